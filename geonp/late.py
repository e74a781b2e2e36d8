"""How old a forecast's newest data are: per initial time, and per target point (late data over part of the domain).

A forecast calibrated per lead takes the calibration of ``lead + age``: the age counts the frames from
its initial time back to the newest data that stand for it. :func:`frame_age` takes any observation
of the window (the whole initial frame not yet delivered); :func:`point_ages` the newest frame with
an observation near each target (a region, or a station, that reports late while the rest of the
window is on time). :func:`region_age` tells a forecast how far back its context must look for them. No torch.
"""

from __future__ import annotations

import itertools

import numpy as np

from .data.tasks import nearest_distance, observed_frames

__all__ = ["frame_age", "point_ages", "region_age", "LATE_RADIUS", "REGION_HOURS", "REGION_INITS", "REGION_SHARE"]

#: an observation within this many model units (the typical spacing of the observed points) of a target stands
#: for it: a place missing at the initial time between observed neighbours is not late
LATE_RADIUS = 1.5
#: hours before an initial time searched for the newest data of each point (:func:`region_age`): data
#: delivered late are hours to two days behind; a station silent for longer is out of service, not late
REGION_HOURS = 48.0
#: initial times whose windows :func:`region_age` reads (evenly spaced when there are more)
REGION_INITS = 8
#: a late region holds at least one point in this many of those observed (:func:`region_age`; at least one)
REGION_SHARE = 1000


def frame_age(values: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """Frames from each of ``frames`` back to the newest frame of ``values`` at or before it with an observation.

    ``values`` is a window ``[frames, ...]``; 0 where the frame itself is observed, and where no frame before
    it is (such a forecast has no context and no value).
    """
    index = np.full(len(values), -1)
    seen = observed_frames(values)
    index[seen] = seen
    newest = np.maximum.accumulate(index)[np.asarray(frames, dtype=np.intp)]
    return np.where(newest >= 0, np.asarray(frames) - newest, 0)


def point_ages(values: np.ndarray, xy: np.ndarray, frames: np.ndarray, points: np.ndarray, look_back: int,
               radius: float = LATE_RADIUS) -> np.ndarray:
    """Per initial frame and target point: frames back to the newest frame with an observation near the point.

    Parameters
    ----------
    values : ndarray ``[T, P]``
        The window's values (NaN = missing) at its points ``xy`` ``[P, 2]`` (model units).
    frames : ndarray ``[I]``
        Indices of the initial frames in the window.
    points : ndarray ``[N, 2]``
        The targets (model units).
    look_back : int
        Frames before each initial frame that may hold its context (older frames are not searched).
    radius : float
        An observation this close (model units) stands for a target.

    Returns
    -------
    ndarray ``[I, N]`` of int
        At least :func:`frame_age` of the frame; a point without an observation that near in the frames
        searched (a place never observed, ``targets=`` elsewhere) gets :func:`frame_age`.
    """
    values = np.asarray(values).reshape(len(values), -1)
    frames = np.asarray(frames, dtype=np.intp)
    base = frame_age(values, frames)
    out = np.repeat(base[:, None], len(points), axis=1)
    observed = np.isfinite(values)
    for row, (i, age) in enumerate(zip(frames, base)):
        open_ = np.ones(len(points), dtype=bool)
        for f in range(i - age, max(-1, i - look_back - 1), -1):
            if not observed[f].any():
                continue
            waiting = np.flatnonzero(open_)
            found = waiting[nearest_distance(points[waiting], xy[observed[f]]) <= radius]
            out[row, found] = i - f
            open_[found] = False
            if not open_.any():
                break
    return out


def region_age(values, time_dim: str, inits: np.ndarray, step_hours: float, positions: np.ndarray | None = None,
               space_dims: tuple | None = None, radius: float = LATE_RADIUS) -> int:
    """The most frames from an initial time back to the newest observation near a point observed in the 48 h before.

    ``values``: the variable (an ``xarray.DataArray``, lazy or not) on a time axis of ``step_hours``;
    only the frames of the :data:`REGION_HOURS` up to each of at most :data:`REGION_INITS` initial
    frames ``inits`` are read. A region (a station) that reports late while the rest is on time has
    no data in the last ``context_frames`` frames: the forecast's context looks this far back for it
    (north of 56° N 10 h late on ERA5: half its means were NaN). Points with nothing in those hours
    (out of service, never observed) do not count, and on steps of a day or longer little does (a
    monthly station silent for a year is no late delivery: counting it made the intervals of every
    Colorado forecast too wide, NLL 2.25 -> 2.47 at +1 month).

    ``positions`` (``[P, d]`` km, :func:`geonp.frames.positions_km`, the points flattened in the order
    of ``space_dims``): a point's age is that of the newest observation within ``radius`` typical
    spacings of the observed points, as :func:`point_ages` counts it. A point missing a few hours
    between observed neighbours (scattered gaps) is then no late region: counted alone, 30 % random
    gaps made every forecast look back 2-35 frames and left its context unfilled (a twenty-eighth
    new-user test).
    """
    limit = int(REGION_HOURS // float(step_hours))
    inits = np.unique(np.asarray(inits, dtype=np.intp))
    if len(inits) > REGION_INITS:
        inits = inits[np.linspace(0, len(inits) - 1, REGION_INITS).round().astype(int)]
    order = (time_dim, *space_dims) if space_dims is not None else (time_dim, ...)
    spacing = None if positions is None else _spacing(positions)
    oldest = 0
    for i in inits if limit > 0 else ():
        lo = max(0, int(i) - limit)
        window = np.isfinite(np.asarray(values.isel({time_dim: slice(lo, int(i) + 1)}).transpose(*order).values))
        seen = window.reshape(len(window), -1)
        newest = len(seen) - 1 - np.argmax(seen[::-1], axis=0)  # the newest observed frame of each point
        ages = np.where(seen.any(0), len(seen) - 1 - newest, -1)
        if spacing is not None and (ages > 0).any():
            reach = radius * spacing / np.sqrt(max(float(seen[:, ages >= 0].mean()), 1e-6))
            ages = _nearby_ages(ages, positions, reach)
        # a region, not a spot: the age at least 1 in 1000 of the points observed reach (on a global grid with 30 %
        # random gaps some spot of 9 neighbours is missing by chance: every forecast lost its filled context)
        counted = np.sort(ages[ages >= 0])[::-1]
        if len(counted):
            oldest = max(oldest, int(counted[min(len(counted) - 1, len(counted) // REGION_SHARE)]))
    return oldest


def _nearby_ages(ages: np.ndarray, positions: np.ndarray, reach: float) -> np.ndarray:
    """Each point's age (-1: none), lowered to the youngest age of the points within ``reach`` of it.

    Points are put in cubes of side ``reach``, and each point missing its last frames is compared with
    the points of its own cube and the 26 around it: linear in the points (a global 0.25° grid has a
    million; comparing every pair took minutes).
    """
    out, placed = ages.copy(), np.isfinite(positions).all(1)
    queries, others = np.flatnonzero((ages > 0) & placed), np.flatnonzero(placed & (ages >= 0))
    if len(queries) == 0 or not np.isfinite(reach) or reach <= 0:
        if len(queries) and np.isinf(reach):  # one point, or none apart: the youngest stands for all
            out[queries] = np.minimum(out[queries], ages[others].min())
        return out
    cube = np.floor(positions[others] / reach).astype(np.int64)
    low = cube.min(0) - 1
    radix = np.cumprod(np.concatenate([[1], (cube.max(0) - low + 2)[:-1]]))
    codes = ((cube - low) * radix).sum(1)
    order = np.argsort(codes, kind="stable")
    codes = codes[order]
    own = np.floor(positions[queries] / reach).astype(np.int64) - low
    for offset in itertools.product((-1, 0, 1), repeat=positions.shape[1]):
        wanted = ((own + np.asarray(offset)) * radix).sum(1)
        lo, hi = np.searchsorted(codes, wanted, "left"), np.searchsorted(codes, wanted, "right")
        for k in range(int((hi - lo).max(initial=0))):
            has = lo + k < hi
            q, j = queries[has], others[order[lo[has] + k]]
            near = ((positions[q] - positions[j]) ** 2).sum(1) <= reach * reach
            np.minimum.at(out, q[near], ages[j[near]])
    return out


def _spacing(positions: np.ndarray, samples: int = 32) -> float:
    """Typical spacing: a median over up to ``samples`` points (evenly picked) of their 4 nearest distances.

    Each point's geometric mean of the distances to its four nearest other points: on a grid, that of
    its two axis steps, as the model's unit.
    """
    pos = np.asarray(positions, dtype=np.float64)
    pos = pos[np.isfinite(pos).all(1)]
    if len(pos) < 2:
        return np.inf
    near = min(4, len(pos) - 1)
    gaps = []
    for k in np.unique(np.linspace(0, len(pos) - 1, min(samples, len(pos))).round().astype(int)):
        d2 = ((pos - pos[k]) ** 2).sum(1)
        d2[k] = np.inf
        gaps.append(float(np.exp(np.log(np.maximum(np.partition(d2, near - 1)[:near], 1e-18)).mean() / 2)))
    return float(np.median(gaps))
