"""Lazy, chunk-by-chunk prediction with dask.

The output is cut into blocks: frames (or initial times) × space tiles, one extra-dim index at a
time. Each block reads only its *context window* from the input – its frames plus the time
window, and the source points within ``halo`` model units of its tile – builds its tasks and
predicts (:func:`geonp.inference.infill_block`). The model travels once per graph as a plain
:class:`~geonp.inference.ModelPayload`, so the threaded scheduler, processes and a
``dask.distributed`` cluster all work. Each target depends only on its own context, so chunked
output equals unchunked output whenever the halo covers the context the model needs.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import dask
import dask.array as da
import numpy as np
import xarray as xr

from . import frames, geo, timeaxis
from .frames import Frame
from .geo import Layout
from .inference import ModelPayload, forecast_block, infill_block
from .normalise import (
    Normaliser,
    context_spacing_km,
    grid_axis_spacing_km,
    grid_spacing_km,
    mean_spacing,
    station_spacing_km,
)

__all__ = ["Space", "Problem", "build_problem", "lazy_infill", "lazy_forecast", "observed_stats"]

#: the largest default tile edge (grid cells; tiles span ``tile`` model units) and the station chunk
DEFAULT_TILE = 128
GLOBAL_TILE = 32
DEFAULT_STATIONS = 4096
DEFAULT_FRAMES = 24


@dataclass
class Space:
    """The points of a grid or station set."""

    dims: tuple[str, ...]
    shape: tuple[int, ...]
    lon: np.ndarray  # [P] degrees (projected data transformed)
    lat: np.ndarray
    km: np.ndarray | None  # [P, 2] in the dataset frame (regional data) or None (per-tile frames)
    elevation: np.ndarray | None  # [P] metres
    layout: Layout

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def is_grid(self) -> bool:
        return len(self.dims) == 2


def space_of(ds: xr.Dataset, layout: Layout, frame: Frame | None) -> Space:
    """Points of ``layout``'s space dims in ``frame`` (km)."""
    lon, lat = frames.lonlat_of(ds, layout)
    km = None
    if frame is not None:
        if frame.kind == "projected":
            x, y = frames.space_points(ds, layout)
            km = frame.to_km(x, y)
        else:
            km = frame.to_km(lon, lat)
    elev = geo.find_elevation(ds, layout)
    shape = tuple(ds.sizes[d] for d in layout.space_dims)
    return Space(layout.space_dims, shape, lon, lat, km, None if elev is None else elev.reshape(-1), layout)


@dataclass
class Problem:
    """Everything the blocks need, decided once up front (small arrays only)."""

    data: da.Array  # dims: extra..., time, *space (a length-1 time axis when the data have none)
    layout: Layout
    source: Space
    target: Space
    frame: Frame | None
    norm: Normaliser
    unit_km: float
    time_unit_hours: float
    step_hours: float
    times: np.ndarray | None  # datetime64 [T] or None
    hours: np.ndarray  # [T] hours since 1970
    extra_shape: tuple[int, ...]

    @property
    def t_units(self) -> np.ndarray:
        return (self.hours - self.hours[0]) / self.time_unit_hours


def _dask_data(ds: xr.Dataset, layout: Layout, chunks: dict) -> da.Array:
    v = ds[layout.var]
    if layout.time is None:
        v = v.expand_dims("__time__")
        time = "__time__"
    else:
        time = layout.time
    order = [*layout.extra_dims, time, *layout.space_dims]
    v = v.transpose(*order)
    if v.chunks is None:
        v = v.chunk({d: chunks.get(d, -1) for d in order})  # lazy: backend arrays are read per chunk
    return v.data


def _axis_steps_km(space: Space, frame_km: np.ndarray | None) -> tuple[float | None, float | None]:
    """A grid's spacing along each axis in km (great-circle neighbour distances when there is no frame)."""
    if frame_km is not None:
        return grid_axis_spacing_km(frame_km, space.shape)
    return frames.grid_steps_km(space.lon.reshape(space.shape), space.lat.reshape(space.shape))


def _spacing(space: Space, frame_km: np.ndarray | None) -> float:
    """Typical spacing of the points in km (great-circle neighbour distances when there is no frame)."""
    if frame_km is None and space.is_grid:  # global data: no single metric frame
        return mean_spacing(_axis_steps_km(space, None))
    if frame_km is None:
        frame_km = Frame("aeqd", *frames.centre_of(space.lon, space.lat)).to_km(space.lon, space.lat)
    if space.is_grid:
        return grid_spacing_km(frame_km, space.shape)
    return station_spacing_km(frame_km)


def build_problem(
    ds: xr.Dataset,
    layout: Layout,
    norm: Normaliser,
    *,
    observed_fraction: float,
    targets: tuple[xr.Dataset, Layout] | None = None,
) -> Problem:
    """Decide frames, units and point coordinates for ``layout.var`` (and optional other targets)."""
    regional = frames.is_regional(ds, layout)
    frame = frames.make_frame(ds, layout) if regional else None
    source = space_of(ds, layout, frame)
    if targets is not None:
        tds, tlayout = targets
        tframe = frame
        if frame is not None and frame.kind == "projected" and tlayout.crs_wkt != layout.crs_wkt:
            tframe = None  # transform targets through lon/lat into the data's CRS below
        target = space_of(tds, tlayout, tframe)
        if frame is not None and target.km is None:
            import pyproj

            t = pyproj.Transformer.from_crs("EPSG:4326", layout.crs, always_xy=True)
            x, y = t.transform(target.lon, target.lat)
            target.km = frame.to_km(np.asarray(x), np.asarray(y))
    else:
        target = source
    if norm.space_unit_km is not None:
        unit_km = norm.space_unit_km
    else:
        unit_km = context_spacing_km(_spacing(source, source.km), observed_fraction)
    times = None if layout.time is None else np.asarray(ds[layout.time].values)
    hours = np.zeros(1) if times is None else timeaxis.time_hours(times)
    step = 1.0 if times is None else timeaxis.time_step_hours(times)
    time_unit = norm.time_unit_hours or step
    extra_shape = tuple(ds.sizes[d] for d in layout.extra_dims)
    return Problem(_dask_data(ds, layout, {}), layout, source, target, frame, norm, float(unit_km),
                   float(time_unit), float(step), times, hours, extra_shape)


def _distance_km(space: Space, idx: np.ndarray | None, lon0: float, lat0: float, frame: Frame | None,
                 centre_km: np.ndarray | None) -> np.ndarray:
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
    steps = _axis_steps_km(space, space.km if problem.frame is not None else None)
    return tuple(cap if not s else int(min(cap, max(1, round(tile * problem.unit_km / s)))) for s in steps)


def _tiles(space: Space, chunks: dict, default: tuple[int, ...]) -> list[tuple[tuple[slice, ...], np.ndarray]]:
    """Output tiles: (slices per space dim, flat point indices); ``chunks`` overrides the ``default`` sizes."""
    per_dim = []
    for d, n, size in zip(space.dims, space.shape, default):
        size = int(chunks.get(d) or size)
        per_dim.append([slice(s, min(s + size, n)) for s in range(0, n, size)])
    grid = np.arange(space.size).reshape(space.shape)
    return [(sl, grid[sl].reshape(-1)) for sl in itertools.product(*per_dim)]


def _window(problem: Problem, tile_idx: np.ndarray, halo_km: float):
    """Source selection (slices for grids, indices for stations) and the block's point coordinates."""
    src, tgt = problem.source, problem.target
    lon0, lat0 = frames.centre_of(tgt.lon[tile_idx], tgt.lat[tile_idx])
    frame = problem.frame
    centre_km = None
    if frame is not None:
        centre_km = tgt.km[tile_idx].mean(0)
    reach = _distance_km(tgt, tile_idx, lon0, lat0, frame, centre_km).max() + halo_km
    near = _distance_km(src, None, lon0, lat0, frame, centre_km) <= reach
    if not near.any():
        near[np.argmin(_distance_km(src, None, lon0, lat0, frame, centre_km))] = True
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
    }
    return sel, meta


def _groups(problem: Problem, idx: np.ndarray, tile: float) -> list[np.ndarray | None]:
    """Positions in a station run of its spatial groups, squares of ``tile`` model units.

    ``[None]`` (the run is one group) for a grid tile, whose tiles are already ``tile`` units, or
    for stations that fit in one square.
    """
    space = problem.target
    if space.is_grid or len(idx) < 2:
        return [None]
    if problem.frame is not None and space.km is not None:
        km = space.km[idx]
    else:
        km = Frame("aeqd", *frames.centre_of(space.lon[idx], space.lat[idx])).to_km(space.lon[idx], space.lat[idx])
    km = np.asarray(km)
    cells = np.floor((km - km.min(0)) / (tile * problem.unit_km)).astype(np.int64)  # squares from the corner
    _, inv = np.unique(cells, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    return [None] if inv.max() == 0 else [np.flatnonzero(inv == g) for g in range(int(inv.max()) + 1)]


def _tile_windows(problem: Problem, tiles, halo_km: float, tile: float) -> list[list[tuple]]:
    """Per output tile, its groups' ``(window selection, point metadata, positions in the tile)``."""
    return [[(*_window(problem, idx if pos is None else idx[pos], halo_km), pos) for pos in _groups(problem, idx, tile)]
            for _, idx in tiles]


def _scatter(parts: list, positions: list, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    """One tile's mean and std from its groups' (along the last axis, the tile's points)."""
    mean = np.full(shape, np.nan, dtype=np.float32)
    std = np.full(shape, np.nan, dtype=np.float32)
    for (m, sd), pos in zip(parts, positions):
        mean[..., pos] = m
        std[..., pos] = sd
    return mean, std


def _combine(parts: list, groups: list, shape: tuple):
    """The delayed (mean, std) of a tile: its one block, or its groups' blocks scattered together."""
    if len(parts) == 1 and groups[0][2] is None:
        return parts[0]
    return dask.delayed(_scatter, pure=True)(parts, [g[2] for g in groups], shape)


def _frame_chunks(n: int, size: int) -> list[np.ndarray]:
    return [np.arange(s, min(s + size, n)) for s in range(0, n, size)]


def _assemble(blocks: np.ndarray) -> da.Array:
    return da.block(blocks.tolist())


def lazy_infill(problem: Problem, payload: ModelPayload, settings: dict, *, chunks: dict, device: str,
                batch_size: int = 8) -> tuple[da.Array, da.Array]:
    """Lazy mean and std with the output dims ``extra..., time, *target space``."""
    frames_per_block = int(chunks.get("__time__") or DEFAULT_FRAMES)
    T = len(problem.hours)
    half = int(settings["half_window"]) if problem.layout.time is not None else 0
    half_units = half * problem.step_hours / problem.time_unit_hours
    halo_km = float(settings["halo"]) * problem.unit_km
    tile = float(settings["tile"])
    tiles = _tiles(problem.target, chunks, tile_cells(problem, tile))
    windows = _tile_windows(problem, tiles, halo_km, tile)
    fchunks = _frame_chunks(T, frames_per_block)
    n_blocks = sum(map(len, windows)) * len(fchunks) * int(np.prod(problem.extra_shape))
    payload_d = dask.delayed(payload, pure=True, traverse=False)
    t_units = problem.t_units
    n_tiles = [len({s[k].start for s, _ in tiles}) for k in range(len(problem.target.dims))]
    means = np.empty((*problem.extra_shape, len(fchunks), *n_tiles), dtype=object)
    stds = np.empty_like(means)
    tile_pos = _tile_positions(tiles)
    for e in itertools.product(*[range(n) for n in problem.extra_shape]):
        for fi, fr in enumerate(fchunks):
            lo, hi = max(0, fr[0] - half), min(T, fr[-1] + half + 1)
            for (slices, _), groups, pos in zip(tiles, windows, tile_pos):
                shape = tuple(s.stop - s.start for s in slices)
                parts = []
                for sel, meta, sub in groups:
                    values = problem.data[(*e, slice(lo, hi), *(sel if isinstance(sel, tuple) else (sel,)))]
                    m = {**meta, "t": t_units[lo:hi], "hours": problem.hours[lo:hi], "frames": fr - lo,
                         "half_window": half_units, "norm": problem.norm.to_dict(),
                         "tile_shape": shape if sub is None else (len(sub),), "device": device,
                         "batch_size": batch_size, "threads": 1 if n_blocks > 1 else None}
                    parts.append(dask.delayed(infill_block, pure=True)(payload_d, values, m))
                blk = _combine(parts, groups, (len(fr), *shape))
                full = (1,) * len(e) + (len(fr),) + shape
                means[(*e, fi, *pos)] = da.from_delayed(blk[0], shape=(len(fr), *shape), dtype=np.float32).reshape(full)
                stds[(*e, fi, *pos)] = da.from_delayed(blk[1], shape=(len(fr), *shape), dtype=np.float32).reshape(full)
    return _assemble(means), _assemble(stds)


def _tile_positions(tiles) -> list[tuple[int, ...]]:
    starts = [sorted({s[k].start for s, _ in tiles}) for k in range(len(tiles[0][0]))]
    return [tuple(starts[k].index(s[k].start) for k in range(len(s))) for s, _ in tiles]


def lazy_forecast(problem: Problem, payload: ModelPayload, settings: dict, *, inits: np.ndarray, leads: np.ndarray,
                  chunks: dict, device: str, batch_size: int = 8) -> tuple[da.Array, da.Array]:
    """Lazy mean and std with dims ``extra..., init_time, lead_time, *space``; ``leads`` in frames."""
    per_block = int(chunks.get("init_time") or 8)
    W = int(settings["context_frames"])
    halo_km = float(settings["halo"]) * problem.unit_km
    tile = float(settings["tile"])
    tiles = _tiles(problem.target, chunks, tile_cells(problem, tile))
    windows = _tile_windows(problem, tiles, halo_km, tile)
    ichunks = [inits[s:s + per_block] for s in range(0, len(inits), per_block)]
    n_blocks = sum(map(len, windows)) * len(ichunks) * int(np.prod(problem.extra_shape))
    payload_d = dask.delayed(payload, pure=True, traverse=False)
    lead_hours = leads * problem.step_hours
    lead_units = lead_hours / problem.time_unit_hours
    t_units = problem.t_units
    tile_pos = _tile_positions(tiles)
    n_tiles = [len({s[k].start for s, _ in tiles}) for k in range(len(problem.target.dims))]
    means = np.empty((*problem.extra_shape, len(ichunks), 1, *n_tiles), dtype=object)
    stds = np.empty_like(means)
    for e in itertools.product(*[range(n) for n in problem.extra_shape]):
        for ci, ini in enumerate(ichunks):
            lo, hi = max(0, int(ini.min()) - W + 1), int(ini.max()) + 1
            for (slices, _), groups, pos in zip(tiles, windows, tile_pos):
                shape = tuple(s.stop - s.start for s in slices)
                parts = []
                for sel, meta, sub in groups:
                    values = problem.data[(*e, slice(lo, hi), *(sel if isinstance(sel, tuple) else (sel,)))]
                    m = {**meta, "t": t_units[lo:hi], "hours": problem.hours[lo:hi], "frames": ini - lo,
                         "leads": lead_units, "lead_hours": lead_hours, "lead_frames": leads, "context_frames": W,
                         "norm": problem.norm.to_dict(), "tile_shape": shape if sub is None else (len(sub),),
                         "device": device, "batch_size": batch_size, "threads": 1 if n_blocks > 1 else None}
                    # the initial frame at the tile's own points: calibrated forecasts shrink towards it
                    persist = None
                    if problem.norm.lead_mean_weight:
                        persist = problem.data[(*e, ini, *slices)]
                        persist = persist if sub is None else persist[..., sub]
                    parts.append(dask.delayed(forecast_block, pure=True)(payload_d, values, m, persist))
                inner = (len(ini), len(leads), *shape)
                blk = _combine(parts, groups, inner)
                full = (1,) * len(e) + inner
                means[(*e, ci, 0, *pos)] = da.from_delayed(blk[0], shape=inner, dtype=np.float32).reshape(full)
                stds[(*e, ci, 0, *pos)] = da.from_delayed(blk[1], shape=inner, dtype=np.float32).reshape(full)
    return _assemble(means), _assemble(stds)


def observed_stats(ds: xr.Dataset, layout: Layout) -> tuple[int, int, float]:
    """(observed values, total values, std of the observed values) of ``layout.var``, in one pass by chunks."""
    data = _dask_data(ds, layout, {})
    x = data.astype(np.float64)
    count, total, squares = dask.compute(da.isfinite(data).sum(), da.nansum(x), da.nansum(x * x))
    if count == 0:
        return 0, int(math.prod(data.shape)), 0.0
    mean = total / count  # moments in float64: a floor for tiny contexts needs no more precision than this
    return int(count), int(math.prod(data.shape)), float(np.sqrt(max(squares / count - mean * mean, 0.0)))
