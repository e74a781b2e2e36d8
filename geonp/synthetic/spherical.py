"""GPs on the sphere in great-circle distance, with the rotated test sets of 003 App. B."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch

from ..errors import ConfigError, UnknownOptionError
from ..models.batch import Batch
from ._common import KernelGPGenerator, Params, check_range
from ._draw import inverse_gamma, randint, uniform
from .kernels import kernel_code
from .sphere import ROTATIONS, euler_rotation_matrix, rotate_lonlat

__all__ = ["SphericalGP", "SPHERICAL_ROTATIONS"]

SPHERICAL_ROTATIONS: tuple[str | None, ...] = (None, *ROTATIONS)


@dataclass(frozen=True)
class SphericalGP(KernelGPGenerator):
    """GP on (lon, lat) with a kernel of great-circle distance (003 App. B).

    Per task: lon and lat uniform on ``domain`` (degrees, default [-10°, 10°] each); exponential
    kernel of the great-circle distance in **degrees of arc**, variance 1, lengthscale
    ℓ ~ InverseGamma(3, 30) **in degrees** (mean 15°), noise std 0.1; ``N_c`` uniform on
    ``num_context`` per batch, ``num_targets`` targets.

    ``rotation`` rotates every point after drawing: ``"60-30-0"`` and ``"60-30-20"`` are the
    intrinsic "yxz" Euler rotations (-60°, 30°, 0°) and (-60°, 30°, 20°) (``R = R_y R_x R_z``
    acting on Earth-centred unit vectors, as ``scipy``'s ``from_euler("YXZ", ...)``), which move
    the patch to about 60°N. Rotations preserve great-circle distances, so with the same seed the
    values are identical to the unrotated batch and the exact-GP oracle scores the same. ``xc``
    and ``xt`` columns stay ``(lon, lat)`` in degrees, longitude wrapped to ``[-180, 180)``.

    Parameters
    ----------
    rotation : str, optional
        ``None``, ``"60-30-0"`` or ``"60-30-20"``.
    kernel : str
        Kernel of the great-circle distance (only ``"exponential"`` is positive definite for every
        lengthscale on the sphere).
    lengthscale_invgamma : tuple of float
        InverseGamma prior ``(shape, scale)`` of ℓ in degrees.
    lengthscale : float, optional
        Fixed ℓ in degrees for every task (overrides the prior).
    variance, noise_std : float
        Signal variance and observation noise std.
    num_context : tuple of int
        Inclusive range of context points per batch.
    num_targets : int
        Targets per task.
    domain : tuple of float
        Interval in degrees of both longitude and latitude before rotation.
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
    >>> gen = SphericalGP(rotation="60-30-20", num_context=(8, 8), num_targets=16)
    >>> batch = gen.sample(2, torch.Generator().manual_seed(0))
    >>> tuple(batch.xc.shape), bool(batch.xc[..., 1].min() > 30)
    ((2, 8, 2), True)
    """

    rotation: str | None = None
    kernel: str = "exponential"
    lengthscale_invgamma: tuple[float, float] = (3.0, 30.0)
    lengthscale: float | None = None
    variance: float = 1.0
    noise_std: float = 0.1
    num_context: tuple[int, int] = (128, 512)
    num_targets: int = 1024
    domain: tuple[float, float] = (-10.0, 10.0)
    noisy_targets: bool = True
    joint_targets: bool = True

    def __post_init__(self) -> None:
        if self.rotation is not None and self.rotation not in ROTATIONS:
            raise UnknownOptionError(
                f"rotation={self.rotation!r} is not a known option; expected one of {list(SPHERICAL_ROTATIONS)} "
                "(None = no rotation; the names are the seeds' Euler angles in degrees)."
            )
        kernel_code(self.kernel)
        check_range("lengthscale_invgamma", self.lengthscale_invgamma)
        self._check_kernel_fields()
        check_range("domain", self.domain, low=-90.0, strict=False)
        if self.domain[1] > 90.0 or self.domain[0] == self.domain[1]:
            raise ConfigError(
                f"domain={self.domain!r} is not valid; expected -90 <= low < high <= 90 degrees, e.g. (-10.0, 10.0)."
            )

    def _draw(self, batch_size: int, generator: torch.Generator) -> tuple[Batch, Params]:
        b = batch_size
        nc = randint(*self.num_context, generator)
        nt = int(self.num_targets)
        ell = self._lengthscales(b, lambda: inverse_gamma(b, *self.lengthscale_invgamma, generator))
        xc = uniform((b, nc, 2), *self.domain, generator)
        xt = uniform((b, nt, 2), *self.domain, generator)
        move_inputs = None
        if self.rotation is not None:
            move_inputs = partial(rotate_lonlat, rotation=euler_rotation_matrix(ROTATIONS[self.rotation], "yxz"))
        return self._gp_batch(
            xc,
            xt,
            generator,
            kernel=kernel_code(self.kernel),
            lengthscale=ell,
            metric=1,
            space_dims=2,
            move_inputs=move_inputs,
        )
