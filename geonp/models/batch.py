"""The tensor batch every model takes, with up-front validation.

Shape letters (see ``docs/conventions.md``): ``b`` batch, ``nc`` context points,
``nt`` target points, ``dx = space_dims + time_dims`` coordinate columns (space
first, then time), ``dz`` covariates, ``dy`` output variables.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
from torch import Tensor

from ..errors import EmptyContextError, InvalidBatchError, NonFiniteError

#: largest magnitude of a coordinate, value or covariate the models accept: beyond it float32 sums of
#: squares (layer norms, distances) overflow and the outputs are no longer finite
MAX_ABS = 1e18

__all__ = ["Batch"]


@dataclass(frozen=True)
class Batch:
    """A padded batch of neural-process tasks.

    Parameters
    ----------
    xc : Tensor
        ``[b, nc, dx]`` context coordinates, space columns then time columns.
    yc : Tensor
        ``[b, nc, dy]`` context values.
    xt : Tensor
        ``[b, nt, dx]`` target coordinates.
    yt : Tensor, optional
        ``[b, nt, dy]`` target values (training and scoring only).
    zc, zt : Tensor, optional
        ``[b, nc, dz]`` and ``[b, nt, dz]`` covariates (e.g. elevation).
    mc, mt : Tensor, optional
        ``[b, nc]`` and ``[b, nt]`` boolean padding masks, ``True`` = a real point.
        ``None`` means every point is real.

    Examples
    --------
    >>> import torch
    >>> batch = Batch(xc=torch.zeros(2, 5, 2), yc=torch.zeros(2, 5, 1), xt=torch.zeros(2, 7, 2))
    >>> batch.num_targets
    7
    """

    xc: Tensor
    yc: Tensor
    xt: Tensor
    yt: Tensor | None = None
    zc: Tensor | None = None
    zt: Tensor | None = None
    mc: Tensor | None = None
    mt: Tensor | None = None

    @property
    def batch_size(self) -> int:
        """Number of tasks ``b``."""
        return self.xc.shape[0]

    @property
    def num_targets(self) -> int:
        """Padded number of targets ``nt``."""
        return self.xt.shape[1]

    def to(self, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> Batch:
        """Move every tensor to ``device``; cast floating tensors to ``dtype``."""

        def move(t: Tensor | None) -> Tensor | None:
            if t is None:
                return None
            if dtype is not None and t.is_floating_point():
                return t.to(device=device, dtype=dtype)
            return t.to(device=device)

        return Batch(**{f.name: move(getattr(self, f.name)) for f in fields(self)})

    def zero_padding(self) -> Batch:
        """The same batch with every padded entry set to 0 (padding may hold NaN)."""

        def clean(t: Tensor | None, mask: Tensor | None) -> Tensor | None:
            if t is None or mask is None:
                return t
            return torch.where(mask[..., None], t, torch.zeros((), dtype=t.dtype, device=t.device))

        return replace(
            self,
            xc=clean(self.xc, self.mc), yc=clean(self.yc, self.mc), zc=clean(self.zc, self.mc),
            xt=clean(self.xt, self.mt), yt=clean(self.yt, self.mt), zt=clean(self.zt, self.mt),
        )

    def select_targets(self, start: int, stop: int) -> Batch:
        """The same context with targets ``start:stop`` only (targets are independent)."""
        sl = slice(start, stop)
        return replace(
            self,
            xt=self.xt[:, sl],
            yt=None if self.yt is None else self.yt[:, sl],
            zt=None if self.zt is None else self.zt[:, sl],
            mt=None if self.mt is None else self.mt[:, sl],
        )

    def validate(self, *, x_dims: int, y_dims: int, z_dims: int = 0, check_finite: bool = True) -> None:
        """Check ranks, feature counts, batch sizes, masks and values.

        Raises
        ------
        InvalidBatchError
            Wrong rank, feature count, batch size, dtype or mask shape, or tensors on different devices.
        EmptyContextError
            A task has no (unmasked) context point.
        NonFiniteError
            NaN or infinite values in coordinates, values or covariates.
        """
        _check(self.xc, "xc", 3, x_dims, "coordinate columns (space dims + time dims)")
        _check(self.yc, "yc", 3, y_dims, "output variables (y_dims)")
        _check(self.xt, "xt", 3, x_dims, "coordinate columns (space dims + time dims)")
        if self.yt is not None:
            _check(self.yt, "yt", 3, y_dims, "output variables (y_dims)")
        if z_dims > 0:
            for name in ("zc", "zt"):
                t = getattr(self, name)
                if t is None:
                    raise InvalidBatchError(
                        f"{name} is missing but the model was built with covariate_dims={z_dims}; "
                        f"pass {name} of shape [b, n, {z_dims}] or build the model with covariate_dims=0."
                    )
                _check(t, name, 3, z_dims, "covariates (covariate_dims)")
        else:
            for name in ("zc", "zt"):
                if getattr(self, name) is not None:
                    raise InvalidBatchError(
                        f"{name} was given but the model was built with covariate_dims=0; "
                        f"rebuild it with covariate_dims={getattr(self, name).shape[-1]} or drop {name}."
                    )
        b, nc, nt = self.xc.shape[0], self.xc.shape[1], self.xt.shape[1]
        shapes = {"xc": (b, nc), "yc": (b, nc), "zc": (b, nc), "xt": (b, nt), "yt": (b, nt), "zt": (b, nt)}
        for name, expected in shapes.items():
            t = getattr(self, name)
            if t is not None and tuple(t.shape[:2]) != expected:
                raise InvalidBatchError(
                    f"{name} has leading shape {tuple(t.shape[:2])} but xc/xt imply (batch, points) = {expected}; "
                    "every tensor of a batch must share the batch size, and context (target) tensors the "
                    "number of context (target) points."
                )
        for name, n in (("mc", nc), ("mt", nt)):
            m = getattr(self, name)
            if m is not None and (m.dtype != torch.bool or tuple(m.shape) != (b, n)):
                raise InvalidBatchError(
                    f"{name} has shape {tuple(m.shape)} and dtype {m.dtype}; expected a bool mask of shape "
                    f"{(b, n)} (True = real point). Build it with `tensor.bool()`."
                )
        devices = {name: getattr(self, name).device for name in ("xc", "yc", "xt", "yt", "zc", "zt", "mc", "mt")
                   if getattr(self, name) is not None}
        if len(set(devices.values())) > 1:
            found = ", ".join(f"{name} on {d}" for name, d in devices.items())
            raise InvalidBatchError(f"the batch's tensors are on different devices ({found}); move them to the "
                                    "model's device together with batch.to(device).")
        if b == 0:
            raise InvalidBatchError("the batch has no tasks (batch size 0); pass at least one task.")
        if nt == 0:
            raise InvalidBatchError("the batch has no target points (nt = 0): there is nothing to predict; "
                                    "pass xt of shape [b, nt, dx] with nt >= 1.")
        if nc == 0:
            raise EmptyContextError("the batch has no context points (nc = 0); a neural process needs at least one.")
        if self.mc is not None:
            counts = self.mc.sum(1)
            if bool((counts == 0).any()):
                empty = torch.nonzero(counts == 0).flatten().tolist()
                raise EmptyContextError(
                    f"tasks {empty[:10]} have no unmasked context point; "
                    "drop them or give each at least one context point."
                )
        if check_finite:
            for name in ("xc", "yc", "xt", "yt", "zc", "zt"):
                t = getattr(self, name)
                if t is None:
                    continue
                mask = self.mc if name.endswith("c") else self.mt
                # NaN, infinite, or so large that float32 squares overflow (the limit in t's dtype stays finite)
                bad = ~(t.abs() <= min(MAX_ABS, torch.finfo(t.dtype).max))
                if mask is not None:
                    bad = bad & mask[..., None]
                if bool(bad.any()):
                    huge = int((bad & torch.isfinite(t)).sum())
                    if huge == 0:
                        raise NonFiniteError(
                            f"{name} contains {int(bad.sum())} NaN or infinite values; expected finite values. Drop "
                            "missing points (or mark them as padding with the mask) before calling the model.")
                    raise NonFiniteError(
                        f"{name} contains {huge} values beyond ±{MAX_ABS:.0e} (largest {float(t.abs().max()):.7g}); "
                        "the models compute in float32 and expect standardised values of order 1. Subtract the "
                        "mean and divide by the spread (or rescale the coordinates) before calling the model.")


def _check(t: Tensor, name: str, ndim: int, last: int, what: str) -> None:
    if not isinstance(t, Tensor):
        raise InvalidBatchError(
            f"{name} is a {type(t).__name__}; expected a torch.Tensor. Convert it with torch.as_tensor."
        )
    if t.ndim != ndim:
        raise InvalidBatchError(
            f"{name} has {t.ndim} dimensions (shape {tuple(t.shape)}); expected {ndim}: [batch, points, features]. "
            "Add a batch dimension with `.unsqueeze(0)` for a single task."
        )
    if not t.is_floating_point():
        raise InvalidBatchError(f"{name} has dtype {t.dtype}; expected a floating dtype. Use `.float()`.")
    if t.shape[-1] != last:
        raise InvalidBatchError(
            f"{name} has {t.shape[-1]} features in its last dimension; the model expects {last} {what}."
        )
