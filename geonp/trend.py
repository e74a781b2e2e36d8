"""Static trends removed from each task's context before the network: elevation and land fraction.

The shipped weights were pretrained on stationary random fields. Real fields also follow the
ground: they cool with height (a lapse rate) and differ between land and sea. Each task fits its
context values on powers of both (:class:`StaticBasis`), the network sees the residuals, and the
trend is added back at the targets, as regression kriging does. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ridge import fit_trend, ridge_penalty

__all__ = ["StaticBasis", "static_basis", "smooth_grid", "local_contrasts", "covariate_contrast", "follows_ground",
           "fit_trend", "ridge_penalty", "fit_variance", "basis_variance",
           "nearest_indices", "neighbour_mean", "target_neighbours", "MIN_TREND_POINTS", "QUADRATIC_TREND_POINTS",
           "INTERACTION_TREND_POINTS", "LAND_CONTRAST_R2", "ELEVATION_CONTRAST_CHI2", "NEIGHBOURS"]

#: fewest context points for a trend (linear in each quantity)
MIN_TREND_POINTS = 10
#: the least spread (std, m) of a context's elevations for an elevation trend (:func:`static_basis`)
MIN_RELIEF_M = 5.0
#: from this many context points the trends are quadratic
QUADRATIC_TREND_POINTS = 30
#: from this many context points (with positions) the elevation trend also varies across the task
INTERACTION_TREND_POINTS = 50
#: least share of the context's local departures the land fraction must explain for a land trend
#: (ERA5 t2m frames 0.2–0.7 by day and night, near 0 around the turn; fields with no land–sea
#: contrast ≤ 0.07: docs/benchmarks.md, "The bundled land fraction")
LAND_CONTRAST_R2 = 0.1
#: an elevation trend needs the elevation to explain this many of the context's local departures' share of
#: variance times their count (``n R²``, about a 5 % test of no relation): with fewer, only the position
#: surface is kept (:func:`follows_ground`; docs/benchmarks.md, "An elevation trend only where the values
#: follow the ground")
ELEVATION_CONTRAST_CHI2 = 4.0
#: neighbours on the same frame that a point's local departure is taken from
NEIGHBOURS = 4
#: most points per frame whose local departures are computed (evenly strided beyond)
_MAX_QUERIES = 1000


def position_columns(X: np.ndarray, Y: np.ndarray, u: np.ndarray | None = None,
                     u2: np.ndarray | None = None) -> list[np.ndarray]:
    """The columns by which the elevation trend varies across a task (without ``u``: the position surface alone).

    ``X``, ``Y`` are the centred, scaled positions, ``u`` the centred elevation in km and ``u2`` its
    square (continued along its tangent beyond the context's range; :class:`StaticBasis`): a
    quadratic surface in position (``X``, ``Y``, ``X²``, ``Y²``, ``X·Y``) and a lapse rate and a
    curvature that vary linearly across it (``X·u``, ``Y·u``, ``X·u²``, ``Y·u²``). These columns are
    shrunk by a ridge penalty chosen by leave-one-out (:func:`fit_trend`), so a small or regular
    network gets the plainer trend it supports (``benchmarks/trend_variants.py`` swaps them).
    """
    if u is None:  # values that do not follow the ground (follows_ground): no lapse rate to vary
        return [X, Y, X * X, Y * Y, X * Y]
    return [X, Y, X * u, Y * u, X * X, Y * Y, X * Y, X * u2, Y * u2]


@dataclass(frozen=True)
class StaticBasis:
    """Powers of centred elevation (``u = (e − e0) / 1000 m``) and land fraction (``v = l − l0``).

    With ``xy0`` the elevation trend also varies across the task: the columns of
    :func:`position_columns` follow, with ``(X, Y) = (xy − xy0) / xy_scale`` (a lapse rate that
    changes from one side of a region to the other, as between plains and mountains; the plain
    position terms keep the interaction from standing in for a gradient across the task). They are
    the :attr:`penalised` columns, and ``ridge`` is the strength :func:`geonp.ridge.fit_trend` chose
    for them (0: least squares).

    ``e_powers = 0`` with ``e0`` set: the values do not follow the ground (:func:`follows_ground`), so
    only the position surface is fitted (from :data:`INTERACTION_TREND_POINTS` locations).

    ``u_range`` and ``v_range`` are the context's ranges of ``u`` and ``v``. Beyond them a trend
    fitted to the context is not extrapolated as a polynomial: the land terms hold their value at
    the nearest end of the range (the context says nothing about sea when it is all land), and
    the elevation powers above the first continue along their tangent there, so the lapse rate
    stays linear above the highest station. A quadratic land trend fitted in a small window whose
    land fractions span 0.87–1 put a target at sea 90 K off before (``tile=3`` on the ERA5
    block, docs/benchmarks.md, "Tiles over the whole grid").
    """

    e0: float | None
    e_powers: int
    l0: float | None
    l_powers: int
    xy0: tuple[float, float] | None = None
    xy_scale: float = 1.0
    u_range: tuple[float, float] | None = None
    v_range: tuple[float, float] | None = None
    ridge: float = 0.0

    @property
    def size(self) -> int:
        return len(self.penalised)

    @property
    def penalised(self) -> np.ndarray:
        """Which of :meth:`columns` the ridge of :func:`fit_trend` shrinks: the position columns."""
        positions = len(position_columns(*np.zeros((4 if self.e_powers else 2, 1)))) if self.xy0 is not None else 0
        return np.array([False] * self.e_powers + [True] * positions + [False] * self.l_powers, dtype=bool)

    def columns(self, e: np.ndarray | None, land: np.ndarray | None, xy: np.ndarray | None = None) -> np.ndarray:
        """The basis at points with elevations ``e`` (m), land fractions ``land`` and positions ``xy``: ``[n, size]``.

        ``xy`` (``[n, 2]``, the units the basis was fitted in) is needed when the basis has ``xy0``.
        """
        cols = []
        if self.e0 is not None:
            u = (np.asarray(e, dtype=np.float64) - self.e0) / 1000.0
            uc = u if self.u_range is None else np.clip(u, *self.u_range)
            powers = [u] + [uc ** k + k * uc ** (k - 1) * (u - uc) for k in range(2, max(self.e_powers, 2) + 1)]
            cols += powers[:self.e_powers]
            if self.xy0 is not None:
                if xy is None:
                    raise ValueError("this trend varies across the task: columns() needs the points' positions xy.")
                p = (np.asarray(xy, dtype=np.float64)[:, :2] - np.asarray(self.xy0)) / self.xy_scale
                cols += position_columns(p[:, 0], p[:, 1], *((u, powers[1]) if self.e_powers else ()))
        if self.l0 is not None:
            v = np.asarray(land, dtype=np.float64) - self.l0
            v = v if self.v_range is None else np.clip(v, *self.v_range)
            cols += [v ** k for k in range(1, self.l_powers + 1)]
        return np.stack(cols, 1)


def _usable(x: np.ndarray | None, spread: float) -> bool:
    return x is not None and len(x) >= MIN_TREND_POINTS and bool(np.isfinite(x).all()) and float(np.std(x)) >= spread


def static_basis(ec: np.ndarray | None, lc: np.ndarray | None, *, elevation: bool = True,
                 land: bool = True, xyc: np.ndarray | None = None, ground: bool = True) -> StaticBasis | None:
    """The trend basis a context with elevations ``ec`` and land fractions ``lc`` supports, or ``None``.

    Elevation enters when there are at least :data:`MIN_TREND_POINTS` finite values spread over
    more than ~5 m, land fraction when they spread by more than 0.01 (a context all on land, or
    all at sea, has no land trend to learn). Each is linear, quadratic from
    :data:`QUADRATIC_TREND_POINTS` points. Given the context positions ``xyc`` (``[n, 2]``), the
    elevation trend also varies across the task from :data:`INTERACTION_TREND_POINTS` distinct
    locations (:class:`StaticBasis`; on the Colorado stations, space only, it lowered geonp's RMSE
    from 1.205 to 1.165 °C, and with the richer, shrunk columns of 2026-11-27 to 1.152:
    docs/benchmarks.md, "A lapse rate that varies across the region" and "A trend that varies
    across the region, shrunk"). ``ground=False`` (the values do not follow the ground between
    neighbours: :func:`follows_ground`) keeps the position surface but no elevation columns.
    """
    ec = None if ec is None or not elevation else np.asarray(ec, dtype=np.float64)
    lc = None if lc is None or not land else np.asarray(lc, dtype=np.float64)
    use_e, use_l = _usable(ec, MIN_RELIEF_M), _usable(lc, 0.01)
    if not (use_e or use_l):
        return None
    n = len(ec) if use_e else len(lc)
    powers = 2 if n >= QUADRATIC_TREND_POINTS else 1
    xy0, xy_scale = None, 1.0
    if use_e and xyc is not None:
        xy = np.asarray(xyc, dtype=np.float64)[:, :2]
        sites = len(np.unique(np.round(xy, 9), axis=0))
        spread = float(np.sqrt(xy.var(0).sum()))
        if sites >= INTERACTION_TREND_POINTS and spread > 0 and np.isfinite(xy).all():
            xy0, xy_scale = (float(xy[:, 0].mean()), float(xy[:, 1].mean())), spread
    e0, l0 = (float(ec.mean()) if use_e else None), (float(lc.mean()) if use_l else None)
    u_range = ((float(ec.min()) - e0) / 1000.0, (float(ec.max()) - e0) / 1000.0) if use_e else None
    v_range = (float(lc.min()) - l0, float(lc.max()) - l0) if use_l else None
    if use_e and not ground and xy0 is None and not use_l:
        return None  # neither elevation columns nor a position surface: no trend
    e_powers = powers if use_e and ground else 0
    return StaticBasis(e0, e_powers, l0, powers if use_l else 0, xy0, xy_scale, u_range, v_range)


def fit_variance(design_c: np.ndarray, design_t: np.ndarray, resid: np.ndarray,
                 neighbours: np.ndarray | None = None, *, neighbour_rows: np.ndarray | None = None,
                 penalty: np.ndarray | None = None) -> np.ndarray:
    """Variance at the targets of a least-squares trend's error that the network cannot see.

    Regression kriging's predictive variance holds, besides the kriging variance of the residual
    field, the variance of the estimated trend at the prediction point, ``σ² d_tᵀ (DᵀD)⁻¹ d_t`` with
    ``σ²`` the residual variance ``RSS / (n − p)``. Here the network predicts the residuals from the
    context's residuals, which carry the trend's error at the context points: near a target it
    follows the error of its neighbours and only the difference is left. With ``neighbours`` the
    variance is that of the trend's error at the target less its mean over those context points,
    ``σ² cᵀ (DᵀD)⁻¹ c`` with ``c = d_t − mean(d_neighbours)``: zero where the neighbours share the
    target's elevation and land fraction, largest at a summit among valley stations. Without, the
    error less its context mean (the share the network's standardisation already holds):
    ``σ² (d_tᵀ (DᵀD)⁻¹ d_t − 1/n)``.

    Parameters
    ----------
    design_c, design_t : ndarray
        ``[n, p]`` and ``[nt, p]`` design rows of the context and the targets (intercept columns included).
    resid : ndarray
        ``[n]`` residuals of the least-squares fit.
    neighbours : ndarray, optional
        ``[nt, k]`` indices of each target's nearest context points (:func:`nearest_indices`).
    neighbour_rows : ndarray, optional
        ``[nt, p]`` the mean of those points' design rows, given instead of ``neighbours``
        (:func:`target_neighbours`, which averages ties at the last neighbour's distance).
    penalty : ndarray, optional
        ``[p]`` diagonal ridge penalty of a :func:`fit_trend` fit (:func:`ridge_penalty`): the
        variance is then the Bayesian one, ``σ² cᵀ (DᵀD + P)⁻¹ c``, with ``n − tr H`` degrees of freedom.

    Returns
    -------
    ndarray
        ``[nt]`` variances in the values' units squared; zeros when the fit has no residual degrees of freedom.
    """
    design_c, design_t = np.asarray(design_c, dtype=np.float64), np.asarray(design_t, dtype=np.float64)
    n, p = design_c.shape
    if n <= p or len(design_t) == 0:
        return np.zeros(len(design_t))
    if neighbours is not None:
        neighbour_rows = design_c[neighbours].mean(1)
    rows = design_t if neighbour_rows is None else design_t - neighbour_rows
    # cᵀ (DᵀD)⁺ c from the SVD of D with unit-norm columns: exact for any column units, and
    # rank-deficient designs (a column that repeats another) drop their null directions
    norms = np.linalg.norm(design_c, axis=0)
    norms = np.where(norms > 0, norms, 1.0)
    if penalty is not None:
        d = design_c / norms
        inv = np.linalg.pinv(d.T @ d + np.diag(np.asarray(penalty) / norms**2), hermitian=True)
        z = rows / norms
        h = np.sum((z @ inv) * z, axis=1)
        s2 = float(resid @ resid) / max(n - float(np.trace(inv @ (d.T @ d))), 1.0)
        return s2 * (h if neighbour_rows is not None else np.clip(h - 1.0 / n, 0.0, None))
    _, sv, vt = np.linalg.svd(design_c / norms, full_matrices=False)
    keep = sv > sv[0] * 1e-10
    z = (rows / norms) @ vt[keep].T / sv[keep]
    s2 = float(resid @ resid) / (n - int(keep.sum()))
    h = np.sum(z * z, axis=1)
    return s2 * (h if neighbour_rows is not None else np.clip(h - 1.0 / n, 0.0, None))


def nearest_indices(xq: np.ndarray, xref: np.ndarray, k: int, exclude: np.ndarray | None = None) -> np.ndarray:
    """Indices ``[nq, k']`` of the ``k`` nearest points of ``xref`` to each point of ``xq``.

    ``exclude`` (``[nq]``, optional) names for each query one point of ``xref`` that is not its
    neighbour (the query itself); ``k' = min(k, available)``. Brute force in blocks of query rows
    (memory ``O(256 · len(xref))``); ties in any order.
    """
    k = min(k, len(xref) - (exclude is not None))
    out = np.empty((len(xq), max(k, 0)), dtype=np.intp)
    if k < 1:
        return out
    for rows, d in _squared_distances(xq, xref):
        if exclude is not None:
            d[np.arange(len(d)), exclude[rows]] = np.inf
        out[rows] = np.argpartition(d, k - 1, axis=1)[:, :k]
    return out


def _squared_distances(xq: np.ndarray, xref: np.ndarray, block: int = 256):
    """Yield ``(rows, [len(rows), nref] squared distances)`` for blocks of query rows (memory ``O(block · nref)``).

    Centred on ``xref``'s mean, so the expanded form loses no precision to an offset; never negative.
    """
    xq, xref = np.asarray(xq, dtype=np.float64), np.asarray(xref, dtype=np.float64)
    centre = xref.mean(0)
    xq, xref = xq - centre, xref - centre
    sq_ref = (xref ** 2).sum(1)
    for start in range(0, len(xq), block):
        q = xq[start:start + block]
        yield slice(start, start + len(q)), np.maximum((q ** 2).sum(1)[:, None] + sq_ref[None, :] - 2.0 * (q @ xref.T),
                                                       0.0)


def basis_variance(basis: StaticBasis, coef: np.ndarray, yc: np.ndarray, ec, lc, xyc, et, lt, xyt) -> np.ndarray:
    """:func:`fit_variance` of a trend in ``basis`` with coefficients ``coef`` (no intercept) fitted to ``yc``.

    ``ec``, ``lc``, ``xyc`` are the context's elevations, land fractions and positions, ``et``,
    ``lt``, ``xyt`` the targets'; with positions, the neighbours are the targets' :data:`NEIGHBOURS`
    nearest context points.
    """
    design_c = np.concatenate([np.ones((len(yc), 1)), basis.columns(ec, lc, xyc)], 1)
    design_t = np.concatenate([np.ones((len(et if et is not None else lt), 1)), basis.columns(et, lt, xyt)], 1)
    resid = np.asarray(yc, dtype=np.float64) - design_c[:, 1:] @ coef
    penalty = ridge_penalty(design_c, np.r_[False, basis.penalised], basis.ridge)
    return fit_variance(design_c, design_t, resid - resid.mean(), neighbour_rows=target_neighbours(xyt, xyc, design_c),
                        penalty=penalty)


def target_neighbours(xyt: np.ndarray | None, xyc: np.ndarray | None, design_c: np.ndarray) -> np.ndarray | None:
    """The mean of ``design_c``'s rows over each target's :data:`NEIGHBOURS` nearest context points.

    ``None`` without positions. Points tied with the last neighbour's distance share its place
    equally (:func:`neighbour_mean`), so the result does not depend on the order of the points:
    a station's copies on several frames lie at one distance, with different frame columns.
    """
    if xyt is None or xyc is None:
        return None
    return neighbour_mean(design_c, np.asarray(xyt)[:, :2], np.asarray(xyc)[:, :2], NEIGHBOURS)


def neighbour_mean(values: np.ndarray, xq: np.ndarray, xref: np.ndarray, k: int) -> np.ndarray:
    """``[nq, p]`` mean of ``values [nref, p]`` over the ``k`` points of ``xref`` nearest each query.

    Ties at the ``k``-th distance (to a relative 1e-9) are averaged: the points strictly closer count
    once each and the tied ones share the remaining weight equally, whatever their order.
    """
    values = np.asarray(values, dtype=np.float64)
    k = min(k, len(xref))
    out = np.zeros((len(xq), values.shape[1]))
    if k < 1:
        return out
    for rows, d in _squared_distances(xq, xref):
        dk = np.partition(d, k - 1, axis=1)[:, k - 1:k]
        tol = 1e-9 * dk + 1e-300  # relative; exact copies (distance 0) tie exactly
        closer = d < dk - tol
        tied = ~closer & (d <= dk + tol)
        share = (k - closer.sum(1, keepdims=True)) / tied.sum(1, keepdims=True)
        out[rows] = (closer @ values + (tied * share) @ values) / k
    return out


def _local_departures(xy: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    """``values [n, c]`` at strided query points minus the mean of their ``k`` nearest neighbours in ``xy``."""
    n = len(xy)
    queries = np.arange(n) if n <= _MAX_QUERIES else np.linspace(0, n - 1, _MAX_QUERIES).astype(np.intp)
    return values[queries] - values[nearest_indices(xy[queries], xy, k, exclude=queries)].mean(1)


def local_contrasts(xy: np.ndarray, frame: np.ndarray | None, y: np.ndarray, covariates: np.ndarray,
                    k: int = NEIGHBOURS) -> tuple[np.ndarray, int]:
    """Share of the context's local departures that each static covariate explains (R², 0 … 1), and their count.

    ``covariates``: ``[points, c]``. A point's local departure is its value minus the mean of its ``k``
    nearest neighbours on the same frame (``frame``: one label per point, or ``None`` for one frame),
    found once for all the covariates. Regressing the values' departures on a covariate's, through the
    origin, pools the frames; the share of their sum of squares it explains is returned. Differences
    between neighbours keep the sharp change a real land–sea contrast makes at a coast, or a lapse rate
    between a valley and a ridge, and drop the smooth, large-scale part of a field, so a field that only
    happens to correlate with a covariate over a task (a gradient across a coast, plains warmer than
    the mountains beside them) scores near 0 (docs/benchmarks.md, "The bundled land fraction" and "An
    elevation trend only where the values follow the ground"). 0 when no frame has more than ``k``
    points or the covariate does not change between neighbours.
    """
    xy, y = np.asarray(xy, dtype=np.float64), np.asarray(y, dtype=np.float64)
    covariates = np.asarray(covariates, dtype=np.float64).reshape(len(y), -1)
    labels = np.zeros(len(y)) if frame is None else np.asarray(frame)
    deps = [np.zeros((0, 1 + covariates.shape[1]))]
    for f in np.unique(labels):
        idx = np.flatnonzero(labels == f)
        if len(idx) > k:
            deps.append(_local_departures(xy[idx], np.c_[y[idx], covariates[idx]], k))
    dep = np.concatenate(deps)
    dy, dc = dep[:, 0], dep[:, 1:]
    scc, syy = np.sum(dc * dc, axis=0), float(dy @ dy)
    ok = (scc >= 1e-12) & (syy > 0.0)
    return np.where(ok, (dy @ dc) ** 2 / np.where(ok, scc * syy, 1.0), 0.0), len(dy)


def covariate_contrast(xy: np.ndarray, frame: np.ndarray | None, y: np.ndarray, covariate: np.ndarray,
                       k: int = NEIGHBOURS) -> float:
    """:func:`local_contrasts` of one covariate: the share of the local departures it explains."""
    return float(local_contrasts(xy, frame, y, np.asarray(covariate)[:, None], k)[0][0])


def follows_ground(share: float, count: int) -> bool:
    """Whether values whose local departures the elevation explains by ``share`` (of ``count``) get its trend.

    ``count · share`` must exceed :data:`ELEVATION_CONTRAST_CHI2` (:func:`local_contrasts`). A field
    unrelated to the ground is otherwise fitted on elevation wherever elevation and position correlate
    over a task (mountains on one side), and a hidden station unlike its neighbours in height takes that
    spurious lapse rate: on a smooth random field at 60 Colorado stations the elevation trend raised
    the error by 14 %, while monthly tmax in one month scores a median share of 0.66 over ~170 stations.
    """
    return count * float(share) > ELEVATION_CONTRAST_CHI2


def smooth_grid(values: np.ndarray, sigma: float = 1.0, wrap: int | None = None) -> np.ndarray:
    """``values`` ``[ny, nx]`` smoothed by a separable Gaussian of ``sigma`` cells (edges repeated).

    ``wrap``: an axis that closes on itself (a global grid's longitudes), smoothed across its ends.

    A land fraction changes from 0 to 1 within a cell at a coast, while near-surface fields change
    over tens of km; smoothed over about one 0.25° cell the land trend helped most on ERA5
    (docs/benchmarks.md, "A land–sea trend").
    """
    values = np.asarray(values, dtype=np.float64)
    if sigma <= 0:
        return values
    r = int(np.ceil(4 * sigma))
    kernel = np.exp(-0.5 * (np.arange(-r, r + 1) / sigma) ** 2)
    kernel /= kernel.sum()
    out = values
    for axis in range(values.ndim):  # separable: one 1-D convolution per axis, as a sum of shifted copies
        pad = [(0, 0)] * values.ndim
        pad[axis] = (r, r)
        padded = np.pad(out, pad, mode="wrap" if axis == wrap else "edge")
        n = out.shape[axis]
        out = sum(w * np.take(padded, np.arange(k, k + n), axis=axis) for k, w in enumerate(kernel))
    return out
