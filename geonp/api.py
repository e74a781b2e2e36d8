"""``fit`` / ``infill`` / ``forecast``: validate up front, plan, and hand the work to dask.

No model math and no file I/O here: :mod:`geonp.geo` finds the axes, :mod:`geonp.planning` refuses
inputs with nothing to do, :mod:`geonp.chunked` builds the lazy computation, :mod:`geonp.fitting`
trains, :mod:`geonp.calibrate_input` calibrates shipped weights on the input, :mod:`geonp.io` writes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import Any

import dask
import dask.array
import numpy as np
import pandas as pd
import xarray as xr

from . import departures, members, seasonal, timeaxis
from . import reference as references
from .chunked import chunk_sizes, lazy_forecast, lazy_infill
from .errors import (
    ConfigError,
    MissingCovariateWarning,
    ModelMismatchError,
    TimeAxisError,
    warn_user,
)
from .frames import positions_km
from .late import region_age
from .model import Model, check_settings, resolve_model, with_settings
from .output import drop_time_scalars, finish, space_coords, variable_attrs
from .planning import plan_problem, sparse_warning
from .poles import merge_pole_copies
from .prepare import prepare
from .pretrained import frame_window, has_scattered_windows, outage_windows, scattered_windows, shipped_name
from .reference_fill import filled_reference, reference_of
from .targets import describe_targets
from .timeaxis import parse_duration

__all__ = ["infill", "forecast", "fit", "parse_duration"]

_INFILL_OPTIONS = ("model", "targets", "covariates", "chunks", "device", "crs", "halo", "tile", "time_window",
                   "frames_per_task", "batch_size", "calibrate", "land", "mask", "reference")
_FORECAST_OPTIONS = ("hours", "steps", "model", "init_time", "covariates", "chunks", "device", "crs", "halo", "tile",
                     "context_frames", "reference", "batch_size", "calibrate", "mask")


def infill(
    obj: xr.Dataset | xr.DataArray,
    var: str | None = None,
    *,
    model: str | os.PathLike | Model = "bsa-tnp",
    targets: xr.Dataset | xr.DataArray | None = None,
    covariates=None,
    chunks: int | Mapping | None = None,
    device: str = "auto",
    crs=None,
    halo: float | None = None,
    tile: float | None = None,
    time_window: int | None = None,
    frames_per_task: int | str | None = None,
    batch_size: int = 8,
    calibrate: bool | str = "auto",
    land: str | bool | None = "auto",
    mask=None,
    reference: str | None = None,
) -> xr.Dataset:
    """Fill the gaps (NaN) of ``var``, or predict it at ``targets``; see :meth:`GeonpAccessor.infill`."""
    return _infill(obj, var, model=model, targets=targets, covariates=covariates, chunks=chunks, device=device,
                   crs=crs, halo=halo, tile=tile, time_window=time_window, frames_per_task=frames_per_task,
                   batch_size=batch_size, calibrate=calibrate, land=land, mask=mask, reference=reference)


def _infill(obj, var, *, part: bool = False, **options) -> xr.Dataset | None:
    """:func:`infill`; each index of an extra dim on its own (``part``: one of them, ``None`` if it has no data)."""
    from . import calibrate_input

    (model, targets, covariates, chunks, device, crs, halo, tile, time_window, frames_per_task, batch_size, calibrate,
     land, mask, reference) = (options[k] for k in _INFILL_OPTIONS)
    calibrate_input.check_option(calibrate, model)
    check_settings(halo=halo, tile=tile, half_window=time_window, frames_per_task=frames_per_task,
                   batch_size=batch_size)
    ds, layout, _ = prepare(obj, var, crs=crs, covariates=covariates, land=land, mask=mask)
    windows = {"halo": halo, "tile": tile}
    m = with_settings(resolve_model(model), half_window=time_window, frames_per_task=frames_per_task, **windows)
    m.check_compatible(layout.var, layout.crs, layout.elevation is not None, layout.time is not None, "infill",
                       has_land=layout.land is not None, step_hours=timeaxis.step_of(ds, layout.time))
    lazy = ds[layout.var].chunks is not None or chunks is not None
    target = describe_targets(targets, crs, land, elevation=layout.elevation) if targets is not None else None
    chunk_map = chunk_sizes(chunks, layout, ds, None if target is None else target[1].space_dims)
    if target is not None and "elevation" in m.normaliser.covariates and target[1].elevation is None:
        raise ModelMismatchError("this model uses elevation as a covariate but targets= has none; add an elevation "
                                 "coordinate to the targets (e.g. targets.assign_coords(elevation=...)).")
    if target is not None and layout.elevation is not None and target[1].elevation is None and not part:
        warn_user(f"{layout.var!r} has an elevation ({layout.elevation!r}) but targets= has none: the predictions "
                  "at the targets leave the elevation out (its trend too). Give the targets an elevation coordinate "
                  "(a DEM on their grid: targets.assign_coords(elevation=dem)).", MissingCovariateWarning)
    if layout.extra_dims:
        if not part:
            plan_problem(ds, layout, m, "infill", target)  # the whole refuses what a single problem would
        order = () if target is not None else ds[layout.var].dims
        return members.split(partial(_infill, part=True, **members.drop_chunks(options, layout.extra_dims)), obj, var,
                             layout.extra_dims, part, order)
    raw = ds  # the variable itself; with a seasonal reference the departures from each point's cycle are infilled
    asked = reference_of(m, reference)  # a model fitted on departures infills short records as they are
    asked = "auto" if reference is None and asked == "seasonal" else asked
    kind = departures.infill_reference(asked, ds[layout.time].values if layout.time else None, target is not None)
    ds, cycle = references.reference_input(ds, layout, kind, 0, {})
    problem, n_obs = plan_problem(ds, layout, m, "infill", target, part=part, raw=raw if cycle is not None else None,
                                  warn_sparse=False)
    if problem is None:
        return None
    nonnegative = problem.norm.nonnegative  # the variable's (raw=); departures are clipped after the cycle instead
    if cycle is not None:
        problem.norm = replace(problem.norm, nonnegative=False)
    windows = scattered_windows(model, problem, windows)
    time_window, near = frame_window(model, problem, time_window)  # narrower for frames unlike their neighbours
    m = with_settings(m, half_window=time_window, near_window=near, **outage_windows(model, time_window), **windows)
    calibration = calibrate_input.infill_calibration(calibrate, model, ds, layout, n_obs, cycle is not None,
                                                     time_window=time_window if near is None else near, **windows)
    sparse_warning(problem if not part else None, calibration)
    from .inference import ModelPayload, resolve_device

    bridged = target is None and layout.time is not None  # what has no prediction: bridged along time
    mean, std = lazy_infill(problem, ModelPayload.from_net(m.net), m.settings, chunks=chunk_map, batch_size=batch_size,
                            device=str(resolve_device(device)), calibration=calibration, fills_empty=bridged)
    if bridged:  # frames missing whole (departures: beyond reach the cycle) and points without a prediction
        mean, std = departures.bridged_outputs(mean, std, ds, raw, layout, problem.norm.small_context_scale,
                                               cycle is not None)
    out_ds, out_layout = target if target is not None else (ds, layout)  # targets=: (their Dataset, layout)
    dims = [*layout.extra_dims, layout.time or "__time__", *out_layout.space_dims]
    coords = {d: ds[d] for d in [*layout.extra_dims, layout.time] if d is not None and d in ds.coords}
    coords.update(space_coords(out_ds, out_layout))
    src = raw[layout.var]
    data_vars = {
        f"{layout.var}_mean": (dims, mean, variable_attrs(src, "mean", layout.var)),
        f"{layout.var}_std": (dims, std, variable_attrs(src, "std", layout.var)),
    }
    out = xr.Dataset(data_vars, coords=coords)
    if cycle is not None:  # back from departures to the variable (never below 0 where the variable never is)
        name = f"{layout.var}_mean"
        out[name] = departures.add_cycle_frames(out[name], cycle, layout.time)
        out[name] = out[name].clip(min=0.0, keep_attrs=True) if nonnegative else out[name]
    out = merge_pole_copies(out, out_layout, layout.var)
    if layout.time is None:
        out = out.isel(__time__=0, drop=True)
    if target is None:
        observed = src.transpose(*[d for d in out[f"{layout.var}_mean"].dims])
        if lazy:  # the prediction's chunks: on the input's own, to_zarr recomputed a larger prediction chunk per piece
            observed = observed.chunk(out[f"{layout.var}_mean"].variable.chunksizes)
        dtype = np.result_type(src.dtype, np.float32)  # float64 observations are kept to the last bit
        filled = observed.astype(dtype).where(np.isfinite(observed), out[f"{layout.var}_mean"].astype(dtype))
        filled.attrs, filled.encoding = variable_attrs(src, "filled", layout.var), {}  # not the input's own
        out[f"{layout.var}_filled"] = filled
        out = out.transpose(*src.dims)
    out = drop_time_scalars(out, ds, ("step",), ("forecast_period",))  # the input's forecast step, not the output's
    out = finish(out, layout, m, "infill", lazy, crs_layout=out_layout, source=obj)
    out.attrs["geonp_calibrated"] = calibrate_input.note(m, calibration, "on held-out observed values of the input")
    out.attrs["geonp_reference"] = kind
    return out


def forecast(
    obj: xr.Dataset | xr.DataArray,
    var: str | None = None,
    *,
    hours: float | None = None,
    steps: int | None = None,
    model: str | os.PathLike | Model = "bsa-tnp",
    init_time=None,
    covariates=None,
    chunks: int | Mapping | None = None,
    device: str = "auto",
    crs=None,
    halo: float | None = None,
    tile: float | None = None,
    context_frames: int | None = None,
    reference: str | None = None,
    batch_size: int = 8,
    calibrate: bool | str = "auto",
    mask=None,
) -> xr.Dataset:
    """Forecast ``var`` up to ``hours`` ahead (or ``steps`` time steps); see :meth:`GeonpAccessor.forecast`."""
    return _forecast(obj, var, hours=hours, steps=steps, model=model, init_time=init_time, covariates=covariates,
                     chunks=chunks, device=device, crs=crs, halo=halo, tile=tile, context_frames=context_frames,
                     reference=reference, batch_size=batch_size, calibrate=calibrate, mask=mask)


def _forecast(obj, var, *, part: bool = False, **options) -> xr.Dataset | None:
    """:func:`forecast`; each index of an extra dim on its own (``part``: one of them, ``None`` if it has no data)."""
    from . import calibrate_input

    (hours, steps, model, init_time, covariates, chunks, device, crs, halo, tile, context_frames, reference, batch_size,
     calibrate, mask) = (options[k] for k in _FORECAST_OPTIONS)
    calibrate_input.check_option(calibrate, model)
    check_settings(halo=halo, tile=tile, context_frames=context_frames, batch_size=batch_size)
    ds, layout, _ = prepare(obj, var, crs=crs, covariates=covariates, land="none", mask=mask)  # no land trend
    if layout.time is None:
        numeric = [d for d in ds[layout.var].dims if d in ds.coords and "time" in str(d).lower()]
        hint = (f" {numeric[0]!r} holds {ds[numeric[0]].dtype} values, not dates: assign datetimes (e.g. "
                "pd.to_datetime) or CF units such as 'hours since 2019-03-01' and decode them (xr.decode_cf)."
                if numeric else " Use ds.np.infill for data without time.")
        raise TimeAxisError(f"{layout.var!r} has no time axis (dims {list(ds[layout.var].dims)}); forecasting needs "
                            f"past frames.{hint}")
    times = np.asarray(ds[layout.time].values)
    if len(times) < 2:
        raise TimeAxisError("forecasting needs at least two time steps to know the step; the data have one. "
                            "Pass the past frames too (e.g. ds.isel(time=slice(-6, None))).")
    step = timeaxis.time_step_hours(times)
    timeaxis.check_regular(times, layout.time, ds[layout.var])
    n_leads = timeaxis.lead_count(hours, steps, step)
    hours = n_leads * step
    windows = {"halo": halo, "tile": tile, "context_frames": context_frames}
    m = with_settings(resolve_model(model), **windows)
    m.check_compatible(layout.var, layout.crs, layout.elevation is not None, True, "forecast", step_hours=step)
    inits = timeaxis.init_indices(times, init_time)
    if layout.extra_dims:
        if not part:
            plan_problem(ds, layout, m, "forecast")  # the whole refuses what a single problem would
        return members.split(partial(_forecast, part=True, **members.drop_chunks(options, layout.extra_dims)), obj,
                             var, layout.extra_dims, part)
    timeaxis.warn_short_history(times, inits)
    late = timeaxis.warn_empty_init(ds[layout.var], layout.time, times, inits)
    region = max(late, region_age(ds[layout.var], layout.time, inits, step, positions_km(ds, layout),
                                  layout.space_dims))  # a region (station) late, or all
    history = int(inits.min()) + 1
    past = {layout.time: slice(0, history)}  # calibration and cycle: nothing after the first initial time is seen
    asked = reference_of(m, reference)
    kind, lag = references.resolve(asked, step, first_init=int(inits.min()),
                                   context_frames=int(m.settings["context_frames"]),
                                   history_years=seasonal.span_years(times[:history]))
    filled = variance = None  # the diurnal reference of a gappy history, infilled, and the infill's variance
    if kind == "diurnal":
        filled, variance = filled_reference(ds, layout, m, inits, lag, int(m.settings["context_frames"]), n_leads,
                                            region, device) or (None, None)
        kind, lag = references.keep_diurnal(ds[layout.var] if filled is None else filled, layout.time, inits,
                                            np.arange(1, n_leads + 1), lag, auto=asked == "auto")
    ref_ds = ds if filled is None else ds.assign({layout.var: filled})
    src_ds = ds if region else ref_ds  # late data keep their own ages: only the reference is filled
    work, cycle = references.reference_input(src_ds, layout, kind, lag, past, filled)
    if shipped_name(model) is not None and kind != "seasonal":
        timeaxis.warn_coarse_step(step, timeaxis.is_monthly(times))
    calibration = calibrate_input.forecast_calibration(
        calibrate, model, work.isel(past), layout, lag=lag, context_frames=int(m.settings["context_frames"]),
        kind=kind, raw=ds.isel(past) if kind != "none" else None, halo=halo, tile=tile,
        max_lead=calibrate_input.calibrated_leads(n_leads + region, history, int(m.settings["context_frames"]), lag))
    calibrate_input.warn_uncalibrated(model, calibration, kind, auto=calibrate == "auto")
    lazy = ds[layout.var].chunks is not None or chunks is not None
    chunk_map = chunk_sizes(chunks, layout, ds, forecast=True)
    # the history up to the first initial time sets the problem's scales (the departures' first `lag` are undefined)
    # frames not yet delivered just before it do not make the data look sparser in space
    late_first = late if len(inits) == 1 or not late else timeaxis.trailing_empty(ds[layout.var], layout.time, history)
    counted = work.isel({layout.time: slice(lag, max(lag + 1, history - late_first))})
    problem, _ = plan_problem(work, layout, m, "forecast", part=part, counted=counted,
                              raw=ds.isel(past) if kind != "none" else None, warn_sparse=calibration is None)
    if problem is None:
        return None
    from .inference import ModelPayload, resolve_device

    leads = np.arange(1, n_leads + 1)
    # a region (a station) without data in the last context_frames frames looks back as far again; its std is
    # that of its lead from its newest data (geonp.late.point_ages)
    reach = max(region, int(m.settings["context_frames"]))
    mean, std = lazy_forecast(problem, ModelPayload.from_net(m.net), m.settings, inits=inits, leads=leads,
                              chunks=chunk_map, device=str(resolve_device(device)), batch_size=batch_size,
                              calibration=calibration, reach=reach)
    coords = {d: ds[d] for d in layout.extra_dims if d in ds.coords}
    coords.update(space_coords(ds, layout))
    coords["init_time"] = ("init_time", times[inits], {"long_name": "forecast initial time",
                                                       "standard_name": "forecast_reference_time"})
    lead_attrs = {"long_name": "lead time", "standard_name": "forecast_period"}
    if timeaxis.is_monthly(times):
        lead_attrs["comment"] = (f"lead k is k calendar months after init_time (valid_time); these values are k x the "
                                 f"median step, {step:g} h")
    coords["lead_time"] = ("lead_time", pd.to_timedelta(leads * step, unit="h").values, lead_attrs)
    valid = timeaxis.valid_times(times, inits, leads, step)
    coords["valid_time"] = (("init_time", "lead_time"), valid, {"long_name": "valid time", "standard_name": "time"})
    dims = [*layout.extra_dims, "init_time", "lead_time", *layout.space_dims]
    src = ds[layout.var]
    out = xr.Dataset({
        f"{layout.var}_mean": (dims, mean, variable_attrs(src, "mean", layout.var)),
        f"{layout.var}_std": (dims, std, variable_attrs(src, "std", layout.var)),
    }, coords=coords)
    name, sd = f"{layout.var}_mean", f"{layout.var}_std"
    ref_change = None
    if kind == "diurnal":  # y(valid - 24 h) added back (where it is late: the same hour a day or two before)
        out[name], out[sd] = references.add_back(out[name], out[sd], ref_ds, layout.var, layout.time, inits, leads,
                                                 lag, problem.norm.small_context_scale, variance,
                                                 None if src_ds is ds else variance)
    elif kind == "seasonal":
        out[name] = references.add_cycle(out[name], cycle, valid)
        before = np.concatenate([times[inits][:, None], valid[:, :-1]], axis=1)
        ref_change = references.cycle_change(cycle, valid, before, like=out[name])
    trend_w = m.normaliser.trend_weight(leads)
    if calibration is not None:  # known once the calibration task has run
        trend_w = dask.array.from_delayed(dask.delayed(calibrate_input.trend_weights, pure=True)(calibration, leads),
                                          shape=(len(leads),), dtype=np.float64)
    if trend_w is not None:
        # the last step's trend from the filled history: raw, it is 0 wherever y(t0) or y(t0 - 1) is missing
        out[name] = references.add_trend(out[name], ref_ds, layout.var, layout.time, inits, leads, lag, trend_w,
                                         ref_change)
    if kind == "diurnal":  # leads beyond a day add the forecast of a day earlier
        out[name], out[sd] = references.chain_days(out[name], out[sd], lag)
    if problem.norm.nonnegative:  # rain, wind speed: no mean below every value of the history (NaN stays NaN)
        out[name] = out[name].clip(min=0.0, keep_attrs=True)
    # no uncertainty without a prediction: where y(valid - 24 h) is missing the mean is NaN, and so the std (lazily)
    out[sd] = references.mask_like(out[sd], out[name])
    out = drop_time_scalars(out, ds)  # cfgrib's step (forecast_period 0) would contradict lead_time
    out = finish(merge_pole_copies(out, layout, layout.var), layout, m, "forecast", lazy, source=obj)
    out.attrs["geonp_reference"] = kind
    out.attrs["geonp_calibrated"] = calibrate_input.note(m, calibration, f"on the {history} frames up to the first "
                                                                         "initial time")
    return out


def fit(
    obj: xr.Dataset | xr.DataArray,
    var: str | None = None,
    *,
    model: str | os.PathLike | Model = "bsa-tnp",
    task: str = "infill",
    max_time: float | str | None = None,
    steps: int | None = None,
    seed: int = 0,
    covariates=None,
    crs=None,
    preset: str = "small",
    pretrained: bool = True,
    device: str = "auto",
    progress: bool = True,
    time_window: int | None = None,
    context_frames: int | None = None,
    reference: str = "auto",
    land: str | bool | None = "auto",
    mask=None,
    **train_options: Any,
) -> Model:
    """Train a model on the dataset itself; see :meth:`GeonpAccessor.fit`."""
    from .fitting import fit_covariates, fit_model, starting_model

    if task not in ("infill", "forecast"):
        raise ConfigError(f"task={task!r}; expected 'infill' or 'forecast'.")
    # options of the other task would be ignored silently: say so instead
    if task == "infill" and context_frames is not None:
        raise ConfigError(f"context_frames={context_frames!r} applies to task='forecast' (past frames before an "
                          "initial time); an infill's frames are set by time_window. Leave it out, or fit "
                          "task='forecast'.")
    if task == "forecast" and time_window is not None:
        raise ConfigError(f"time_window={time_window!r} applies to task='infill' (frames each side of a target); a "
                          "forecast's are set by context_frames. Leave it out, or pass context_frames=.")
    if task == "forecast" and not (land is None or land is False or str(land) in ("auto", "none")):
        raise ConfigError(f"land={land!r}: forecasts use no land-sea trend (the past frames' land-sea contrast is "
                          "the wrong one for later hours); leave land= out for task='forecast'.")
    check_settings(half_window=time_window, context_frames=context_frames)
    seconds = parse_duration(max_time)
    if seconds is None and steps is None and train_options.get("max_cpu_time") is None:
        raise ConfigError("fit needs a budget: pass max_time= (e.g. '10min') or steps= (e.g. 2000).")
    if steps is not None and (not isinstance(steps, (int, np.integer)) or steps < 0):
        raise ConfigError(f"steps={steps!r}; expected a non-negative integer (0: calibrate the shipped weights only).")
    model, start = starting_model(model)
    ds, layout, explicit = prepare(obj, var, crs=crs, covariates=covariates, land=land if task == "infill" else "none",
                                   mask=mask)
    if task == "forecast" and layout.time is None:
        raise TimeAxisError(f"task='forecast' needs a time axis but {layout.var!r} has dims "
                            f"{list(ds[layout.var].dims)}; fit task='infill' instead.")
    if start is not None:  # continue training a fitted model: same variable, covariates, CRS and task
        start.check_compatible(layout.var, layout.crs, layout.elevation is not None, layout.time is not None, task,
                               has_land=layout.land is not None if task == "infill" else None)
        time_window = start.settings["half_window"] if time_window is None else time_window
        context_frames = start.settings["context_frames"] if context_frames is None else context_frames
        reference = reference_of(start, None if reference == "auto" else reference)
        for key in ("halo", "tile"):
            train_options.setdefault(key, start.settings[key])
    explicit = fit_covariates(ds, layout, explicit, start)
    kind, raw = "none", None
    if task == "forecast":  # train on departures from the reference, as forecast will predict them
        step = timeaxis.time_step_hours(ds[layout.time].values) if len(ds[layout.time]) > 1 else 24.0
        kind, lag = references.resolve(reference, step, n_frames=len(ds[layout.time]),
                                       history_years=seasonal.span_years(ds[layout.time].values))
    else:  # an infill of departures from each point's annual cycle, on records of two years or more
        kind = departures.infill_reference(reference, ds[layout.time].values if layout.time else None, False)
    if kind != "none":
        ds, raw = references.reference_input(ds, layout, kind, lag if task == "forecast" else 0, {})[0], ds
    if task == "infill" and start is None and has_scattered_windows(model):  # the windows infill would choose
        problem = plan_problem(ds, layout, resolve_model(model), "infill", part=True)[0]
        small = scattered_windows(model, problem, {k: train_options.get(k) for k in ("tile", "halo")})
        train_options.update({k: v for k, v in small.items() if v is not None})
    return fit_model(ds, layout, model=model, start=start, task=task, reference=kind,
                     max_time=seconds, steps=steps, seed=seed, covariates=explicit, preset=preset,
                     pretrained=pretrained, device=device, progress=progress, half_window=time_window,
                     context_frames=context_frames, raw_ds=raw, **train_options)

