"""Calibration of a model on held-out points of its training data (forward passes only).

* infill: one factor on the predictive std, ``sqrt(mean(z²))`` over held-out points weighted so
  that their distances to the context match the data's own gaps;
* forecast: per lead, a blend of the network's mean with persistence (least squares) and a
  factor on the std.
"""

from __future__ import annotations

import numpy as np

from .data import SamplerConfig, TaskSampler, Window
from .inference import predict_tasks
from .models import NeuralProcess
from .normalise import Normaliser

__all__ = ["calibrate", "gap_distances", "match_weights", "mean_weights"]


def calibrate(net: NeuralProcess, values: np.ndarray, window: Window, norm: Normaliser, config: SamplerConfig,
              settings: dict, n_tasks: int, seed: int) -> dict:
    """Scale of the predictive std that makes held-out errors unit-variance: ``sqrt(mean(z²))``.

    Infill: tasks hold out 5–30 % of a frame's observed points and keep every other observed
    point as context, as prediction does. Forecast: tasks with the context of prediction (the
    model's ``context_frames``), one factor per lead. Forward passes only.
    """
    if config.task == "infill":
        cal = SamplerConfig(task="infill", max_context=4096, max_targets=256, half_window=settings["half_window"],
                            keep_range=(0.7, 0.95), hole_probability=0.5)
    else:
        cal = SamplerConfig(task="forecast", max_context=4096, max_targets=512,
                            context_frames=settings["context_frames"], max_lead=config.max_lead)
    sampler = TaskSampler(values, window, norm, config=cal)
    rng = np.random.default_rng(10_000 + seed)
    tasks = []
    while len(tasks) < n_tasks:
        t = sampler.sample(rng)
        if t.num_targets and t.num_context:
            tasks.append(t)
    preds = predict_tasks(net, tasks, batch_size=4)
    y = np.concatenate([t.to_data(t.yt[:, 0], t.yt[:, 0])[0] for t in tasks])
    mean = np.concatenate([m for m, _ in preds])
    std = np.concatenate([s for _, s in preds])
    if config.task == "infill":
        # weight the held-out points so their distances to the context match the data's own gaps
        near = np.concatenate([_nearest_same_frame(t) for t in tasks])
        w = match_weights(near, gap_distances(values, window.xy, np.random.default_rng(20_000 + seed)))
        z2 = ((y - mean) / std) ** 2
        return {"std_scale": float(np.clip(np.sqrt(np.sum(w * z2) / np.sum(w)), 0.2, 5.0))}
    leads = np.concatenate([np.rint(t.xt[:, 2] - t.xc[:, 2].max()).astype(int) for t in tasks])
    persistence = np.concatenate([t.persistence for t in tasks])
    weights = mean_weights(y, mean, persistence, leads, config.max_lead)
    w = np.asarray(weights)[np.clip(leads, 1, config.max_lead) - 1]
    mean = np.where(np.isfinite(persistence), persistence + w * (mean - persistence), mean)
    z2 = ((y - mean) / std) ** 2
    out = {"std_scale": float(np.clip(np.sqrt(np.mean(z2)), 0.2, 5.0))}
    out["lead_std_scale"] = tuple(
        float(np.clip(np.sqrt(np.mean(z2[leads == k])), 0.2, 5.0)) if (leads == k).any() else out["std_scale"]
        for k in range(1, config.max_lead + 1))
    out["lead_mean_weight"] = weights
    return out


def _nearest_same_frame(task) -> np.ndarray:
    """Distance (model units) from each target to the nearest context point of its own frame."""
    out = np.full(task.num_targets, np.inf)
    for t in np.unique(task.xt[:, 2]):
        ctx = task.xc[task.xc[:, 2] == t, :2]
        sel = task.xt[:, 2] == t
        if len(ctx):
            out[sel] = _nearest(task.xt[sel, :2], ctx)
    return out


def gap_distances(values: np.ndarray, xy: np.ndarray, rng: np.random.Generator, frames: int = 16,
                  region: int = 2048) -> np.ndarray:
    """Distances (model units) from missing points to the nearest observed point of the same frame.

    Sampled from up to ``frames`` frames, each within a region of ``region`` neighbouring points
    (so the cost does not grow with the grid). Empty when the data have no gaps.
    """
    E, T, P = values.shape
    finite = np.isfinite(values)
    counts = finite.sum(2)
    mixed = np.argwhere((counts > 0) & (counts < P))
    out = []
    for e, t in mixed[rng.permutation(len(mixed))[:frames]]:
        centre = xy[rng.integers(P)]
        idx = np.argsort(((xy - centre) ** 2).sum(1))[:region] if P > region else np.arange(P)
        obs, miss = xy[idx[finite[e, t, idx]]], xy[idx[~finite[e, t, idx]]]
        if len(obs) and len(miss):
            out.append(_nearest(miss, obs))
    return np.concatenate(out) if out else np.zeros(0)


def match_weights(distances: np.ndarray, wanted: np.ndarray, bins: int = 16) -> np.ndarray:
    """Importance weights that give ``distances`` the histogram of ``wanted`` (log-spaced bins).

    Uniform weights when ``wanted`` is empty; bins that ``wanted`` does not reach get weight 0.
    """
    if len(wanted) == 0:
        return np.ones(len(distances))
    edges = np.concatenate([[0.0], np.geomspace(0.05, 50.0, bins - 1), [np.inf]])
    have = np.histogram(distances, edges)[0] / max(len(distances), 1)
    want = np.histogram(wanted, edges)[0] / len(wanted)
    ratio = np.divide(want, have, out=np.zeros_like(want), where=have > 0)
    w = ratio[np.clip(np.searchsorted(edges, distances, side="right") - 1, 0, bins - 1)]
    return w if w.sum() > 0 else np.ones(len(distances))


def mean_weights(y: np.ndarray, mean: np.ndarray, persistence: np.ndarray, leads: np.ndarray,
                 max_lead: int) -> tuple[float, ...]:
    """Per lead, the least-squares weight ``w`` of ``persistence + w * (mean - persistence)``.

    The calibrated forecast blends the network with persistence (model output statistics, one
    number per lead); ``w`` is clipped to [0, 1.5], and is 1 where a lead has no usable points.
    """
    out = []
    for k in range(1, max_lead + 1):
        sel = (leads == k) & np.isfinite(persistence)
        d = mean[sel] - persistence[sel]
        denom = float(np.sum(d * d))
        w = float(np.sum((y[sel] - persistence[sel]) * d) / denom) if denom > 0 else 1.0
        out.append(float(np.clip(w, 0.0, 1.5)))
    return tuple(out)


def _nearest(points: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Distance from each of ``points`` ``[n, 2]`` to the nearest of ``others`` ``[m, 2]``."""
    return np.sqrt(((points[:, None] - others[None]) ** 2).sum(-1).min(1))
