"""Calibration of a model on held-out points of its training data (forward passes only).

* infill: factors on the predictive std, ``sqrt(mean(z²))`` over held-out points weighted so
  that their distances to the context match the data's own gaps, per bin of that distance, then
  by how the target's own place is observed in the other frames (:func:`support_scales`);
* forecast: per lead, a blend of the network's mean with persistence and the last step's trend
  (least squares, shrunk towards the network alone by cross-validation across the calibration
  tasks: :func:`geonp.blend.shrunk_mean_weights`), and the std ``sqrt((a σ)² + b²)`` (maximum likelihood),
  widened where its 95 % interval would cover fewer of the held-out errors (:func:`coverage_factor`).
"""

from __future__ import annotations

import numpy as np

from .blend import Blend, forecast_damping, lag_regression, mean_weights, shrunk_mean_weights
from .data import SamplerConfig, TaskSampler, Window, coarsen_far, gap_to_context, nearest_distance, temporal_support
from .inference import predict_tasks
from .models import NeuralProcess
from .normalise import Normaliser
from .std_fits import coverage_factor, covered_std_fit, growing_with_lead, std_fit

#: resamples of the held-out places behind :func:`infill_mean_weight`, and the quantile of their fits kept
MEAN_WEIGHT_RESAMPLES = 200
MEAN_WEIGHT_QUANTILE = 0.9

#: share of the infill calibration's tasks without a hole whose held-out points are missing from every
#: frame (scattered places with no record in the window, as new stations), beside the holes
CALIBRATION_VANISH = 0.3

#: share of each frame's observed points an infill calibration keeps as context when the data have no gaps
#: (otherwise 0.7–0.95): a model fitted on complete fields is calibrated for sparser ones too
GAP_FREE_KEEP = (0.05, 0.95)

__all__ = ["Blend", "beats_pooled", "calibrate", "coverage_factor", "covered_std_fit", "forecast_fields",
           "gap_distances", "gap_scales",
           "lag_regression", "match_weights", "infill_mean_weight", "mean_weights", "shrunk_mean_weights", "std_fit",
           "support_scales", "window_context"]


def calibrate(net: NeuralProcess, values: np.ndarray, window: Window, norm: Normaliser, config: SamplerConfig,
              settings: dict, n_tasks: int, seed: int, raw: np.ndarray | None = None, spacing: float = 1.0) -> dict:
    """Scale of the predictive std that makes held-out errors unit-variance: ``sqrt(mean(z²))``.

    Infill: tasks hold out 5–30 % of a frame's observed points (5–95 % of every frame's when the data
    have no gaps, :data:`GAP_FREE_KEEP`) and keep every other observed
    point as context, as prediction does (the other frames whole since 2026-11-27); half the tasks
    also cut a hole through every frame, and :data:`CALIBRATION_VANISH` of the others remove the
    held-out places from every frame. Forecast: tasks with the context of prediction (the
    model's ``context_frames``), one factor per lead, after the mean is blended with persistence
    and the trend (see :func:`mean_weights`; ``raw`` is the variable when ``values`` are departures
    from a reference). ``spacing`` is the typical spacing of the observed points in model units
    (:meth:`geonp.chunked.Problem.observed_spacing`), so that a task's region is a prediction window's.
    Forward passes only.
    """
    if config.task == "infill":
        wanted = gap_distances(values, window.xy, np.random.default_rng(20_000 + seed))  # the data's own gaps
        # the other frames keep every observed point, as prediction does; data without gaps tell nothing of
        # the gaps the model will meet, so there every frame is thinned, and further
        gap_free = len(wanted) == 0
        frames, keep = 2 * settings["half_window"] + 1, GAP_FREE_KEEP if gap_free else (0.7, 0.95)
        kept = float(np.mean(keep)) if gap_free else (float(np.mean(keep)) + frames - 1) / frames
        cal = SamplerConfig(task="infill", max_context=window_context(settings, frames, kept, spacing=spacing),
                            max_targets=256, half_window=settings["half_window"], keep_range=keep,
                            hole_probability=0.5, vanish_probability=CALIBRATION_VANISH, thin_other_frames=gap_free)
    else:
        cal = SamplerConfig(task="forecast", max_context=window_context(settings, settings["context_frames"],
                                                               spacing=spacing),
                            max_targets=512, context_frames=settings["context_frames"], max_lead=config.max_lead)
    sampler = TaskSampler(values, window, norm, config=cal, raw=raw)
    rng = np.random.default_rng(10_000 + seed)
    tasks = []
    while len(tasks) < n_tasks:
        t = sampler.sample(rng)
        if t.num_targets and t.num_context:
            tasks.append(t)
    gaps = [gap_to_context(t) for t in tasks]  # model units, before any coarsening
    preds = predict_tasks(net, [coarsen_far(t, gap=g) for t, g in zip(tasks, gaps)], batch_size=4)  # as prediction
    y = np.concatenate([t.to_data(t.yt[:, 0], t.yt[:, 0])[0] for t in tasks])
    mean = np.concatenate([m for m, _ in preds])
    std = np.concatenate([s for _, s in preds])
    if config.task == "infill":
        # weight the held-out points so their distances to the context match the data's own gaps
        near = np.concatenate(gaps)
        w = match_weights(near, wanted)
        # the network's departure from the trend, shrunk where it follows the context's noise; the held-out
        # points of one place (a station on several tasks) share their errors, so they are resampled together
        trend = np.concatenate([t.to_data(np.zeros(t.num_targets), np.zeros(t.num_targets))[0] for t in tasks])
        places = np.unique(np.round(np.concatenate([t.xt[:, :2] for t in tasks]), 6), axis=0, return_inverse=True)[1]
        weight = infill_mean_weight(y, mean, trend, w, groups=places.ravel(), seed=seed)
        mean = trend + weight * (mean - trend)
        # a nugget first (errors that do not shrink next to the data as the network's std does), then
        # factors by gap size on the combined std
        base, extra = std_fit(y - mean, std, weights=w)
        std = np.sqrt((base * std) ** 2 + extra**2)
        z2 = ((y - mean) / std) ** 2
        return {"std_scale": float(np.clip(np.sqrt(np.sum(w * z2) / np.sum(w)), 0.2, 5.0)),
                "infill_mean_weight": weight, "infill_std_base": base, "infill_std_extra": extra,
                **support_scales(near, z2, w, np.concatenate([temporal_support(t) for t in tasks]),
                                 groups=places.ravel(), seed=seed)}
    leads = np.concatenate([np.rint(t.xt[:, 2] - t.xc[:, 2].max()).astype(int) for t in tasks])
    task_of = np.concatenate([np.full(t.num_targets, i) for i, t in enumerate(tasks)])
    return forecast_fields(y, mean, std, leads, np.concatenate([t.persistence for t in tasks]),
                           np.concatenate([t.trend for t in tasks]), task_of, config.max_lead,
                           damping=forecast_damping(values, window.t, settings.get("reference"), config.max_lead))


def forecast_fields(y: np.ndarray, mean: np.ndarray, std: np.ndarray, leads: np.ndarray, persistence: np.ndarray,
                    trend: np.ndarray, groups: np.ndarray, max_lead: int, shrink: bool = True,
                    damping=None) -> dict:
    """The forecast calibration's normaliser fields from the held-out errors of its tasks.

    Per lead: the mean blend with persistence and the trend (:func:`shrunk_mean_weights`, or
    :func:`mean_weights` as fitted with ``shrink=False``), then the std ``sqrt((a σ)² + b²)`` of the
    blended errors (:func:`std_fit`) widened by :func:`coverage_factor`. ``y``, ``mean``, ``std``,
    ``persistence`` and ``trend`` are per target point in data units, ``leads`` in frames and
    ``groups`` the calibration task of each point. ``damping`` is the weight of persistence per
    lead for forecasts of departures from an annual cycle (:func:`mean_weights`).
    """
    if shrink:
        blend = shrunk_mean_weights(y, mean, persistence, leads, max_lead, trend, groups=groups, damping=damping)
    else:
        blend = mean_weights(y, mean, persistence, leads, max_lead, trend, damping)
    k = np.clip(leads, 1, max_lead) - 1
    w, v, c = np.asarray(blend.w)[k], np.asarray(blend.v)[k], np.asarray(blend.c)[k]
    p = np.where(np.isfinite(persistence), persistence, mean)  # the network's mean where it is missing, as predicted
    mean = c * p + w * (mean - p) + v * trend
    z2 = ((y - mean) / std) ** 2
    out = {"std_scale": float(np.clip(np.sqrt(np.mean(z2)), 0.2, 5.0))}
    fits = []
    for k in range(1, max_lead + 1):
        sel = leads == k
        if not sel.any():
            fits.append((out["std_scale"], 0.0))
            continue
        fits.append(covered_std_fit(y[sel] - mean[sel], std[sel], groups=len(np.unique(groups[sel]))))
    fits = growing_with_lead(fits, std, leads)
    out["lead_std_scale"] = tuple(a for a, _ in fits)
    out["lead_std_extra"] = tuple(b for _, b in fits)
    out["lead_mean_weight"] = blend.w
    out["lead_trend_weight"] = blend.v
    out["lead_damping"] = () if damping is None else blend.c
    return out


def window_context(settings: dict, frames: int, keep: float = 1.0, cap: int = 4096, spacing: float = 1.0) -> int:
    """Context points of a calibration task whose region matches a prediction window.

    A prediction window holds the points within ``r = tile / sqrt(2) + halo`` model units of its
    tile's centre (:func:`geonp.tiling.window`): about ``π (r / spacing)²`` observed points per frame,
    where ``spacing`` is the typical spacing of the observed points in model units (1 for the shipped
    weights, whose unit is that spacing; a fitted model keeps its training data's unit, so on sparser
    data more than 1). Calibrating on regions of that size measures the errors of the tasks prediction
    will run: a region the size of five windows gave a fitted model's 95 % intervals 0.78 coverage
    (docs/benchmarks.md, "Recalibrating a fitted model on sparser data"). ``keep`` is the share of the
    observed points a calibration task keeps as context; at most ``cap`` points.
    """
    radius = (float(settings["tile"]) / np.sqrt(2.0) + float(settings["halo"])) / max(float(spacing), 1e-6)
    return int(min(cap, max(32, round(np.pi * radius**2 * frames * keep))))


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
            out.append(nearest_distance(miss, obs))
    return np.concatenate(out) if out else np.zeros(0)


def match_weights(distances: np.ndarray, wanted: np.ndarray, bins: int = 16) -> np.ndarray:
    """Weight ``distances`` so that they follow the histogram of ``wanted`` (log-spaced bins).

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


def infill_mean_weight(y: np.ndarray, mean: np.ndarray, trend: np.ndarray, weights: np.ndarray | None = None,
                       groups: np.ndarray | None = None, seed: int = 0) -> float:
    """Weight ``w`` in ``[0, 1]`` of the network's departure from the trend, as far as held-out points show it.

    ``trend + w · (mean − trend)`` by weighted least squares, ``w = Σ a (y − t)(m − t) / Σ a (m − t)²``.
    ``trend`` is what a task predicts with the network's standardised mean at 0: the static trend
    plus the context's mean. Where the context's residuals from the trend are mostly station noise
    (a nugget), the shipped weights, pretrained on smooth fields, follow it (docs/benchmarks.md,
    "A trend that varies across the region, shrunk").

    With ``groups`` (one label per point: its place, as a station held out on several tasks) the
    fit is only trusted as far as the places support it: the weight is the
    :data:`MEAN_WEIGHT_QUANTILE` quantile of :data:`MEAN_WEIGHT_RESAMPLES` fits to places resampled
    with replacement (seeded by ``seed``), so a weight below 1 needs most resamples to agree. The
    result is clipped to ``[0, 1]``: the departure is never amplified. 1 when there is no departure.
    """
    y, mean, trend = (np.asarray(a, dtype=np.float64) for a in (y, mean, trend))
    a = np.ones_like(y) if weights is None else np.asarray(weights, dtype=np.float64)
    ok = np.isfinite(y) & np.isfinite(mean) & np.isfinite(trend) & (a > 0)
    d, r, a = (mean - trend)[ok], (y - trend)[ok], a[ok]
    if float(np.sum(a * d * d)) <= 0:
        return 1.0
    if groups is None:
        return float(np.clip(np.sum(a * r * d) / np.sum(a * d * d), 0.0, 1.0))
    labels, place = np.unique(np.asarray(groups)[ok], return_inverse=True)
    num = np.bincount(place, a * r * d, minlength=len(labels))
    den = np.bincount(place, a * d * d, minlength=len(labels))
    draws = np.random.default_rng(30_000 + seed).integers(0, len(labels), (MEAN_WEIGHT_RESAMPLES, len(labels)))
    counts = np.stack([np.bincount(row, minlength=len(labels)) for row in draws])
    fits = (counts @ num) / np.maximum(counts @ den, 1e-300)
    return float(np.clip(np.quantile(fits, MEAN_WEIGHT_QUANTILE), 0.0, 1.0))


def support_scales(distance: np.ndarray, z2: np.ndarray, weights: np.ndarray, support: np.ndarray,
                   min_points: int = 100, groups: np.ndarray | None = None, seed: int = 0) -> dict:
    """The infill std factors by gap size (:func:`gap_scales`), then by the target's temporal support.

    A target whose own place is observed in other frames of the context (``support`` 1 or 2 sides,
    :func:`geonp.data.temporal_support`) has an error set by its own record more than by its
    distance to its neighbours, and a record on both sides of the gap brackets it. Calibration tasks
    mix the three kinds (first and last frames have one side; holes and vanished places none), and
    one factor per gap size for the mixture is too wide for the one and too narrow for the other
    (docs/benchmarks.md, "Temporal support in the infill calibration"). So after the gap factors each support gets the
    factor ``sqrt(mean(z²))`` of its own points (weighted), when it has ``min_points`` of them (1
    otherwise). Returns the :class:`~geonp.normalise.Normaliser` fields ``gap_distance``,
    ``gap_std_scale`` and ``support_std_scale`` (empty when there are no gap factors).

    With ``groups`` (each point's place) both sets of factors must earn their place: they are kept
    only where they predict held-out places better than one pooled factor (:func:`beats_pooled`);
    otherwise the gap factors become one and the support factors 1.
    """
    centres, scales = gap_scales(distance, z2, weights, groups=groups, seed=seed)
    out = {"gap_distance": centres, "gap_std_scale": scales, "support_std_scale": ()}
    if not centres:
        return out
    z2 = z2 / Normaliser(gap_distance=centres, gap_std_scale=scales).std_factor(distance=distance) ** 2
    ok = np.isfinite(z2) & (weights > 0)
    support = np.asarray(support)
    factors = []
    for k in range(3):
        sel = ok & (support == k)
        factors.append(float(np.clip(np.sqrt(np.sum(weights[sel] * z2[sel]) / np.sum(weights[sel])), 0.2, 5.0))
                       if sel.sum() >= min_points else 1.0)
    fitted = np.array([f != 1.0 for f in factors])
    labels = np.where(ok & fitted[np.clip(support, 0, 2)], support, -1)  # -1: points whose factor stays 1
    if groups is not None and not beats_pooled(labels, z2, weights, groups, seed=seed):
        factors = [1.0, 1.0, 1.0]
    out["support_std_scale"] = tuple(factors) if factors != [1.0, 1.0, 1.0] else ()
    return out


def gap_scales(distance: np.ndarray, z2: np.ndarray, weights: np.ndarray,
               levels: tuple[float, ...] = (0.25, 0.5, 0.7, 0.85, 0.95), min_points: int = 100,
               groups: np.ndarray | None = None, seed: int = 0) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Std factors ``sqrt(mean(z²))`` (weighted) in bins of gap distance.

    Bins end where the cumulative weight (the data's own gap profile) reaches ``levels``; they get
    narrower towards large distances, where the errors grow fastest. A bin with fewer than
    ``min_points`` points joins its smaller-distance neighbour. Each bin is represented by its
    weighted median distance. Returns ``(distances, factors)``, increasing distances; empty when
    there are fewer than ``min_points`` usable points.

    With ``groups`` (each point's place: a station held out on many tasks gives many points with
    one error) the bins are kept only if they predict held-out places better than one pooled factor
    (:func:`beats_pooled`); otherwise there is one bin. A network of 170 stations gives bins that
    fit their few stations rather than the gaps (docs/benchmarks.md, "Std factors that earn their place").
    """
    ok = np.isfinite(distance) & np.isfinite(z2) & (weights > 0)
    d, z2, w = distance[ok], z2[ok], weights[ok]
    if len(d) < min_points:
        return (), ()
    order = np.argsort(d)
    d, z2, w = d[order], z2[order], w[order]
    g = None if groups is None else np.asarray(groups)[ok][order]
    cuts = np.searchsorted(np.cumsum(w) / np.sum(w), np.asarray(levels), side="right")
    parts: list[np.ndarray] = []
    for part in np.split(np.arange(len(d)), cuts):
        if parts and (len(part) < min_points or len(parts[-1]) < min_points):
            parts[-1] = np.concatenate([parts[-1], part])
        elif len(part):
            parts.append(part)
    if g is not None and len(parts) > 1:
        labels = np.concatenate([np.full(len(part), i) for i, part in enumerate(parts)])
        if not beats_pooled(labels, z2, w, g, seed=seed):
            parts = [np.arange(len(d))]
    centres, scales = [], []
    for part in parts:
        pw = w[part]
        median = max(float(d[part][np.searchsorted(np.cumsum(pw) / pw.sum(), 0.5)]), 1e-6)
        if centres and median <= centres[-1] * (1 + 1e-6):  # ties: keep the first
            continue
        centres.append(median)
        scales.append(float(np.clip(np.sqrt(np.sum(pw * z2[part]) / pw.sum()), 0.2, 5.0)))
    return tuple(centres), tuple(scales)


def beats_pooled(labels: np.ndarray, z2: np.ndarray, weights: np.ndarray, groups: np.ndarray, folds: int = 5,
                 seed: int = 0) -> bool:
    """Whether std factors per label predict held-out places better than one pooled factor.

    Cross-validation over places: ``groups`` (one per point) are split into ``folds`` at random
    (seeded); each fold's points are scored with factors ``sqrt(mean(z²))`` (weighted) fitted on
    the other folds, per label and pooled, by the Gaussian log-likelihood of their ``z²``. Points
    labelled -1 keep the factor 1 in both. True when the labels' gain, summed over places, exceeds
    one standard error of that sum (the places' spread times the square root of their number).
    False with fewer than two labels or ``folds`` places.
    """
    labels, z2, w = np.asarray(labels), np.asarray(z2, dtype=np.float64), np.asarray(weights, dtype=np.float64)
    names, place = np.unique(np.asarray(groups), return_inverse=True)
    place = place.ravel()
    if len(np.unique(labels[labels >= 0])) < 2 or len(names) < folds:
        return False
    fold = np.random.default_rng(40_000 + seed).permutation(len(names)) % folds
    fold = fold[place]
    gain = np.zeros(len(names))  # per place: log-likelihood of the labels' factors over the pooled one
    for k in range(folds):
        train, test = (fold != k) & (labels >= 0), (fold == k) & (labels >= 0)
        if not train.any() or not test.any():
            continue
        pooled = np.sum(w[train] * z2[train]) / np.sum(w[train])
        per = np.full(labels.max() + 1, pooled)
        for b in np.unique(labels[train]):
            sel = train & (labels == b)
            per[b] = np.sum(w[sel] * z2[sel]) / np.sum(w[sel])
        f2 = np.maximum(per[labels[test]], 1e-12)
        p2 = max(pooled, 1e-12)
        cost = (np.log(p2) + z2[test] / p2) - (np.log(f2) + z2[test] / f2)
        gain += np.bincount(place[test], w[test] * cost, minlength=len(names))
    # one standard error: a gain that the places' spread could give by chance is no gain
    return float(gain.sum()) > float(np.sqrt(len(names)) * gain.std())
