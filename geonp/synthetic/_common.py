"""The generator protocol, option checks, and the step every GP generator shares.

A generator is a frozen dataclass with ``sample`` and ``sample_with_params``; :class:`GPGenerator`
supplies ``sample`` and the argument checks, subclasses implement ``_draw``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from ..errors import ConfigError, UnknownOptionError
from ..models.batch import Batch
from ._draw import cholesky_with_jitter, sample_gaussian
from .kernels import METRIC_NAMES, space_time_kernel

__all__ = [
    "TaskGenerator",
    "GPGenerator",
    "KernelGPGenerator",
    "check_choice",
    "check_range",
    "check_positive",
    "kernel_params",
    "params_covariance",
    "select_tasks",
    "draw_gp_values",
    "to_batch",
]

Params = dict[str, Tensor]


@runtime_checkable
class TaskGenerator(Protocol):
    """What every synthetic task generator provides."""

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        """A batch of ``batch_size`` tasks drawn with ``generator``."""
        ...

    def sample_with_params(self, batch_size: int, generator: torch.Generator) -> tuple[Batch, Params]:
        """The batch and the per-task parameters that generated it."""
        ...


class GPGenerator:
    """Mixin giving frozen-dataclass generators ``sample`` and ``sample_with_params``."""

    def _draw(self, batch_size: int, generator: torch.Generator) -> tuple[Batch, Params]:  # pragma: no cover
        raise NotImplementedError

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        """Draw ``batch_size`` tasks (float32 :class:`~geonp.models.batch.Batch`, no padding)."""
        return self.sample_with_params(batch_size, generator)[0]

    def sample_with_params(self, batch_size: int, generator: torch.Generator) -> tuple[Batch, Params]:
        """Draw ``batch_size`` tasks and return them with their generating parameters.

        The parameters are float64 (codes: long) tensors with one row per task, including the
        noiseless values ``"fc"`` and ``"ft"`` of shapes ``[b, nc, 1]`` and ``[b, nt, 1]``;
        :func:`geonp.synthetic.oracle.gp_posterior` takes them as they are.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size is {batch_size!r}; expected a positive int such as 8.")
        if not isinstance(generator, torch.Generator):
            raise ConfigError(
                f"generator is a {type(generator).__name__}; expected a torch.Generator, "
                "e.g. torch.Generator().manual_seed(0)."
            )
        return self._draw(batch_size, generator)


class KernelGPGenerator(GPGenerator):
    """:class:`GPGenerator` of one-kernel GP tasks (:class:`~geonp.synthetic.gp.GP1D`, ``GP2D``, ``SphericalGP``).

    Subclasses are frozen dataclasses with the fields ``lengthscale`` (``None``: drawn from a prior
    per task), ``variance``, ``noise_std``, ``num_context``, ``num_targets``, ``noisy_targets`` and
    ``joint_targets``, which their ``__post_init__`` checks with :meth:`_check_kernel_fields`. Their
    ``_draw`` picks the inputs and the kernel, taking ℓ from :meth:`_lengthscales`, and ends with
    :meth:`_gp_batch`, which draws the values and assembles the batch.
    """

    lengthscale: float | None
    variance: float
    noise_std: float
    num_context: tuple[int, int]
    num_targets: int
    noisy_targets: bool
    joint_targets: bool

    def _check_kernel_fields(self) -> None:
        """Raise :class:`ConfigError` unless the fields every one-kernel generator has are valid."""
        check_positive("lengthscale", self.lengthscale, allow_none=True)
        check_positive("variance", self.variance)
        check_positive("noise_std", self.noise_std, allow_zero=True)
        check_range("num_context", self.num_context, low=1, strict=False, integer=True)
        check_positive("num_targets", self.num_targets, integer=True)

    def _lengthscales(self, batch_size: int, prior: Callable[[], Tensor]) -> Tensor:
        """``[b]`` float64 lengthscales: the fixed ``lengthscale``, or ``prior()`` when it is ``None``.

        ``prior`` is only called (and the generator only advanced) when no lengthscale is fixed.
        """
        if self.lengthscale is None:
            return prior()
        return torch.full((batch_size,), float(self.lengthscale), dtype=torch.float64)

    def _gp_batch(
        self,
        xc: Tensor,
        xt: Tensor,
        generator: torch.Generator,
        *,
        kernel: Tensor | int,
        lengthscale: Tensor,
        space_dims: int,
        metric: int = 0,
        period: Tensor | None = None,
        move_inputs: Callable[[Tensor], Tensor] | None = None,
    ) -> tuple[Batch, Params]:
        """Draw GP values at ``xc`` and ``xt`` and return the batch with its parameters.

        Parameters
        ----------
        xc, xt : Tensor
            ``[b, nc, d]`` and ``[b, nt, d]`` float64 inputs in the frame the kernel expects.
        generator : torch.Generator
            Source of randomness.
        kernel, lengthscale, space_dims, metric, period
            Per-task kernel settings (see :func:`kernel_params`); ``variance`` and ``noise_std``
            come from the generator's fields.
        move_inputs : callable, optional
            Applied to ``xc`` and ``xt`` after the values are drawn (a shift or a rotation that
            leaves the kernel unchanged), so the values are those of the unmoved inputs.

        Returns
        -------
        tuple
            The float32 :class:`~geonp.models.batch.Batch` and the float64 parameters, including
            the noiseless values ``"fc"`` and ``"ft"`` (see :func:`to_batch`).
        """
        params = kernel_params(
            xc.shape[0],
            kernel=kernel,
            lengthscale=lengthscale,
            period=period,
            variance=self.variance,
            noise_std=self.noise_std,
            metric=metric,
            space_dims=space_dims,
        )
        fc, ft, yc, yt = draw_gp_values(xc, xt, params, generator, joint_targets=self.joint_targets)
        if move_inputs is not None:
            xc, xt = move_inputs(xc), move_inputs(xt)
        return to_batch(xc, yc, xt, yt, params, fc=fc, ft=ft, noisy_targets=self.noisy_targets)


def check_choice(name: str, value: object, choices: Sequence[object]) -> None:
    """Raise :class:`UnknownOptionError` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise UnknownOptionError(f"{name}={value!r} is not a known option; expected one of {list(choices)}.")


def check_range(name: str, value: object, *, low: float = 0.0, strict: bool = True, integer: bool = False) -> None:
    """Raise :class:`ConfigError` unless ``value`` is an ordered pair ``(lo, hi)`` above ``low``."""
    ok = isinstance(value, (tuple, list)) and len(value) == 2
    if ok:
        lo, hi = value
        kind = int if integer else (int, float)
        ok = all(isinstance(v, kind) and not isinstance(v, bool) for v in (lo, hi)) and lo <= hi
        ok = ok and (lo > low if strict else lo >= low)
    if not ok:
        bound = f"> {low}" if strict else f">= {low}"
        what = "ints" if integer else "numbers"
        raise ConfigError(
            f"{name}={value!r} is not a valid range; expected a pair (low, high) of {what} with "
            f"low <= high and low {bound}, e.g. {name}={(1, 64) if integer else (0.25, 4.0)}."
        )


def check_positive(
    name: str, value: object, *, allow_zero: bool = False, allow_none: bool = False, integer: bool = False
) -> None:
    """Raise :class:`ConfigError` unless ``value`` is a positive (or zero) number (an int if ``integer``)."""
    if value is None and allow_none:
        return
    kind = int if integer else (int, float)
    ok = isinstance(value, kind) and not isinstance(value, bool)
    ok = ok and (value >= 0 if allow_zero else value > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        what = "an int" if integer else "a number"
        raise ConfigError(f"{name}={value!r} is not valid; expected {what} {bound}.")


def kernel_params(
    batch_size: int,
    *,
    kernel: Tensor | int,
    lengthscale: Tensor | float,
    variance: Tensor | float,
    noise_std: Tensor | float,
    metric: int = 0,
    space_dims: int,
    period: Tensor | float | None = None,
) -> Params:
    """The per-task kernel parameters every generator returns (``[b]`` tensors).

    Keys: ``kernel`` and ``metric`` (long codes into :data:`~geonp.synthetic.kernels.KERNEL_NAMES`
    and :data:`~geonp.synthetic.kernels.METRIC_NAMES`), ``space_dims`` (long), ``lengthscale``,
    ``period`` (equal to ``lengthscale`` where the kernel has none), ``variance`` and ``noise_std``
    (float64).
    """

    def f64(v: Tensor | float) -> Tensor:
        return torch.as_tensor(v, dtype=torch.float64).expand(batch_size).clone()

    def i64(v: Tensor | int) -> Tensor:
        return torch.as_tensor(v, dtype=torch.long).expand(batch_size).clone()

    ell = f64(lengthscale)
    return {
        "kernel": i64(kernel),
        "metric": i64(metric),
        "space_dims": i64(space_dims),
        "lengthscale": ell,
        "period": ell.clone() if period is None else f64(period),
        "variance": f64(variance),
        "noise_std": f64(noise_std),
    }


def _single(params: Params, key: str) -> int:
    values = torch.unique(params[key]).tolist()
    if len(values) != 1:
        raise ConfigError(
            f"params[{key!r}] differs between tasks ({values}); expected one value per batch. "
            "Split the batch so that each call holds one value."
        )
    return int(values[0])


def params_covariance(params: Params, x1: Tensor, x2: Tensor) -> Tensor:
    """The covariance ``k(x1, x2)`` of each task as its ``params`` describe it (no noise).

    Uses ``kernel``, ``lengthscale``, ``period``, ``variance``, ``metric`` and ``space_dims``;
    with ``time_lengthscale`` (and ``time_kernel``) the separable space×time kernel; with
    ``elevation_lengthscale`` the last input column is an elevation and the kernel is multiplied
    by :func:`elevation_correlation`. Generators sample with it and the oracle conditions with it,
    so both always agree.

    Parameters
    ----------
    params : dict of Tensor
        Per-task parameters (``[b]`` tensors).
    x1, x2 : Tensor
        ``[b, n, dx]`` and ``[b, m, dx]`` float64 inputs.

    Returns
    -------
    Tensor
        ``[b, n, m]``.
    """
    metric = METRIC_NAMES[_single(params, "metric")]
    space_dims = _single(params, "space_dims")
    factor = 1.0
    if "elevation_lengthscale" in params:
        factor = elevation_correlation(x1[..., -1], x2[..., -1], params["elevation_lengthscale"])
        x1, x2 = x1[..., :-1], x2[..., :-1]
    return factor * space_time_kernel(
        x1,
        x2,
        space_dims=space_dims,
        space_kernel=params["kernel"],
        space_lengthscale=params["lengthscale"],
        time_kernel=params.get("time_kernel", "se"),
        time_lengthscale=params.get("time_lengthscale", 1.0),
        variance=params["variance"],
        metric=metric,
        period=params.get("period"),
    )


def elevation_correlation(e1: Tensor, e2: Tensor, lengthscale: Tensor) -> Tensor:
    """``exp(-(e1 - e2)² / (2 ℓ²))`` per task: correlation falling with elevation difference.

    ``e1`` ``[b, n]``, ``e2`` ``[b, m]``, ``lengthscale`` ``[b]`` (``inf``: elevation plays no part).
    """
    ell = lengthscale.to(e1.dtype).reshape(-1, 1, 1)
    return torch.exp(-0.5 * ((e1[:, :, None] - e2[:, None, :]) / ell).square())


def select_tasks(params: Params, tasks: slice) -> Params:
    """The per-task parameters of a sub-batch."""
    return {k: v[tasks] for k, v in params.items()}


def draw_gp_values(
    xc: Tensor,
    xt: Tensor,
    params: Params,
    generator: torch.Generator,
    *,
    joint_targets: bool = True,
    max_elements: int = 2**25,
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Draw noiseless GP values at context and targets, then add observation noise.

    Parameters
    ----------
    xc, xt : Tensor
        ``[b, nc, d]`` and ``[b, nt, d]`` float64 inputs (in the frame the kernel expects).
    params : dict of Tensor
        Per-task kernel parameters (see :func:`kernel_params`); ``noise_std`` gives the noise.
    generator : torch.Generator
        Source of randomness.
    joint_targets : bool
        ``True``: one joint draw at context and targets (one Cholesky of size ``nc + nt``).
        ``False``: the context jointly, then each target from its exact conditional given the
        context values, independently of the other targets (Cholesky of size ``nc`` only). Every
        (context, target) pair has the exact GP law; only correlations between targets are lost.
    max_elements : int
        Bound on the matrix entries built at once (tasks are processed in sub-batches).

    Returns
    -------
    tuple of Tensor
        ``fc, ft, yc, yt``, float64, shapes ``[b, nc, 1]`` and ``[b, nt, 1]``.
    """
    nc = xc.shape[1]
    if joint_targets:
        x = torch.cat([xc, xt], dim=1)

        def cov(tasks: slice) -> Tensor:
            return params_covariance(select_tasks(params, tasks), x[tasks], x[tasks])

        f = sample_gaussian(cov, generator, shape=tuple(x.shape[:2]), max_elements=max_elements).unsqueeze(-1)
        fc, ft = f[:, :nc], f[:, nc:]
    else:
        fc, ft = _draw_conditional(xc, xt, params, generator, max_elements)
    noise_std = params["noise_std"].reshape(-1, 1, 1)
    yc = fc + noise_std * torch.randn(fc.shape, generator=generator, dtype=torch.float64)
    yt = ft + noise_std * torch.randn(ft.shape, generator=generator, dtype=torch.float64)
    return fc, ft, yc, yt


def _draw_conditional(
    xc: Tensor, xt: Tensor, params: Params, generator: torch.Generator, max_elements: int
) -> tuple[Tensor, Tensor]:
    """Context values jointly (``L ε_c``), each target from its conditional given them."""
    b, nc, nt = xc.shape[0], xc.shape[1], xt.shape[1]
    eps_c = torch.randn((b, nc, 1), generator=generator, dtype=torch.float64)
    eps_t = torch.randn((b, nt, 1), generator=generator, dtype=torch.float64)
    fc = torch.empty((b, nc, 1), dtype=torch.float64)
    ft = torch.empty((b, nt, 1), dtype=torch.float64)
    step = max(1, max_elements // max(nc * (nc + nt), 1))
    for start in range(0, b, step):
        tasks = slice(start, start + step)
        p = select_tasks(params, tasks)
        low, _ = cholesky_with_jitter(params_covariance(p, xc[tasks], xc[tasks]))
        fc[tasks] = low @ eps_c[tasks]
        v = torch.linalg.solve_triangular(low, params_covariance(p, xc[tasks], xt[tasks]), upper=False)
        mean = v.transpose(-1, -2) @ eps_c[tasks]  # K_tc K_cc^-1 f_c with f_c = L eps_c
        var = (p["variance"].reshape(-1, 1) - v.square().sum(-2)).clamp_min(0.0)
        ft[tasks] = mean + var.sqrt().unsqueeze(-1) * eps_t[tasks]
    return fc, ft


def to_batch(
    xc: Tensor, yc: Tensor, xt: Tensor, yt: Tensor, params: Params, *, fc: Tensor, ft: Tensor, noisy_targets: bool,
    zc: Tensor | None = None, zt: Tensor | None = None,
) -> tuple[Batch, Params]:
    """Assemble a float32 :class:`Batch` and attach ``fc``/``ft`` to ``params``.

    ``yt`` is noisy or not; the covariates ``zc``/``zt`` are included if given.
    """
    params = dict(params)
    params["fc"] = fc
    params["ft"] = ft
    batch = Batch(
        xc=xc.to(torch.float32),
        yc=yc.to(torch.float32),
        xt=xt.to(torch.float32),
        yt=(yt if noisy_targets else ft).to(torch.float32),
        zc=None if zc is None else zc.to(torch.float32),
        zt=None if zt is None else zt.to(torch.float32),
    )
    return batch, params
