"""``geonp.Model``: a network together with everything needed to apply it to data.

A :class:`Model` carries the network, its :class:`~geonp.normalise.Normaliser` (scales and
covariates), the variables, covariates and CRS it was trained on, and the window settings of
prediction. ``model.save(path)`` writes a safe checkpoint (no code runs when it is loaded);
:func:`load_model` reads it back.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyproj

from .checkpoint import load_model as _load_net
from .checkpoint import read_checkpoint, save_model
from .errors import (
    CheckpointError,
    CheckpointNotFoundError,
    ConfigError,
    ModelMismatchError,
    UnknownOptionError,
    VariableTypeError,
)
from .models import NeuralProcess, model_names
from .normalise import Normaliser

__all__ = ["Model", "load_model", "resolve_model", "DEFAULT_SETTINGS", "default_settings", "frames_per_task"]

#: prediction windows (frames / model units) used unless a model says otherwise
DEFAULT_SETTINGS = {
    "half_window": 3,  # infill: frames each side of the target frame used as context
    "context_frames": 4,  # forecast: frames up to the initial time used as context
    "halo": 3.0,  # space halo around each output tile, in model space units
    "tile": 8.0,  # edge of the tiles a grid is predicted in (stations: groups), in model space units
    "frames_per_task": "auto",  # infill: consecutive frames predicted as one task (see frames_per_task())
    "reference": "auto",  # forecast: what the network forecasts a departure from (geonp.reference)
}


@dataclass
class Model:
    """A network ready to be applied to xarray data.

    Attributes
    ----------
    net : NeuralProcess
        The torch model.
    normaliser : Normaliser
        Scales and covariates.
    name : str
        Model name (``"bsa-tnp"``, ...).
    task : str
        ``"infill"``, ``"forecast"`` or ``"any"`` (the shipped weights do both).
    variables : tuple of str
        Variables it was trained on (empty: any variable, as for the shipped weights).
    crs_wkt : str or None
        CRS of the training data's coordinates (``None``: any).
    settings : dict
        Prediction windows, see :data:`DEFAULT_SETTINGS`.
    source : str
        Where it came from: ``"pretrained:<name>"``, ``"fitted"`` or a file path.
    metadata : dict
        Training record (steps, losses, data description).
    """

    net: NeuralProcess
    normaliser: Normaliser = field(default_factory=Normaliser)
    name: str = ""
    task: str = "any"
    variables: tuple[str, ...] = ()
    crs_wkt: str | None = None
    settings: dict = field(default_factory=lambda: dict(DEFAULT_SETTINGS))
    source: str = ""
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name:
            self.name = self.net.name
        self.settings = {**DEFAULT_SETTINGS, **self.settings}

    def __repr__(self) -> str:
        vars_ = ", ".join(self.variables) or "any variable"
        cov = ", ".join(self.normaliser.covariates) or "none"
        return (f"<geonp.Model {self.name} ({self.net.num_parameters():,} parameters), task={self.task}, "
                f"variables: {vars_}, covariates: {cov}, source: {self.source or 'in memory'}>")

    @property
    def digest(self) -> str:
        """sha256 of the weights (recorded in output provenance)."""
        h = hashlib.sha256(self.name.encode())
        for k, v in sorted(self.net.state_dict().items()):
            h.update(k.encode())
            h.update(v.detach().cpu().contiguous().numpy().tobytes())
        return h.hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """Everything but the network, as plain data."""
        return {
            "normaliser": self.normaliser.to_dict(), "name": self.name, "task": self.task,
            "variables": list(self.variables), "crs_wkt": self.crs_wkt, "settings": dict(self.settings),
            "source": self.source,
        }

    def save(self, path: str | os.PathLike, *, overwrite: bool = False) -> Path:
        """Write the model to ``path`` (a safe checkpoint, written to a temporary file then renamed).

        Raises
        ------
        OutputExistsError
            ``path`` exists and ``overwrite`` is ``False`` (as for :func:`geonp.to_zarr`), or it is not a
            model file written by geonp (``overwrite`` never replaces anything else).
        OutputPathError
            ``path`` could not be written (its folder is a file, or takes no new files).
        """
        from ._files import MODEL_MAGIC
        from .io.lock import check_new_path

        target = check_new_path(path, overwrite, "model", magic=MODEL_MAGIC)  # overwrite replaces only a model file
        return save_model(self.net, target, metadata={"geonp_model": self.to_dict(), "training": self.metadata})

    @classmethod
    def pretrained(cls, name: str = "bsa-tnp") -> Model:
        """The shipped weights of ``name``: zero-shot, any variable, units taken from the data."""
        from .pretrained import load_pretrained

        return cls(load_pretrained(name), Normaliser(), name=name, task="any", source=f"pretrained:{name}",
                   settings=default_settings(name))

    def check_compatible(self, var: str, crs: pyproj.CRS, has_elevation: bool, has_time: bool,
                         task: str | None = None, has_land: bool | None = None,
                         step_hours: float | None = None) -> None:
        """Refuse data (and a task) this model was not trained for.

        Raises
        ------
        ModelMismatchError
            Another variable, a missing covariate, another CRS (any two longitude/latitude CRSs count
            as the same: geonp measures both in kilometres on the sphere), ``task`` is not the one
            the model was fitted for (shipped weights, ``task="any"``, serve both), the model was
            fitted for infill with a land–sea mask and ``has_land`` is ``False``, or on another time step
            than the data's ``step_hours`` (more than 10 % apart; ``None``: not known, one frame).
        """
        if task is not None and self.task not in ("any", task):
            raise ModelMismatchError(
                f"this model was fitted for {self.task!r} but is used for {task!r}; fit one with task={task!r} "
                f"(CLI: geonp fit --task {task}) or use a shipped model (model='bsa-tnp')."
            )
        if self.variables and var not in self.variables:
            raise ModelMismatchError(
                f"this model was trained on {list(self.variables)} but was given {var!r}; pass var= with one of "
                f"those, fit a new model on {var!r}, or use a shipped model (model='bsa-tnp')."
            )
        cov = self.normaliser.covariates
        if "elevation" in cov and not has_elevation:
            raise ModelMismatchError(
                "this model was trained with elevation as a covariate but the data have none; add an elevation "
                "coordinate (or pass covariates=) or fit a model without it (covariates=[])."
            )
        if has_land is False and self.metadata.get("land_trend"):
            raise ModelMismatchError(
                "this model was fitted with a land-sea mask (its tasks remove a land-sea trend) but the data have "
                "none; add the mask, e.g. ds.assign_coords(lsm=mask), use land='auto' (the bundled land fraction), "
                "or fit a model with land='none'.")
        unit = self.normaliser.time_unit_hours
        if unit and step_hours and abs(np.log(step_hours / unit)) > np.log(1.1):
            raise ModelMismatchError(
                f"this model was fitted on data with a time step of {unit:g} h but the data step {step_hours:g} h: "
                "its time windows and calibration do not carry over (an hourly ERA5 model covered 0.70 instead of "
                f"0.95 on 6-hourly data). Fit a model on data with this step, resample the data to {unit:g} h "
                "(ds.resample(time=...)), or use a shipped model (model='bsa-tnp').")
        if ("hour" in cov or "doy" in cov) and not has_time:
            raise ModelMismatchError("this model uses time-of-day/day-of-year covariates but the data have no time "
                                     "axis; fit a model on data without time.")
        if self.crs_wkt is not None:
            trained = pyproj.CRS.from_wkt(self.crs_wkt)
            both_geographic = trained.is_geographic and crs.is_geographic
            if not both_geographic and not crs.equals(trained, ignore_axis_order=True):
                raise ModelMismatchError(
                    f"this model was trained on coordinates in {trained.name!r} but the data are in {crs.name!r}; "
                    "reproject the data (ds.rio.reproject) or fit a model on them."
                )


def load_model(path: str | os.PathLike) -> Model:
    """Read a model written by :meth:`Model.save` (or any geonp checkpoint), never executing code.

    Raises
    ------
    CheckpointNotFoundError
        No file at ``path``.
    CheckpointError
        Corrupt, of a newer version, or not a geonp checkpoint.
    """
    payload = read_checkpoint(path)
    net = _load_net(path)
    info = (payload.get("metadata") or {}).get("geonp_model")
    if not info:  # a bare network checkpoint: use it like the shipped weights
        return Model(net, Normaliser(), name=payload["model"], task="any", source=str(path))
    try:
        normaliser = Normaliser.from_dict(info["normaliser"])
        fields = dict(name=info["name"], task=info["task"], variables=tuple(info["variables"]),
                      crs_wkt=info["crs_wkt"], settings={"reference": "none", **info["settings"]})
    except (KeyError, TypeError, ValueError) as exc:  # ConfigError is a ValueError
        raise CheckpointError(
            f"{str(path)!r} is a geonp checkpoint whose model metadata is damaged ({type(exc).__name__}: {exc}); "
            "expected the fields Model.save writes (normaliser, name, task, variables, crs_wkt, settings). Save the "
            "model again, or load the network alone with geonp.checkpoint.load_model."
        ) from exc
    return Model(net, normaliser, **fields, source=str(path),
                 metadata=(payload.get("metadata") or {}).get("training") or {})


def resolve_model(model: str | os.PathLike | Model) -> Model:
    """A :class:`Model` from a name (shipped weights), a path, or a model.

    Raises
    ------
    UnknownOptionError
        A name with no shipped weights that is not a file either.
    """
    if isinstance(model, Model):
        return model
    if isinstance(model, NeuralProcess):
        return Model(model, Normaliser(), source="in memory")
    if not isinstance(model, (str, os.PathLike)):
        raise VariableTypeError(f"model= got a {type(model).__name__}; expected a model name such as 'bsa-tnp', a "
                                "geonp.Model, or the path of a saved model.")
    from .pretrained import PRETRAINED

    key = str(model).lower().replace("_", "-")
    if key in PRETRAINED:
        return Model.pretrained(key)
    path = Path(model)
    if path.exists():
        return load_model(path)
    if key in model_names():
        raise UnknownOptionError(
            f"no shipped weights for {key!r} (shipped: {sorted(PRETRAINED)}); fit it on your data first: "
            f"m = ds.np.fit(model={key!r}); ds.np.infill(model=m)."
        )
    if any(sep in str(model) for sep in ("/", os.sep, ".")):
        raise CheckpointNotFoundError(f"no model file at {str(model)!r}; check the path, or use a shipped model "
                                      f"name: {sorted(PRETRAINED)}.")
    raise UnknownOptionError(f"unknown model {str(model)!r}; expected one of {sorted(PRETRAINED)} (shipped weights), "
                             f"{sorted(set(model_names()) - set(PRETRAINED))} (fit first), a geonp.Model or a path.")


def default_settings(name: str) -> dict:
    """The prediction settings a model called ``name`` starts from.

    :data:`DEFAULT_SETTINGS` with the shipped model's own (``geonp.pretrained.SETTINGS``), for its
    zero-shot use, its calibration on the input and a fit alike.
    """
    from .pretrained import SETTINGS

    return {**DEFAULT_SETTINGS, **SETTINGS.get(name, {})}


#: the smallest value of each integer prediction setting
_SETTING_MINIMUM = {"half_window": 0, "near_window": 0, "wide_window": 0, "side_window": 0, "context_frames": 1,
                    "frames_per_task": 1, "batch_size": 1}


def check_settings(**settings: Any) -> dict:
    """The prediction settings that are not ``None``, checked and converted (``halo``/``tile`` float, frames int).

    Raises
    ------
    ConfigError
        ``halo`` is not a finite number >= 0, ``tile`` not a finite number > 0, or ``half_window``
        (``time_window=``) or ``context_frames`` is not a whole number of frames (at least 0 and 1), or
        ``batch_size`` not a whole number of tasks (at least 1).
    """
    new = {k: v for k, v in settings.items() if v is not None}
    for key, positive, example in (("halo", False, 3), ("tile", True, 8)):
        if key in new:
            v = new[key]
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not (
                    np.isfinite(v) and (v > 0 if positive else v >= 0)):
                raise ConfigError(f"{key}={v!r}; expected a finite number {'> 0' if positive else '>= 0'} of model "
                                  f"units (typical spacings), e.g. {key}={example}.")
            new[key] = float(v)
    for key, low in _SETTING_MINIMUM.items():
        if key in new and not (key == "frames_per_task" and new[key] == "auto"):
            v = new[key]
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
                name = "time_window" if key == "half_window" else key
                also = " or 'auto'" if key == "frames_per_task" else ""
                what = "tasks per forward pass (default 8; lower it to save memory)" if key == "batch_size" else (
                    "frames")
                raise ConfigError(f"{name}={v!r}; expected a whole number of {what} >= {low}{also}.")
            new[key] = int(v)
    return new


#: ``frames_per_task="auto"`` groups this many frames once ``time_window`` is at least as large
AUTO_FRAMES_PER_TASK = 3

#: models whose context encoding is linear in the context (pseudo-tokens): ``"auto"`` does not group
_LINEAR_CONTEXT = frozenset({"te-pt-tnp"})


def frames_per_task(setting: int | str, half_window: int, model: str = "bsa-tnp") -> int:
    """The frames one infill task of ``model`` predicts under ``setting``, ``half_window`` frames each side.

    ``"auto"``: :data:`AUTO_FRAMES_PER_TASK` when ``half_window`` is at least that (each frame
    then keeps ``half_window − 1`` or more frames of context on each side) and the model's
    context stream is quadratic in the context (all but TE-PT-TNP), else 1. For BSA-TNP three
    frames per task cost about half the CPU of one at ±3 frames for about 1 % in RMSE; TE-PT-TNP,
    cheap already, lost 4 % (docs/benchmarks.md, "Frame groups"). Never more than
    ``2·half_window + 1``, so every frame lies in its group's window.
    """
    if setting == "auto":
        setting = AUTO_FRAMES_PER_TASK if half_window >= AUTO_FRAMES_PER_TASK and model not in _LINEAR_CONTEXT else 1
    return max(1, min(int(setting), 2 * int(half_window) + 1))


def with_settings(model: Model, **settings: Any) -> Model:
    """A shallow copy of ``model`` with some prediction settings replaced (``None`` values ignored).

    Raises
    ------
    ConfigError
        A setting out of range (see :func:`check_settings`).
    """
    new = check_settings(**settings)
    return replace(model, settings={**model.settings, **new}) if new else model
