"""Frames and points an infill left without a prediction: bridged along time from the frames either side (no torch).

A frame with no observation anywhere gets from the network either nothing (``time_window=0``, the
automatic window of smooth daily grids: NaN) or a guess from the frames around it with a std
calibrated on gaps inside observed frames, far too wide (Irish daily wind: 6.6 knots for errors of
3.9). Such frames, and any point the network left without a prediction, are bridged from the point's
observations in the nearest frames where it is observed, up to :data:`MAX_GAP` frames away on each
side, ``a`` frames before and ``b`` after. Only observations: the infill's means of other frames
would tie each block of the output to the blocks around it, and ``geonp.to_zarr``, computing region
by region, ran the prediction's blocks up to 8 times (a smooth synthetic grid with 20 % of its values
missing paid for it: RMSE 1.21 -> 1.27 for its frames missing whole).

- departures from each point's annual cycle (``fill="frames"``, long records), whose mean is 0: the
  Gaussian conditional (simple kriging) with ``rho(k)`` the correlation of departures ``k`` frames
  apart (pooled over the points) and ``s_p`` the point's spread,

      mean = c' S^-1 v,   var = s_p^2 - c' S^-1 c,
      c = s_p^2 [rho(a), rho(b)],   S = s_p^2 [[1, rho(a + b)], [rho(a + b), 1]];

  with no value on either side, the prior (0, ``s_p``). Irish daily wind, 45 days missing at every
  station: RMSE 4.13 -> 3.89 knots, the std 6.8 -> 3.9 (docs/benchmarks.md, "Days missing at every point").
- the variable itself (``fill="gaps"``, records too short for a cycle), whose level the record does not
  pin down: ordinary kriging along time with ``gamma_p(k) = s_p^2 g(k)``, the pooled semivariogram
  ``g`` over the variance (weights summing to one; with ``gamma(a) = gamma(b)`` the mean of the two
  sides), weighed with the network's guess where its time window gave one (:func:`_with_network`:
  between sparse frames a point's own values lie frames away). With no value on either side the
  network's prediction stays, or NaN with a warning.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import dask
import dask.array as da
import dask.base
import numpy as np

from .errors import NO_CONTEXT_MESSAGE, CallKey, NoContextWarning, warn_user
from .memo import ProcessMemo

__all__ = ["MAX_GAP", "FrameStats", "frame_stats", "bridge_empty"]

#: frames searched on each side of a point without a prediction for the nearest frame with a value
MAX_GAP = 8
#: a point's spread is shrunk towards the pooled one as if the pooled one were this many observations
_SPREAD_PRIOR = 10.0
#: frames read at once when the statistics stream through a long record (at least ``2 MAX_GAP + 1``)
_BLOCK_VALUES = 1 << 22


class FrameStats(NamedTuple):
    """What the bridge needs from the values, measured on the whole input."""

    spread: np.ndarray  #: ``[points]`` each point's spread (RMS departure, shrunk towards the pooled one)
    rho: np.ndarray  #: ``[2 MAX_GAP + 1]`` pooled correlation of departures 0 .. 2 MAX_GAP frames apart
    variogram: np.ndarray  #: ``[2 MAX_GAP + 1]`` pooled semivariogram 0 .. 2 MAX_GAP frames apart, over the variance


def frame_stats(y: np.ndarray, max_lag: int = 2 * MAX_GAP, centre: bool = False) -> FrameStats:
    """:class:`FrameStats` of ``y`` (``[time, points]``; NaN where missing), read frame block by block.

    ``centre=False``: ``y`` are departures already (from each point's annual cycle); ``True``: the
    departures are from each point's mean over the record (the pooled mean at a point never observed),
    measured in a first pass. ``y`` may be a dask array: blocks of frames are computed one at a time
    (with ``max_lag`` frames more), so a long record is never one array in memory.
    """
    n_t, n_p = y.shape
    block = max(2 * max_lag + 1, _BLOCK_VALUES // max(n_p, 1))
    level = np.zeros(n_p)
    if centre:
        total, seen = np.zeros(n_p), np.zeros(n_p)
        for start in range(0, n_t, block):
            v = _read(y, start, start + block)
            total += np.nansum(v, 0)
            seen += np.isfinite(v).sum(0)
        level = np.where(seen > 0, total / np.maximum(seen, 1.0), total.sum() / max(seen.sum(), 1.0))
    total, seen = np.zeros(n_p), np.zeros(n_p)
    lag_sum, lag_n, diff_sum = np.zeros(max_lag + 1), np.zeros(max_lag + 1), np.zeros(max_lag + 1)
    for start in range(0, n_t, block):
        v = _read(y, start, start + block + max_lag) - level
        own = min(block, n_t - start)
        ok = np.isfinite(v)
        v = np.where(ok, v, 0.0)
        total += (v[:own] ** 2).sum(0)
        seen += ok[:own].sum(0)
        for k in range(max_lag + 1):  # pairs whose first frame is one of this block's own
            n = max(0, min(own, len(v) - k))
            pair = ok[:n] & ok[k:k + n]
            lag_sum[k] += float((v[:n] * v[k:k + n]).sum())
            lag_n[k] += float(pair.sum())
            diff_sum[k] += float((np.where(pair, v[k:k + n] - v[:n], 0.0) ** 2).sum())
    # each point's spread, shrunk towards the pooled one; the correlation pools the points' products
    pooled = total.sum() / max(seen.sum(), 1.0)
    spread2 = (total + _SPREAD_PRIOR * pooled) / (seen + _SPREAD_PRIOR)
    cov = lag_sum / np.maximum(lag_n, 1.0)
    rho = np.where(lag_n > 0, cov / cov[0], 0.0) if cov[0] > 0 else np.zeros(max_lag + 1)
    rho[0] = 1.0
    variogram = np.where(lag_n > 0, diff_sum / np.maximum(2.0 * lag_n, 1.0), np.nan) / max(pooled, 1e-300)
    variogram = np.fmax.accumulate(np.nan_to_num(variogram, nan=0.0))  # never less than at a shorter lag
    return FrameStats(np.sqrt(spread2), np.clip(rho, -1.0, 1.0), variogram)


def _read(y, lo: int, hi: int) -> np.ndarray:
    v = y[lo:min(hi, y.shape[0])]
    return np.asarray(v.compute() if hasattr(v, "compute") else v, dtype=np.float64)


def bridge_empty(mean: da.Array, std: da.Array, y, time_axis: int, fill: str = "frames",
                 inside: np.ndarray | None = None) -> tuple[da.Array, da.Array]:
    """``mean`` and ``std`` with frames missing whole and points without a prediction bridged along time (lazy).

    ``y``: the observed values (NaN where missing; outside the domain too), with the dims of ``mean``.
    Frames where ``y`` has no observation are replaced, and points without a prediction (NaN) filled,
    from the point's observed values in the nearest frames either side: ``fill="frames"`` (departures
    from each point's annual cycle, whose mean is 0) by the Gaussian conditional
    (:func:`_conditional`), the prior where no frame has a value within :data:`MAX_GAP`;
    ``fill="gaps"`` (the variable itself, whose level a short record does not pin down) by ordinary
    kriging along time (:func:`_kriged`); where no frame has one the network's prediction stays (from a
    wider ``time_window``), or NaN with a :class:`~geonp.errors.NoContextWarning`. ``inside``
    (``[points]`` booleans, the domain of ``mask=``): only its points are bridged and counted.

    Each block of the output depends on its own block of ``mean`` and ``std`` and on the input within
    :data:`MAX_GAP` frames, never on other blocks of the prediction: computed region by region
    (``geonp.to_zarr``), no prediction runs twice (with the infill's means of the frames around as
    values, a region of 6 frames made dask run 8 times the prediction's blocks). The frames missing
    whole are counted in the graph (a lazy input is read once for them and the prediction together);
    the statistics (:func:`frame_stats`) are measured only by blocks with something to bridge, once
    per process, reading the input once more.
    """
    n_t = mean.shape[time_axis]
    if n_t < 2:
        return mean, std
    mean0, std0 = da.moveaxis(mean, time_axis, 0), da.moveaxis(std, time_axis, 0)
    y0 = da.moveaxis(da.asarray(y), time_axis, 0)
    space = mean0.chunks[1:]
    points = mean0.shape[1:]
    key, flat = _stats_input(y0, fill == "gaps")
    # one node of the graph holds the (uncomputed) input's graph; each block gets it as data and measures the
    # statistics only if it has something to bridge
    stats = dask.delayed(functools.partial(_stats_once, key, flat, fill == "gaps"), pure=True, traverse=False)
    index = np.arange(int(np.prod(points))).reshape(points)
    means, stds = mean0.to_delayed(optimize_graph=False), std0.to_delayed(optimize_graph=False)
    edges = [np.cumsum((0, *c)) for c in space]
    tiles = list(np.ndindex(*[len(c) for c in space]))
    blocks = np.empty((len(mean0.chunks[0]), *[len(c) for c in space]), dtype=object)
    start, call = 0, CallKey()  # its blocks warn once
    for i, size in enumerate(mean0.chunks[0]):
        stop = start + size
        lo, hi = max(0, start - MAX_GAP), min(n_t, stop + MAX_GAP)
        cuts = [tuple(slice(int(e[k]), int(e[k + 1])) for e, k in zip(edges, tile)) for tile in tiles]
        # the frames missing whole, from a flag per frame of each of the input's chunks (never the whole frames
        # at once); the windows as tasks on the chunks' own keys (read once, with the prediction's reads:
        # window_task)
        pieces = y0[lo:hi].to_delayed(optimize_graph=False)
        empty = dask.delayed(_missing_whole, pure=True)(
            [[dask.delayed(_seen, pure=True)(p) for p in np.ravel(row)] for row in pieces])
        for tile, cut in zip(tiles, cuts):
            out = dask.delayed(_bridge_block, pure=True)(
                means[(i, *tile)], stds[(i, *tile)], window_task(y0[(slice(lo, hi), *cut)]), empty, index[cut],
                offset=start - lo, stats=stats, fill=fill, inside=inside, once=call)
            shape = (2, size, *[c.stop - c.start for c in cut])
            blocks[(i, *tile)] = da.from_delayed(out, shape=shape, dtype=np.float32)
        start = stop
    out = one_layer(da.block(_nest(blocks)))
    return (da.moveaxis(out[0], 0, time_axis).astype(mean.dtype),
            da.moveaxis(out[1], 0, time_axis).astype(std.dtype))


def _nest(blocks) -> list:
    """An object array of ``[2, ...]`` dask arrays as nested lists for :func:`dask.array.block`."""
    return [_nest(b) for b in blocks] if isinstance(blocks, np.ndarray) else blocks


def _seen(block: np.ndarray) -> np.ndarray:
    """``[frames]`` booleans: the frames of one chunk of the input with an observation."""
    return np.isfinite(block.reshape(len(block), -1)).any(1)


def _missing_whole(seen: list) -> np.ndarray:
    """``[frames]`` booleans from :func:`_seen` by time chunk (rows) and space chunk: no observation anywhere."""
    return ~np.concatenate([np.logical_or.reduce(row) for row in seen])


def _bridge_block(mean, std, y, empty, index, *, offset: int, stats, fill: str, inside, once=None):
    """One block, ``[2, own frames, ...]`` (mean, std); ``y`` and ``empty`` start ``offset`` frames before it.

    ``once``: the bridge's :class:`~geonp.errors.CallKey` (its blocks warn once).
    """
    tile = mean.shape[1:]
    m, s = (a.reshape(len(a), -1).astype(np.float64) for a in (mean, std))
    v = y.reshape(len(y), -1).astype(np.float64)
    own = np.asarray(empty, dtype=bool)[offset:offset + len(m)]
    target = np.isnan(m) | own[:, None]
    if inside is not None:  # outside the domain (mask=) the outputs are NaN: nothing to bridge there
        target &= inside[np.asarray(index).ravel()]
    if not target.any():
        return _stacked(m, s, tile)
    stats = stats()
    idx = np.asarray(index).ravel()
    usable = np.isfinite(v)  # observed values only: what the other blocks predicted is not read
    out_m, out_s = m.copy(), s.copy()
    for t in np.flatnonzero(target.any(1)):
        p, at = np.flatnonzero(target[t]), t + offset
        sides = [_nearest(usable[:, p], at, step) for step in (-1, 1)]
        if fill == "gaps":  # no value on either side: the network's prediction, if it made one
            gamma = stats.spread[idx[p]] ** 2 * stats.variogram[:, None]
            mu, var = _kriged(at, *sides, v[:, p], gamma)
            mu, var = np.where(np.isnan(mu), m[t, p], mu), np.where(np.isnan(var), s[t, p] ** 2, var)
            var = np.where(np.isnan(mu), np.nan, var)
            out_m[t, p], out_s[t, p] = _with_network(mu, var, m[t, p], s[t, p])
        else:  # departures: the network's guess from the frames around made it worse (docs/benchmarks.md)
            mu, var = _conditional(at, *sides, v[:, p], stats.spread[idx[p]] ** 2, stats.rho)
            out_m[t, p], out_s[t, p] = mu, np.sqrt(var)
    if fill == "gaps" and np.isnan(out_m[:, slice(None) if inside is None else inside[idx]]).any():
        warn_user(NO_CONTEXT_MESSAGE, NoContextWarning, once=once)
    return _stacked(out_m, out_s, tile)


def _with_network(mu: np.ndarray, var: np.ndarray, net_mean: np.ndarray,
                  net_std: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bridge's mean and std of the variable itself, weighed with the network's own guess where it made one.

    The bridge reads each point's own values, which sparse frames hold only a few frames away; the
    network reads every observation of the frames around. Each is weighted by its precision; the std
    is the same weighting of the two stds (their errors taken as fully correlated, which both share
    where the point's neighbouring values are observed: taken as independent, the std was 0.15 for
    errors of 0.18, coverage 0.92). ERA5 hourly, hours missing whole between frames with 20 % of the
    cells observed: RMSE 0.886 K (bridge) or 0.284 (network) -> 0.302, coverage 0.98; 90 % observed:
    0.195 or 0.198 -> 0.180, coverage 0.97 (docs/benchmarks.md, "Hours missing whole between sparse frames").
    Not for departures from each point's cycle (long records), where the mix lost: Irish daily wind
    3.887 -> 3.907 knots, Colorado monthly tmax 2.470 -> 2.562.
    """
    sd = np.sqrt(var)
    both = np.isfinite(mu) & np.isfinite(net_mean) & (net_std > 0)
    wb = np.where(both, 1.0 / np.maximum(var, 1e-300), 1.0)
    wn = np.where(both, 1.0 / np.maximum(np.where(both, net_std, 1.0) ** 2, 1e-300), 0.0)
    total = wb + wn
    mean = np.where(both, (wb * np.nan_to_num(mu) + wn * np.nan_to_num(net_mean)) / total, mu)
    std = np.where(both, (wb * np.nan_to_num(sd) + wn * np.nan_to_num(net_std)) / total, sd)
    return mean, std


def _stacked(m: np.ndarray, s: np.ndarray, tile: tuple) -> np.ndarray:
    """``[frames, points]`` mean and std back to the block's shape, as ``[2, ...]`` float32."""
    return np.stack([m.reshape(len(m), *tile), s.reshape(len(s), *tile)]).astype(np.float32)


def _nearest(usable: np.ndarray, t: int, step: int) -> np.ndarray:
    """Frames from ``t`` to the nearest usable frame in direction ``step`` (0: none within :data:`MAX_GAP`)."""
    lag = np.zeros(usable.shape[1], dtype=np.int64)
    for k in range(1, MAX_GAP + 1):
        u = t + step * k
        if not 0 <= u < len(usable):
            break
        lag = np.where((lag == 0) & usable[u], k, lag)
    return lag


def _conditional(t: int, a: np.ndarray, b: np.ndarray, value: np.ndarray, s2: np.ndarray,
                 rho: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of departures at frame ``t``, ``a`` frames after a value and ``b`` before one (0: none).

    ``value``: ``[frames, points]``, the observed departures.
    """
    col = np.arange(value.shape[1])
    ra, rb = np.where(a > 0, rho[a], 0.0), np.where(b > 0, rho[b], 0.0)
    rab = np.where((a > 0) & (b > 0), rho[np.minimum(a + b, len(rho) - 1)], 0.0)
    before, after = np.clip(t - a, 0, len(value) - 1), np.clip(t + b, 0, len(value) - 1)
    va, vb = np.where(a > 0, value[before, col], 0.0), np.where(b > 0, value[after, col], 0.0)
    s11, s22 = np.where(a > 0, s2, 1.0), np.where(b > 0, s2, 1.0)  # a side that is missing: weight 0
    s12, c1, c2 = rab * s2, ra * s2, rb * s2
    det = s11 * s22 - s12**2
    w1, w2 = (c1 * s22 - c2 * s12) / det, (c2 * s11 - c1 * s12) / det
    return w1 * va + w2 * vb, np.maximum(s2 - (w1 * c1 + w2 * c2), 1e-3 * s2)


def _stats_input(y: da.Array, centre: bool) -> tuple[str, da.Array]:
    """The key of the statistics of ``y`` (time first) and ``y`` as ``[time, points]``."""
    key = dask.base.tokenize("geonp-bridge", y, centre)
    return key, y.reshape(y.shape[0], -1, merge_chunks=True) if y.ndim != 2 else y


_STATS = ProcessMemo()


def _stats_once(key: str, y: da.Array, centre: bool) -> FrameStats:
    """:func:`frame_stats` of ``y``, measured once per process for the same ``key``."""
    def measure() -> FrameStats:
        with dask.config.set(scheduler="synchronous"):  # inside a task of the prediction's graph
            return frame_stats(y, centre=centre)

    return _STATS.get(key, measure)


def _kriged(t: int, a: np.ndarray, b: np.ndarray, value: np.ndarray,
            gamma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ordinary kriging along time of frame ``t`` from the values ``a`` frames before and ``b`` after (0: none).

    ``gamma``: ``[lags, points]``, each point's semivariogram. The weights sum to one (the point's level is
    not assumed known: a short record's mean is not); NaN where neither side has a value.
    """
    col = np.arange(value.shape[1])
    before, after = np.clip(t - a, 0, len(value) - 1), np.clip(t + b, 0, len(value) - 1)
    ga, gb = np.where(a > 0, gamma[a, col], 0.0), np.where(b > 0, gamma[b, col], 0.0)
    gab = gamma[np.minimum(a + b, len(gamma) - 1), col]
    both = (a > 0) & (b > 0)
    wa = np.where(both, (gab - ga + gb) / np.maximum(2 * gab, 1e-300), (a > 0).astype(float))
    wa = np.clip(wa, 0.0, 1.0)
    wb = 1.0 - wa
    mean = np.where(a > 0, wa * value[before, col], 0.0) + np.where(b > 0, wb * value[after, col], 0.0)
    var = 2 * wa * ga + 2 * wb * gb - 2 * wa * wb * gab
    none = (a == 0) & (b == 0)
    return np.where(none, np.nan, mean), np.where(none, np.nan, np.maximum(var, 1e-12))


def window_task(values) -> dask.delayed.Delayed:
    """One task giving a block's window of the data (a dask array), built on the source chunks' own tasks.

    Every window of one graph depends on the same source chunk keys, so each chunk of a lazily
    opened file is read once per compute. (A dask array handed to ``dask.delayed`` as it is gets its
    graph optimised per call, into a fused copy of the reads of its own: one 24-frame Zarr chunk was
    read 63 times.)
    """
    pieces = values.to_delayed(optimize_graph=False)
    return dask.delayed(_join, pure=True)(pieces.tolist())


def _join(pieces: list) -> np.ndarray:
    return np.block(pieces)


def one_layer(array: da.Array) -> da.Array:
    """``array`` with its graph as one layer: the same tasks and keys, so each source chunk is still read once.

    A prediction's graph has a layer per task (every ``dask.delayed`` call and block adds one), and
    dask's cull at compute, like every later ``dask.delayed`` call on a block, costs the number of
    layers times the keys: quadratic in the blocks. A 0.5° global grid's graph (2,972 tiles) took
    118 s to build and run with no prediction, 27 s as one layer (docs/benchmarks.md, "Global grids").
    """
    return da.Array(dict(array.__dask_graph__()), array.name, array.chunks, meta=array._meta)
