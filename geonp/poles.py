"""One prediction per pole on a longitude–latitude grid. No torch here.

A grid with a row at latitude ±90° holds one point, the pole, once per longitude. Each copy is
predicted by the tile it falls in, from that tile's window, so the copies of a pole missing from
the data came out different (72 copies of a 5° grid spread over 0.14 K when the polar cap was
missing: docs/benchmarks.md, "A fifth to eighth new-user test"). They are one point: each gets
the mean of the copies' predictions, and the std of their pooled variance.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from . import geo

__all__ = ["pole_rows", "merge_pole_copies"]


def pole_rows(out: xr.Dataset, layout: geo.Layout) -> np.ndarray | None:
    """Indices along the latitude dim of the rows at ±90°, or ``None`` when the grid has none.

    Only a grid of plain longitudes and latitudes (1-D, one dim each) with two or more longitudes
    has copies of a pole; stations and projected or curvilinear grids are left alone.
    """
    if len(layout.space_dims) != 2 or not (layout.geographic and layout.plain_lonlat):
        return None
    ydim, xdim = layout.space_dims
    if layout.y not in out.coords or out[layout.y].dims != (ydim,) or out.sizes.get(xdim, 0) < 2:
        return None
    lat = np.asarray(out[layout.y].values, dtype=np.float64)
    rows = np.flatnonzero(np.abs(np.abs(lat) - 90.0) < 1e-9)
    return rows if len(rows) else None


def merge_pole_copies(out: xr.Dataset, layout: geo.Layout, var: str) -> xr.Dataset:
    """``out`` with every copy of a pole given the copies' mean ``{var}_mean`` and pooled ``{var}_std``.

    Only the pole rows are recomputed and put back in place: when ``out`` is lazy, the other rows'
    blocks do not depend on them (a ``where`` against a reduction would make every block wait for
    the poles), and the latitude chunks are restored.
    """
    rows = pole_rows(out, layout)
    if rows is None:
        return out
    ydim, xdim = layout.space_dims
    out = out.copy()
    for name, pooled in ((f"{var}_mean", False), (f"{var}_std", True)):
        da = out[name]
        band = da.isel({ydim: rows})
        merged = np.sqrt((band**2).mean(xdim)) if pooled else band.mean(xdim)
        merged = merged.broadcast_like(band).transpose(*da.dims).astype(da.dtype)
        pieces, start = [], 0
        for k, row in enumerate(rows):
            pieces += [da.isel({ydim: slice(start, row)}), merged.isel({ydim: [k]})]
            start = row + 1
        new = xr.concat([*pieces, da.isel({ydim: slice(start, None)})], dim=ydim)
        if da.chunks is not None:
            new = new.chunk({ydim: da.chunksizes[ydim]})
        out[name] = new.assign_attrs(da.attrs)
        out[name].encoding = dict(da.encoding)
    return out
