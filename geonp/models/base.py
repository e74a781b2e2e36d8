"""The neural-process interface every model implements."""

from __future__ import annotations

import numbers
from dataclasses import MISSING, asdict, dataclass, fields, replace

import torch
from torch import Tensor, nn

from ..errors import ConfigError, InvalidBatchError
from .batch import Batch

__all__ = ["ModelConfig", "NeuralProcess", "masked_nll", "centre"]


@dataclass(frozen=True)
class ModelConfig:
    """Fields every model config has (subclasses add architecture fields)."""

    space_dims: int = 2  # coordinate columns that are space (first in xc/xt)
    time_dims: int = 0  # coordinate columns that are time (after space)
    covariate_dims: int = 0  # columns of zc/zt (elevation, hour of day, ...)
    y_dims: int = 1  # output variables
    min_std: float = 1e-3  # floor of the predictive standard deviation
    max_targets: int = 65536  # targets decoded per slice at inference (memory knob only)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
            expected = {"int": numbers.Integral, "float": numbers.Real}.get(kind)
            if expected is not None and (not isinstance(value, expected) or isinstance(value, bool)):
                example = f" such as {f.name}={f.default!r}" if f.default is not MISSING else ""
                raise ConfigError(
                    f"{f.name} must be {'an integer' if kind == 'int' else 'a number'}, got {value!r} "
                    f"({type(value).__name__}); pass a {'whole number' if kind == 'int' else 'number'}{example}."
                )
            if isinstance(value, int) and not isinstance(value, bool) and value < 0:
                raise ConfigError(f"{f.name} must be >= 0, got {value}.")
        if self.space_dims + self.time_dims == 0:
            raise ConfigError("space_dims + time_dims must be >= 1: a model needs coordinates to predict at.")
        if self.y_dims < 1:
            raise ConfigError(f"y_dims must be >= 1, got {self.y_dims}.")
        if not self.min_std > 0:
            raise ConfigError(f"min_std must be > 0, got {self.min_std}.")
        if self.max_targets < 1:
            raise ConfigError(f"max_targets must be >= 1 (targets decoded per slice), got {self.max_targets}.")

    def _check_architecture(self, counts: tuple[str, ...], widths: tuple[str, ...]) -> None:
        """Each of ``counts`` >= 1, each of ``widths`` a tuple of positive layer widths, a known ``backend``."""
        from .attention import BACKENDS

        if self.backend not in BACKENDS:
            raise ConfigError(f"backend must be one of {BACKENDS}, got {self.backend!r}.")
        for name in counts:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}.")
        for name in widths:
            w = getattr(self, name)
            if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in w):
                raise ConfigError(f"{name} must be a tuple of positive layer widths, got {w!r}; e.g. {name}=(64, 64).")

    @property
    def x_dims(self) -> int:
        """Coordinate columns ``dx = space_dims + time_dims``."""
        return self.space_dims + self.time_dims

    def to_dict(self) -> dict:
        """Plain-data form (saved in checkpoints)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        """Inverse of :meth:`to_dict`; rejects unknown keys, listing the valid ones."""
        names = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise ConfigError(f"unknown {cls.__name__} fields {unknown}; valid fields are {sorted(names)}.")
        kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**kwargs)


def masked_nll(dist: torch.distributions.Normal, y: Tensor, mask: Tensor | None) -> Tensor:
    """Mean negative log-likelihood per target point and variable, ignoring padding."""
    nll = -dist.log_prob(y)  # [b, nt, dy]
    if mask is None:
        return nll.mean()
    keep = mask[..., None].expand_as(nll)
    return torch.where(keep, nll, 0.0).sum() / keep.sum().clamp_min(1)


class NeuralProcess(nn.Module):
    """Base class: ``forward(batch) -> Normal`` with ``loc``/``scale`` ``[b, nt, y_dims]``.

    Subclasses implement :meth:`encode` (context → state) and :meth:`decode`
    (state, a slice of targets → Normal).  Targets are decoded in slices of
    ``config.max_targets``; every model here predicts each target independently
    given the context, so slicing never changes the result.
    """

    name: str = ""
    config: ModelConfig

    def forward(self, batch: Batch) -> torch.distributions.Normal:
        """Predictive distribution at the targets of ``batch``."""
        cfg = self.config
        batch.validate(x_dims=cfg.x_dims, y_dims=cfg.y_dims, z_dims=cfg.covariate_dims)
        dtype = next(self.parameters()).dtype
        batch = self.prepare(batch.zero_padding()).to(dtype=dtype)
        state = self.encode(batch)
        step = cfg.max_targets
        if batch.num_targets <= step or torch.is_grad_enabled():
            return self.decode(state, batch)
        parts = [self.decode(state, batch.select_targets(s, s + step)) for s in range(0, batch.num_targets, step)]
        return torch.distributions.Normal(
            torch.cat([p.loc for p in parts], 1), torch.cat([p.scale for p in parts], 1), validate_args=False
        )

    def loss(self, batch: Batch) -> Tensor:
        """Mean negative log-likelihood per target value (the training objective, 000 eq. 1).

        The Gaussian NLL of each real target point and output variable, averaged over all of them:
        the sum over the batch's tasks, real (unpadded) target points and ``y_dims`` variables, divided
        by the number of such values (tasks × real targets × ``y_dims``). With ``y_dims == 1`` this is the
        mean NLL per target point; with more variables it is ``1 / y_dims`` of the per-point NLL summed
        over variables.
        """
        if batch.yt is None:
            raise InvalidBatchError("the batch has no target values yt; the loss needs them. Pass yt [b, nt, y_dims].")
        if batch.mt is not None and batch.mt.dtype == torch.bool and not bool(batch.mt.any()):
            raise InvalidBatchError("every target point of the batch is masked (mt all False): the loss has "
                                    "nothing to average. Mark real targets True in mt, or skip this batch.")
        yt = batch.zero_padding().yt.to(next(self.parameters()).dtype)
        return masked_nll(self(batch), yt, batch.mt)

    def prepare(self, batch: Batch) -> Batch:
        """Hook run before encoding (e.g. centre coordinates); identity by default."""
        return batch

    def encode(self, batch: Batch):
        raise NotImplementedError

    def decode(self, state, batch: Batch) -> torch.distributions.Normal:
        raise NotImplementedError

    def num_parameters(self) -> int:
        """Number of trainable parameters."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


def centre(batch: Batch, columns: list[int]) -> Batch:
    """Subtract each task's mean context coordinate on ``columns`` (in float64).

    Exact for translation-invariant models; it only keeps float32 precise far
    from the origin.
    """
    if not columns:
        return batch
    xc, xt = batch.xc.double().clone(), batch.xt.double().clone()  # never modify the caller's tensors
    sel = xc[..., columns]
    if batch.mc is None:
        ref = sel.mean(1, keepdim=True)
    else:  # padded points may hold anything, NaN included: select, never multiply by 0
        w = batch.mc[..., None]
        ref = torch.where(w, sel, 0.0).sum(1, keepdim=True) / w.sum(1, keepdim=True)
    xc[..., columns] -= ref
    xt[..., columns] -= ref
    return replace(batch, xc=xc, xt=xt)
