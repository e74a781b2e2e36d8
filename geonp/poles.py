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


def pole_rows(out: xr.Dataset, layout: geo.Layout) -> xr.DataArray | None:
    """Boolean over the latitude dim marking rows at ±90°, or ``None`` when the grid has none.

    Only a grid of plain longitudes and latitudes (1-D, one dim each) with two or more longitudes
    has copies of a pole; stations and projected or curvilinear grids are left alone.
    """
    if len(layout.space_dims) != 2 or not (layout.geographic and layout.plain_lonlat):
        return None
    ydim, xdim = layout.space_dims
    if layout.y not in out.coords or out[layout.y].dims != (ydim,) or out.sizes.get(xdim, 0) < 2:
        return None
    lat = np.asarray(out[layout.y].values, dtype=np.float64)
    pole = np.abs(np.abs(lat) - 90.0) < 1e-9
    return xr.DataArray(pole, dims=ydim) if pole.any() else None


def merge_pole_copies(out: xr.Dataset, layout: geo.Layout, var: str) -> xr.Dataset:
    """``out`` with every copy of a pole given the copies' mean ``{var}_mean`` and pooled ``{var}_std``.

    Lazy when ``out`` is (a reduction along the longitude dim of the pole rows only).
    """
    pole = pole_rows(out, layout)
    if pole is None:
        return out
    xdim = layout.space_dims[1]
    out = out.copy()
    mean, std = out[f"{var}_mean"], out[f"{var}_std"]
    merged_mean = mean.where(~pole, mean.mean(xdim).astype(mean.dtype))
    merged_std = std.where(~pole, np.sqrt((std**2).mean(xdim)).astype(std.dtype))
    for name, new, old in ((f"{var}_mean", merged_mean, mean), (f"{var}_std", merged_std, std)):
        out[name] = new.transpose(*old.dims).assign_attrs(old.attrs)
        out[name].encoding = dict(old.encoding)
    return out
