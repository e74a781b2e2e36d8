"""Model names, presets and :func:`build_model`."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError, UnknownOptionError
from .base import ModelConfig, NeuralProcess

__all__ = ["ModelSpec", "register", "build_model", "model_names", "get_spec"]


@dataclass(frozen=True)
class ModelSpec:
    """How to build one named model: its class, config class, fixed flags and presets."""

    name: str
    model_cls: type[NeuralProcess]
    config_cls: type[ModelConfig]
    presets: dict[str, dict[str, Any]]
    flags: dict[str, Any]  # config fields that define this model (not overridable)


_REGISTRY: dict[str, ModelSpec] = {}


def register(spec: ModelSpec) -> None:
    """Add a model to the registry (used by the model modules at import)."""
    _REGISTRY[spec.name] = spec


def model_names() -> tuple[str, ...]:
    """Names accepted by :func:`build_model`."""
    return tuple(_REGISTRY)


def get_spec(name: str) -> ModelSpec:
    """The :class:`ModelSpec` of ``name`` (``_`` and case are forgiven)."""
    key = str(name).lower().replace("_", "-")
    if key not in _REGISTRY:
        raise UnknownOptionError(f"unknown model {name!r}; expected one of {model_names()}.")
    return _REGISTRY[key]


def make_config(name: str, preset: str = "small", **overrides: Any) -> ModelConfig:
    """The config of model ``name`` at ``preset`` with ``overrides`` applied."""
    spec = get_spec(name)
    if preset not in spec.presets:
        raise UnknownOptionError(f"unknown preset {preset!r} for {spec.name}; expected one of {tuple(spec.presets)}.")
    valid = {f.name for f in fields(spec.config_cls)}
    unknown = sorted(set(overrides) - valid)
    if unknown:
        raise ConfigError(f"unknown option(s) {unknown} for {spec.name}; valid options are {sorted(valid)}.")
    fixed = sorted(set(overrides) & set(spec.flags))
    if fixed and any(overrides[k] != spec.flags[k] for k in fixed):
        raise ConfigError(f"{fixed} define {spec.name} and cannot be overridden; pick another model name instead.")
    return spec.config_cls(**{**spec.presets[preset], **overrides, **spec.flags})


def build_model(
    name: str,
    preset: str = "small",
    *,
    space_dims: int = 2,
    time_dims: int = 0,
    covariate_dims: int = 0,
    y_dims: int = 1,
    seed: int | None = None,
    **overrides: Any,
) -> NeuralProcess:
    """Build a model by name.

    Parameters
    ----------
    name : str
        One of :func:`model_names`: ``"bsa-tnp"``, ``"te-pt-tnp"``, ``"te-tnp"``, ``"tnp-d"``, ``"tnp-kr"``.
    preset : {"small", "paper"}
        ``"paper"`` is the seeds' configuration; ``"small"`` a CPU-sized one.
    space_dims, time_dims, covariate_dims, y_dims : int
        Columns of space and time in ``xc``/``xt``, of covariates ``zc``/``zt``, of values ``yc``.
    seed : int, optional
        Seed of the initial weights (the same seed gives the same weights; torch's global random state is
        left as it was). ``None`` draws them from the global state. :class:`~geonp.train.TrainConfig`'s
        ``seed`` seeds the training batches, not these.
    **overrides
        Any other config field (see the model's config class).

    Returns
    -------
    NeuralProcess
        A freshly initialised model; ``model(batch)`` returns a ``torch.distributions.Normal``.

    Examples
    --------
    >>> model = build_model("bsa-tnp", preset="small", space_dims=2, time_dims=1)
    >>> model.config.num_layers
    4
    """
    spec = get_spec(name)
    config = make_config(
        spec.name, preset, space_dims=space_dims, time_dims=time_dims, covariate_dims=covariate_dims, y_dims=y_dims,
        **overrides,
    )
    if seed is None:
        return spec.model_cls(config)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not -2**63 <= int(seed) < 2**64:
        raise ConfigError(f"seed must be an integer in [-2**63, 2**64) or None, got {seed!r}.")
    seed = int(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return spec.model_cls(config)


def model_from_config(name: str, config: dict[str, Any]) -> NeuralProcess:
    """Rebuild model ``name`` from a config dict (as stored in checkpoints)."""
    spec = get_spec(name)
    return spec.model_cls(spec.config_cls.from_dict(config))
