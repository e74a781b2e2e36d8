"""How far each target of a prediction block lies from the data, and what that changes. No torch here.

The distances decide the prior's std far from every observation (:func:`far_floors`), the coarser
units deep inside holes (:func:`deepest_gaps`, :func:`geonp.data.coarsen_far`), and the domain
(``mask=``) decides which targets count at all (:func:`outside_domain`, :func:`inside_domain`).
"""

from __future__ import annotations

import numpy as np

from .data.tasks import FAR_FROM_DATA_UNITS, FAR_GAP_MAX_FACTOR, FAR_GAP_UNITS, Task, Window, nearest_distance
from .errors import FarFromDataWarning, warn_user

__all__ = ["far_floors", "outside_domain", "inside_domain", "near_in_time", "gap_to_past", "window_gap",
           "deepest_gaps", "near_entries", "wide_entries", "one_sided_floors", "seen_near",
           "NEAR_UNITS", "NEAR_FRAMES"]


def far_floors(tasks, gaps, once=None) -> list[np.ndarray | None]:
    """Per task, the least std of its targets: the prior's where they are far from the data.

    ``gaps[i]``: the distance (model units) from each target of task ``i`` (in the order its
    predictions are kept) to the data it is predicted from: for infill its frame's observations
    (:func:`geonp.data.gap_to_context`), for forecasts those of its context frames (:func:`gap_to_past`).
    A target more than :data:`FAR_FROM_DATA_UNITS` from them lies beyond the distances the weights
    were trained on, even in coarser units (:func:`geonp.data.coarsen_far`), and the network's std there does
    not grow as a Gaussian process's would (0.15–0.2 K 1,000–3,000 km from ERA5 data whose spread
    is 1.6 K). A GP's std tends to its prior's far from the data: the spread of the task's context
    (``Task.scale``, data units) is the floor there. ``once``: the prediction's key (its blocks warn once).
    """
    out, far_count = [], 0
    for t, gap in zip(tasks, gaps):
        far = None if t is None or gap is None else gap > FAR_FROM_DATA_UNITS
        far_count += 0 if far is None else int(far.sum())
        out.append(np.where(far, float(t.scale), 0.0) if far is not None and far.any() else None)
    if far_count:
        warn_user(
            f"targets lie more than {FAR_FROM_DATA_UNITS:g} spacing units (typical distances between observations) "
            "from every observation of their frame and, in space and time, of the frames beside it (forecasts: of "
            "their context frames), farther than the model "
            "was trained on: their std is raised to the spread of the data in their window (a prior's), their mean "
            "is little more than its mean. Predict nearer the data (targets=, a smaller domain) or treat them as "
            "unconstrained.", FarFromDataWarning, once=once)
    return out


def outside_domain(meta: dict, shape: tuple) -> np.ndarray | None:
    """NaN mean and std ``[2, *shape]`` for a block whose targets all lie outside the domain (``mask=``), else None.

    Their outputs are NaN anyway: nothing is predicted, and nothing warns that they lack context.
    """
    inside = meta.get("tgt_domain")
    if inside is None or np.asarray(inside).any():
        return None
    return np.full((2, *shape), np.nan, dtype=np.float32)


def inside_domain(gaps: list, meta: dict) -> list:
    """``gaps`` (per task, over its targets: the block's target points, repeated) at 0 outside the domain.

    Outside the domain (``mask=``) the outputs are NaN: no target there is far from the data, so none
    raises a :class:`FarFromDataWarning` (a land-only field's sea, never observed, did).
    """
    inside = meta.get("tgt_domain")
    if inside is None:
        return gaps
    inside = np.asarray(inside, dtype=bool)
    return [None if g is None else np.where(np.tile(inside, len(g) // len(inside)), g, 0.0) for g in gaps]


def near_in_time(task: Task | None, gap: np.ndarray | None) -> np.ndarray | None:
    """``gap`` (to each target's own frame's context) lowered to the space-time distance to the whole context.

    A frame missing whole between observed frames is not far from the data: its places are observed
    a step or two away in time (model units of space and time alike). Its std was raised to the
    prior's, 3.5 x its error on ERA5, with a warning to predict nearer the data.
    """
    if task is None or gap is None or not (gap > FAR_FROM_DATA_UNITS).any():
        return gap
    return np.minimum(gap, nearest_distance(task.xt[:, :3], task.xc[:, :3]))


def gap_to_past(task: Task, n_points: int) -> np.ndarray:
    """Distance (model units) from each forecast target to the nearest observation of its context frames.

    The targets are the same ``n_points`` points at every lead (lead-major), at other times than the context.
    """
    d = nearest_distance(task.xt[:n_points, :2], np.unique(task.xc[:, :2], axis=0))
    return np.tile(d, task.num_targets // n_points)


def window_gap(window: Window, n_source: int, group: np.ndarray, domain: np.ndarray | None = None) -> np.ndarray:
    """The distance (model units) from each frame's missing source points to its data, over ``group``'s frames.

    Only missing points inside ``domain`` (where the field is defined: ``mask=``) count.
    """
    out = [np.zeros(0)]
    xy = window.xy[:n_source]
    inside = np.ones(n_source, dtype=bool) if domain is None else np.asarray(domain, dtype=bool)
    for f in np.atleast_1d(group):
        ok = np.isfinite(window.values[f, :n_source])
        gap = ~ok & inside
        if ok.any() and gap.any():
            out.append(nearest_distance(xy[gap], xy[ok]))
    return np.concatenate(out)


def deepest_gaps(window: Window, n_source: int, groups, meta: dict) -> list:
    """Per frame group of a gap filling, the distances that decide its coarsening (:func:`geonp.data.coarsen_far`).

    Those of every missing point of the window, so that the decision does not depend on how chunks
    cut tiles. At ``targets=`` each target is coarsened by its own distance instead (:func:`target_factors`).
    """
    return [window_gap(window, n_source, g, domain=meta.get("ctx_domain")) for g in groups]


#: steps per doubling of a target's coarsening factor (:func:`target_factors`)
FACTOR_STEPS = 4


def target_factors(gap: np.ndarray) -> np.ndarray:
    """Each target's own coarsening factor (:func:`geonp.data.coarsen_far`) from its distance to the data.

    ``gap / FAR_GAP_UNITS`` between 1 and ``FAR_GAP_MAX_FACTOR``, rounded up to :data:`FACTOR_STEPS` steps
    per doubling so that targets at about one distance share a task; 1 within ``FAR_GAP_UNITS``.
    """
    f = np.clip(np.nan_to_num(np.asarray(gap, dtype=np.float64) / FAR_GAP_UNITS, nan=1.0, posinf=FAR_GAP_MAX_FACTOR),
                1.0, FAR_GAP_MAX_FACTOR)
    return np.minimum(2.0 ** (np.ceil(np.log2(f) * FACTOR_STEPS - 1e-9) / FACTOR_STEPS), FAR_GAP_MAX_FACTOR)


#: a frame is predicted from its near window when each target has points observed within this many model space units
NEAR_UNITS = 3.0
#: … in at least this many frames of it: from one frame alone the network cannot tell how fast the field changes
NEAR_FRAMES = 2


def near_entries(window: Window, groups: list, targets: np.ndarray, frames: np.ndarray, half_window: float,
                 near_window: float | None) -> tuple[list, np.ndarray | float]:
    """The infill tasks of a block: its frame groups, or their frames alone where a near window sees enough.

    Without ``near_window`` (model time units) ``groups`` and ``half_window`` are returned as they are.
    Else a group whose every frame has, for each of ``targets``, points observed within
    :data:`NEAR_UNITS` (space alone) in at least :data:`NEAR_FRAMES` of the frames within ``near_window``
    of it is split into its own frames (those among ``frames``, the block's), each predicted from the
    frames within ``near_window``; the other groups keep ``half_window`` around their centre. Returns
    the entries and one window per entry. A window narrower than a gap's duration sees nothing of the
    place missing, and one observed frame alone made the network sure of it (a 6-hour outage over half
    of ERA5's domain: 0.909 K at ±1 frame against 0.688 at ±3, 0.707 with this rule; single frames at ±3
    had rms z about 20 in its middle hours, docs/benchmarks.md "A near window where it sees enough").
    The decision reads the block's window only, so chunkings agree.
    """
    if near_window is None or near_window >= half_window:
        return groups, half_window
    # frames where every target has an observation within NEAR_UNITS
    seen = seen_near(window, targets).all(1) & np.isfinite(window.values).any(1)
    # a frame needs NEAR_FRAMES such frames within near_window; a target well seen in two different frames only
    # half-counts here (each frame must see every target), so the rule errs towards the wide window
    near = [np.flatnonzero(np.abs(window.t - window.t[f]) <= near_window + 1e-9) for f in range(len(window.t))]
    ok = np.array([seen[n].sum() >= NEAR_FRAMES for n in near])
    own = set(np.asarray(frames).tolist())
    entries, halves = [], []
    for g in groups:
        g = np.atleast_1d(np.asarray(g, dtype=np.int64))
        if ok[g].all():
            kept = [np.array([f]) for f in g if int(f) in own]
            entries += kept
            halves += [near_window] * len(kept)
        else:
            entries.append(g)
            halves.append(half_window)
    return entries, np.asarray(halves, dtype=np.float64)


def seen_near(window: Window, targets: np.ndarray) -> np.ndarray:
    """``[frames, targets]``: whether a target has a point observed within :data:`NEAR_UNITS` in each frame.

    :func:`wide_entries` and :func:`one_sided_floors` take it as ``seen=``, so that a block computes it once.
    """
    observed = np.isfinite(window.values)
    seen = np.zeros((len(window.t), len(targets)), dtype=bool)
    for f in np.flatnonzero(observed.any(1)):
        seen[f] = nearest_distance(window.xy[targets], window.xy[observed[f]]) <= NEAR_UNITS
    return seen


def wide_entries(window: Window, entries: list, halves, targets: np.ndarray, wide_window: float | None,
                 seen: np.ndarray | None = None):
    """``halves`` (one window per entry, model time units) widened, up to ``wide_window``, to see both sides.

    A target of an entry is *deep* when no point within :data:`NEAR_UNITS` of it is observed in any
    of the entry's own frames. Its two sides are the nearest earlier and later frames in which one
    is. An entry's window widens to the least window that shows both sides of every deep target
    whose sides lie within ``wide_window`` but not both within the entry's window. Inside an outage the
    frames read at ±3 saw the place only before it or only after it, and the network extrapolated
    from one side (ERA5, the west half missing for 6 hours: 0.707 K by default before, 0.562 with
    this, linear interpolation in time 0.653; docs/benchmarks.md, "Both sides of an outage"). A
    place missing up to the end of the record has one side only and keeps its window, as do entries
    with no deep target. The decision reads the block's window only (read ``wide_window`` beyond its
    frames), so chunkings agree.
    """
    halves = np.broadcast_to(np.asarray(halves, dtype=np.float64), (len(entries),)).copy()
    if wide_window is None or not len(entries) or (halves >= wide_window).all():
        return halves
    seen = seen_near(window, targets) if seen is None else seen
    for i, g in enumerate(entries):
        g = np.atleast_1d(np.asarray(g, dtype=np.int64))
        deep = ~seen[g].any(0)
        if halves[i] >= wide_window or not deep.any():
            continue
        centre, first, last = float(np.mean(window.t[g])), window.t[g].min(), window.t[g].max()
        dt = np.abs(window.t - centre)
        sides = [(window.t < first)[:, None] & seen[:, deep], (window.t > last)[:, None] & seen[:, deep]]
        # each deep target's nearest frame on each side where it is seen; the window that shows both sides
        both = np.stack([np.where(side, dt[:, None], np.inf).min(0) for side in sides]).max(0)
        wanted = both[(both > halves[i] + 1e-9) & (both <= wide_window + 1e-9)]
        if wanted.size:
            halves[i] = float(wanted.max())  # the least window that shows every such target's both sides
    return halves


def one_sided_floors(window: Window, entries: list, halves, targets: np.ndarray, own: list,
                     side_window: float | None, seen: np.ndarray | None = None) -> list[np.ndarray | None]:
    """Per entry, the least std of its own targets where a missing place is seen on one side only.

    A deep target (see :func:`wide_entries`) whose window, even widened, shows its place observed
    before it or after it but not both is extrapolated in time from that side, and the network's std
    there is set by one frame's observations, not by the time passed since them (ERA5, the west half
    missing in the last 10 hours of the record: 0.42 K where its error was 1.3–2.0 K, rms z about 12).
    Its floor is the persistence error at that lag: the RMS change of the observed values over as many
    frames, within ``side_window`` of the entry (docs/benchmarks.md, "One side of an outage"); a
    target seen on neither side within its window (TE-PT-TNP's ±1 inside an outage) takes the nearer.
    ``own[i]``: the ``(row, position in the entry)`` of each of the block's frames, as the floors
    of :func:`far_floors` are kept. The decision and the RMS change read only the frames within
    ``side_window`` of the entry, so chunkings agree. ``None`` for entries without such targets.
    """
    out: list[np.ndarray | None] = [None] * len(entries)
    if side_window is None or not len(entries):
        return out
    halves = np.broadcast_to(np.asarray(halves, dtype=np.float64), (len(entries),))
    seen = seen_near(window, targets) if seen is None else seen  # the targets' own values are NaN: never observed
    n_tgt = len(targets)
    for i, (g, where) in enumerate(zip(entries, own)):
        g = np.atleast_1d(np.asarray(g, dtype=np.int64))
        deep = ~seen[g].any(0)
        if not deep.any() or not where:
            continue
        centre = float(np.mean(window.t[g]))
        reach_ = np.abs(window.t - centre) <= side_window + 1e-9
        inside = (np.abs(window.t - centre) <= halves[i] + 1e-9)[:, None] & seen[:, deep]
        before, after = window.t < window.t[g].min(), window.t > window.t[g].max()
        both = (inside & before[:, None]).any(0) & (inside & after[:, None]).any(0)
        one = np.flatnonzero(deep)[~both]
        sides = reach_[:, None] & seen[:, one]  # [frames, one-sided targets]: where each is seen, within reach
        if not sides.any() or reach_.sum() < 2:
            continue  # nothing of them in reach: the far floors (far_floors) stand alone
        change = _persistence_error(window.values[reach_])
        frame = np.arange(len(window.t))[:, None]
        floor = np.zeros((len(where), n_tgt))
        for j, (_, k) in enumerate(where):  # lag: frames to the nearest seen (never 0: deep in its own frames)
            lag = np.where(sides, np.abs(frame - g[k]), len(window.t) + 1).min(0)
            floor[j, one] = np.where(lag <= len(window.t), change[np.minimum(lag, len(change)) - 1], 0.0)
        out[i] = floor.reshape(-1) if floor.any() else None
    return out


def _persistence_error(values: np.ndarray) -> np.ndarray:
    """``[lags]``: the RMS of ``values[f + k] − values[f]`` over every point observed in both, ``k = 1 …``.

    ``values``: ``[frames, points]`` with NaN where unobserved. A lag without pairs takes the shorter one's.
    """
    out = []
    for k in range(1, len(values)):
        d = values[k:] - values[:-k]
        d = d[np.isfinite(d)]
        out.append(float(np.sqrt(np.mean(d**2))) if d.size else out[-1] if out else 0.0)
    return np.asarray(out)
