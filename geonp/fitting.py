"""Train a model on a dataset itself (the body of ``ds.np.fit``).

The data of the variable are read into memory once (at most :data:`MAX_VALUES` values; longer
records are thinned to evenly spaced blocks of frames), tasks are drawn by
:class:`geonp.data.TaskSampler`, and :func:`geonp.train.train` does the optimisation. By
default a model with shipped weights starts from them (covariate inputs start at zero, so
training starts exactly from the shipped model) and adapts to the data.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import numpy as np
import torch
import xarray as xr

from . import frames, geo, timeaxis
from .calibration import calibrate
from .chunked import build_problem
from .data import SamplerConfig, TaskSampler, Window
from .errors import (
    ConfigError,
    ModelMismatchError,
    NoDataError,
    ShortFitWarning,
    TimeAxisError,
    VariableNotFoundError,
    warn_user,
)
from .inference import collate, resolve_device
from .model import Model, check_settings, default_settings, resolve_model
from .models import Batch, NeuralProcess, build_model, model_names
from .models.bsa_tnp import with_proximity_features
from .models.layers import MLP
from .normalise import Normaliser, covariate_dims
from .pretrained import OVERRIDES, PRETRAINED, load_pretrained
from .train import TrainConfig, train

__all__ = ["fit_model", "init_from", "TaskSource", "MAX_LEAD", "MAX_VALUES"]

#: values of the variable read into memory for training
MAX_VALUES = 50_000_000

#: a fit on a time budget that ran fewer steps warns (:class:`~geonp.errors.ShortFitWarning`)
FEW_STEPS = 50

#: longest lead (frames) that forecast training and calibration draw; longer leads reuse its calibration
MAX_LEAD = 6


class TaskSource:
    """Adapter: ``sample(batch_size, generator) -> Batch`` over a :class:`TaskSampler`."""

    def __init__(self, sampler: TaskSampler) -> None:
        self.sampler = sampler

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        rng = np.random.default_rng(seed)
        tasks = []
        while len(tasks) < batch_size:
            task = self.sampler.sample(rng)
            if task.num_targets > 0 and task.num_context > 0:
                tasks.append(task)
        return collate(tasks, with_targets=True).to(dtype=torch.float32)


def _frames_to_keep(T: int, P: int, E: int) -> np.ndarray:
    budget = max(1, MAX_VALUES // max(1, P * E))
    if T <= budget:
        return np.arange(T)
    blocks = max(1, budget // 64)
    starts = np.linspace(0, T - 64, blocks).astype(int)
    return np.unique(np.concatenate([np.arange(s, s + 64) for s in starts]))


def init_from(net: NeuralProcess, source: NeuralProcess) -> int:
    """Copy every matching weight of ``source`` into ``net``; what ``net`` adds starts switched off.

    Wider input layers (covariate columns) get zero columns, and an embedding MLP that ``source``
    lacks (TE-PT-TNP's ``target_embed`` of the target covariates) gets a zero last layer, so that
    before any training ``net`` predicts as ``source`` does, whatever the covariates (a fit with
    ``steps=0`` calibrates the shipped network itself, not one with random covariate inputs).
    Returns the number of tensors copied.
    """
    if getattr(net.config, "proximity_features", False) and not getattr(source.config, "proximity_features", True):
        source = with_proximity_features(source)  # their inputs sit before the covariates
    own, theirs = net.state_dict(), source.state_dict()
    copied = 0
    with torch.no_grad():
        for k, v in theirs.items():
            if k not in own:
                continue
            w = own[k]
            if w.shape == v.shape:
                w.copy_(v)
                copied += 1
            elif w.ndim == 2 and w.shape[0] == v.shape[0] and w.shape[1] > v.shape[1]:
                w.zero_()  # extra input columns (covariates) start switched off
                w[:, : v.shape[1]].copy_(v)
                copied += 1
        for name, module in net.named_modules():
            if isinstance(module, MLP) and not any(f"{name}.{k}" in theirs for k, _ in module.named_parameters()):
                last = module[-1]
                last.weight.zero_()
                last.bias.zero_()
    return copied


def _elevation_bias(name: str, covariates: tuple[str, ...]) -> tuple[int]:
    """The covariate column of elevation, for ``bias_covariates`` (``elevation_bias=True``)."""
    if name != "bsa-tnp":
        raise ConfigError(f"elevation_bias=True needs model='bsa-tnp' (an attention bias on Δelevation); got {name!r}.")
    if "elevation" not in covariates:
        raise ConfigError(
            f"elevation_bias=True but the data have no elevation covariate (covariates: {tuple(covariates)}); "
            "pass covariates=['elevation', ...] or an elevation variable/coordinate, or drop elevation_bias."
        )
    i = list(covariates).index("elevation")
    return (covariate_dims(covariates[:i]),)


def starting_model(model) -> tuple[str, Model | None]:
    """The model name and the fitted :class:`Model` that ``fit(model=...)`` continues (``None``: start anew).

    A name (``"bsa-tnp"``, ``"tnp-d"``, ...) builds a network, from the shipped weights where there
    are some, and so does a :class:`Model` of shipped weights; any other :class:`Model`, or the path
    of a saved one, is trained further.
    """
    if isinstance(model, str) and model.lower().replace("_", "-") in model_names():
        return model, None
    start = resolve_model(model)
    if start.source.startswith("pretrained:"):
        return start.name, None
    return start.name, start


def fit_covariates(ds: xr.Dataset, layout: geo.Layout, explicit: tuple[str, ...] | None,
                   start: Model | None = None) -> tuple[str, ...]:
    """The covariates a fit uses: ``explicit`` (``covariates=``), a continued model's own, or chosen from the data.

    Chosen: elevation where the data have it, hour of day for sub-daily data, day of year for data
    spanning 60 days or more.

    Raises
    ------
    ModelMismatchError
        ``explicit`` differs from the covariates of the model ``start`` being trained further.
    VariableNotFoundError, TimeAxisError
        Elevation, or hour/day of year, asked for data without it.
    """
    if start is not None:
        own = tuple(start.normaliser.covariates)
        if explicit is not None and tuple(explicit) != own:
            raise ModelMismatchError(f"this model was trained with covariates {list(own)}; it cannot continue "
                                     f"with {list(explicit)}. Leave covariates= out, or fit a new model "
                                     f"(model={start.name!r}).")
        explicit = own
    if explicit is None:
        names = []
        if layout.elevation is not None:
            names.append("elevation")
        if layout.time is not None and len(ds[layout.time]) > 1:
            times = ds[layout.time].values
            if timeaxis.time_step_hours(times) < 24:
                names.append("hour")
            span_days = (timeaxis.time_hours(times[-1:]) - timeaxis.time_hours(times[:1]))[0] / 24
            if span_days >= 60:
                names.append("doy")
        explicit = tuple(names)
    if "elevation" in explicit and layout.elevation is None:
        raise VariableNotFoundError("covariates include elevation but the data have no elevation variable or "
                                    "coordinate; pass covariates=[<name>] or an elevation DataArray.")
    if ("hour" in explicit or "doy" in explicit) and layout.time is None:
        raise TimeAxisError("covariates 'hour'/'doy' need a time axis; the data have none.")
    return tuple(explicit)


def fit_model(
    ds: xr.Dataset,
    layout: geo.Layout,
    *,
    model: str,
    task: str,
    max_time: float | None,
    steps: int | None,
    seed: int,
    covariates: tuple[str, ...],
    preset: str = "small",
    pretrained: bool = True,
    device: str = "auto",
    progress: bool = True,
    raw_ds: xr.Dataset | None = None,
    start: Model | None = None,
    **train_options: Any,
) -> Model:
    """Fit ``model`` on ``layout.var`` of ``ds``; see :func:`geonp.api.fit`.

    ``raw_ds`` holds the variable itself when ``ds`` holds its departures from a forecast reference
    (it gives the calibration's trend term). ``start`` is a fitted model to train further (its
    network, copied; ``preset``, ``pretrained`` and ``elevation_bias`` are then ignored): the scales are taken from
    ``ds`` as for any fit, so continuing on the same data keeps them.
    """
    name = str(model).lower().replace("_", "-")
    times = ds[layout.time].values if layout.time is not None else None
    step = timeaxis.time_step_hours(times) if times is not None else 1.0
    # scales: fixed from the training data and saved with the model
    ds, raw_ds = geo.canonical_grid(ds, layout, raw_ds)  # draws by array position: one order, whatever the input's
    probe = build_problem(ds, layout, Normaliser(time_unit_hours=step), observed_fraction=1.0)
    data = probe.data
    E = int(np.prod(probe.extra_shape))
    T, P = data.shape[len(probe.extra_shape)], probe.source.size
    keep = _frames_to_keep(T, P, E)
    values = _kept_values(probe, keep)
    finite = np.isfinite(values)
    if not finite.any():
        raise NoDataError(
            f"every value of {layout.var!r} is missing in the {len(keep)} frame(s) read for training; there is "
            "nothing to train on. Check that the variable holds observations (a fill value not decoded as NaN: "
            "open the file with mask_and_scale=True) or pick the period that has them (ds.sel(time=...))."
        )
    obs_fraction = float(finite.mean())
    spread = float(np.nanstd(values))
    elev = probe.source.elevation
    norm = Normaliser(
        time_unit_hours=step,
        covariates=covariates,
        elevation_mean=float(np.nanmean(elev)) if elev is not None else 0.0,
        elevation_std=float(np.nanstd(elev)) if elev is not None and np.nanstd(elev) > 0 else 1.0,
        value_mean=float(np.nanmean(values)),
        value_std=spread or 1.0,
        value_std_floor=1e-3 * (spread or 1.0),
        small_context_scale=spread,
        # a model trained further keeps the space unit its network learnt in
        space_unit_km=start.normaliser.space_unit_km if start is not None else None,
    )
    problem = build_problem(ds, layout, norm, observed_fraction=obs_fraction)
    norm = replace(norm, covariates=tuple(covariates), space_unit_km=problem.unit_km)
    window = _window(problem, keep, norm)
    windows = {k: train_options.pop(k, None) for k in ("half_window", "context_frames", "halo", "tile")}
    settings = {**default_settings(name), **check_settings(**windows)}
    if (reference := train_options.pop("reference", None)) is not None:
        settings["reference"] = reference
    sconf = SamplerConfig(task=task, half_window=settings["half_window"], context_frames=settings["context_frames"],
                          max_lead=int(train_options.pop("max_lead", MAX_LEAD)))
    sampler = TaskSampler(values, window, norm, config=sconf)

    overrides = dict(OVERRIDES.get(name, {}))
    if train_options.pop("elevation_bias", False):
        overrides["bias_covariates"] = _elevation_bias(name, norm.covariates)
    torch.manual_seed(seed)  # the initial weights too (new inputs of shipped weights, or a model from scratch)
    if start is not None:
        net = copy.deepcopy(start.net).cpu()
        source = f"fitted from {start.source or 'a geonp.Model'}"
    else:
        net = build_model(name, preset=preset, space_dims=2, time_dims=1, covariate_dims=norm.covariate_dims,
                          **overrides)
        source = "fitted"
    if start is None and pretrained and name in PRETRAINED and preset == "small":
        init_from(net, load_pretrained(name))
        source = f"fitted from pretrained:{name}"
    dev = resolve_device(device)
    torch.manual_seed(seed)
    calibration_tasks = int(train_options.pop("calibration_tasks", 64))
    record: dict[str, Any] = {"steps": 0, "wall_seconds": 0.0, "cpu_seconds": 0.0, "final_loss": None,
                              "best_val_loss": None}
    if steps != 0:
        # from trained weights (shipped or a fitted model) a lower rate than from scratch
        config = TrainConfig(steps=steps, max_time=max_time, seed=seed, progress=progress,
                             lr=train_options.pop("lr", 3e-4 if source != "fitted" else 5e-4),
                             warmup_steps=train_options.pop("warmup_steps", min(50, (steps or 1000) // 4)),
                             val_every=train_options.pop("val_every", 200),
                             val_batches=train_options.pop("val_batches", 4), **train_options)
        data = TaskSource(sampler)
        result = train(net.to(dev), data, config, val_data=data)
        record.update(steps=int(result.steps), wall_seconds=float(result.wall_seconds),
                      cpu_seconds=float(result.cpu_seconds),
                      final_loss=float(result.history[-1]["loss"]) if result.history else None,
                      best_val_loss=result.best_val)
        if max_time is not None and not steps and record["steps"] < FEW_STEPS:
            warn_user(f"The fit ran only {record['steps']} training steps in max_time={max_time:g} s: it changed the "
                      f"weights little, and how many steps fit in the time depends on the machine and its load, so the "
                      f"same call gives another model next time. Pass steps= (e.g. steps=500) for a reproducible fit, "
                      f"or a longer max_time.", ShortFitWarning)
    net = net.cpu().eval()
    if calibration_tasks > 0:
        raw = None
        if raw_ds is not None and task == "forecast":
            raw = _kept_values(build_problem(raw_ds, layout, Normaliser(time_unit_hours=step), observed_fraction=1.0),
                               keep)
        scales = calibrate(net, values, window, norm, sconf, settings, calibration_tasks, seed, raw=raw,
                           spacing=problem.observed_spacing(obs_fraction))
        norm = replace(norm, **scales)
        record["calibration"] = scales
    if record["steps"] == 0 and source.startswith("fitted from pretrained:"):
        # shipped weights, calibrated only: keep their convention, lengths in the context spacing of the
        # data at hand, rather than fixing the fit data's (a sparser past network would squeeze a denser one)
        norm = replace(norm, space_unit_km=None)
    record.update({
        "task": task, "variable": layout.var,
        "frames": int(len(keep)), "points": int(P), "observed_fraction": obs_fraction, "seed": seed,
        "source": source, "land_trend": task == "infill" and layout.land is not None,
    })
    return Model(net, norm, name=name, task=task, variables=(layout.var,), crs_wkt=layout.crs_wkt,
                 settings=settings, source=source, metadata=record)


def _kept_values(problem, keep: np.ndarray) -> np.ndarray:
    """Load the problem's values at frames ``keep`` as ``[series, frames, points]`` float64.

    Only the points where the field is defined (``mask=``, :mod:`geonp.domain`), as :func:`_window` has them.
    """
    data = problem.data
    E, P = int(np.prod(problem.extra_shape)), problem.source.size
    values = np.asarray(data[..., keep, :, :] if problem.source.is_grid else data[..., keep, :], dtype=np.float64)
    values = values.reshape(E, len(keep), P)
    return values if problem.source.domain is None else values[..., problem.source.domain]


def _window(problem, keep: np.ndarray, norm: Normaliser) -> Window:
    src = problem.source
    if src.km is None:
        from .frames import Frame

        km = Frame("aeqd", *frames.centre_of(src.lon, src.lat)).to_km(src.lon, src.lat)
    else:
        km = src.km
    inside = slice(None) if src.domain is None else src.domain  # the points of the field (_kept_values)

    def pick(a):
        return None if a is None else a[inside]

    return Window(values=np.zeros((len(keep), 0)), xy=km[inside] / problem.unit_km, t=problem.t_units[keep],
                  hours=problem.hours[keep], lon=src.lon[inside], elevation=pick(src.elevation), land=pick(src.land))
