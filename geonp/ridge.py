"""A least-squares fit with some columns shrunk by a ridge chosen by leave-one-out. No torch here.

:mod:`geonp.trend` fits each task's static trend with it: the columns by which the trend varies
across a task are shrunk as far as the task's own points support them.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fit_trend", "ridge_penalty", "RIDGE_GRID", "RIDGE_MAX_POINTS"]

#: ridge strengths tried for the position columns (on columns scaled to unit variance, per point)
RIDGE_GRID = (0.0,) + tuple(float(r) for r in np.logspace(-3, 3, 25))
#: most context points whose trend is shrunk: beyond, least squares (a few parameters are well determined
#: by thousands of points, and the selection costs ~10 × a least-squares fit: 14 ms at 1,200 points × 30 columns)
RIDGE_MAX_POINTS = 2000


def ridge_penalty(design: np.ndarray, penalised: np.ndarray, ridge: float) -> np.ndarray | None:
    """Diagonal ridge penalty ``[p]`` in ``design``'s units: ``ridge · n · var(column)`` on the penalised columns.

    ``None`` when ``ridge`` is 0 or no column is penalised (plain least squares).
    """
    penalised = np.asarray(penalised, dtype=bool)
    if ridge <= 0 or not penalised.any():
        return None
    return np.where(penalised, ridge * len(design) * np.var(design, axis=0), 0.0)


def fit_trend(design: np.ndarray, y: np.ndarray, penalised: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Coefficients of ``y`` on ``design``, the ``penalised`` columns shrunk by a ridge chosen by leave-one-out.

    Least squares when no column is penalised or the context holds more than
    :data:`RIDGE_MAX_POINTS` points. Otherwise each strength of :data:`RIDGE_GRID` (0
    included: least squares) penalises the penalised columns' coefficients as if the columns had
    unit variance, and the one with the smallest leave-one-out error (``rᵢ / (1 − hᵢᵢ)``, exact for a
    linear smoother) is kept. A trend's many position columns fitted to ~170 stations by least
    squares follow their noise: on the Colorado stations, space only, the error of the trend plus
    an exact GP on its residuals was 1.126 °C with the four linear position columns by least
    squares, 1.123 with a ridge on them, and 1.109 with the richer columns under the ridge
    (docs/benchmarks.md, "A trend that varies across the region, shrunk").

    Returns
    -------
    coef : ndarray
        ``[p]`` coefficients in ``design``'s units.
    ridge : float
        The strength kept (0 for least squares); :func:`ridge_penalty` turns it into the penalty.
    """
    design, y = np.asarray(design, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if penalised is None or not np.any(penalised) or not design.shape[1] < len(y) <= RIDGE_MAX_POINTS:
        return np.linalg.lstsq(design, y, rcond=None)[0], 0.0
    penalised = np.asarray(penalised, dtype=bool)
    norms = np.linalg.norm(design, axis=0)
    norms = np.where(norms > 0, norms, 1.0)
    d = design / norms  # unit-norm columns: the solves below are well scaled whatever the units
    # the hat matrix for every strength at once: the free columns' projection plus the penalised
    # columns, with the free ones projected out, shrunk along their singular vectors
    q = _orthonormal(d[:, ~penalised])
    b = d[:, penalised] - q @ (q.T @ d[:, penalised])
    r = y - q @ (q.T @ y)
    unit = np.maximum(ridge_penalty(design, penalised, 1.0)[penalised] / norms[penalised] ** 2, 1e-12)
    u, sv, _ = np.linalg.svd(b / np.sqrt(unit), full_matrices=False)
    keep = sv > (sv[0] if len(sv) else 0.0) * 1e-10
    u, s2 = u[:, keep], sv[keep] ** 2
    h_free, ur, u2 = np.sum(q * q, axis=1), u.T @ r, u * u
    best = (np.inf, 0.0)
    for ridge in RIDGE_GRID:
        f = s2 / (s2 + ridge)
        h = h_free + u2 @ f
        loo = float(np.mean(((r - u @ (f * ur)) / np.maximum(1.0 - h, 1e-9)) ** 2))
        if loo < best[0] * (1 - 1e-12):
            best = (loo, ridge)
    pen = ridge_penalty(design, penalised, best[1])
    gram = d.T @ d + (0.0 if pen is None else np.diag(pen / norms**2))
    return np.linalg.pinv(gram, hermitian=True) @ (d.T @ y) / norms, best[1]


def _orthonormal(a: np.ndarray) -> np.ndarray:
    """An orthonormal basis ``[n, rank]`` of the columns of ``a`` (dropping dependent ones)."""
    if a.shape[1] == 0:
        return np.zeros((len(a), 0))
    u, sv, _ = np.linalg.svd(a, full_matrices=False)
    return u[:, sv > sv[0] * 1e-10]
