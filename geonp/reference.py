"""Reference forecasts: what the network forecasts a departure from.

Near-surface fields follow a daily cycle that a stationary space-time prior does not know: left
to itself, a forecast drifts back towards the mean of its context, and loses to persistence. With
``reference="diurnal"`` the network forecasts the change since the same hour one day earlier,

    D(t) = y(t) - y(t - 24 h),

a field without the daily cycle whose past frames are its context, and the forecast adds
``y(valid_time - 24 h)`` back (a known value, so the predictive std is unchanged; a gappy history is
infilled first, :mod:`geonp.reference_fill`; where it is still missing mean and std are NaN: :func:`mask_like`).
Diurnal persistence, ``y(t0) + y(t0 + h - 24 h) - y(t0 - 24 h)``, is the network keeping ``D(t0)``.

With ``reference="seasonal"`` (daily and longer steps) the network forecasts the departure from
each point's annual cycle, fitted on the frames up to the first initial time
(:mod:`geonp.seasonal`), and the forecast adds the cycle at the valid time back (:func:`add_cycle`).

``"auto"`` picks ``"diurnal"`` for sub-daily steps that divide a day, leads up to 24 h and at least
a day of history before the first initial time (plus the context frames); ``"seasonal"`` for steps
of a day or longer with :data:`geonp.seasonal.MIN_YEARS` years of history; otherwise ``"none"``
(the network forecasts the variable itself). No torch here.
"""

from __future__ import annotations

import dask.array
import numpy as np
import xarray as xr

from . import seasonal
from .domain import DOMAIN_COORD
from .errors import ConfigError, MissingReferenceWarning, TimeAxisError, warn_user

__all__ = ["REFERENCES", "check", "day_lag", "resolve", "departure", "reference_input", "cycle_departure",
           "add_back", "reference_values", "add_cycle", "cycle_change", "trend", "add_trend", "mask_like",
           "keep_diurnal", "short_gaps_filled", "MAX_MISSING_REFERENCE", "FALLBACK_DAYS", "INTERPOLATE_FRAMES"]

REFERENCES = ("auto", "diurnal", "seasonal", "none")
#: ``"auto"`` keeps the diurnal reference while at most this share of the values it adds back is missing
MAX_MISSING_REFERENCE = 0.05
#: frames of ``y(valid - 24 h)`` read to measure that share (evenly spaced when there are more)
REFERENCE_SAMPLE_FRAMES = 32
#: days before ``valid - 24 h`` whose value at the same hour stands in for a missing ``y(valid - 24 h)``
FALLBACK_DAYS = 2
#: frames either side of a missing ``y(valid - 24 h)`` within which its point's values interpolate it
INTERPOLATE_FRAMES = 3


def check(reference: str) -> str:
    """Return ``reference`` lower-cased; a :class:`~geonp.errors.ConfigError` when it is not in :data:`REFERENCES`."""
    ref = str(reference).lower()
    if ref not in REFERENCES:
        raise ConfigError(f"reference={reference!r}; expected one of {REFERENCES}.")
    return ref


def day_lag(step_hours: float) -> int | None:
    """Frames per day when the time step divides a day and is shorter than one, else ``None``."""
    n = 24.0 / step_hours
    return None if step_hours >= 24 or abs(n - round(n)) > 1e-6 else int(round(n))


def resolve(reference: str, step_hours: float, *, first_init: int | None = None, context_frames: int = 1,
            n_frames: int | None = None, history_years: float | None = None) -> tuple[str, int]:
    """``("diurnal", frames per day)``, ``("seasonal", 0)`` or ``("none", 0)`` for these data.

    Parameters
    ----------
    reference : {"auto", "diurnal", "seasonal", "none"}
    step_hours : float
        The data's time step.
    first_init : int, optional
        Index of the earliest initial time (forecast); it needs a day plus ``context_frames - 1``
        frames of history.
    context_frames : int
        Past frames used as context.
    n_frames : int, optional
        Frames in the data (fit): at least two days are needed to learn from departures.
    history_years : float, optional
        Years the annual cycle is fitted on (the history up to the first initial time, or the
        data of a fit): ``"seasonal"`` needs one, ``"auto"`` picks it from
        :data:`geonp.seasonal.MIN_YEARS` on daily and longer steps.

    Raises
    ------
    ConfigError
        Unknown ``reference``.
    TimeAxisError
        ``"diurnal"`` or ``"seasonal"`` asked for on data that cannot support it (says why).
    """
    ref = check(reference)
    if ref == "none":
        return "none", 0
    years = 0.0 if history_years is None else float(history_years)
    if ref == "seasonal" or (ref == "auto" and step_hours >= 24):
        if years >= (1.0 if ref == "seasonal" else seasonal.MIN_YEARS):
            return "seasonal", 0
        if ref == "auto":
            return "none", 0
        raise TimeAxisError(f"reference='seasonal' needs a year of history to fit the annual cycle on; the data "
                            f"have {years:.2f} years up to the first initial time. Pass reference='none', or "
                            "give more history.")
    lag = day_lag(step_hours)
    problems = []
    if lag is None:
        problems.append(f"the time step ({step_hours:g} h) is not a sub-daily step that divides 24 h")
    else:
        if first_init is not None and first_init - lag - (context_frames - 1) < 0:
            problems.append(f"the first initial time has {first_init} earlier frames; it needs "
                            f"{lag + context_frames - 1} (one day plus {context_frames - 1} context frames)")
        if n_frames is not None and n_frames < 2 * lag:
            problems.append(f"the data have {n_frames} frames; learning daily departures needs at least {2 * lag}")
    if not problems:
        return "diurnal", int(lag)
    if ref == "auto":
        return "none", 0
    fix = ("reference='seasonal' (departures from each point's annual cycle, with a year of history or more) or "
           "reference='none'" if lag is None else "reference='none', or give more history / shorter hours")
    raise TimeAxisError("reference='diurnal' cannot be used: " + "; ".join(problems) + f". Pass {fix}.")


def keep_diurnal(y: xr.DataArray, time_dim: str, inits: np.ndarray, leads: np.ndarray, lag: int,
                 auto: bool) -> tuple[str, int]:
    """The diurnal reference, or ``("none", 0)`` where ``auto`` and too many of its values are missing.

    A diurnal forecast is NaN wherever ``y(valid - 24 h)`` is missing and no day before it stands in
    (:func:`reference_values`): on data with half the cells missing, a good part of every forecast
    field. The share is read from at most
    :data:`REFERENCE_SAMPLE_FRAMES` of those frames; above :data:`MAX_MISSING_REFERENCE` ``"auto"``
    forecasts the variable itself, and any missing value warns (:class:`MissingReferenceWarning`).
    """
    leads = np.asarray(leads)
    idx = np.asarray(inits)[:, None] + leads[leads <= lag][None, :] - lag  # later leads chain (chain_days)
    pairs = np.unique(np.stack([idx.ravel(), np.broadcast_to(np.asarray(inits)[:, None], idx.shape).ravel()]), axis=1)
    if pairs.shape[1] > REFERENCE_SAMPLE_FRAMES:
        pairs = pairs[:, np.linspace(0, pairs.shape[1] - 1, REFERENCE_SAMPLE_FRAMES).round().astype(int)]
    missing = reference_values(y, time_dim, xr.DataArray(pairs[0], dims="frame"), lag,
                               xr.DataArray(pairs[1], dims="frame"))[0].isnull()
    if DOMAIN_COORD in y.coords:  # points outside mask= are no part of the field: not missing values
        missing = missing.where(y[DOMAIN_COORD])
    share = float(missing.mean())
    if auto and share > MAX_MISSING_REFERENCE:
        warn_user(f"{_share(share)} of the values y(valid - 24 h) a diurnal reference would add back are missing (with "
                  f"no value within {INTERPOLATE_FRAMES} frames or {FALLBACK_DAYS} days before to stand in), so "
                  "reference='auto' forecasts the variable itself (reference='none') and every point gets a "
                  "forecast. Pass reference='diurnal' for departures from the same hour a day earlier (NaN where "
                  "that value is missing), or fill the gaps first (ds.np.infill).", MissingReferenceWarning)
        return "none", 0
    if share > 0:
        warn_user(f"{_share(share)} of the values y(valid - 24 h) the diurnal reference adds back are missing (with "
                  f"no value within {INTERPOLATE_FRAMES} frames or {FALLBACK_DAYS} days before to stand in): the "
                  "forecast (mean and std) is NaN there. Fill the gaps first (ds.np.infill) or pass "
                  "reference='none'.", MissingReferenceWarning)
    return "diurnal", int(lag)


def _share(share: float) -> str:
    """A share as a percentage that is never rounded to 0 % (one NaN of many thousand values read "0.0%")."""
    return f"{share:.1%}" if share == 0 or share >= 0.0005 else "<0.1%"


def departure(ds: xr.Dataset, var: str, time_dim: str, lag: int, reference: xr.DataArray | None = None) -> xr.Dataset:
    """``ds`` with ``var`` replaced by its change over ``lag`` frames (lazy when ``var`` is dask-backed).

    The first ``lag`` frames become missing. Attributes are kept. A missing value ``lag`` frames before is
    interpolated from its point's values around it (:func:`short_gaps_filled`, never reading past the
    frame itself), so that a gap leaves one departure missing, not two: hourly stations with 15 % of
    their values missing at random lost 28 % of their departures. ``reference``: subtracted instead of ``y``.
    """
    y = ds[var]
    earlier = y if reference is None else reference
    earlier = short_gaps_filled(earlier, time_dim) if lag > INTERPOLATE_FRAMES else earlier
    d = (y - earlier.shift({time_dim: lag})).astype(y.dtype).assign_attrs(y.attrs)
    d.encoding = dict(y.encoding)
    return ds.assign({var: d})


def short_gaps_filled(y: xr.DataArray, time_dim: str) -> xr.DataArray:
    """``y`` with each missing value interpolated linearly in time between its point's nearest values.

    Both within :data:`INTERPOLATE_FRAMES` frames, or the value one frame before alone
    (:func:`_interpolated`, as :func:`reference_values` does for the values a forecast adds back).
    Lazy when ``y`` is dask-backed; a record without gaps comes back unchanged.
    """
    if isinstance(y.data, np.ndarray) and not y.isnull().any():
        return y
    value, _ = _interpolated(lambda k: y.shift({time_dim: -k}), y)  # shift(-k): the value k frames on
    return y.where(y.notnull(), value).astype(y.dtype)


def _interpolated(at, like: xr.DataArray) -> tuple[xr.DataArray, xr.DataArray]:
    """Linear interpolation in time from ``at(k)``, each point's values ``k`` frames away (NaN: none to use).

    Between the nearest values before and after, both within :data:`INTERPOLATE_FRAMES` frames, ``a``
    before and ``b`` after: their variance is a random walk's bridge, ``a b / (a + b)`` frames of change;
    or the value one frame before alone (1 frame). Returns the values (NaN where neither) and that
    variance in frames, on the dims of ``like``.
    """
    sides = []
    for step in (-1, 1):
        value, dist = xr.full_like(like, np.nan, dtype=np.float64), xr.zeros_like(like, dtype=np.int16)
        for j in range(1, INTERPOLATE_FRAMES + 1):
            v = at(step * j)
            found = value.isnull() & v.notnull()
            value, dist = value.where(~found, v), dist.where(~found, j)
        sides.append((value, dist))
    (before, b), (after, a) = sides
    both = before.notnull() & after.notnull()
    value = ((before * a + after * b) / (a + b).where(both)).where(both, before.where(b == 1))
    return value, (a * b / (a + b).where(both)).where(both, 1.0)


def cycle_departure(ds: xr.Dataset, var: str, time_dim: str, cycle: xr.DataArray) -> xr.Dataset:
    """``ds`` with ``var`` replaced by its departure from the annual ``cycle`` (:func:`geonp.seasonal.fit_cycle`)."""
    y = ds[var]
    c = seasonal.cycle_at(cycle, ds[time_dim].values, (time_dim,), like=y).transpose(*y.dims)
    d = (y - c.data).astype(y.dtype).assign_attrs(y.attrs)
    d.encoding = dict(y.encoding)
    return ds.assign({var: d})


def add_cycle(mean: xr.DataArray, cycle: xr.DataArray, valid: np.ndarray) -> xr.DataArray:
    """``mean`` (dims ``..., init_time, lead_time, <space>``) plus the annual ``cycle`` at the ``valid`` times."""
    c = seasonal.cycle_at(cycle, valid, ("init_time", "lead_time"), like=mean).transpose(*mean.dims)
    return (mean + c.data.astype(mean.dtype)).assign_attrs(mean.attrs)


def cycle_change(cycle: xr.DataArray, valid: np.ndarray, before: np.ndarray,
                 like: xr.DataArray | None = None) -> xr.DataArray:
    """The annual ``cycle``'s change from the ``before`` times to the ``valid`` times (``[init_time, lead_time]``).

    The reference's part of the trend term (:func:`trend`) when forecasts are of departures from the cycle;
    chunked like ``like`` (the forecast) when that is lazy.
    """
    dims = ("init_time", "lead_time")
    return seasonal.cycle_at(cycle, valid, dims, like) - seasonal.cycle_at(cycle, before, dims, like)


def reference_values(y: xr.DataArray, time_dim: str, idx: xr.DataArray, lag: int,
                     latest: xr.DataArray | None = None) -> tuple[xr.DataArray, xr.DataArray]:
    """``y`` at the frames ``idx``, or where it is missing, its point's values around it or days before.

    Returns the values and their extra variance in units of a day's change (0: the frame itself).
    A missing value is interpolated linearly in time between the point's nearest values before and
    after it, both within :data:`INTERPOLATE_FRAMES` frames and none after ``latest`` (the initial time:
    what comes after it is never read), with the variance of a random walk's bridge, ``a b / (a + b)``
    frames of a day's ``lag``; or it takes the value one frame before (1 / ``lag``). Otherwise the same
    hour ``k`` days earlier stands in (``k``), up to :data:`FALLBACK_DAYS`: a region (a station)
    reporting a few hours late has no ``y(valid - 24 h)`` at the leads near a day. Hourly stations with
    15 % of their values missing at random: the day before alone scored 2.17 K at those points (lazy
    when ``y`` is dask-backed).
    """
    ref = y.isel({time_dim: idx})
    extra = xr.zeros_like(ref, dtype=np.float32)
    latest = idx if latest is None else latest
    n = y.sizes[time_dim]

    def at(k: int) -> xr.DataArray:
        near = idx + k
        return y.isel({time_dim: near.clip(0, n - 1)}).where((near >= 0) & (near < n) & (near <= latest))

    value, frames = _interpolated(at, ref)
    fill = ref.isnull() & value.notnull()
    ref, extra = ref.where(~fill, value), extra.where(~fill, frames / lag)
    for k in range(1, FALLBACK_DAYS + 1):
        back = idx - k * lag
        earlier = y.isel({time_dim: back.clip(min=0)}).where(back >= 0)
        fill = ref.isnull() & earlier.notnull()
        ref, extra = ref.where(~fill, earlier), extra.where(~fill, float(k))
    return ref, extra


def add_back(mean: xr.DataArray, std: xr.DataArray, ds: xr.Dataset, var: str, time_dim: str, inits: np.ndarray,
             leads: np.ndarray, lag: int, spread: float, variance: xr.DataArray | None = None,
             start_variance: xr.DataArray | None = None) -> tuple[xr.DataArray, xr.DataArray]:
    """``mean`` (dims ``..., init_time, lead_time, <space>``) plus ``y(init + lead - lag)``, for leads up to ``lag``.

    Where that value is missing, its point's values around it, or the same hour ``k`` days earlier, stand
    in (:func:`reference_values`) and the ``std`` widens by that many days' changes (``spread``, the std of
    the daily departures). Longer leads are left as they are: :func:`chain_days` adds the forecast of ``lag``
    frames earlier to them (what comes after an initial time is never read). ``variance`` (of ``ds[var]``'s
    values: an infill's where it filled gaps, :mod:`geonp.reference_fill`) adds to the std's at the values
    added back, ``start_variance`` at the initial times (the forecast change starts from them).
    """
    leads = np.asarray(leads)
    idx = np.asarray(inits)[:, None] + leads[leads <= lag][None, :] - lag
    if idx.size and idx.min() < 0:
        raise TimeAxisError("the diurnal reference needs y(valid - 24 h) at every lead; use initial times a day "
                            "into the data.")
    if not idx.size:
        return mean, std
    latest = xr.DataArray(np.broadcast_to(np.asarray(inits)[:, None], idx.shape), dims=("init_time", "lead_time"))
    ref, days = reference_values(ds[var], time_dim, xr.DataArray(idx, dims=("init_time", "lead_time")), lag, latest)
    pad = [(0, len(leads) - idx.shape[1]) if d == "lead_time" else (0, 0) for d in mean.dims]
    extra = days * spread**2
    if variance is not None:
        extra = extra + variance.isel({time_dim: xr.DataArray(idx, dims=("init_time", "lead_time"))})
    if start_variance is not None:
        extra = extra + start_variance.isel({time_dim: latest})
    extra = extra.transpose(*mean.dims).data.astype(std.dtype)
    ref = ref.transpose(*mean.dims).data.astype(mean.dtype)
    lib = np if isinstance(ref, np.ndarray) and isinstance(extra, np.ndarray) else dask.array
    ref, extra = lib.pad(ref, pad), lib.pad(extra, pad)
    return (mean + ref).assign_attrs(mean.attrs), np.sqrt(std**2 + extra).astype(std.dtype).assign_attrs(std.attrs)


def chain_days(mean: xr.DataArray, std: xr.DataArray, lag: int) -> tuple[xr.DataArray, xr.DataArray]:
    """Leads beyond ``lag`` frames (a day): the forecast departure plus the forecast of ``lag`` frames earlier.

    ``y(valid - 24 h)`` is not yet observed there, so the forecast of that time stands in for it, and its
    std adds to the departure's in quadrature (their errors taken as independent). ``mean`` and ``std``
    have dims ``..., init_time, lead_time, <space>`` with leads ``1, 2, …`` frames; :func:`add_back`
    has added the reference to the first ``lag``.
    """
    n, axis = mean.sizes["lead_time"], mean.get_axis_num("lead_time")
    if n <= lag:
        return mean, std
    lib = np if isinstance(mean.data, np.ndarray) else dask.array
    ms, ss = [mean.data[_take(axis, 0, lag)]], [std.data[_take(axis, 0, lag)]]
    for start in range(lag, n, lag):
        cut, k = _take(axis, start, min(start + lag, n)), min(lag, n - start)
        ms.append(mean.data[cut] + ms[-1][_take(axis, 0, k)])
        ss.append(lib.sqrt(std.data[cut] ** 2 + ss[-1][_take(axis, 0, k)] ** 2))
    return (mean.copy(data=lib.concatenate(ms, axis=axis)).assign_attrs(mean.attrs),
            std.copy(data=lib.concatenate(ss, axis=axis)).assign_attrs(std.attrs))


def _take(axis: int, start: int, stop: int) -> tuple:
    return (slice(None),) * axis + (slice(start, stop),)


def mask_like(std: xr.DataArray, mean: xr.DataArray) -> xr.DataArray:
    """``std`` made NaN wherever ``mean`` is (lazy when they are dask-backed; dtype and attributes kept).

    :func:`add_back` leaves the mean NaN where ``y(valid - 24 h)`` is missing: no std is reported there.
    """
    out = std.where(mean.notnull())
    return out.astype(std.dtype).assign_attrs(std.attrs)


def trend(ds: xr.Dataset, var: str, time_dim: str, inits: np.ndarray, leads: np.ndarray, lag: int,
          ref_change: xr.DataArray | None = None) -> xr.DataArray:
    """Compute the calibration's trend term per initial time and lead (lazy when ``var`` is dask-backed).

    ``(y(t0) - y(t0 - 1)) - (r(t0 + h) - r(t0 + h - 1))``: the last step's change less the change
    of the reference ``r(t) = y(t - lag)`` over the step ending at the valid time (``r = 0`` when
    ``lag`` is 0; ``ref_change`` gives that change instead, as :func:`cycle_change` does). Dims
    ``(init_time, lead_time, ...)``; 0 where a value is missing or the first initial time has no
    previous step.
    """
    y = ds[var]
    inits, leads = np.asarray(inits), np.asarray(leads)

    def at(idx: np.ndarray) -> xr.DataArray:
        dims = ("init_time", "lead_time")[: idx.ndim]
        return y.isel({time_dim: xr.DataArray(np.clip(idx, 0, None), dims=dims)})

    change = (at(inits) - at(inits - 1)).where(xr.DataArray(inits >= 1, dims="init_time"))
    if ref_change is not None:
        out = change - ref_change
    elif lag:
        valid = inits[:, None] + leads[None, :] - lag
        if valid.min() < 1:
            raise TimeAxisError("the trend term needs y(valid - 24 h - 1 step); use initial times a day into the data.")
        # beyond a day the reference's change is not observed (nothing after the initial time is read): no term
        valid = np.minimum(valid, inits[:, None])
        out = (change - (at(valid) - at(valid - 1))).where(xr.DataArray(leads <= lag, dims="lead_time"), 0.0)
    else:
        out = change.expand_dims(lead_time=len(leads), axis=1)
    return out.fillna(0.0).drop_vars(time_dim, errors="ignore")


def add_trend(mean: xr.DataArray, ds: xr.Dataset, var: str, time_dim: str, inits: np.ndarray,
              leads: np.ndarray, lag: int, weights: np.ndarray, ref_change: xr.DataArray | None = None) -> xr.DataArray:
    """``mean`` (dims ``..., init_time, lead_time, <space>``) plus ``weights[lead] * trend``."""
    t = trend(ds, var, time_dim, inits, leads, lag, ref_change).transpose(*mean.dims)
    shape = [-1 if d == "lead_time" else 1 for d in mean.dims]
    # numpy weights, or a dask array while a calibration is still to run; a zero weight adds nothing, even
    # where the trend is missing
    w = weights if isinstance(weights, dask.array.Array) else np.asarray(weights, dtype=np.float64)
    w = w.reshape(shape)
    step = np.where(w == 0, 0.0, t.data * w)
    return (mean + step.astype(mean.dtype)).assign_attrs(mean.attrs)


def reference_input(ds: xr.Dataset, layout, kind: str, lag: int, past: dict,
                    filled: xr.DataArray | None = None) -> tuple[xr.Dataset, xr.DataArray | None]:
    """``ds`` as the network predicts it (departures from the ``kind`` reference) and the annual cycle, if any.

    The cycle is fitted on the frames ``past`` selects, its prior on each point's x, y and elevation;
    ``filled``: the diurnal reference with its gaps infilled (:mod:`geonp.reference_fill`).
    """
    if kind == "diurnal":
        return departure(ds, layout.var, layout.time, lag, filled), None
    if kind != "seasonal":
        return ds, None
    points = seasonal.point_covariates(ds, layout.space_dims, (layout.x, layout.y, layout.elevation))
    cycle = seasonal.cached_cycle(ds[layout.var].isel(past) if past else ds[layout.var], layout.time, covariates=points)
    return cycle_departure(ds, layout.var, layout.time, cycle), cycle
