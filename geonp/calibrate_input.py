"""Calibrating the shipped weights on the data being predicted (``calibrate=`` of infill and forecast).

A calibration is ``fit(steps=0)`` on a bounded sample of the input (:func:`calibration_sample`):
forward passes only, giving the std factors of infill and the per-lead mean blend, trend term and
std of forecasts (:mod:`geonp.calibration`). :func:`delayed_calibration` makes it a task of the
prediction's dask graph, so it runs when the result is computed, once, before the blocks that use
its numbers (and once per process: computing the result region by region, as ``geonp.to_zarr``
does, reuses it). ``calibrate="auto"`` decides with :func:`calibration_inits` (forecasts) and
:data:`AUTO_CALIBRATION_POINTS` (station infill).
"""

from __future__ import annotations

import dask
import dask.base
import numpy as np
import xarray as xr
from dask.delayed import Delayed

from . import geo
from .errors import ConfigError, NoDataError, UncalibratedWarning, UnvalidatedStepWarning, warn_user
from .fitting import MAX_LEAD, fit_model
from .memo import ProcessMemo
from .model import Model, check_settings, default_settings
from .normalise import Normaliser
from .planning import PLAN_FRAMES
from .pretrained import PRETRAINED, shipped_name

__all__ = ["calibration_fields", "calibration_inits", "calibration_sample", "check_option",
           "delayed_calibration", "forecast_calibration", "infill_calibration", "note",
           "trend_weights", "warn_uncalibrated", "grid_roughness", "AUTO_CALIBRATION_INITS",
           "AUTO_CALIBRATION_MIN_INITS", "AUTO_CALIBRATION_POINTS", "ROUGH_GRID", "CALIBRATION_FIELDS",
           "CALIBRATION_VALUES"]

#: initial times a forecast calibration keeps when it chooses how many leads to cover (:func:`calibrated_leads`)
AUTO_CALIBRATION_INITS = 24
#: initial times the history must hold before a forecast calibrates the shipped weights by default: with 8
#: (41 hourly frames, diurnal) ERA5 scored 0.275 … 1.500 K at +1 … +6 h calibrated against 0.384 … 1.543
#: uncalibrated, with 20 0.273 … 1.430; Irish daily wind with 11, 4.91 / 5.40 / 6.49 knots against
#: 5.28 / 7.16 / 6.63 (docs/benchmarks.md, "Short histories calibrated")
AUTO_CALIBRATION_MIN_INITS = 8

#: most leads (frames) a forecast calibration covers (it covers the leads asked for, at least
#: :data:`~geonp.fitting.MAX_LEAD`); its 64 tasks' targets are spread over them
MAX_CALIBRATED_LEAD = 48

#: values of the variable a calibration of shipped weights reads (its 64 tasks need far fewer)
CALIBRATION_VALUES = 4_000_000

#: observed values an infill of station data needs before it calibrates the shipped weights by default:
#: from networks of 3 observed stations up, calibrating cut the NLL of hidden Colorado stations from
#: 4.6–67 to 1.8–4.1 (benchmarks/small_networks.py, docs/benchmarks.md "Small station networks")
AUTO_CALIBRATION_POINTS = 3

#: a grid whose neighbour differences are this large against those two cells apart (along either axis;
#: a smooth field ~0.25, pure noise 1, ERA5 t2m 0.31–0.35) is calibrated by default: noise from cell to
#: cell is what the weights' priors lack (a 1° global field with 0.3 K noise: coverage 0.69 alone,
#: 0.95 calibrated; docs/benchmarks.md, "Global grids")
ROUGH_GRID = 0.7

#: the normaliser fields a calibration sets; every other field stays the shipped weights'
CALIBRATION_FIELDS = ("std_scale", "infill_mean_weight", "infill_std_base", "infill_std_extra", "gap_distance",
                      "gap_std_scale", "support_std_scale",
                      "lead_std_scale", "lead_std_extra", "lead_mean_weight", "lead_trend_weight", "lead_damping")


def check_option(calibrate, model) -> None:
    """Refuse a ``calibrate=`` value other than True, False or "auto", and True with a fitted model."""
    if not (isinstance(calibrate, (bool, np.bool_)) or (isinstance(calibrate, str) and calibrate == "auto")):
        raise ConfigError(f"calibrate={calibrate!r}; expected True, False or 'auto'.")
    if calibrate is True and shipped_name(model) is None:
        _refuse_fitted(model)


def infill_calibration(calibrate, model, ds: xr.Dataset, layout: geo.Layout, n_obs: int, seasonal: bool = False,
                       **options) -> Delayed | None:
    """The calibration task of an infill, or ``None``.

    ``"auto"`` calibrates shipped weights on station data with at least
    :data:`AUTO_CALIBRATION_POINTS` observed values (``n_obs``): their nugget is what the
    shipped weights miss, in networks of every size measured
    (docs/benchmarks.md). On smooth grids calibration made the intervals wider
    than needed, so grids are left to the network unless ``calibrate=True``, unless they are
    departures from each point's annual cycle (``seasonal``): smoother than the weights' priors, their
    intervals were too narrow (a monthly grid of 20 years: coverage 0.74 alone, 0.95 calibrated), or
    rough from cell to cell (:func:`grid_roughness` at least :data:`ROUGH_GRID`), or infilled each frame
    alone (``time_window=0``, frames unlike their neighbours: ERA5 6-hourly coverage 0.87 alone,
    ERA5 3-hourly 0.84 against 0.97 calibrated, docs/benchmarks.md "Narrower time windows").
    """
    auto = calibrate == "auto"
    if auto:
        calibrate = (shipped_name(model) is not None and n_obs >= AUTO_CALIBRATION_POINTS
                     and (len(layout.space_dims) == 1 or seasonal or options.get("time_window") == 0
                          or grid_roughness(ds, layout) >= ROUGH_GRID))
    return delayed_calibration(model, ds, layout, "infill", auto=auto, **options) if calibrate else None


def forecast_calibration(calibrate, model, history: xr.Dataset, layout: geo.Layout, *, lag: int,
                         context_frames: int, raw: xr.Dataset | None = None, **options) -> Delayed | None:
    """The calibration task of a forecast on ``history`` (the frames up to the first initial time), or ``None``.

    ``"auto"`` calibrates shipped weights when the history holds at least
    :data:`AUTO_CALIBRATION_MIN_INITS` initial times (:func:`calibration_inits`) with
    ``context_frames`` past frames each; forecasts of departures from an annual cycle
    (``kind="seasonal"``) with one: without its damping the network alone is worse than the
    cycle (:func:`warn_uncalibrated`).
    """
    auto = calibrate == "auto"
    if auto:
        needed = 1 if options.get("kind") == "seasonal" else AUTO_CALIBRATION_MIN_INITS
        calibrate = shipped_name(model) is not None and calibration_inits(
            history.sizes[layout.time], context_frames, lag) >= needed
    return delayed_calibration(model, history, layout, "forecast", raw=raw, auto=auto, context_frames=context_frames,
                               **options) if calibrate else None


def warn_uncalibrated(model, calibration: Delayed | None, kind: str, auto: bool = True) -> None:
    """Warn when shipped weights forecast without a calibration: too little history (``auto``), or departures.

    The network's std alone missed the errors by up to 2 × either way on ERA5 t2m with 2–8 frames of
    history (a twenty-fifth new-user test), which only ``geonp_calibrated="no"`` recorded. Departures
    from an annual cycle: the network alone carries the context's anomalies on (monthly Colorado
    tmax: 2.88 °C at +1 month against the annual cycle's 2.44, ``benchmarks/coarse_forecast.py``; the
    calibration's damped blend scores 2.30).
    """
    if calibration is not None or shipped_name(model) is None:
        return
    if kind != "seasonal":
        if auto:
            warn_user(f"the forecast is left uncalibrated: the history before the first initial time holds fewer "
                      f"than {AUTO_CALIBRATION_MIN_INITS} initial times with their context and {MAX_LEAD} leads, so "
                      "the network alone forecasts (its std missed the errors by up to 2x either way with a few "
                      "frames of history; one ERA5 forecast from 53 hours scored 3.1 K at +6 h against persistence's "
                      "1.4). Give more history before the first initial time, or pass calibrate=False to "
                      "forecast uncalibrated without this warning.", UncalibratedWarning)
        return
    warn_user("forecasting departures from the annual cycle with the shipped weights uncalibrated "
              "(calibrate=False, or too little history): the network alone is worse than the cycle itself "
              "(monthly Colorado tmax: 2.88 degC at +1 month against the cycle's 2.44; calibrated 2.30). "
              "Leave calibrate='auto' with a few initial times of history before the first one.",
              UnvalidatedStepWarning)


def note(model: Model, calibration: Delayed | None, how: str) -> str:
    """The output's ``geonp_calibrated`` attribute: ``how`` the shipped weights were calibrated, or not."""
    return how if calibration is not None else "when fitted" if "calibration" in model.metadata else "no"


def calibration_inits(history_frames: int, context_frames: int, lag: int = 0) -> int:
    """Initial times in ``history_frames`` frames with every calibrated lead (up to :data:`MAX_LEAD`) inside them.

    Each needs ``context_frames`` frames up to it, plus ``lag`` frames before those when the
    forecast is of departures from the same hour a day earlier (``reference="diurnal"``).
    ``calibrate="auto"`` of forecasts calibrates when this reaches :data:`AUTO_CALIBRATION_MIN_INITS`.
    """
    return max(0, int(history_frames) - int(lag) - int(context_frames) - MAX_LEAD + 1)


def calibrated_leads(leads: int, history_frames: int, context_frames: int, lag: int = 0) -> int:
    """Leads (frames) a forecast calibration covers: ``leads``, as far as the history allows.

    At least :data:`~geonp.fitting.MAX_LEAD`, at most :data:`MAX_CALIBRATED_LEAD`, and no more than
    leave :data:`AUTO_CALIBRATION_INITS` initial times in the history. Longer leads take the last
    calibrated lead's fields.
    """
    room = int(history_frames) - int(lag) - int(context_frames) - AUTO_CALIBRATION_INITS + 1
    return int(max(MAX_LEAD, min(int(leads), MAX_CALIBRATED_LEAD, room)))


def grid_roughness(ds: xr.Dataset, layout: geo.Layout) -> float:
    """How rough a grid is from cell to cell: the larger, over its two axes, of mean Δ₁² / mean Δ₂².

    Δ₁ and Δ₂ are the differences between observed cells one and two apart along the axis, in 8
    of the frames planning reads (of two indices of the extra dims), cropped as a calibration reads
    them (:func:`calibration_sample`). A smooth field gives about 0.25, noise from cell to cell 1.
    ``nan`` without enough pairs.
    """
    index = calibration_sample(ds, layout, 8, 500_000)  # its crop of the space for 8 frames
    if layout.time is not None:  # 8 of the frames planning reads (geonp.planning.observed_stats), no others
        T = ds.sizes[layout.time]
        planned = np.unique(np.linspace(0, T - 1, min(T, PLAN_FRAMES)).round().astype(int))
        pick = np.linspace(0, len(planned) - 1, min(8, len(planned))).round().astype(int)
        index[layout.time] = planned[np.unique(pick)]
    index.update({d: slice(0, 2) for d in layout.extra_dims})
    da = ds[layout.var].isel(index).transpose(*layout.extra_dims, *[d for d in (layout.time,) if d],
                                              *layout.space_dims)
    values = np.asarray(da.values, dtype=np.float64).reshape(-1, *da.shape[-2:])
    ratios = []
    for axis in (1, 2):
        n = values.shape[axis]
        if n < 3:
            continue
        one = np.diff(values, axis=axis)
        two = values.take(range(2, n), axis=axis) - values.take(range(n - 2), axis=axis)
        one, two = one[np.isfinite(one)], two[np.isfinite(two)]
        if len(one) >= 16 and len(two) >= 16 and np.mean(two**2) > 0:
            ratios.append(float(np.mean(one**2) / np.mean(two**2)))
    return max(ratios) if ratios else float("nan")


def calibration_sample(ds: xr.Dataset, layout: geo.Layout, min_frames: int, max_values: int | None = None) -> dict:
    """Indexers (for ``isel``) of the part of ``ds`` a calibration reads.

    The last ``max(min_frames, max_values / values per frame)`` frames (forecasts calibrate on
    the most recent history) and, where ``min_frames`` frames of the whole domain exceed
    ``max_values``, only the central part of the domain: a square of grid cells, or the stations
    nearest the centre (at least 1,024 points). Calibration tasks are windows the size of
    prediction tiles, so such a crop measures the same errors, and nothing else is read.
    ``max_values`` defaults to :data:`CALIBRATION_VALUES`.
    """
    max_values = CALIBRATION_VALUES if max_values is None else int(max_values)
    da = ds[layout.var]
    extra = int(np.prod([da.sizes[d] for d in layout.extra_dims])) if layout.extra_dims else 1
    points = int(np.prod([da.sizes[d] for d in layout.space_dims]))
    index, frames = {}, 1
    if layout.time is not None:
        T = da.sizes[layout.time]
        frames = min(T, max(int(min_frames), max_values // max(1, extra * points)))
        index[layout.time] = slice(T - frames, T)
    cells = max(1024, max_values // max(1, extra * frames))
    if len(layout.space_dims) == 2:
        # a grid comes in one orientation (geo.canonical_flips), so a reversed axis draws the same points
        if points <= cells:
            return index
        side = int(np.sqrt(cells))
        for d in layout.space_dims:
            start = max(0, (da.sizes[d] - side) // 2)
            index[d] = slice(start, start + side)
        return index
    x = np.asarray(ds[layout.x].values, dtype=np.float64)
    y = np.asarray(ds[layout.y].values, dtype=np.float64)
    if layout.geographic:  # degrees of longitude shrink with latitude; wrap across the dateline
        x = ((x - np.nanmedian(x) + 180.0) % 360.0 - 180.0) * np.cos(np.deg2rad(np.nanmedian(y)))
    d2 = (x - np.nanmedian(x)) ** 2 + (y - np.nanmedian(y)) ** 2
    keep = np.argsort(np.nan_to_num(d2, nan=np.inf), kind="stable")[:cells]
    # in the order of their positions, not the input's: the calibration's random held-out stations
    # then do not depend on how the stations are listed
    index[layout.space_dims[0]] = keep[np.lexsort((x[keep], y[keep]))]
    return index


def calibration_fields(model: str, ds: xr.Dataset, layout: geo.Layout, task: str, *, auto: bool = False,
                       kind: str = "none", raw: xr.Dataset | None = None, time_window: int | None = None,
                       context_frames: int | None = None, halo: float | None = None,
                       tile: float | None = None, max_lead: int = MAX_LEAD) -> dict:
    """The :data:`CALIBRATION_FIELDS` of shipped weights ``model`` calibrated on ``ds`` (forward passes only).

    The same calibration as ``fit(steps=0)``, on the data being predicted: held-out observed
    points for infill (the gaps are never read); for forecasts ``ds`` is the history up to the first
    initial time (``raw``: the variable itself when ``ds`` holds departures from a ``kind``
    reference). ``ds`` is already the bounded sample (:func:`delayed_calibration` cuts it).
    ``halo`` and ``tile`` size the calibration's tasks like the prediction windows they calibrate;
    forecasts calibrate leads ``1 … max_lead`` (frames).
    Runs dask's synchronous scheduler inside, as it is itself a task of the prediction's graph.

    Raises
    ------
    NoDataError
        Nothing to calibrate on; with ``auto`` (``calibrate="auto"``) the result is ``{}`` instead:
        the shipped weights as they are.
    """
    try:
        with dask.config.set(scheduler="synchronous"):
            fitted = fit_model(ds, layout, model=model, task=task, max_time=None, steps=0, seed=0, covariates=(),
                               progress=False, raw_ds=raw, reference=kind, half_window=time_window,
                               context_frames=context_frames, halo=halo, tile=tile, max_lead=max_lead)
    except NoDataError as exc:
        if auto:
            return {}
        raise NoDataError(f"calibrate=True found nothing to calibrate on ({exc}) "
                          + ("Forecasts calibrate on the frames up to the first init_time; pass later initial "
                             "times." if task == "forecast" else "Pass calibrate=False.")) from exc
    values = fitted.normaliser.to_dict()
    return {k: values[k] for k in CALIBRATION_FIELDS}


def delayed_calibration(model, ds: xr.Dataset, layout: geo.Layout, task: str, *, raw: xr.Dataset | None = None,
                        auto: bool = False, **options) -> Delayed:
    """:func:`calibration_fields` as one dask task on the bounded sample of ``ds``: nothing runs yet.

    Refuses at once (:class:`ConfigError`) a ``model`` that is not the name of shipped weights.
    The sample is cut here (its dask chunks, if any, are read when the task runs).
    """
    name = shipped_name(model)
    if name is None:
        _refuse_fitted(model)
    ds, raw = geo.canonical_grid(ds, layout, raw)
    index = calibration_sample(ds, layout, _frames_needed(name, task, options))
    sample_raw = None if raw is None else raw.isel(index)
    args, kwargs = (name, ds.isel(index), layout, task), {"raw": sample_raw, "auto": auto, **options}
    key = dask.base.tokenize(calibration_fields, *args, **kwargs)  # deterministic: the same sample and options
    return dask.delayed(_calibrate_once)(key, *args, dask_key_name=f"calibration-{key}", **kwargs)


#: calibrations this process has run, by their inputs' dask token (the most recent few)
_DONE = ProcessMemo()


def _calibrate_once(key: str, *args, **kwargs) -> dict:
    """:func:`calibration_fields`, run once per process for the same inputs (``key``).

    ``geonp.to_zarr`` computes a result region by region, and each region's graph holds the
    calibration task: without this it ran once per region (4 times for 4 chunks, 81 s against 15 s).
    """
    return dict(_DONE.get(key, lambda: dict(calibration_fields(*args, **kwargs))))


def trend_weights(fields: dict, lead_frames: np.ndarray) -> np.ndarray:
    """Per-lead weights of the trend term from calibration ``fields`` (zeros when there are none)."""
    w = Normaliser(lead_trend_weight=tuple(fields.get("lead_trend_weight", ()))).trend_weight(lead_frames)
    return np.zeros(len(lead_frames)) if w is None else np.asarray(w, dtype=np.float64)


def _frames_needed(name: str, task: str, options: dict) -> int:
    settings = {**default_settings(name), **check_settings(half_window=options.get("time_window"),
                                                           context_frames=options.get("context_frames"))}
    if task == "forecast":
        return settings["context_frames"] + int(options.get("max_lead", MAX_LEAD)) + AUTO_CALIBRATION_INITS - 1
    return 16 * (2 * settings["half_window"] + 1)


def _refuse_fitted(model) -> None:
    raise ConfigError(f"calibrate=True calibrates shipped weights {sorted(PRETRAINED)} on the input, but model= "
                      f"is {model!r}. A fitted model is calibrated already; to recalibrate one, fit it on these "
                      "data with no training steps: ds.np.fit(model=<the model>, steps=0) (CLI: geonp fit INPUT "
                      "--model FILE --steps 0 --out NEW_FILE).")
