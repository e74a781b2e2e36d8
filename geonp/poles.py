"""The poles of a longitude–latitude grid: one tile about each, one prediction per pole. No torch here.

Towards a pole a grid's rows shrink, so its tiles there are merged into one cap each
(:func:`polar_caps`).

A grid with a row at latitude ±90° holds one point, the pole, once per longitude. Each copy is
predicted by the tile it falls in, from that tile's window, so the copies of a pole missing from
the data came out different (72 copies of a 5° grid spread over 0.14 K when the polar cap was
missing: docs/benchmarks.md, "A fifth to eighth new-user test"). They are one point: each gets
the mean of the copies' predictions, and the std of their pooled variance.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from . import geo

if TYPE_CHECKING:
    from .chunked import Problem

__all__ = ["CAP_GROWTH", "polar_caps", "ring_axis", "pole_rows", "merge_pole_copies"]

#: a polar band of tiles becomes one cap while the cap's window holds at most this many times the
#: points of the band's largest tile's window (:func:`polar_caps`)
CAP_GROWTH = 1.25


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


def polar_caps(problem: Problem, ids: np.ndarray, window_points: Callable[[np.ndarray], int]) -> np.ndarray:
    """``ids`` (from :func:`tile_ids`) with the tiles about each pole of a global grid merged: caps, then runs.

    Towards a pole a longitude–latitude grid's rows shrink, so the windows of neighbouring tiles in a
    band there hold mostly the same points, and many more than a window at the equator (a 1° grid:
    3,600 about the pole against 330). Each tile encoded that context again: on a 1° grid the two
    polar bands took 82 % of the attention (docs/benchmarks.md, "Global grids"). Taken from each pole
    inwards, a band becomes one tile (a cap, its window centred on the pole) as long as that window
    holds at most :data:`CAP_GROWTH` times the points of its largest tile's
    (``window_points(target indices)``: the source points in their window,
    :func:`geonp.tiling.window`); otherwise runs of neighbouring tiles as long as that holds for
    them, down to the first band where even two tiles would not. Only a grid whose rows (or
    columns) are whole circles of latitude is changed. A band's tiles are taken in their order from
    −180° (:func:`geonp.tiling.grid_tiles`), and a band cut into runs is cut into an even number of
    them, so that the meridians 0° and 180° stay between runs (where a grid in either longitude
    convention is stored from).
    """
    space = problem.target
    if problem.frame is not None or not space.is_grid or len(space.shape) != 2:
        return ids
    ring = ring_axis(space.lon.reshape(space.shape), space.lat.reshape(space.shape))
    if ring is None:
        return ids
    band = 1 - ring
    ids = ids.copy()
    lat = space.lat
    bands = np.unique(ids[:, band])
    for hemisphere in (1.0, -1.0):
        side = [r for r in bands if np.all(lat[ids[:, band] == r] * hemisphere >= 0)]
        for r in sorted(side, key=lambda r: -np.abs(lat[ids[:, band] == r]).min()):
            idx = np.flatnonzero(ids[:, band] == r)
            parts, position = np.unique(ids[idx, ring], return_inverse=True)
            n = len(parts)
            if n == 1:
                continue
            limit = CAP_GROWTH * window_points(idx[position == np.argmax(np.bincount(position))])
            run = n if window_points(idx) <= limit else 1
            while run == 1 or 2 * run < n:  # the longest run (doubling) whose window stays within the limit
                if window_points(idx[position < 2 * run]) > limit:
                    break
                run *= 2
            if run == 1:
                break
            groups = -(-n // run)
            groups += groups % 2 if groups > 1 else 0  # an even count keeps the meridians 0 and 180 as edges
            ids[idx, ring] = position * groups // n  # runs of at most ``run`` tiles, as equal as can be
    return ids


def ring_axis(lon: np.ndarray, lat: np.ndarray) -> int | None:
    """The axis along which a grid's latitude is constant and its longitudes close the circle, or ``None``."""
    for axis in (1, 0):
        if np.ptp(lat, axis=axis).max() > 1e-9:
            continue
        return axis if geo.closes_circle(np.take(lon, 0, axis=1 - axis)) else None
    return None
