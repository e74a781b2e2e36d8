"""Windows of data → context/target tasks (numpy only, no torch).

A :class:`Window` is a block of frames ``[T, P]`` (time × flattened space points) with every
point's model-space coordinates. Tasks built from it are what the models predict:

* **infill** – one task per target frame ``i``: the context is every finite value of frames
  ``j`` with ``|t_j − t_i| ≤ half_window`` (model time units), the targets are the requested
  points of frame ``i``; or one task per *frame group* of consecutive frames, sharing the
  context around the group's centre time (:func:`frame_groups`);
* **forecast** – one task per initial frame ``i``: the context is every finite value of frames
  ``i − window + 1 … i``, the targets are the requested points at each lead.

Values are standardised per task by the context (see :class:`geonp.normalise.Normaliser`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..errors import EmptyContextError
from ..normalise import Normaliser
from ..trend import LAND_CONTRAST_R2, basis_variance, follows_ground, local_contrasts, static_basis

__all__ = ["Window", "Task", "make_task", "infill_tasks", "frame_groups", "forecast_tasks", "nearest_distance",
           "gap_to_context", "temporal_support", "coarsen_far", "FAR_GAP_UNITS", "FAR_GAP_MAX_FACTOR",
           "FAR_FROM_DATA_UNITS"]

#: targets farther than this from the context of their own frame (model units) are predicted in coarser units
FAR_GAP_UNITS = 2.5

#: the most :func:`coarsen_far` coarsens the space units
FAR_GAP_MAX_FACTOR = 3.0

#: the farthest :func:`coarsen_far` brings within the distances of the pretraining tasks (model units): a
#: window grows by at most this to find data (:func:`geonp.tiling.window`), and targets farther than this
#: from every observation of their frame get at least the prior's std (``geonp.inference``)
FAR_FROM_DATA_UNITS = FAR_GAP_UNITS * FAR_GAP_MAX_FACTOR

#: add the variance of the static trend's estimate to the predictive std (:func:`geonp.trend.fit_variance`; False
#: computes none)
TREND_VARIANCE = True


@dataclass
class Window:
    """A block of data in model units.

    Attributes
    ----------
    values : ndarray ``[T, P]``
        Data values (NaN = missing).
    xy : ndarray ``[P, 2]``
        Space coordinates in model units.
    t : ndarray ``[T]``
        Times in model units.
    hours : ndarray ``[T]``
        Absolute times in hours since 1970 (for time covariates).
    lon : ndarray ``[P]``
        Longitude in degrees (for local solar time).
    elevation : ndarray ``[P]`` or None
        Elevation in metres.
    land : ndarray ``[P]`` or None
        Land fraction (0 sea … 1 land) for the land–sea trend of infill tasks.
    """

    values: np.ndarray
    xy: np.ndarray
    t: np.ndarray
    hours: np.ndarray
    lon: np.ndarray
    elevation: np.ndarray | None = None
    land: np.ndarray | None = None

    def covariates(self, norm: Normaliser, hours: np.ndarray | None = None) -> np.ndarray | None:
        """Covariates ``[T', P, dz]`` at ``hours`` (default: the window's frames)."""
        return norm.covariate_columns(self.elevation, self.lon, self.hours if hours is None else hours)


@dataclass
class Task:
    """One prediction problem in model units (values standardised by ``shift``/``scale``)."""

    xc: np.ndarray  # [nc, 3]
    yc: np.ndarray  # [nc, 1]
    xt: np.ndarray  # [nt, 3]
    zc: np.ndarray | None = None  # [nc, dz]
    zt: np.ndarray | None = None  # [nt, dz]
    yt: np.ndarray | None = None  # [nt, 1] (training only)
    shift: float = 0.0
    scale: float = 1.0
    offset: np.ndarray | None = None  # [nt] data units added to the mean (elevation trend)
    offset_var: np.ndarray | None = None  # [nt] data units²: the variance of that trend's estimate, added to the std's
    persistence: np.ndarray | None = None  # [nt] data units: the targets' values at the initial frame (forecast)
    trend: np.ndarray | None = None  # [nt] data units: the trend predictor of the calibration (forecast)

    def select_targets(self, keep: np.ndarray) -> Task:
        """The task with only the targets ``keep`` (indices); the context is unchanged."""
        # the fields with one row per target
        per_target = ("xt", "zt", "yt", "offset", "offset_var", "persistence", "trend")
        return replace(self, **{f: None if (v := getattr(self, f)) is None else v[keep] for f in per_target})

    def to_data(self, loc: np.ndarray, std: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Model-unit predictions of the targets back to data units."""
        mean = loc * self.scale + self.shift
        if self.offset is not None:
            mean = mean + self.offset
        std = std * self.scale
        if self.offset_var is not None:
            std = np.sqrt(std**2 + self.offset_var)
        return mean, std

    @property
    def num_context(self) -> int:
        return len(self.xc)

    @property
    def num_targets(self) -> int:
        return len(self.xt)


def make_task(norm: Normaliser, xc, yc, zc, ec, xt, zt, et, yt=None, lc=None, lt=None) -> Task:
    """Build a task with values standardised by its context, after removing the static trend.

    ``ec``/``et`` are the elevations (m) of the context and target points, ``lc``/``lt`` their
    land fractions, or ``None`` (:mod:`geonp.trend`; a quantity the targets lack is not fitted, nor a
    land fraction the context values do not follow across coasts; where they do not follow the ground
    between neighbours the elevation trend keeps only its position surface: :func:`geonp.trend.local_contrasts`,
    :func:`geonp.trend.follows_ground`).
    With context on several frames and targets on them, each frame's own mean goes too (see
    :meth:`Normaliser.frame_offsets`).
    """
    offset = offset_var = None
    ec, lc = (None if et is None else ec), (None if lt is None else lc)
    # the local departures the land fraction and the elevation explain, from one neighbour search
    with_l = lc is not None and static_basis(None, lc) is not None
    with_e = norm.elevation_trend and ec is not None and static_basis(ec, None) is not None
    ground = True
    if with_l or with_e:
        share, count = local_contrasts(xc[:, :2], xc[:, -1] if xc.shape[1] > 2 else None, yc,
                                       np.stack([c for c, used in ((lc, with_l), (ec, with_e)) if used], 1))
        if with_l and share[0] < LAND_CONTRAST_R2:
            lc = lt = None  # the values do not change across the coast: no land trend
        ground = not with_e or follows_ground(share[-1], count)  # else only the trend's position surface
    xyc, xyt = xc[:, :2], xt[:, :2]
    frame = norm.frame_offsets(yc, xc[:, -1], ec, xt[:, -1], et, lc, lt, xyc, xyt, variance=TREND_VARIANCE,
                               ground=ground) if xc.shape[1] > 2 else None
    if frame is not None:
        yc, offset, offset_var = yc - frame[0], frame[1], frame[2]
    elif (fit := norm.elevation_fit(yc, ec, lc, xyc, ground=ground)) is not None:
        if TREND_VARIANCE:
            offset_var = basis_variance(*fit, yc, ec, lc, xyc, et, lt, xyt)
        yc = yc - norm.elevation_offset(fit, ec, lc, xyc)
        offset = norm.elevation_offset(fit, et, lt, xyt)
    shift, scale = norm.standardise(yc)
    if yt is not None:
        yt = ((yt - shift - (offset if offset is not None else 0.0)) / scale)[:, None]
    return Task(xc=xc, yc=((yc - shift) / scale)[:, None], xt=xt, zc=zc, zt=zt, yt=yt, shift=shift, scale=scale,
                offset=offset, offset_var=offset_var)


def _points(xy: np.ndarray, t: float, idx: np.ndarray) -> np.ndarray:
    return np.concatenate([xy[idx], np.full((len(idx), 1), t)], 1)


def _context(window: Window, frames: np.ndarray, cov: np.ndarray | None, exclude: dict | None = None):
    """Context points, values, covariates, elevations and land fractions of ``frames`` (finite values only)."""
    xs, ys, zs, es, ls = [], [], [], [], []
    for j in frames:
        ok = np.isfinite(window.values[j])
        if exclude is not None and j in exclude:
            ok &= ~exclude[j]
        idx = np.flatnonzero(ok)
        xs.append(_points(window.xy, window.t[j], idx))
        ys.append(window.values[j, idx])
        if cov is not None:
            zs.append(cov[j, idx])
        if window.elevation is not None:
            es.append(window.elevation[idx])
        if window.land is not None:
            ls.append(window.land[idx])
    xc = np.concatenate(xs) if xs else np.zeros((0, 3))
    yc = np.concatenate(ys) if ys else np.zeros(0)
    zc = np.concatenate(zs) if cov is not None and zs else None
    ec = np.concatenate(es) if es else None
    lc = np.concatenate(ls) if ls else None
    return xc, yc, zc, ec, lc


def infill_tasks(
    window: Window,
    frames,
    targets: np.ndarray,
    norm: Normaliser,
    half_window,
    *,
    skip_empty: bool = False,
) -> list[Task | None]:
    """One infill task per entry of ``frames``, predicting points ``targets`` of its frame(s).

    An entry is a frame index, or a sequence of frame indices predicted together (a *frame
    group*: :func:`frame_groups`). The context is every finite value of the frames within
    ``half_window`` (model time units) of the entry's centre time, the mean time of its frames;
    the targets are ``targets`` on each of its frames in turn (``[frame, point]``). With
    ``skip_empty=True`` an entry with no observation in its window gets ``None``. ``half_window``
    may also be a sequence, one per entry (:func:`geonp.reach.near_entries`).

    Raises
    ------
    EmptyContextError
        An entry has no observation within ``half_window`` (in model time units).
    """
    cov = window.covariates(norm)
    et = None if window.elevation is None else window.elevation[targets]
    lt = None if window.land is None else window.land[targets]
    tasks = []
    halves = np.broadcast_to(np.asarray(half_window, dtype=np.float64), (len(frames),))
    for entry, half_window in zip(frames, halves):
        group = np.atleast_1d(np.asarray(entry, dtype=np.int64))
        centre = float(np.mean(window.t[group]))
        near = np.flatnonzero(np.abs(window.t - centre) <= half_window + 1e-9)
        xc, yc, zc, ec, lc = _context(window, near, cov)
        if len(yc) == 0:
            if skip_empty:
                tasks.append(None)
                continue
            raise EmptyContextError(
                f"no observation within {half_window:g} time steps of frame(s) {group.tolist()} of this window; "
                "expected at least one. Drop all-missing periods first or use a larger time window (time_window=)."
            )
        xt = np.concatenate([_points(window.xy, window.t[i], targets) for i in group])
        zt = None if cov is None else np.concatenate([cov[i, targets] for i in group])
        tasks.append(make_task(norm, xc, yc, zc, ec, xt, zt, None if et is None else np.tile(et, len(group)),
                               lc=lc, lt=None if lt is None else np.tile(lt, len(group))))
    return tasks


def frame_groups(frames: np.ndarray, size: int, num_frames: int,
                 numbers: np.ndarray | None = None) -> list[np.ndarray]:
    """The frame groups that hold ``frames``: the frames numbered ``g·size … g·size + size − 1``.

    A frame's number is its own time counted in steps from a fixed time (``numbers``, one per frame,
    :func:`geonp.timeaxis.frame_numbers`; without them, its index). So the groups depend only on the
    frames' times (clipped to the ``num_frames`` frames of the data): a chunked prediction cuts the
    same groups as an unchunked one, an input that starts at another time the same groups of the
    times both hold, and an axis with a missing hour the same groups after it. Returns the whole
    groups (as indices), in order, including their frames outside ``frames``.
    """
    size, frames = max(1, int(size)), np.asarray(frames, dtype=np.int64)
    index = numbers is None or len(numbers) != num_frames  # no time axis: one frame, numbered 0
    ids = (np.arange(num_frames) if index else np.asarray(numbers, dtype=np.int64)) // size
    return [np.flatnonzero(ids == g) for g in np.unique(ids[frames])]


def forecast_tasks(
    window: Window,
    inits,
    leads: np.ndarray,
    lead_hours: np.ndarray,
    targets: np.ndarray,
    norm: Normaliser,
    context_frames: int,
    *,
    skip_empty: bool = False,
    reach: int = 0,
) -> list[Task | None]:
    """One forecast task per frame index in ``inits``: all ``targets`` at every lead.

    ``leads`` are the lead times in model time units, ``lead_hours`` the same in hours (for
    covariates). Targets are ordered lead-major: ``[lead, point]``. The context is the
    ``context_frames`` newest frames with observations up to the initial frame, looking back at
    most ``reach`` frames further than those (late data: the frames just before it not delivered).
    """
    cov = window.covariates(norm)
    seen = observed_frames(window.values)
    tasks = []
    for i in inits:
        past = seen[(seen <= i) & (seen > i - context_frames - reach)][-context_frames:]
        # no land trend: the past frames' land-sea contrast is the wrong one for later hours (docs/benchmarks.md)
        xc, yc, zc, ec, _ = _context(window, past, cov)
        if len(yc) == 0:
            if skip_empty:
                tasks.append(None)
                continue
            raise EmptyContextError(f"no observation in the {context_frames} frames up to the initial time; "
                                    "expected at least one. Pick another init_time.")
        xt = np.concatenate([_points(window.xy, window.t[i] + lead, targets) for lead in leads])
        zt = None
        if cov is not None:
            zl = window.covariates(norm, window.hours[i] + np.asarray(lead_hours, dtype=np.float64))
            zt = np.concatenate([zl[k, targets] for k in range(len(leads))])
        et = None if window.elevation is None else np.tile(window.elevation[targets], len(leads))
        tasks.append(make_task(norm, xc, yc, zc, ec, xt, zt, et))
    return tasks


def observed_frames(values: np.ndarray) -> np.ndarray:
    """Indices of the frames of ``values`` ``[frames, ...]`` that hold an observation."""
    return np.flatnonzero(np.isfinite(np.asarray(values)).reshape(len(values), -1).any(1))


def nearest_distance(points: np.ndarray, others: np.ndarray, chunk: int | None = None) -> np.ndarray:
    """Distance from each of ``points`` ``[n, d]`` to the nearest of ``others`` ``[m, d]`` (inf when ``m = 0``).

    Squared distances come from one matrix product per chunk of ``chunk`` points (memory
    ``chunk × m``; by default about 2^20 pairs, 8 MB, whatever ``m``).
    """
    points, others = np.asarray(points, dtype=np.float64), np.asarray(others, dtype=np.float64)
    out = np.full(len(points), np.inf)
    if len(others) == 0:
        return out
    oo = (others * others).sum(1)
    chunk = chunk or max(1, 2**20 // len(others))
    for lo in range(0, len(points), chunk):
        p = points[lo : lo + chunk]
        d2 = (p * p).sum(1)[:, None] + oo[None, :] - 2.0 * (p @ others.T)
        out[lo : lo + chunk] = np.sqrt(np.maximum(d2.min(1), 0.0))
    return out


def gap_to_context(task: Task) -> np.ndarray:
    """Distance (model units) from each target to the nearest context point of its own frame."""
    out = np.full(task.num_targets, np.inf)
    for t in np.unique(task.xt[:, 2]):
        sel = task.xt[:, 2] == t
        out[sel] = nearest_distance(task.xt[sel, :2], task.xc[task.xc[:, 2] == t, :2])
    return out


def temporal_support(task: Task) -> np.ndarray:
    """How each target's own place is observed in the other frames of the context: 0, 1 or 2 sides.

    2: the place is a context point both in an earlier and in a later frame (a station missing one
    month between months it reports: its own record brackets the gap); 1: on one side only (the
    first or last frame of a window, or a record that starts or stops); 0: not at all (a hole that
    persists, a new station, a ``targets=`` point). The infill calibration scales the std by
    support (see :func:`geonp.calibration.support_scales`). Places match exactly: the
    coordinates of one place are the same floats in every frame of a task.
    """
    nc, nt = task.num_context, task.num_targets
    out = np.zeros(nt, dtype=np.int8)
    if nc == 0 or nt == 0:
        return out
    place = np.unique(np.concatenate([task.xc[:, :2], task.xt[:, :2]]), axis=0, return_inverse=True)[1].ravel()
    n = int(place.max()) + 1
    first, last = np.full(n, np.inf), np.full(n, -np.inf)
    np.minimum.at(first, place[:nc], task.xc[:, 2])
    np.maximum.at(last, place[:nc], task.xc[:, 2])
    t, p = task.xt[:, 2], place[nc:]
    return ((first[p] < t).astype(np.int8) + (last[p] > t)).astype(np.int8)


def coarsen_far(task: Task, reach: float = FAR_GAP_UNITS, max_factor: float = FAR_GAP_MAX_FACTOR,
                gap: np.ndarray | None = None) -> Task:
    """``task`` in coarser space units where its farthest target lies beyond ``reach`` of the context.

    The space coordinates are divided by ``f = min(max_factor, gap / reach)``, ``gap`` the largest
    distance from a target to the context of its own frame: the network then sees that target
    ``reach`` units from the data. The shipped weights were pretrained on holes whose centres lie
    mostly within 4 units of the data; deeper inside a hole their prediction stops following the
    field (docs/benchmarks.md, "Where in the ERA5 block"). Every distance shrinks by the same
    factor, so the task keeps its shape. Tasks whose targets all lie within ``reach``, and
    forecasts (no context in the targets' frames), are returned as they are. ``gap``: the distances
    that decide the factor; by default the task's :func:`gap_to_context`. Prediction passes those of
    every missing point of the task's window when it fills gaps, so that the decision does not
    depend on how a chunking cuts the window's tiles.
    """
    gap = gap_to_context(task) if gap is None else np.asarray(gap)
    gap = gap[np.isfinite(gap)]
    factor = min(float(max_factor), float(gap.max()) / reach) if len(gap) else 1.0
    if factor <= 1.0:
        return task
    xc, xt = task.xc.copy(), task.xt.copy()
    xc[:, :2] /= factor
    xt[:, :2] /= factor
    return replace(task, xc=xc, xt=xt)
