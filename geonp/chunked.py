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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import dask
import dask.array as da
import numpy as np
import xarray as xr
from dask.delayed import Delayed

from . import frames, geo, timeaxis
from .data.tasks import frame_groups
from .domain import find_domain
from .errors import CallKey, ConfigError
from .frames import Frame
from .geo import Layout
from .graph import BlockGraph, space_chunks, window_index
from .inference import ModelPayload, forecast_block, infill_block
from .model import frames_per_task
from .normalise import Normaliser, context_spacing_km, grid_spacing_km, mean_spacing, station_spacing_km
from .surface import COASTLINE, find_land, land_like_source
from .tiling import axis_steps_km, block_positions, output_blocks, tile_cells, tile_plan

__all__ = ["Space", "Problem", "build_problem", "chunk_sizes", "lazy_infill", "lazy_forecast"]

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
    land: np.ndarray | None = None  # [P] land fraction (smoothed on grids)
    domain: np.ndarray | None = None  # [P] bool: where the field is defined (mask=, geonp.domain), None: everywhere
    seen: np.ndarray | None = None  # [P] bool: observed in some frame planning counted (geonp.planning), None: all

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    @property
    def is_grid(self) -> bool:
        return len(self.dims) == 2

    def in_band(self, centre: float, half_width: float, metric: bool) -> np.ndarray:
        """Indices of the points whose latitude (``metric``: whose ``km`` y) lies within ``half_width`` of ``centre``.

        Found by bisection in the points sorted once, so that a window on a large grid does not look
        at every point (:func:`geonp.tiling.window`).
        """
        order, values = self._by_y if metric else self._by_lat
        lo = int(np.searchsorted(values, centre - half_width, side="left"))
        hi = int(np.searchsorted(values, centre + half_width, side="right"))
        return np.sort(order[lo:hi])

    @cached_property
    def _by_lat(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.lat, kind="stable")
        return order, self.lat[order]

    @cached_property
    def _by_y(self) -> tuple[np.ndarray, np.ndarray]:
        order = np.argsort(self.km[:, 1], kind="stable")
        return order, self.km[order, 1]


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
    return Space(layout.space_dims, shape, lon, lat, km, None if elev is None else elev.reshape(-1), layout,
                 find_land(ds, layout, lon, lat), find_domain(ds, layout))


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
    observed_per_frame: float = float("inf")  # observed points per frame with data, on average (planning)

    @property
    def fill_gaps(self) -> bool:
        """Whether the targets are the source's own points (filling its gaps), not ``targets=``."""
        return self.target is self.source

    def observed_spacing(self, observed_fraction: float) -> float:
        """Typical spacing of the observed points, in model units, when ``observed_fraction`` of the points are.

        1 for the shipped weights' unit (the context spacing of the data at hand); a fitted model keeps the
        unit of its training data, so on sparser data its prediction windows hold fewer points.
        """
        return context_spacing_km(_spacing(self.source, self.source.km), observed_fraction) / self.unit_km

    @property
    def t_units(self) -> np.ndarray:
        """Model time of each frame: hours in units of ``time_unit_hours``.

        On an axis of calendar months one step per frame, as leads count them (a 28-day February is a
        month, like January).
        """
        if self.times is not None and timeaxis.is_monthly(self.times):
            return np.arange(len(self.hours)) * (self.step_hours / self.time_unit_hours)
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
    data = v.data
    if np.issubdtype(data.dtype, np.floating):  # ±inf of a lazily read file are gaps (geonp.variables)
        data = da.where(da.isinf(data), np.nan, data)
    return data


def _spacing(space: Space, frame_km: np.ndarray | None) -> float:
    """Typical spacing of the points in km (great-circle neighbour distances when there is no frame)."""
    if frame_km is None and space.is_grid:  # global data: no single metric frame
        return mean_spacing(axis_steps_km(space, None))
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
        if target.land is not None and COASTLINE == tlayout.land == layout.land:  # as the source's, for its trend
            target.land = land_like_source(target.lon, target.lat, source.lon, source.lat, source.shape)
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


def _frame_chunks(n: int, size: int) -> list[np.ndarray]:
    return [np.arange(s, min(s + size, n)) for s in range(0, n, size)]


def lazy_infill(problem: Problem, payload: ModelPayload, settings: dict, *, chunks: dict, device: str,
                batch_size: int = 8, calibration=None, fills_empty: bool = False) -> tuple[da.Array, da.Array]:
    """Lazy mean and std with the output dims ``extra..., time, *target space``.

    ``fills_empty``: the caller fills what has no context (:mod:`geonp.bridge`) and warns of what it
    cannot, so the blocks do not warn that it is NaN.

    ``calibration``: a dask task giving normaliser fields (:mod:`geonp.calibrate_input`) that
    every block applies on top of the problem's own.
    """
    frames_per_block, T = int(chunks.get("__time__") or DEFAULT_FRAMES), len(problem.hours)
    timed = problem.layout.time is not None  # and the windows of reach.near_entries, wide_entries, one_sided_floors
    half = int(settings["half_window"]) if timed else 0
    near, wide, side = (settings.get(k) if timed else None for k in ("near_window", "wide_window", "side_window"))
    per_unit = problem.step_hours / problem.time_unit_hours  # model time units per frame
    half_units, near_units = half * per_unit, None if near is None else near * per_unit
    wide_units = None if not wide or wide <= half else wide * per_unit
    side_units, read = None if not side else side * per_unit, max(half, int(wide or 0), int(side or 0))
    halo_km, tile = float(settings["halo"]) * problem.unit_km, float(settings["tile"])
    cells = tile_cells(problem, tile)
    tiles = output_blocks(problem.target, chunks, cells, periodic=problem.frame is None)
    plan = tile_plan(problem, tiles, halo_km, cells, tile)
    fchunks = _frame_chunks(T, frames_per_block)
    group = frames_per_task(settings.get("frames_per_task", 1), half, payload.name)
    numbers = timeaxis.frame_numbers(problem.times, problem.step_hours)  # groups of times, not of positions
    n_tasks = len(plan.tiles) * len(fchunks) * int(np.prod(problem.extra_shape))
    payload_d, norm, norm_key = _inputs(problem, payload, calibration)
    call = CallKey()  # its blocks warn once (errors.warn_user)
    graph = BlockGraph(problem.data, [d for d in (payload_d, norm) if isinstance(d, Delayed)],
                       _identity(problem, settings, chunks, device, batch_size, "infill", fills_empty, norm))
    t_units = problem.t_units
    tile_pos = block_positions(tiles)
    for e in itertools.product(*[range(n) for n in problem.extra_shape]):
        for fi, fr in enumerate(fchunks):
            fgroups = frame_groups(fr, group, T, numbers=numbers)
            lo, hi = max(0, fgroups[0][0] - read), min(T, fgroups[-1][-1] + read + 1)
            predicted = {}  # each tile once, for every block it meets
            for k, (sel, meta, shape, _) in plan.tiles.items():
                m = {**meta, "t": t_units[lo:hi], "hours": problem.hours[lo:hi], "frames": fr - lo,
                     "half_window": half_units, "near_window": near_units, "wide_window": wide_units,
                     "side_window": side_units,
                     "tile_shape": shape, "device": device, "batch_size": batch_size, "call": call,
                     "threads": 1 if n_tasks > 1 else None,
                     "groups": [g - lo for g in fgroups] if group > 1 else None,
                     "fill_gaps": problem.fill_gaps, "fills_empty": fills_empty}
                predicted[k] = graph.tile((*e, fi, k), infill_block, payload_d.key,
                                          graph.window(window_index(e, slice(lo, hi), sel)), m, norm_key)
            for (slices, _), groups, pos in zip(tiles, plan.blocks, tile_pos):
                shape = tuple(s.stop - s.start for s in slices)
                graph.block((*e, fi, *pos), [predicted[k] for k, _, _ in groups], groups,
                            (len(fr), *shape), 1, (1,) * len(e) + (len(fr),) + shape)
    return graph.arrays((*((1,) * n for n in problem.extra_shape), tuple(len(fr) for fr in fchunks),
                         *space_chunks(tiles)))


def lazy_forecast(problem: Problem, payload: ModelPayload, settings: dict, *, inits: np.ndarray, leads: np.ndarray,
                  chunks: dict, device: str, batch_size: int = 8, calibration=None,
                  reach: int = 0) -> tuple[da.Array, da.Array]:
    """Lazy mean and std with dims ``extra..., init_time, lead_time, *space``; ``leads`` in frames.

    ``calibration`` as in :func:`lazy_infill`; ``reach``: frames the context may look back beyond
    ``context_frames`` past empty ones (:func:`~geonp.data.forecast_tasks`).
    """
    per_block = int(chunks.get("init_time") or 8)
    W = int(settings["context_frames"])
    halo_km, tile = float(settings["halo"]) * problem.unit_km, float(settings["tile"])
    cells = tile_cells(problem, tile)
    tiles = output_blocks(problem.target, chunks, cells, periodic=problem.frame is None)
    plan = tile_plan(problem, tiles, halo_km, cells, tile)
    ichunks = [inits[s:s + per_block] for s in range(0, len(inits), per_block)]
    n_tasks = len(plan.tiles) * len(ichunks) * int(np.prod(problem.extra_shape))
    payload_d, norm, norm_key = _inputs(problem, payload, calibration)
    identity = _identity(problem, settings, chunks, device, batch_size, "forecast", (inits, leads, reach), norm)
    inputs, call = [d for d in (payload_d, norm) if isinstance(d, Delayed)], CallKey()  # its blocks warn once
    graph = BlockGraph(problem.data, inputs, identity)
    lead_hours = leads * problem.step_hours
    lead_units = lead_hours / problem.time_unit_hours
    t_units = problem.t_units
    tile_pos = block_positions(tiles)
    for e in itertools.product(*[range(n) for n in problem.extra_shape]):
        for ci, ini in enumerate(ichunks):
            lo, hi = max(0, int(ini.min()) - W - reach + 1), int(ini.max()) + 1
            predicted = {}  # each tile once, for every block it meets
            for k, (sel, meta, shape, points) in plan.tiles.items():
                m = {**meta, "t": t_units[lo:hi], "hours": problem.hours[lo:hi], "frames": ini - lo,
                     "leads": lead_units, "lead_hours": lead_hours, "lead_frames": leads, "context_frames": W,
                     "reach": reach, "tile_shape": shape, "call": call,
                     "device": device, "batch_size": batch_size, "threads": 1 if n_tasks > 1 else None}
                # the initial frame at the tile's own points: calibrated forecasts shrink towards it
                persist = None
                if problem.norm.lead_mean_weight or calibration is not None:  # [inits, *space] at its points
                    persist = graph.window(window_index(e, np.asarray(ini), points))
                predicted[k] = graph.tile((*e, ci, k), forecast_block, payload_d.key,
                                          graph.window(window_index(e, slice(lo, hi), sel)), m, norm_key, persist)
            for (slices, _), groups, pos in zip(tiles, plan.blocks, tile_pos):
                shape = tuple(s.stop - s.start for s in slices)
                inner = (len(ini), len(leads), *shape)
                graph.block((*e, ci, 0, *pos), [predicted[k] for k, _, _ in groups], groups, inner, 2,
                            (1,) * len(e) + inner)
    return graph.arrays((*((1,) * n for n in problem.extra_shape), tuple(len(i) for i in ichunks), (len(leads),),
                         *space_chunks(tiles)))


def _inputs(problem: Problem, payload: ModelPayload, calibration):
    """The payload as one task, the blocks' normaliser (plain data, or a task on a calibration), and its key."""
    payload_d = dask.delayed(payload, pure=True, traverse=False)
    norm = _block_norm(problem, calibration)
    return payload_d, norm, norm.key if isinstance(norm, Delayed) else norm


def _identity(problem: Problem, settings: dict, chunks: dict, device: str, batch_size: int, *more) -> tuple:
    """What names a prediction's keys beside its input: settings, coordinates, options (see :class:`BlockGraph`)."""
    spaces = [(sp.lon, sp.lat, sp.km, sp.elevation, sp.land, sp.domain) for sp in (problem.source, problem.target)]
    return (dict(settings), dict(chunks), device, batch_size, problem.hours, problem.unit_km, problem.time_unit_hours,
            problem.fill_gaps, spaces, *[m if not isinstance(m, Delayed) else m.key for m in more])


def _block_norm(problem: Problem, calibration):
    """The normaliser (plain data) of every block: the problem's, with a calibration's fields on top."""
    base = problem.norm.to_dict()
    return base if calibration is None else dask.delayed(_with_fields, pure=True)(base, calibration)


def _with_fields(base: dict, fields: dict) -> dict:
    return {**base, **fields}


def chunk_sizes(chunks, layout: Layout, ds: xr.Dataset, target_dims: Sequence[str] | None = None,
                forecast: bool = False) -> dict:
    """Normalise ``chunks=`` to {"__time__": frames, <space dim>: size, "init_time": n}.

    Dims that ``chunks=`` leaves unset take the input's own dask chunks, if any. ``target_dims``:
    the space dims of ``targets=`` when the output lies there (stations → grid); ``chunks=`` then
    names those, and the input's own space chunks do not apply to them.

    Raises
    ------
    ConfigError
        ``chunks`` is neither an int nor a mapping, names a dim the data lack, or a size below 1.
    """
    data_chunks = _input_chunks(ds, layout)
    out: dict[str, int] = {}
    space_dims = layout.space_dims if target_dims is None else tuple(target_dims)
    if data_chunks is not None:  # the input's own dask chunks along time and space
        dims = [*layout.extra_dims, layout.time or "__time__", *layout.space_dims]
        for d, c in zip(dims, data_chunks):
            if d not in layout.extra_dims and (target_dims is None or d not in layout.space_dims):
                out["__time__" if d == layout.time else d] = int(max(c))
    if chunks is None:
        return out
    if isinstance(chunks, (int, np.integer)) and not isinstance(chunks, bool):
        if int(chunks) < 1:
            raise ConfigError(f"chunks={chunks!r}; expected a positive number of frames per chunk, or a dict such "
                              "as {'time': 24}.")
        out["__time__"] = out["init_time"] = int(chunks)
        return out
    if not isinstance(chunks, Mapping):
        raise ConfigError(f"chunks={chunks!r}; expected an int (frames per chunk) or a dict such as "
                          "{'time': 24, 'latitude': 64, 'longitude': 64}.")
    known = {layout.time, *space_dims, *layout.extra_dims, *(["init_time"] if forecast else [])} - {None}
    for k, v in chunks.items():
        if k not in known:
            raise ConfigError(f"chunks has dim {k!r}; expected some of {sorted(known)}.")
        if v is None or v == -1:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or int(v) < 1:
            raise ConfigError(f"chunks[{k!r}]={v!r}; expected a positive whole number of points (or -1/None: "
                              "the whole dim).")
        out["__time__" if k == layout.time else k] = int(v)
    return out


def _input_chunks(ds: xr.Dataset, layout: Layout):
    v = ds[layout.var]
    if v.chunks is None:
        return None
    order = [*layout.extra_dims, *( [layout.time] if layout.time else []), *layout.space_dims]
    c = v.transpose(*order).chunks
    if layout.time is None:
        c = (*c[: len(layout.extra_dims)], (1,), *c[len(layout.extra_dims):])
    return c
