"""Infill of departures from each point's annual cycle: when, and the outputs back in the variable's terms.

A record of two years or more is infilled as departures from each point's annual cycle
(:func:`geonp.reference.reference_input`, :mod:`geonp.seasonal`): :func:`infill_reference` decides,
:func:`bridged_outputs` fills what the network left without a prediction (frames missing at every
point bridged from the frames either side, :mod:`geonp.bridge`; the prior elsewhere) and adds each
point's cycle uncertainty to the std (in an infill of the variable itself it bridges the points without a
prediction), and :func:`add_cycle_frames` adds the cycle back to the mean.
No torch here.
"""

from __future__ import annotations

import dask.array
import numpy as np
import xarray as xr

from . import seasonal
from .bridge import bridge_empty
from .domain import DOMAIN_COORD
from .errors import ConfigError, TimeAxisError

__all__ = ["infill_reference", "add_cycle_frames", "bridged_outputs", "fill_empty", "add_cycle_variance",
           "no_context_prior"]


def infill_reference(reference: str, times, with_targets: bool) -> str:
    """``"seasonal"`` or ``"none"``: an infill of departures from each point's annual cycle, or of the variable.

    ``"auto"`` infills departures from each point's annual cycle (:mod:`geonp.seasonal`, fitted on the whole
    input) when the record spans :data:`geonp.seasonal.MIN_YEARS` or more: a point's own mean and seasons,
    which its neighbours do not show, then come from its other years (Colorado tmax, every month of
    1950-1990 with 20 % of the stations hidden: RMSE 0.871 -> 0.767 °C). ``times``: the time axis (``None``
    without one); ``with_targets``: ``targets=`` elsewhere, where no point has a cycle of its own.

    Raises
    ------
    ConfigError
        ``"diurnal"`` (a forecast's reference), or ``"seasonal"`` with ``targets=``.
    TimeAxisError
        ``"seasonal"`` on data without time or with less than a year.
    """
    ref = str(reference).lower()
    if ref not in ("auto", "seasonal", "none"):
        raise ConfigError(f"reference={reference!r}" + (" is a forecast's reference" if ref == "diurnal" else "") +
                          "; infill takes 'auto', 'seasonal' (departures from each point's annual cycle) or 'none'.")
    if ref == "none" or (ref == "auto" and (times is None or with_targets)):
        return "none"
    if with_targets:
        raise ConfigError("reference='seasonal' infills departures from each point's own annual cycle, which the "
                          "points of targets= do not have; leave reference= out with targets=.")
    if times is None:
        raise TimeAxisError("reference='seasonal' fits each point's annual cycle along time, but the data have no "
                            "time axis; leave reference= out.")
    # the span of the frames themselves: 24 months (730 days) are two years, from the first frame's start to
    # the last one's end
    years = seasonal.span_years(times) * len(times) / max(len(times) - 1, 1)
    if years >= 0.99 * (seasonal.MIN_YEARS if ref == "auto" else 1.0):
        return "seasonal"
    if ref == "auto":
        return "none"
    raise TimeAxisError(f"reference='seasonal' needs a year of data to fit each point's annual cycle on; the data "
                        f"span {years:.2f} years. Pass reference='none', or give more data.")


def add_cycle_frames(mean: xr.DataArray, cycle: xr.DataArray, time_dim: str) -> xr.DataArray:
    """``mean`` (dims ``..., time_dim, <space>``) plus the annual ``cycle`` at its frames (an infill's)."""
    c = seasonal.cycle_at(cycle, mean[time_dim].values, (time_dim,), like=mean).transpose(*mean.dims)
    return (mean + c.data.astype(mean.dtype)).assign_attrs(mean.attrs)


def bridged_outputs(mean, std, ds: xr.Dataset, raw: xr.Dataset, layout, spread: float, seasonal: bool):
    """An infill's ``mean`` and ``std`` (dask, dims ``time, <space>``) with what had no prediction bridged along time.

    ``seasonal`` (``ds`` holds departures from each point's cycle, ``raw`` the variable): :func:`fill_empty`,
    then :func:`add_cycle_variance`. Otherwise the points the network left without a prediction (a frame
    without an observation within the time window) are bridged from the point's values in the frames either
    side (:func:`geonp.bridge.bridge_empty` with ``fill="gaps"``), and what is still without one warns.
    """
    if seasonal:
        mean, std = fill_empty(mean, std, ds, layout, spread)
        return mean, add_cycle_variance(std, raw, layout)
    y, inside = _observed(ds, layout)
    return bridge_empty(mean, std, y, len(layout.extra_dims), fill="gaps", inside=inside)


def _observed(ds: xr.Dataset, layout) -> tuple:
    """The observed values and the domain (``mask=``), as :func:`geonp.bridge.bridge_empty` takes them.

    The values have dims ``extra..., time, <space>`` (NaN outside the domain already); the domain is
    ``[points]`` booleans over the dims but time, or ``None`` without a mask.
    """
    y = ds[layout.var].transpose(*layout.extra_dims, layout.time, *layout.space_dims)
    if DOMAIN_COORD not in ds.coords:
        return y.data, None
    inside = ds[DOMAIN_COORD].broadcast_like(y.isel({layout.time: 0}, drop=True))
    return y.data, np.asarray(inside.transpose(*layout.extra_dims, *layout.space_dims).values, dtype=bool).ravel()


def fill_empty(mean, std, ds: xr.Dataset, layout, spread: float):
    """An infill's ``mean`` and ``std`` of departures (dask, dims ``time, <space>``) where it has no data.

    Frames with no observation inside the domain are bridged from the frames either side
    (:func:`geonp.bridge.bridge_empty`); what is still without a prediction gets the prior
    (:func:`no_context_prior`, ``spread`` the departures').
    """
    y, inside = _observed(ds, layout)
    mean, std = bridge_empty(mean, std, y, len(layout.extra_dims), inside=inside)
    return no_context_prior(mean, std, spread)


def add_cycle_variance(std, raw: xr.Dataset, layout):
    """An infill's ``std`` of departures (dask, dims ``time, <space>``) with each point's cycle's uncertainty added.

    The variance of the cycle (:func:`geonp.seasonal.cycle_variance`) that :func:`reference_input` fitted on
    ``raw``: large at a point observed for a few weeks or never, whose cycle is the pooled one. Only its
    excess over the best-observed point's (as a share of each point's departure variance) is added: where
    the departures are smooth in space, a point's cycle error is shared by the neighbours the departures
    are infilled from and cancels. A 5-day global grid whose departures are slow waves, every point
    observed for two years: the whole variance made the std 3.3 times the error (coverage 1.000, NLL
    1.34); its excess, 1.6 times (0.998, 0.85); none at all, 0.91 times (0.933, 0.66).
    """
    points = seasonal.point_covariates(raw, layout.space_dims, (layout.x, layout.y, layout.elevation))
    cov = seasonal.cached_cycle(raw[layout.var], layout.time, covariates=points, part="covariance")
    like = xr.DataArray(std, dims=(*layout.extra_dims, layout.time, *layout.space_dims))
    noise = seasonal.cached_cycle(raw[layout.var], layout.time, covariates=points, part="noise")
    v = seasonal.cycle_variance(cov, raw[layout.time].values, (layout.time,), like=like).transpose(*like.dims)
    share = v / noise.clip(min=1e-300)  # the point's leverage on its cycle, in units of its departures' variance
    v = (noise * (share - share.min(layout.space_dims))).clip(min=0.0).transpose(*like.dims)  # its excess
    return np.sqrt(std.astype(np.float64) ** 2 + v.data).astype(std.dtype)


def no_context_prior(mean, std, spread: float):
    """Departures without a prediction (no context: NaN) get the prior: 0, and ``spread`` (the departures') as std.

    What the bridge (:mod:`geonp.bridge`) leaves without one (``mean``, ``std``: dask or numpy arrays): a
    tile with no data within its window while the rest of the frame has some, or a run of frames missing at
    every point longer than twice :data:`geonp.bridge.MAX_GAP`; the cycle is then the infill.
    """
    lib = dask.array if isinstance(mean, dask.array.Array) else np
    empty = lib.isnan(mean)
    return lib.where(empty, 0.0, mean).astype(mean.dtype), lib.where(empty, spread, std).astype(std.dtype)
