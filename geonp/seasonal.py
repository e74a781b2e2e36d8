"""The annual cycle of each point: the reference of forecasts on daily and longer steps.

A monthly or daily record swings through the year by several times its month-to-month change
(Colorado tmax: 2.4 °C about its cycle, 5.5 °C from one month to the next). A network that
carries its context forward, or a blend with persistence, then runs past the seasonal turning
points. With ``reference="seasonal"`` the network forecasts the departure from each point's
annual cycle (its anomaly), and the forecast adds the cycle of the valid time back. The cycle is

    c(t) = a0 + sum_k (a_k cos(2 pi k f(t)) + b_k sin(2 pi k f(t))),   k = 1 .. HARMONICS,

with ``f(t)`` the fraction of the year (day of year and hour, in the axis' own calendar), fitted
per point by least squares on the frames up to the first initial time, never later ones. Points
with a short history lean on a pooled fit: one set of harmonics for the domain (the within
estimator) and a mean linear in each point's x, y and elevation. The harmonics are shrunk towards
it by a ridge of half a year of frames, the mean by one frame, so a point with no history gets
the cycle its position and height suggest. Everything stays lazy on dask-backed data, and
:func:`cached_cycle` reads a lazy history once per process. No torch here.
"""

from __future__ import annotations

import functools

import dask
import dask.array
import dask.base
import numpy as np
import xarray as xr

from .memo import ProcessMemo

__all__ = ["HARMONICS", "MIN_YEARS", "basis", "cached_cycle", "cycle_at", "cycle_posterior", "cycle_variance",
           "fit_cycle", "point_covariates", "span_years", "year_fraction"]

#: annual harmonics of the cycle (2: a peak and a trough that need not be half a year apart)
HARMONICS = 2

#: years of history ``reference="auto"`` needs before it forecasts departures from the cycle
MIN_YEARS = 2.0

_DIM = "harmonic"


def year_fraction(times) -> np.ndarray:
    """Fraction of the year, in ``[0, 1)``, of each of ``times`` (numpy datetimes or cftime dates)."""
    t = xr.DataArray(np.asarray(times).ravel(), dims="t").dt
    day = t.dayofyear.values - 1 + (t.hour.values + t.minute.values / 60.0) / 24.0
    return (day / t.days_in_year.values).reshape(np.shape(times))


def span_years(times) -> float:
    """Years from the first to the last of ``times`` (by the fraction of the year, so calendars agree)."""
    times = np.asarray(times)
    if len(times) < 2:
        return 0.0
    t = xr.DataArray(times[[0, -1]], dims="t").dt
    return float(t.year.values[1] - t.year.values[0] + year_fraction(times[-1:])[0] - year_fraction(times[:1])[0])


def basis(times, harmonics: int = HARMONICS) -> np.ndarray:
    """``[..., 2 harmonics + 1]`` basis of the cycle at ``times``: 1, then cos and sin of each harmonic."""
    phase = 2.0 * np.pi * year_fraction(times)[..., None] * np.arange(1, harmonics + 1)
    return np.concatenate([np.ones(phase.shape[:-1] + (1,)), np.cos(phase), np.sin(phase)], axis=-1)


def fit_cycle(da: xr.DataArray, time_dim: str, harmonics: int = HARMONICS,
              covariates: xr.DataArray | None = None) -> xr.DataArray:
    """Coefficients of each point's annual cycle in ``da`` (dims: ``da``'s without time, plus ``harmonic``).

    Missing values are skipped; lazy when ``da`` is dask-backed (its chunks along time are summed).
    Each point is shrunk towards a pooled fit: one cycle for the domain whose mean varies
    linearly with ``covariates`` (dims: ``da``'s space dims plus ``covariate``, e.g. x, y and
    elevation; none: one mean), so a point with no history gets the mean its neighbours and its
    elevation suggest. How far is measured (:func:`cycle_posterior`).
    """
    return cycle_posterior(da, time_dim, harmonics, covariates)["coefficients"]


def cycle_posterior(da: xr.DataArray, time_dim: str, harmonics: int = HARMONICS,
                    covariates: xr.DataArray | None = None) -> xr.Dataset:
    """Each point's cycle (``coefficients``) and its uncertainty (``covariance``, dims ``harmonic, other``).

    A random-effects fit: each point's coefficients are drawn about the pooled fit (:func:`_pooled`)
    with a variance per coefficient that the points observed for a year or more measure (their own
    least-squares fits' spread about the pooled one, less what their noise explains), and its
    departures are noise whose variance is the point's own, inflated by ``(1 + rho) / (1 - rho)`` for
    the correlation ``rho`` of consecutive departures (a fortnight of one winter is worth far fewer
    than 14 independent days). A point observed for years keeps its own cycle; one with a few weeks,
    or none, leans on the pooled fit, and its ``covariance`` says how far it may be from its true
    cycle; the variance of its mean also holds the pooled fit's own, where the point leans on it
    (its leverage among the well-observed points times their spread: a station beyond the network's
    edge). Without two points observed for a year, the ridge of half a year of frames on the
    harmonics and one frame on the mean.
    """
    X = xr.DataArray(basis(da[time_dim].values, harmonics), dims=(time_dim, _DIM))
    observed = da.notnull().astype(np.float64)
    y = da.fillna(0.0).astype(np.float64)
    gram = xr.dot(observed, X * X.rename({_DIM: "other"}), dim=time_dim)  # [..., harmonic, other]
    moment = xr.dot(y, X, dim=time_dim)  # [..., harmonic]
    points = [d for d in moment.dims if d != _DIM]
    design = _design(gram.isel({_DIM: 0, "other": 0}), covariates)
    prior = _pooled(gram, moment, design, points)
    n = gram.isel({_DIM: 0, "other": 0}, drop=True)
    frames_per_year = len(da[time_dim]) / max(span_years(da[time_dim].values), 1.0)
    # consecutive frames both observed: the correlation of the departures one frame apart
    nxt = {time_dim: -1}
    both = observed * observed.shift(nxt, fill_value=0.0)
    y1, X1 = y.shift(nxt, fill_value=0.0), X.shift(nxt, fill_value=0.0)
    lag = {"yy": xr.dot(both * y, y1, dim=time_dim), "yx": xr.dot(both * y, X1, dim=time_dim),
           "xy": xr.dot(both * y1, X, dim=time_dim), "pairs": both.sum(time_dim),
           "xx": xr.dot(both, X * X1.rename({_DIM: "other"}), dim=time_dim)}
    inv = xr.apply_ufunc(_inverse_diagonal, gram, input_core_dims=[[_DIM, "other"]], output_core_dims=[[_DIM]],
                         dask="parallelized", output_dtypes=[np.float64])
    # observed for a year or more, through the seasons: each coefficient known within twice its variance
    # for frames spread evenly over the year (1/n for the mean, 2/n for each harmonic)
    balanced = xr.DataArray(np.r_[1.0, np.full(2 * harmonics, 2.0)], dims=_DIM)
    well = (n >= max(frames_per_year, 2 * harmonics + 3)) & (inv * n <= 2 * balanced).all(_DIM)
    own = xr.apply_ufunc(_own_fit, gram, moment, input_core_dims=[[_DIM, "other"], [_DIM]],
                         output_core_dims=[[_DIM]], dask="parallelized", output_dtypes=[np.float64]).where(well)
    b = own.fillna(0.0)
    sq = (y * y).sum(time_dim)
    rss = sq - 2 * xr.dot(b, moment, dim=_DIM) + xr.dot(b, xr.dot(gram, b.rename({_DIM: "other"}), dim="other"),
                                                        dim=_DIM)
    noise = (rss / (n - (2 * harmonics + 1)).clip(min=1.0)).where(well)  # each well-observed point's
    r1 = lag["yy"] - xr.dot(b, lag["yx"] + lag["xy"], dim=_DIM) + xr.dot(
        b, xr.dot(lag["xx"], b.rename({_DIM: "other"}), dim="other"), dim=_DIM)
    rho = (r1.where(well).sum(points) / (lag["pairs"] * noise).sum(points)).clip(0.0, 0.95)
    pooled_noise = noise.mean(points)
    noise = noise.fillna(pooled_noise) * (1 + rho) / (1 - rho)
    spread = ((own - prior) ** 2 - noise * inv).where(well).mean(points)  # [harmonic]: the points' own variance
    ridge = np.full(2 * harmonics + 1, frames_per_year / 2.0)
    ridge[0] = 1.0
    fallback = xr.DataArray(ridge, dims=_DIM) * xr.ones_like(noise)  # fewer than two points observed for a year
    ridge = xr.where(well.sum(points) >= 2, noise / spread.clip(min=1e-6 * pooled_noise.fillna(1.0)), fallback)
    fit = xr.apply_ufunc(_solve, gram, moment, prior, ridge, input_core_dims=[[_DIM, "other"], [_DIM], [_DIM], [_DIM]],
                         output_core_dims=[[_DIM, "column"]], dask="parallelized", output_dtypes=[np.float64],
                         dask_gufunc_kwargs={"output_sizes": {"column": 2 * harmonics + 2}})
    scale = xr.where(well.sum(points) >= 2, noise, rss.sum(points) / n.sum(points))
    cov = fit.isel(column=slice(1, None)).rename(column="other") * scale
    # the pooled mean is itself a fit over the points: a point that leans on it far from the others (a station
    # beyond the network's edge) inherits its extrapolation's variance, leverage x the points' spread
    zw = design.where(well, 0.0)
    gram_z = xr.dot(zw, zw.rename(covariate="c2"), dim=points)
    leverage = xr.apply_ufunc(_leverage, design, gram_z, input_core_dims=[["covariate"], ["covariate", "c2"]],
                              dask="parallelized", output_dtypes=[np.float64],
                              dask_gufunc_kwargs={"allow_rechunk": True})  # a few covariates: small chunks
    spread0 = spread.isel({_DIM: 0}, drop=True).clip(min=1e-12)
    lean = cov.isel({_DIM: 0, "other": 0}, drop=True) ** 2 / spread0 * leverage  # (share of the prior)^2 x variance
    lean = xr.where(well.sum(points) >= 2, lean, 0.0)
    mean_only = xr.DataArray(np.eye(2 * harmonics + 1)[0], dims=_DIM)  # the variance of the mean coefficient
    cov = (cov + lean * mean_only * mean_only.rename({_DIM: "other"})).transpose(*cov.dims)
    return xr.Dataset({"coefficients": fit.isel(column=0), "covariance": cov, "noise": scale})


def _design(count: xr.DataArray, covariates: xr.DataArray | None) -> xr.DataArray:
    """``[..., covariate]``: 1 and each covariate standardised over the points (0 where missing)."""
    ones = xr.ones_like(count, dtype=np.float64).expand_dims(covariate=1, axis=-1)
    if covariates is None:
        return ones
    c = covariates.astype(np.float64)
    space = [d for d in c.dims if d != "covariate"]
    c = (c - c.mean(space)) / c.std(space).where(lambda s: s > 0, 1.0)
    c = xr.broadcast(c.fillna(0.0), count)[0]  # the same at every index of extra dims (members, levels)
    return xr.concat([ones, c.transpose(*ones.dims)], dim="covariate")


def _pooled(gram: xr.DataArray, moment: xr.DataArray, Z: xr.DataArray, points: list[str]) -> xr.DataArray:
    """The pooled fit at each point: one set of harmonics for all points, a mean linear in ``Z``.

    The harmonics are fitted with a mean of each point's own (the within estimator: points
    observed in different seasons do not bias them), then the points' means, given those
    harmonics, are regressed on ``Z``. Lazy; only the sums over points are solved in numpy.
    """
    h = {_DIM: slice(1, None)}
    g00 = gram.isel({_DIM: 0, "other": 0})
    inv = xr.where(g00 > 0, 1.0 / g00.where(g00 > 0, 1.0), 0.0)
    g0h = gram.isel({_DIM: 0}).isel(other=slice(1, None)).drop_vars(_DIM, errors="ignore")  # [..., other]
    gh0 = gram.isel({"other": 0}).isel(h).drop_vars("other", errors="ignore")  # [..., harmonic]
    within = (gram.isel(h).isel(other=slice(1, None)) - gh0 * g0h * inv).sum(points)
    target = (moment.isel(h) - gh0 * moment.isel({_DIM: 0}) * inv).sum(points)
    small = {"dask": "parallelized", "output_dtypes": [np.float64], "dask_gufunc_kwargs": {"allow_rechunk": True}}
    beta = xr.apply_ufunc(_lstsq, within, target, input_core_dims=[[_DIM, "other"], [_DIM]],
                          output_core_dims=[[_DIM]], **small)
    zz = xr.dot(g00 * Z, Z.rename(covariate="c2"), dim=points)
    zy = xr.dot(Z, moment.isel({_DIM: 0}) - xr.dot(g0h, beta.rename({_DIM: "other"}), dim="other"), dim=points)
    gamma = xr.apply_ufunc(_lstsq, zz, zy, input_core_dims=[["covariate", "c2"], ["covariate"]],
                           output_core_dims=[["covariate"]], **small)
    mean = xr.dot(Z, gamma, dim="covariate")
    out = xr.concat([mean.expand_dims({_DIM: 1}), xr.broadcast(beta, mean)[0]], dim=_DIM).transpose(*moment.dims)
    return out.chunk({_DIM: -1}) if out.chunks is not None else out


def _lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares of one small system (``a`` may arrive with singleton leading axes)."""
    k = a.shape[-1]
    x = np.linalg.lstsq(a.reshape(-1, k, k)[0] + 1e-9 * np.eye(k), b.reshape(-1, k)[0], rcond=None)[0]
    return x.reshape(b.shape[:-1] + (k,)) if b.ndim > 1 else x


def _solve(gram: np.ndarray, moment: np.ndarray, prior: np.ndarray, ridge: np.ndarray) -> np.ndarray:
    """Per-point ridge fits shrunk towards ``prior`` and their unscaled covariance (numpy, batched).

    ``[..., k, k + 1]``: the coefficients, then ``(gram + diag(ridge))^-1``.
    """
    residual = moment - np.einsum("...ij,...j->...i", gram, prior)
    a = gram + ridge[..., None, :] * np.eye(gram.shape[-1])
    inverse = np.linalg.inv(a)
    coef = prior + np.einsum("...ij,...j->...i", inverse, residual)
    return np.concatenate([coef[..., None], inverse], axis=-1)


def _own_fit(gram: np.ndarray, moment: np.ndarray) -> np.ndarray:
    """Each point's least-squares coefficients (those of a singular ``gram`` are meaningless)."""
    k = gram.shape[-1]
    return np.linalg.solve(gram + 1e-9 * np.eye(k), moment[..., None])[..., 0]


def _leverage(z: np.ndarray, gram: np.ndarray) -> np.ndarray:
    """``z' gram^+ z`` of each point's design row ``z`` (``gram`` the same for all, broadcast)."""
    inverse = np.linalg.pinv(gram)
    return np.einsum("...i,...ij,...j->...", z, inverse, z)


def _inverse_diagonal(gram: np.ndarray) -> np.ndarray:
    """The diagonal of each point's ``gram`` inverse (``inf`` where singular)."""
    k = gram.shape[-1]
    ok = np.linalg.det(gram) > 1e-12 * np.maximum(gram[..., 0, 0], 1.0) ** k
    safe = np.where(ok[..., None, None], gram, np.eye(k))
    return np.where(ok[..., None], np.diagonal(np.linalg.inv(safe), axis1=-2, axis2=-1), np.inf)


def cycle_at(coefficients: xr.DataArray, times, dims: tuple[str, ...],
             like: xr.DataArray | None = None) -> xr.DataArray:
    """The cycle of ``coefficients`` at ``times`` (an array whose axes are named ``dims``), lazy if they are.

    ``like`` (dask-backed): the result is chunked as it is, block by block, so that a cycle over a
    long record is never one array in memory.
    """
    X = xr.DataArray(basis(np.asarray(times), (coefficients.sizes[_DIM] - 1) // 2), dims=(*dims, _DIM))
    if like is not None and like.chunks is not None:
        sizes = like.chunksizes
        X = X.chunk({d: sizes[d] for d in dims if d in sizes})
        coefficients = coefficients.chunk({d: sizes[d] for d in coefficients.dims if d in sizes})
        return (coefficients * X).sum(_DIM)  # blockwise: dask's einsum would split the blocks further
    return xr.dot(coefficients, X, dim=_DIM)


def cycle_variance(covariance: xr.DataArray, times, dims: tuple[str, ...],
                   like: xr.DataArray | None = None) -> xr.DataArray:
    """The variance of the cycle at ``times`` given its coefficients' ``covariance`` (:func:`cycle_posterior`).

    ``x(t)' C x(t)`` at each point, with ``x(t)`` the :func:`basis`; lazy as :func:`cycle_at`.
    """
    k = covariance.sizes[_DIM]
    X = xr.DataArray(basis(np.asarray(times), (k - 1) // 2), dims=(*dims, _DIM))
    if like is not None and like.chunks is not None:
        sizes = like.chunksizes
        X = X.chunk({d: sizes[d] for d in dims if d in sizes})
        covariance = covariance.chunk({d: sizes[d] for d in covariance.dims if d in sizes})
    return xr.apply_ufunc(_quadratic, X, covariance, input_core_dims=[[_DIM], [_DIM, "other"]], dask="parallelized",
                          output_dtypes=[np.float64])


def _quadratic(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``x' c x`` over the last axes (broadcast over the leading ones)."""
    return np.einsum("...j,...jk,...k->...", x, c, x)


def cached_cycle(da: xr.DataArray, time_dim: str, covariates: xr.DataArray | None = None,
                 part: str = "coefficients") -> xr.DataArray:
    """:func:`cycle_posterior`'s ``part``, as one dask task that runs once per process for the same inputs.

    The fit sums over the whole history: inside the graphs of a forecast's output blocks it was
    read again for each region ``geonp.to_zarr`` computes (2,289 chunk reads for 44 chunks on a
    3-year daily grid). As one task whose inputs dask does not traverse, the history is read once,
    chunk by chunk, and the coefficients and their covariance are kept (like the calibration's).
    ``part``: ``"coefficients"`` (:func:`fit_cycle`), ``"covariance"`` or ``"noise"`` (the departures' variance
    per point that scales it).
    """
    key = dask.base.tokenize("geonp-cycle", da, time_dim, covariates)
    if da.chunks is None:
        fit = _cycle_once(key, da, time_dim, covariates)
        return fit[part]
    dims = [d for d in da.dims if d != time_dim]
    k = 2 * HARMONICS + 1
    trailing = {"coefficients": (_DIM,), "covariance": (_DIM, "other"), "noise": ()}[part]
    shape = tuple(da.sizes[d] for d in dims) + (k,) * len(trailing)
    # a partial hides the lazy input from dask: the task reads it itself, once per process
    task = dask.delayed(functools.partial(_cycle_part, key, da, time_dim, covariates, part), pure=True)(
        dask_key_name=f"geonp-cycle-{part}-{key}")
    return xr.DataArray(dask.array.from_delayed(task, shape, dtype=np.float64),
                        dims=(*dims, *trailing),
                        coords={d: da[d] for d in dims if d in da.coords})


_CYCLES = ProcessMemo()


def _cycle_part(key: str, da: xr.DataArray, time_dim: str, covariates, part: str) -> np.ndarray:
    return np.asarray(_cycle_once(key, da, time_dim, covariates)[part].values)


def _cycle_once(key: str, da: xr.DataArray, time_dim: str, covariates) -> xr.Dataset:
    def fit() -> xr.Dataset:
        with dask.config.set(scheduler="synchronous"):  # a task of the prediction's graph itself
            return cycle_posterior(da, time_dim, covariates=covariates).compute()

    return _CYCLES.get(key, fit)


def point_covariates(ds: xr.Dataset, space_dims: tuple[str, ...],
                     names: tuple[str | None, ...]) -> xr.DataArray | None:
    """``[<space_dims>, covariate]``: the coordinates or variables ``names`` (x, y, elevation...) at each point.

    ``None`` names are skipped (none left: ``None``); a name with other dims than ``space_dims`` (a surface geopotential
    with a time axis, say) is taken at the first index of those. The prior of :func:`fit_cycle`.
    """
    columns = []
    for name in names:
        if name is None or name not in ds.variables:
            continue
        c = ds[name]
        c = c.isel({d: 0 for d in c.dims if d not in space_dims}).astype(np.float64)
        columns.append(c.drop_vars(list(c.coords)))
    template = xr.DataArray(np.zeros([ds.sizes[d] for d in space_dims]), dims=space_dims)
    if not columns:
        return None
    out = xr.concat([c + template for c in columns], dim="covariate")
    return out.transpose(*space_dims, "covariate")
