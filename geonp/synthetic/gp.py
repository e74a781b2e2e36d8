"""GP task generators of the seeds: 1-D GP regression (000 §4.1) and the 2-D GP benchmark (003 §5.1).

All generators follow one protocol (:class:`TaskGenerator`): a frozen dataclass with
``sample(batch_size, generator) -> Batch`` and ``sample_with_params(batch_size, generator) ->
(Batch, params)``. Every task of a batch is drawn jointly at context and target inputs with one
batched float64 Cholesky; the batch is float32 with one number of context points per batch (no
padding). ``yt`` holds noisy targets unless ``noisy_targets=False``; ``params["ft"]`` always holds
the noiseless target values. :class:`SpaceTimeGP` and :class:`SphericalGP` live in their own
modules and are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import ConfigError
from ..models.batch import Batch
from ._common import KernelGPGenerator, Params, TaskGenerator, check_choice, check_positive, check_range
from ._draw import beta, log_uniform, randint, uniform
from .kernels import KERNEL_NAMES, kernel_code
from .spacetime import SpaceTimeGP
from .spherical import SphericalGP

__all__ = ["TaskGenerator", "GP1D", "GP2D", "GP2D_VARIANTS", "SpaceTimeGP", "SphericalGP"]

GP2D_VARIANTS: tuple[str, ...] = ("in-domain", "shifted", "scaled", "scaled-dense", "multires")


@dataclass(frozen=True)
class GP1D(KernelGPGenerator):
    """1-D GP regression with a random kernel per task (000 §4.1, App. F.1).

    Per task: kernel uniform over ``kernels``; lengthscale ℓ log-uniform on ``lengthscale_range``
    (or fixed by ``lengthscale``); ``x_c ~ U(context_range)``, ``x_t ~ U(target_range)``; values
    from the GP plus Gaussian noise of std ``noise_std``. Per batch: ``N_c`` uniform on
    ``num_context`` (inclusive). ``shift`` (the seeds' Δ) is added to every input.

    The seeds' periodic kernel ``exp(-2 sin²(π r / ℓ))`` uses the drawn ℓ as the *period* with a
    fixed ``periodic_lengthscale`` (1); Matérn-2.5 is the standard ``√5 r / ℓ`` form (the printed
    ``/ℓ²`` is a typo).

    Parameters
    ----------
    kernels : tuple of str
        Kernel names drawn uniformly per task (see :data:`~geonp.synthetic.kernels.KERNEL_NAMES`).
    lengthscale_range : tuple of float
        Log-uniform prior of ℓ.
    lengthscale : float, optional
        Fixed ℓ for every task (overrides the prior).
    periodic_lengthscale : float
        Lengthscale inside the periodic kernel (the drawn ℓ is its period).
    variance : float
        Signal variance.
    num_context : tuple of int
        Inclusive range of context points, one count per batch.
    num_targets : int
        Target points per task.
    context_range, target_range : tuple of float
        Input intervals of context and targets (before ``shift``).
    noise_std : float
        Observation noise standard deviation.
    shift : float
        Δ added to every input (test-time translation).
    noisy_targets : bool
        ``yt`` with noise (default) or the noiseless values.
    joint_targets : bool
        ``True`` (default): context and targets drawn jointly. ``False``: each target drawn from its
        exact conditional given the context values, independently of the other targets (a
        Cholesky of size ``N_c`` instead of ``N_c + N_t``; the law of every (context, target) pair
        is exact, so a factorised NP likelihood sees the same training signal).

    Examples
    --------
    >>> import torch
    >>> batch = GP1D(num_context=(10, 10)).sample(4, torch.Generator().manual_seed(0))
    >>> tuple(batch.xc.shape), tuple(batch.yt.shape), batch.xc.dtype
    ((4, 10, 1), (4, 128, 1), torch.float32)
    """

    kernels: tuple[str, ...] = ("se", "periodic", "matern-2.5")
    lengthscale_range: tuple[float, float] = (0.25, 4.0)
    lengthscale: float | None = None
    periodic_lengthscale: float = 1.0
    variance: float = 1.0
    num_context: tuple[int, int] = (1, 64)
    num_targets: int = 128
    context_range: tuple[float, float] = (-2.0, 2.0)
    target_range: tuple[float, float] = (-3.0, 3.0)
    noise_std: float = 0.2
    shift: float = 0.0
    noisy_targets: bool = True
    joint_targets: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.kernels, str) or not isinstance(self.kernels, (tuple, list)) or not self.kernels:
            raise ConfigError(
                f"kernels={self.kernels!r} is not valid; expected a non-empty tuple of kernel names "
                "such as ('se', 'periodic')."
            )
        for k in self.kernels:
            kernel_code(k)
        check_range("lengthscale_range", self.lengthscale_range)
        check_positive("periodic_lengthscale", self.periodic_lengthscale)
        self._check_kernel_fields()
        check_range("context_range", self.context_range, low=float("-inf"))
        check_range("target_range", self.target_range, low=float("-inf"))

    def _draw(self, batch_size: int, generator: torch.Generator) -> tuple[Batch, Params]:
        b = batch_size
        nc = randint(*self.num_context, generator)
        codes = torch.tensor([kernel_code(k) for k in self.kernels], dtype=torch.long)
        kernel = codes[torch.randint(0, len(codes), (b,), generator=generator)]
        ell = self._lengthscales(b, lambda: log_uniform((b,), *self.lengthscale_range, generator))
        is_periodic = kernel == KERNEL_NAMES.index("periodic")
        kern_ell = torch.where(is_periodic, torch.full_like(ell, self.periodic_lengthscale), ell)
        xc = uniform((b, nc, 1), *self.context_range, generator)
        xt = uniform((b, int(self.num_targets), 1), *self.target_range, generator)
        return self._gp_batch(
            xc,
            xt,
            generator,
            kernel=kernel,
            lengthscale=kern_ell,
            period=ell,
            space_dims=1,
            move_inputs=lambda x: x + self.shift,
        )


@dataclass(frozen=True)
class GP2D(KernelGPGenerator):
    """The 2-D GP benchmark of 003 §5.1 with its test variants.

    Per task: SE kernel (configurable) with variance 1, lengthscale ℓ ~ Beta(3, 7) (or fixed by
    ``lengthscale``), inputs uniform on ``domain``², noise std 0.1; per batch ``N_c`` uniform on
    ``num_context`` (inclusive), ``num_targets`` targets. Variants:

    ``"in-domain"``
        Context and targets uniform on ``domain``² = [-2, 2]².
    ``"shifted"``
        The in-domain draw with ``shift_by`` (10) added to both axes: with the same seed, inputs are
        exactly the in-domain inputs + 10 and the values are identical.
    ``"scaled"``
        Domain doubled along each axis ([-4, 4]²), same counts (4× sparser).
    ``"scaled-dense"``
        Domain doubled, context and target counts ×4 (same density as in-domain).
    ``"multires"``
        Half the context (``N_c // 2``) uniform on the centre box [-0.5, 0.5]², the rest on
        [-1.5, 1.5]²; targets uniform on [-1.5, 1.5]², the region the context covers. The seeds do
        not say where the targets lie; this choice reproduces the oracle figures of
        ``docs/baselines.md`` (targets on [-2, 2]² would give an oracle NLL of about +0.39).

    Parameters
    ----------
    variant : str
        One of :data:`GP2D_VARIANTS`.
    kernel : str
        Kernel name (default ``"se"``).
    lengthscale_beta : tuple of float
        Beta prior ``(a, b)`` of ℓ.
    lengthscale : float, optional
        Fixed ℓ for every task (overrides the prior).
    variance : float
        Signal variance.
    noise_std : float
        Observation noise standard deviation (context and, by default, targets).
    num_context : tuple of int
        Inclusive range of context points per batch (before the ×4 of ``"scaled-dense"``).
    num_targets : int
        Targets per task (before the ×4 of ``"scaled-dense"``).
    domain : tuple of float
        Training interval on each axis.
    shift_by : float
        Offset of the ``"shifted"`` variant.
    noisy_targets : bool
        ``yt`` with noise (default) or the noiseless values.
    joint_targets : bool
        ``True`` (default): context and targets drawn jointly. ``False``: each target drawn from its
        exact conditional given the context values, independently of the other targets (a
        Cholesky of size ``N_c`` instead of ``N_c + N_t``; the law of every (context, target) pair
        is exact, so a factorised NP likelihood sees the same training signal).

    Examples
    --------
    >>> import torch
    >>> gen = GP2D(num_context=(16, 16), num_targets=32)
    >>> batch = gen.sample(2, torch.Generator().manual_seed(0))
    >>> tuple(batch.xc.shape), tuple(batch.xt.shape)
    ((2, 16, 2), (2, 32, 2))
    """

    variant: str = "in-domain"
    kernel: str = "se"
    lengthscale_beta: tuple[float, float] = (3.0, 7.0)
    lengthscale: float | None = None
    variance: float = 1.0
    noise_std: float = 0.1
    num_context: tuple[int, int] = (128, 512)
    num_targets: int = 1024
    domain: tuple[float, float] = (-2.0, 2.0)
    shift_by: float = 10.0
    noisy_targets: bool = True
    joint_targets: bool = True

    def __post_init__(self) -> None:
        check_choice("variant", self.variant, GP2D_VARIANTS)
        kernel_code(self.kernel)
        check_range("lengthscale_beta", self.lengthscale_beta)
        self._check_kernel_fields()
        check_range("domain", self.domain, low=float("-inf"))
        if self.domain[0] == self.domain[1]:
            raise ConfigError(f"domain={self.domain!r} is empty; expected low < high, e.g. (-2.0, 2.0).")

    def _draw(self, batch_size: int, generator: torch.Generator) -> tuple[Batch, Params]:
        b = batch_size
        dense = self.variant == "scaled-dense"
        factor = 4 if dense else 1
        # ×4 after the draw: with the same seed a scaled-dense task is the in-domain task's count and
        # lengthscale on a domain twice as wide, at the same density (paired tasks)
        nc = factor * randint(self.num_context[0], self.num_context[1], generator)
        nt = int(self.num_targets) * factor
        ell = self._lengthscales(b, lambda: beta(b, *self.lengthscale_beta, generator))
        centre = 0.5 * (self.domain[0] + self.domain[1])
        half = 0.5 * (self.domain[1] - self.domain[0])
        if self.variant.startswith("scaled"):
            half = 2.0 * half
        if self.variant == "multires":
            n_in = nc // 2
            inner = _box((b, n_in, 2), centre, 0.25 * half, generator)
            outer = _box((b, nc - n_in, 2), centre, 0.75 * half, generator)
            xc = torch.cat([inner, outer], dim=1)
        else:
            xc = _box((b, nc, 2), centre, half, generator)
        # multires targets cover the outer context box [-1.5, 1.5]^2 (matches docs/baselines.md's oracle)
        xt = _box((b, nt, 2), centre, 0.75 * half if self.variant == "multires" else half, generator)
        return self._gp_batch(
            xc,
            xt,
            generator,
            kernel=kernel_code(self.kernel),
            lengthscale=ell,
            space_dims=2,
            move_inputs=(lambda x: x + self.shift_by) if self.variant == "shifted" else None,
        )


def _box(shape: tuple[int, ...], centre: float, half: float, generator: torch.Generator) -> torch.Tensor:
    """Float64 points uniform on ``[centre - half, centre + half)^d``."""
    return uniform(shape, centre - half, centre + half, generator)
