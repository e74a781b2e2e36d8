"""The predictive std's scale from held-out errors: maximum-likelihood shapes and the 95 % coverage widening.

No torch here. Used by :mod:`geonp.calibration` (which re-exports these names).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np

__all__ = ["coverage_factor", "covered_std_fit", "growing_with_lead", "std_fit"]


def coverage_factor(z: np.ndarray, level: float = 0.95, groups: int | None = None) -> float:
    """Factor (at least 1) on a Gaussian std so that its central ``level`` interval holds that share of ``z``.

    ``z`` are errors divided by the std. A maximum-likelihood std matches the errors' variance, which
    covers fewer than ``level`` of them when their tails are heavier than a Gaussian's, or when the
    std is small where the errors are large; this widens it to the empirical quantile (a split-conformal
    correction). It never narrows: intervals that already cover enough are left as they are.

    ``groups`` is the number of independent units behind ``z`` (calibration tasks: the errors of one
    forecast are correlated in space). The quantile is then taken at split conformal's finite-sample
    level ``ceil((n + 1) level) / n`` with ``n = groups`` (capped at 1), which guarantees ``level`` for
    a new unit exchangeable with these.
    """
    z = np.abs(z[np.isfinite(z)])
    if len(z) == 0:
        return 1.0
    q = level if not groups else min(1.0, np.ceil((groups + 1) * level) / groups)
    return max(1.0, float(np.quantile(z, q)) / NormalDist().inv_cdf(0.5 + level / 2))


def covered_std_fit(error: np.ndarray, std: np.ndarray, groups: int | None = None,
                    steps: int = 21) -> tuple[float, float]:
    """``(a, b)`` of the std ``sqrt((a σ)² + b²)``: the shapes of :func:`std_fit`, each widened to cover 95 %.

    The share ``λ`` of the variance that follows the network's ``σ`` is chosen by the likelihood of the
    widened std (:func:`coverage_factor` makes each shape's 95 % interval hold 95 % of the errors), not
    of the unwidened one: where ``σ`` ranks the errors badly, a shape that follows it fits the bulk, but its
    errors at small ``σ`` need a wide factor on every point. ERA5 t2m at +24 h (diurnal reference, a
    3-day history): the shape following ``σ`` alone, widened by 1.9, gave a mean std of 5.3 K for errors
    of 1.6 K (coverage 1.000).
    """
    ok = np.isfinite(error) & np.isfinite(std) & (std > 0)
    e, s = np.asarray(error, dtype=np.float64)[ok], np.asarray(std, dtype=np.float64)[ok]
    if len(e) == 0:
        return 1.0, 0.0
    m = float(np.mean(s * s))
    best = None
    for lam in np.linspace(0.0, 1.0, steps):
        g = np.maximum(lam * s * s / m + (1.0 - lam), 1e-12)
        c2 = float(np.mean(e * e / g))
        var = c2 * g
        f = coverage_factor(e / np.sqrt(var), groups=groups)
        var = var * f * f
        nll = float(np.mean(np.log(var) + e * e / var))
        if best is None or nll < best[0]:
            best = (nll, float(np.clip(np.sqrt(c2 * lam / m) * f, 0.0, 5.0 * f)), float(np.sqrt(c2 * (1.0 - lam)) * f))
    return best[1], best[2]


def growing_with_lead(fits: list[tuple[float, float]], std: np.ndarray, leads: np.ndarray) -> list[tuple[float, float]]:
    """Per-lead ``(a, b)`` fits raised where their RMS std (over that lead's points) falls below an earlier lead's.

    An error may be smaller at a later lead at some hour of the day, but averaged over the initial
    times a forecast's error grows with the lead: twelve Irish wind stations, each lead fitted on its
    own, got mean stds of 4.64 / 4.23 / 5.29 knots at +1 / +2 / +3 days and covered 0.914 at +2 (a
    thirtieth new-user test). Both parts of a lead's std are scaled by the same factor.
    """
    out, floor = [], 0.0
    for k, (a, b) in enumerate(fits, start=1):
        sel = (leads == k) & np.isfinite(std)
        if sel.any():
            rms = float(np.sqrt(np.mean((a * std[sel]) ** 2 + b * b)))
            if 0.0 < rms < floor:
                a, b = a * floor / rms, b * floor / rms
            floor = max(floor, rms)
        out.append((a, b))
    return out


def std_fit(error: np.ndarray, std: np.ndarray, steps: int = 21,
            weights: np.ndarray | None = None) -> tuple[float, float]:
    """Maximum-likelihood ``(a, b)`` of the predictive std ``sqrt((a σ)² + b²)`` for these errors.

    A grid over the share ``λ`` of the variance that follows the network's ``σ`` (the rest is a
    constant ``b²``), with the overall size in closed form for each ``λ``: where the network's
    std says little about its errors the fit moves towards a constant std. ``a`` is clipped to
    [0, 5]; ``b`` is in data units. ``weights`` weigh the points' log-likelihoods.
    """
    w = np.ones_like(error, dtype=np.float64) if weights is None else np.asarray(weights, dtype=np.float64)
    ok = np.isfinite(error) & np.isfinite(std) & (std > 0) & (w > 0)
    e2, s2, w = error[ok] ** 2, std[ok] ** 2, w[ok] / w[ok].sum() if ok.any() else w[ok]
    if len(e2) == 0:
        return 1.0, 0.0
    m = float(np.sum(w * s2))
    best = None
    for lam in np.linspace(0.0, 1.0, steps):
        g = lam * s2 / m + (1.0 - lam)  # shape of the variance, weighted mean 1
        g = np.maximum(g, 1e-12)
        c2 = float(np.sum(w * e2 / g))
        nll = float(np.sum(w * np.log(c2 * g)))  # + 1 + log 2π, the same for every λ
        if best is None or nll < best[0]:
            best = (nll, lam, c2)
    _, lam, c2 = best
    return float(np.clip(np.sqrt(c2 * lam / m), 0.0, 5.0)), float(np.sqrt(c2 * (1.0 - lam)))
