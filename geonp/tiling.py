"""Output blocks, prediction groups and their context windows (numpy only, no torch).

A prediction's output is cut into **blocks** (dask chunks: ``chunks=``, the input's own chunks,
or tiles of about ``tile`` model units). A block larger than a tile is predicted in **groups** of
about ``tile`` units, each from its own **window**: the source points within the group's reach
plus a ``halo``. Windows the size of the pretraining tasks predict better than one window over a
large grid (docs/geometry.md).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import dask
import numpy as np

from . import frames
from .frames import Frame
from .normalise import grid_axis_spacing_km

if TYPE_CHECKING:
    from .chunked import Problem, Space

__all__ = ["DEFAULT_TILE", "GLOBAL_TILE", "DEFAULT_STATIONS", "axis_steps_km", "distance_km", "tile_cells",
           "output_blocks", "block_positions", "window", "prediction_groups", "block_windows", "scatter", "combine"]

#: the largest default tile edge (grid cells; tiles span ``tile`` model units) and the station chunk
DEFAULT_TILE = 128
GLOBAL_TILE = 32
DEFAULT_STATIONS = 4096


def axis_steps_km(space: Space, frame_km: np.ndarray | None) -> tuple[float | None, float | None]:
    """A grid's spacing along each axis in km (great-circle neighbour distances when there is no frame)."""
    if frame_km is not None:
        return grid_axis_spacing_km(frame_km, space.shape)
    return frames.grid_steps_km(space.lon.reshape(space.shape), space.lat.reshape(space.shape))


def distance_km(space: Space, idx: np.ndarray | None, lon0: float, lat0: float, frame: Frame | None,
                centre_km: np.ndarray | None) -> np.ndarray:
    """Distances (km) of ``space``'s points ``idx`` (all if ``None``) from a centre; great-circle without a frame."""
    if frame is not None and space.km is not None:
        km = space.km if idx is None else space.km[idx]
        return np.sqrt(((km - centre_km) ** 2).sum(1))
    lon = space.lon if idx is None else space.lon[idx]
    lat = space.lat if idx is None else space.lat[idx]
    lam0, phi0 = np.deg2rad(lon0), np.deg2rad(lat0)
    c = np.sin(phi0) * np.sin(np.deg2rad(lat)) + np.cos(phi0) * np.cos(np.deg2rad(lat)) * np.cos(
        np.deg2rad(lon) - lam0)
    return np.arccos(np.clip(c, -1, 1)) * frames.EARTH_RADIUS_KM


def tile_cells(problem: Problem, tile: float) -> tuple[int, ...]:
    """Default tile size per space dim: about ``tile`` model units of the target points, in cells.

    A grid's tiles span ``tile`` units along each axis (at least one cell, at most
    :data:`DEFAULT_TILE` cells, :data:`GLOBAL_TILE` for global data, so that each window's own
    projection stays local); a station dim is cut into runs of :data:`DEFAULT_STATIONS`.
    """
    space = problem.target
    if not space.is_grid:
        return (DEFAULT_STATIONS,)
    cap = DEFAULT_TILE if problem.frame is not None else GLOBAL_TILE
    steps = axis_steps_km(space, space.km if problem.frame is not None else None)
    return tuple(cap if not s else int(min(cap, max(1, round(tile * problem.unit_km / s)))) for s in steps)


def output_blocks(space: Space, chunks: dict, default: tuple[int, ...]) -> list[tuple[tuple[slice, ...], np.ndarray]]:
    """Output blocks: (slices per space dim, flat point indices); ``chunks`` overrides the ``default`` sizes."""
    per_dim = []
    for d, n, size in zip(space.dims, space.shape, default):
        size = int(chunks.get(d) or size)
        per_dim.append([slice(s, min(s + size, n)) for s in range(0, n, size)])
    grid = np.arange(space.size).reshape(space.shape)
    return [(sl, grid[sl].reshape(-1)) for sl in itertools.product(*per_dim)]


def window(problem: Problem, tile_idx: np.ndarray, halo_km: float):
    """Source selection (slices for grids, indices for stations) and the block's point coordinates."""
    src, tgt = problem.source, problem.target
    lon0, lat0 = frames.centre_of(tgt.lon[tile_idx], tgt.lat[tile_idx])
    frame = problem.frame
    centre_km = None
    if frame is not None:
        centre_km = tgt.km[tile_idx].mean(0)
    reach = distance_km(tgt, tile_idx, lon0, lat0, frame, centre_km).max() + halo_km
    near = distance_km(src, None, lon0, lat0, frame, centre_km) <= reach
    if not near.any():
        near[np.argmin(distance_km(src, None, lon0, lat0, frame, centre_km))] = True
    if src.is_grid:
        grid = near.reshape(src.shape)
        sel = []
        for axis in range(2):
            hit = np.flatnonzero(grid.any(axis=1 - axis))
            sel.append(slice(int(hit.min()), int(hit.max()) + 1))
        sel = tuple(sel)
        ctx_idx = np.arange(src.size).reshape(src.shape)[sel].reshape(-1)
    else:
        sel = np.flatnonzero(near)
        ctx_idx = sel
    local = frame if frame is not None else Frame("aeqd", lon0, lat0)

    def km_of(space: Space, idx: np.ndarray) -> np.ndarray:
        return space.km[idx] if frame is not None else local.to_km(space.lon[idx], space.lat[idx])

    unit = problem.unit_km
    meta = {
        "ctx_xy": km_of(src, ctx_idx) / unit, "tgt_xy": km_of(tgt, tile_idx) / unit,
        "ctx_lon": src.lon[ctx_idx], "tgt_lon": tgt.lon[tile_idx],
        "ctx_elev": None if src.elevation is None else src.elevation[ctx_idx],
        "tgt_elev": None if tgt.elevation is None else tgt.elevation[tile_idx],
        "ctx_land": None if src.land is None else src.land[ctx_idx],
        "tgt_land": None if tgt.land is None else tgt.land[tile_idx],
    }
    return sel, meta


def prediction_groups(problem: Problem, shape: tuple[int, ...], idx: np.ndarray, cells: tuple[int, ...],
                      tile: float) -> list[np.ndarray | None]:
    """Positions (row-major) in an output block of its prediction groups, about ``tile`` model units.

    A grid block larger than ``cells`` (set by ``chunks=`` or the input's own chunks) is split into
    rectangles of ``cells``; stations into squares of ``tile`` units counted from the block's
    corner. ``[None]``: the block is one group.
    """
    space = problem.target
    if space.is_grid:
        if all(n <= c for n, c in zip(shape, cells)):
            return [None]
        grid = np.arange(int(np.prod(shape))).reshape(shape)
        return [grid[i:i + cells[0], j:j + cells[1]].reshape(-1)
                for i in range(0, shape[0], cells[0]) for j in range(0, shape[1], cells[1])]
    if len(idx) < 2:
        return [None]
    if problem.frame is not None and space.km is not None:
        km = space.km[idx]
    else:
        km = Frame("aeqd", *frames.centre_of(space.lon[idx], space.lat[idx])).to_km(space.lon[idx], space.lat[idx])
    km = np.asarray(km)
    squares = np.floor((km - km.min(0)) / (tile * problem.unit_km)).astype(np.int64)
    _, inv = np.unique(squares, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    return [None] if inv.max() == 0 else [np.flatnonzero(inv == g) for g in range(int(inv.max()) + 1)]


def block_windows(problem: Problem, blocks, halo_km: float, cells: tuple[int, ...], tile: float) -> list[list[tuple]]:
    """Per output block, its groups' ``(window selection, point metadata, positions in the block)``."""
    out = []
    for slices, idx in blocks:
        shape = tuple(s.stop - s.start for s in slices)
        out.append([(*window(problem, idx if pos is None else idx[pos], halo_km), pos)
                    for pos in prediction_groups(problem, shape, idx, cells, tile)])
    return out


def scatter(parts: list, positions: list, shape: tuple, lead: int) -> tuple[np.ndarray, np.ndarray]:
    """A block's mean and std (``shape``: ``lead`` leading dims, then space) from its groups'."""
    flat = (*shape[:lead], int(np.prod(shape[lead:])))
    mean = np.full(flat, np.nan, dtype=np.float32)
    std = np.full(flat, np.nan, dtype=np.float32)
    for (m, sd), pos in zip(parts, positions):
        mean[..., pos] = m.reshape(*flat[:lead], -1)
        std[..., pos] = sd.reshape(*flat[:lead], -1)
    return mean.reshape(shape), std.reshape(shape)


def combine(parts: list, groups: list, shape: tuple, lead: int):
    """The delayed (mean, std) of a block: its one group's, or its groups' scattered together."""
    if len(parts) == 1 and groups[0][2] is None:
        return parts[0]
    return dask.delayed(scatter, pure=True)(parts, [g[2] for g in groups], shape, lead)


def block_positions(tiles) -> list[tuple[int, ...]]:
    """Index of each block along every space dim, for assembling the blocks."""
    starts = [sorted({s[k].start for s, _ in tiles}) for k in range(len(tiles[0][0]))]
    return [tuple(starts[k].index(s[k].start) for k in range(len(s))) for s, _ in tiles]
