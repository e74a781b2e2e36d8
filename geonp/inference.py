"""The per-chunk prediction body: tasks (numpy) → padded batches → model → mean/std (numpy).

This is the only place where the xarray side meets torch. It is called inside dask tasks, so
the model travels as a plain :class:`~geonp.payload.ModelPayload` (name, config and weights as
numpy arrays) and is rebuilt once per worker process.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import torch

from . import reach
from .allocator import release_freed_memory
from .data.tasks import (
    FAR_GAP_UNITS,
    Task,
    Window,
    coarsen_far,
    forecast_tasks,
    gap_to_context,
    infill_tasks,
    temporal_support,
)
from .errors import NO_CONTEXT_MESSAGE, NoContextWarning, warn_user
from .late import point_ages
from .models import Batch, NeuralProcess
from .normalise import Normaliser
from .payload import ModelPayload, net_from_payload, resolve_device

__all__ = [
    "ModelPayload", "collate", "predict_tasks", "resolve_device", "net_from_payload", "infill_block", "forecast_block",
]

#: padded context × tasks per forward pass (bounds memory; results do not depend on it)
MAX_BATCH_POINTS = 1 << 15


def _pad(arrays: Sequence[np.ndarray | None], n: int) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Stack ``[n_i, d]`` arrays into ``[b, n, d]`` (zero padding) and a ``[b, n]`` mask."""
    mask = torch.zeros(len(arrays), n, dtype=torch.bool)
    if arrays[0] is None:
        return None, mask
    d = arrays[0].shape[1]
    out = np.zeros((len(arrays), n, d), dtype=np.float64)
    for i, a in enumerate(arrays):
        out[i, : len(a)] = a
        mask[i, : len(a)] = True
    return torch.from_numpy(out), mask


def collate(tasks: Sequence[Task], *, with_targets: bool = False) -> Batch:
    """Pad ``tasks`` into one :class:`~geonp.models.Batch` (float64; the model casts)."""
    nc = max(t.num_context for t in tasks)
    nt = max(t.num_targets for t in tasks)
    xc, mc = _pad([t.xc for t in tasks], nc)
    yc, _ = _pad([t.yc for t in tasks], nc)
    xt, mt = _pad([t.xt for t in tasks], nt)
    zc, _ = _pad([t.zc for t in tasks], nc)
    zt, _ = _pad([t.zt for t in tasks], nt)
    yt = _pad([t.yt for t in tasks], nt)[0] if with_targets else None
    full_c, full_t = bool(mc.all()), bool(mt.all())
    return Batch(xc=xc, yc=yc, xt=xt, yt=yt, zc=zc, zt=zt, mc=None if full_c else mc, mt=None if full_t else mt)


def _groups(tasks: Sequence[Task], batch_size: int) -> list[list[int]]:
    order = sorted(range(len(tasks)), key=lambda i: (tasks[i].num_context, tasks[i].num_targets))
    groups, current = [], []
    for i in order:
        n = max([tasks[j].num_context for j in current] + [tasks[i].num_context])
        lo = min([tasks[j].num_context for j in current] + [tasks[i].num_context])
        if current and (len(current) >= batch_size or n * (len(current) + 1) > MAX_BATCH_POINTS
                        or n > 1.1 * lo + 16):  # padding costs real work: keep sizes within ~10 %
            groups.append(current)
            current = []
        current.append(i)
    if current:
        groups.append(current)
    return groups


@torch.no_grad()
def predict_tasks(
    net: NeuralProcess,
    tasks: Sequence[Task],
    *,
    device: torch.device | str = "cpu",
    batch_size: int = 8,
    mean_weight: float = 1.0,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Predictive mean and std of every task's targets, in data units (float64).

    ``mean_weight`` scales the network's standardised mean, its departure from the task's trend
    and context mean (``Normaliser.infill_mean_weight``).
    Tasks of similar size are padded together, at most ``batch_size`` per forward pass.
    Each target depends only on its own task, so the grouping never changes the result
    beyond float rounding.
    """
    device = torch.device(device)
    out: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(tasks)
    for group in _groups(tasks, batch_size):
        batch = collate([tasks[i] for i in group]).to(device)
        pred = net(batch)
        loc = pred.loc[..., 0].double().cpu().numpy()
        scale = pred.scale[..., 0].double().cpu().numpy()
        for row, i in enumerate(group):
            t, n = tasks[i], tasks[i].num_targets
            out[i] = t.to_data(mean_weight * loc[row, :n], scale[row, :n])
    return out  # type: ignore[return-value]


def predict_coarsened(net: NeuralProcess, tasks: Sequence[Task], factors: Sequence[np.ndarray] | None,
                      **options) -> list[tuple[np.ndarray, np.ndarray]]:
    """:func:`predict_tasks`, each target coarsened in space by its own factor (``factors[i]``: task ``i``'s).

    The targets of a task that share a factor are predicted together (:func:`geonp.data.coarsen_far`
    scales the whole task); a target's prediction then depends on its own distance to the data, not
    on the other targets of its tile. ``factors=None``: the tasks as they are.
    """
    if factors is None:
        return predict_tasks(net, tasks, **options)
    parts, where = [], []
    for i, (task, factor) in enumerate(zip(tasks, factors)):
        for level in np.unique(factor):
            sel = np.flatnonzero(factor == level)
            part = task if len(sel) == task.num_targets else task.select_targets(sel)
            parts.append(coarsen_far(part, gap=np.array([level * FAR_GAP_UNITS])) if level > 1 else part)
            where.append((i, sel))
    out = [(np.full(t.num_targets, np.nan), np.full(t.num_targets, np.nan)) for t in tasks]
    for (i, sel), (mean, std) in zip(where, predict_tasks(net, parts, **options)):
        out[i][0][sel], out[i][1][sel] = mean, std
    return out


def _threads(n: int | None) -> None:
    if n is not None and torch.get_num_threads() != n:
        torch.set_num_threads(n)


def _window(values: np.ndarray, meta: dict) -> tuple[Window, np.ndarray]:
    """Return the context window plus the target points (appended with NaN values, so never context)."""
    tw = values.shape[0]
    v = np.asarray(values, dtype=np.float64).reshape(tw, -1)
    n_ctx, n_tgt = v.shape[1], len(meta["tgt_xy"])
    allv = np.concatenate([v, np.full((tw, n_tgt), np.nan)], 1)

    def cat(a, b):
        return None if a is None or b is None else np.concatenate([a, b])

    window = Window(
        values=allv, xy=np.concatenate([meta["ctx_xy"], meta["tgt_xy"]]), t=meta["t"], hours=meta["hours"],
        lon=np.concatenate([meta["ctx_lon"], meta["tgt_lon"]]), elevation=cat(meta["ctx_elev"], meta["tgt_elev"]),
        land=cat(meta.get("ctx_land"), meta.get("tgt_land")),
    )
    return window, np.arange(n_ctx, n_ctx + n_tgt)


def _fill(tasks, preds_of, n_out: int, n_tgt: int, places=None, floors=None, warn: bool = True,
          once=None) -> np.ndarray:
    """Predict the tasks that are not ``None`` into ``[2, n_out, n_tgt]`` (NaN elsewhere).

    ``places[i]``: where task ``i``'s targets go, as ``(output row, slice of its targets)``
    pairs; by default task ``i`` fills row ``i``. ``floors[i]`` (optional): the least std of task
    ``i``'s targets (:func:`geonp.reach.far_floors`). ``warn=False``: no :class:`NoContextWarning` for tasks
    without context (an infill with a time axis bridges them after, and warns of what it cannot:
    :mod:`geonp.bridge`). ``once``: the prediction's key, so that its blocks warn once (:func:`warn_user`).
    """
    places = places or [[(i, slice(None))] for i in range(len(tasks))]
    out = np.full((2, n_out, n_tgt), np.nan, dtype=np.float32)
    real = [i for i, t in enumerate(tasks) if t is not None]
    empty = sum(len(places[i]) for i, t in enumerate(tasks) if t is None)
    if empty and warn:
        warn_user(NO_CONTEXT_MESSAGE, NoContextWarning, once=once)  # one text for every block
    preds = preds_of([tasks[i] for i in real])
    for i, (mean, std) in zip(real, preds):
        if floors is not None and floors[i] is not None:
            std = np.maximum(std, floors[i])
        std = np.where(np.isnan(mean), np.nan, std)  # no uncertainty without a prediction
        for row, part in places[i]:
            out[0, row], out[1, row] = mean[part].reshape(n_tgt), std[part].reshape(n_tgt)
    return out


def _setup(payload: ModelPayload, values: np.ndarray, meta: dict):
    _threads(meta.get("threads"))
    device = torch.device(meta["device"])
    window, targets = _window(values, meta)
    return net_from_payload(payload, device), device, Normaliser.from_dict(meta["norm"]), window, targets


def _releasing_memory(block):
    """Run ``block`` and then hand the memory it freed back to the system (see :mod:`geonp.allocator`)."""

    @functools.wraps(block)
    def run(*args, **kwargs):
        try:
            return block(*args, **kwargs)
        finally:
            release_freed_memory()

    return run


def _group_places(groups: Sequence[np.ndarray], frames: np.ndarray) -> list[list[tuple[int, int]]]:
    """For each frame group, ``(block row, position in the group)`` of each of its frames the block holds."""
    row = {int(f): r for r, f in enumerate(frames)}
    return [[(row[int(f)], k) for k, f in enumerate(g) if int(f) in row] for g in groups]


def _own_frames(task: Task | None, positions: list[int], n_tgt: int) -> Task | None:
    """``task`` with only the targets of the group frames at ``positions`` (a block's own frames).

    A target's prediction does not depend on the other targets of its task, so the targets of a
    group's frames that another block holds need not be predicted here.
    """
    if task is None or len(positions) * n_tgt == task.num_targets:
        return task
    return task.select_targets(np.concatenate([np.arange(k * n_tgt, (k + 1) * n_tgt) for k in positions]))


@_releasing_memory
def infill_block(payload: ModelPayload, values: np.ndarray, meta: dict) -> np.ndarray:
    """Predict one output block of an infill: ``[2 (mean, std), frames, target points]`` (float32).

    ``meta["groups"]`` (optional): the frame groups to predict as one task each (window frame
    indices, :func:`geonp.data.frame_groups`); they may hold frames outside the block's
    ``meta["frames"]``, whose predictions are dropped.
    """
    nothing = reach.outside_domain(meta, (len(meta["frames"]), *meta["tile_shape"]))
    if nothing is not None:
        return nothing
    net, device, norm, window, targets = _setup(payload, values, meta)
    frames, n_tgt = np.asarray(meta["frames"]), len(targets)
    groups = meta.get("groups") or [np.array([f]) for f in frames]
    groups, halves = reach.near_entries(window, groups, targets, frames, meta["half_window"], meta.get("near_window"))
    outages = meta.get("wide_window") is not None or meta.get("side_window") is not None
    seen = reach.seen_near(window, targets) if outages else None  # for both of them, computed once
    halves = reach.wide_entries(window, groups, halves, targets, meta.get("wide_window"), seen=seen)
    own = _group_places(groups, frames)
    tasks = infill_tasks(window, groups, targets, norm, halves, skip_empty=True)
    # each target's distance to its frame's context (model units, before any coarsening): for the std
    # factors per gap size, the prior's std far from the data (with the other frames), and coarsening
    gaps = [None if t is None else gap_to_context(t) for t in tasks]
    n_source = len(window.xy) - n_tgt  # the window holds the source points, then the targets
    fill = bool(meta.get("fill_gaps"))  # filling gaps: a task is coarsened by its window's deepest gap
    deep = reach.deepest_gaps(window, n_source, groups, meta) if fill else [None] * len(tasks)
    coarse = [_own_frames(None if t is None else coarsen_far(t, gap=d) if fill else t, [k for _, k in where], n_tgt)
              for t, d, where in zip(tasks, deep, own)]
    # targets=: each target by its own gap, so that a target's prediction does not depend on the others asked for
    factors = None if fill else [reach.target_factors(np.concatenate([g[k * n_tgt:(k + 1) * n_tgt] for _, k in where]))
                                 for t, g, where in zip(coarse, gaps, own) if t is not None]
    places = [[(row, slice(j * n_tgt, (j + 1) * n_tgt)) for j, (row, _) in enumerate(where)] for where in own]
    # the prior's std far from the data: the other frames count too, in space and time; for the block's own
    # targets, as `places` keeps them
    far = [reach.near_in_time(t, g) for t, g in zip(tasks, gaps)]
    own_gaps = [None if g is None else np.concatenate([g[k * n_tgt:(k + 1) * n_tgt] for _, k in where])
                for g, where in zip(far, own)]
    own_gaps = reach.inside_domain(own_gaps, meta)
    floors = _floors(window, groups, halves, targets, own, tasks, own_gaps, meta, seen)
    out = _fill(coarse, lambda ts: predict_coarsened(net, ts, factors, device=device, batch_size=meta["batch_size"],
                                                     mean_weight=norm.infill_mean_weight),
                len(frames), n_tgt, places, floors=floors, warn=not meta.get("fills_empty"), once=meta.get("call"))
    raw = out[1].copy() if norm.gap_std_scale else None  # the network's own std, before the calibration
    out[1] = norm.infill_std(out[1])  # NaN (no context) stays NaN
    if norm.gap_std_scale:  # calibrated per gap size: each target's distance to its frame's context
        by_support = bool(norm.support_std_scale)  # and by how its own place is observed in the other frames
        gap, support = np.full(out.shape[1:], np.inf), np.zeros(out.shape[1:], dtype=np.int8)
        for t, g, where in zip(tasks, gaps, own):
            s = temporal_support(t) if by_support and t is not None else None
            for row, k in where:
                if g is not None:
                    gap[row] = g[k * n_tgt:(k + 1) * n_tgt]
                if s is not None:
                    support[row] = s[k * n_tgt:(k + 1) * n_tgt]
        out[1] *= norm.std_factor(distance=gap, support=support).astype(np.float32)
        # far beyond the gaps the calibration saw (targets= a grid far from the stations), it cannot tell the
        # network's std to stop growing: never below the network's own there
        beyond = gap > BEYOND_CALIBRATION * norm.gap_distance[-1]
        out[1] = np.where(beyond, np.fmax(out[1], raw), out[1])
    else:
        out[1] *= norm.std_factor()
    if norm.nonnegative:  # rain, wind speed: no mean below every observed value (NaN stays NaN)
        out[0] = np.maximum(out[0], 0.0)
    return out.reshape(2, len(frames), *meta["tile_shape"])


def _floors(window, entries, halves, targets, own, tasks, own_gaps, meta, seen) -> list[np.ndarray | None]:
    """Per task, the least std of its own targets: the prior's far from the data, the persistence error one-sided."""
    floors = reach.far_floors(tasks, own_gaps, once=meta.get("call"))
    sided = reach.one_sided_floors(window, entries, halves, targets, own, meta.get("side_window"), seen=seen)
    return [a if b is None or t is None else b if a is None else np.maximum(a, b)
            for a, b, t in zip(floors, sided, tasks)]


#: targets this many times farther than the calibration's farthest gap bin keep at least the network's own std
BEYOND_CALIBRATION = 2.0


@_releasing_memory
def forecast_block(payload: ModelPayload, values: np.ndarray, meta: dict,
                   persistence: np.ndarray | None = None) -> np.ndarray:
    """Predict one output block of a forecast: ``[2, inits, leads, target points]`` (float32).

    ``persistence`` (``[inits, *tile_shape]``, the targets' values at the initial times) is needed
    when the normaliser's ``lead_mean_weight`` calibrates the mean; where it is missing the
    network's mean stands in for it (kept as it is, or damped by ``lead_damping``).
    """
    nothing = reach.outside_domain(meta, (len(meta["frames"]), len(meta["leads"]), *meta["tile_shape"]))
    if nothing is not None:
        return nothing
    net, device, norm, window, targets = _setup(payload, values, meta)
    leads = np.asarray(meta["leads"])
    tasks = forecast_tasks(window, meta["frames"], leads, meta["lead_hours"], targets, norm,
                           meta["context_frames"], skip_empty=True, reach=meta.get("reach", 0))
    n_tgt = len(targets) * len(leads)
    # as infill's: at least the prior's std at targets far from every observation the task sees
    gaps = reach.inside_domain([None if t is None else reach.gap_to_past(t, len(targets)) for t in tasks], meta)
    out = _fill(tasks, lambda ts: predict_tasks(net, ts, device=device, batch_size=meta["batch_size"]),
                len(meta["frames"]), n_tgt, floors=reach.far_floors(tasks, gaps, once=meta.get("call")),
                once=meta.get("call"))
    out = out.reshape(2, len(meta["frames"]), len(leads), -1)
    # the calibration's per-lead fields at each forecast's lead from its newest observed frame (its own lead when
    # the initial frame is observed; the initial frame and the one before it not yet delivered: lead + 2)
    # and per target point: a region (a station) not yet delivered while the rest of the window is on time
    ages = point_ages(np.asarray(values).reshape(len(window.t), -1), meta["ctx_xy"], meta["frames"], meta["tgt_xy"],
                      look_back=int(meta["context_frames"]) + int(meta.get("reach", 0)) - 1)
    lead_frames = np.asarray(meta["lead_frames"])[None, :, None] + ages[:, None, :]

    def per_lead(field: np.ndarray | float) -> np.ndarray:
        return np.broadcast_to(np.asarray(field, dtype=np.float32), lead_frames.shape)

    out[1] *= per_lead(norm.std_factor(lead_frames))
    extra = norm.std_extra(lead_frames)
    if extra is not None:
        out[1] = np.sqrt(out[1] ** 2 + per_lead(extra) ** 2)
    weight = norm.mean_weight(lead_frames)
    if weight is not None and persistence is not None:
        p = np.asarray(persistence, dtype=np.float32).reshape(len(meta["frames"]), 1, -1)
        damping = norm.damping(lead_frames)
        c = np.float32(1.0) if damping is None else per_lead(damping)
        # where the initial value is missing the network's mean stands in for it (kept as it is when c = 1)
        p = np.where(np.isfinite(p), p, out[0])
        out[0] = c * p + per_lead(weight) * (out[0] - p)
    return out.reshape(2, len(meta["frames"]), len(leads), *meta["tile_shape"])
