"""Stationary covariance functions on Euclidean or great-circle distance, and a space×time product.

Every kernel here is a function of one distance ``r`` (isotropic): Euclidean distance between
coordinate vectors, or great-circle distance in degrees of arc between ``(lon, lat)`` points in
degrees. Correlations have unit variance; :func:`kernel_matrix` multiplies by the signal variance.

Kernel names (:data:`KERNEL_NAMES`; the integer code of a kernel is its index there, which is what
the generators store in ``params["kernel"]``):

==============  =====================================================================
``se``          ``exp(-r² / (2ℓ²))`` (a.k.a. RBF)
``matern-1.5``  ``(1 + √3 r/ℓ) exp(-√3 r/ℓ)``
``matern-2.5``  ``(1 + √5 r/ℓ + 5r²/(3ℓ²)) exp(-√5 r/ℓ)``
``periodic``    ``exp(-2 sin²(π r / p) / ℓ²)`` with period ``p``
``exponential`` ``exp(-r/ℓ)`` (Matérn-0.5)
==============  =====================================================================

On the sphere only ``exponential`` is guaranteed positive definite with great-circle distance
for every lengthscale; the others are fine on small regions (jitter handles the rest).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..errors import UnknownOptionError
from .sphere import great_circle_distance

__all__ = [
    "KERNEL_NAMES",
    "METRIC_NAMES",
    "kernel_code",
    "metric_code",
    "euclidean_distance",
    "distance",
    "correlation",
    "kernel_matrix",
    "space_time_kernel",
]

KERNEL_NAMES: tuple[str, ...] = ("se", "matern-1.5", "matern-2.5", "periodic", "exponential")
METRIC_NAMES: tuple[str, ...] = ("euclidean", "great-circle")

_KERNEL_ALIASES = {
    "rbf": "se",
    "squared-exponential": "se",
    "matern12": "exponential",
    "matern-0.5": "exponential",
    "exp": "exponential",
    "matern32": "matern-1.5",
    "matern52": "matern-2.5",
    "pe": "periodic",
}
_METRIC_ALIASES = {"geodesic": "great-circle", "haversine": "great-circle", "sphere": "great-circle"}


def kernel_code(name: str) -> int:
    """Integer code (index in :data:`KERNEL_NAMES`) of a kernel name; ``_`` and case are forgiven.

    Examples
    --------
    >>> kernel_code("RBF"), kernel_code("matern_2.5")
    (0, 2)
    """
    key = str(name).strip().lower().replace("_", "-")
    key = _KERNEL_ALIASES.get(key, key)
    if key not in KERNEL_NAMES:
        raise UnknownOptionError(
            f"unknown kernel {name!r}; expected one of {list(KERNEL_NAMES)} "
            f"(aliases: {sorted(_KERNEL_ALIASES)}). Fix the spelling or pick one of these."
        )
    return KERNEL_NAMES.index(key)


def metric_code(name: str) -> int:
    """Integer code (index in :data:`METRIC_NAMES`) of a distance name.

    Examples
    --------
    >>> metric_code("great-circle")
    1
    """
    key = str(name).strip().lower().replace("_", "-")
    key = _METRIC_ALIASES.get(key, key)
    if key not in METRIC_NAMES:
        raise UnknownOptionError(
            f"unknown metric {name!r}; expected one of {list(METRIC_NAMES)}: 'euclidean' for projected or "
            "abstract coordinates, 'great-circle' for (lon, lat) in degrees."
        )
    return METRIC_NAMES.index(key)


def euclidean_distance(x1: Tensor, x2: Tensor) -> Tensor:
    """Pairwise Euclidean distances from exact coordinate differences.

    Parameters
    ----------
    x1 : Tensor
        ``[..., n, d]``.
    x2 : Tensor
        ``[..., m, d]``.

    Returns
    -------
    Tensor
        ``[..., n, m]``.

    Examples
    --------
    >>> import torch
    >>> euclidean_distance(torch.tensor([[0.0, 0.0]]), torch.tensor([[3.0, 4.0]]))
    tensor([[5.]])
    """
    return torch.cdist(x1, x2, compute_mode="donot_use_mm_for_euclid_dist")


def distance(x1: Tensor, x2: Tensor, metric: str = "euclidean") -> Tensor:
    """Pairwise distances under ``metric`` (``"euclidean"`` or ``"great-circle"``, degrees of arc).

    Examples
    --------
    >>> import torch
    >>> distance(torch.tensor([[0.0, 0.0]]), torch.tensor([[90.0, 0.0]]), "great-circle")
    tensor([[90.]])
    """
    if metric_code(metric) == 1:
        return great_circle_distance(x1, x2)
    return euclidean_distance(x1, x2)


def _per_task(value: float | Tensor, like: Tensor) -> Tensor:
    """A scalar, or a ``[b]`` tensor viewed as ``[b, 1, 1]``, in ``like``'s dtype and device."""
    t = torch.as_tensor(value, dtype=like.dtype, device=like.device)
    return t.reshape(-1, 1, 1) if t.ndim == 1 else t


def _correlation_one(code: int, r: Tensor, lengthscale: Tensor, period: Tensor) -> Tensor:
    name = KERNEL_NAMES[code]
    if name == "se":
        return torch.exp(-0.5 * (r / lengthscale).square())
    if name == "exponential":
        return torch.exp(-r / lengthscale)
    if name == "matern-1.5":
        a = (math.sqrt(3.0) / lengthscale) * r
        return (1.0 + a) * torch.exp(-a)
    if name == "matern-2.5":
        a = (math.sqrt(5.0) / lengthscale) * r
        return (1.0 + a + a.square() / 3.0) * torch.exp(-a)
    return torch.exp(-2.0 * torch.sin((math.pi / period) * r).square() / lengthscale.square())


def correlation(
    kernel: str | int | Tensor, r: Tensor, lengthscale: float | Tensor, period: float | Tensor | None = None
) -> Tensor:
    """Unit-variance kernel value as a function of distance.

    Parameters
    ----------
    kernel : str, int or Tensor
        A kernel name, its integer code, or a ``[b]`` long tensor of codes (one kernel per task;
        then ``r`` is ``[b, n, m]``).
    r : Tensor
        Distances, ``[n, m]`` or ``[b, n, m]``.
    lengthscale : float or Tensor
        Scalar or ``[b]`` per task.
    period : float or Tensor, optional
        Period of the ``periodic`` kernel (scalar or ``[b]``); required only by it.

    Returns
    -------
    Tensor
        Same shape as ``r``.

    Examples
    --------
    >>> import torch
    >>> correlation("se", torch.tensor([0.0, 1.0]), 1.0)
    tensor([1.0000, 0.6065])
    >>> correlation("exponential", torch.tensor([2.0]), 2.0)
    tensor([0.3679])
    """
    ell = _per_task(lengthscale, r)
    if isinstance(kernel, Tensor) and kernel.ndim == 1:
        codes = kernel.to(torch.long)
        unique = torch.unique(codes).tolist()
        if len(unique) == 1:
            kernel = int(unique[0])
        else:
            ell_b = ell.expand(codes.shape[0], 1, 1)
            per_b = _per_task(1.0 if period is None else period, r).expand(codes.shape[0], 1, 1)
            out = torch.empty_like(r)
            for code in unique:
                idx = torch.nonzero(codes == code).flatten()
                _check_period(int(code), period)
                out[idx] = _correlation_one(int(code), r[idx], ell_b[idx], per_b[idx])
            return out
    code = kernel_code(kernel) if isinstance(kernel, str) else int(kernel)
    _check_period(code, period)
    per = _per_task(1.0 if period is None else period, r)
    return _correlation_one(code, r, ell, per)


def _check_period(code: int, period: object) -> None:
    if KERNEL_NAMES[code] == "periodic" and period is None:
        raise UnknownOptionError(
            "the 'periodic' kernel needs a period; pass period=... (a float or one value per task)."
        )


def kernel_matrix(
    x1: Tensor,
    x2: Tensor,
    *,
    kernel: str | int | Tensor,
    lengthscale: float | Tensor,
    variance: float | Tensor = 1.0,
    metric: str = "euclidean",
    period: float | Tensor | None = None,
) -> Tensor:
    """Covariance matrix ``variance · k(dist(x1, x2) / ℓ)``.

    Parameters
    ----------
    x1 : Tensor
        ``[..., n, d]`` coordinates (``(lon, lat)`` degrees for ``metric="great-circle"``).
    x2 : Tensor
        ``[..., m, d]``.
    kernel, lengthscale, period
        See :func:`correlation`. Great-circle lengthscales are in degrees of arc.
    variance : float or Tensor
        Signal variance, scalar or ``[b]``.
    metric : str
        ``"euclidean"`` or ``"great-circle"``.

    Returns
    -------
    Tensor
        ``[..., n, m]``.

    Examples
    --------
    >>> import torch
    >>> x = torch.tensor([[0.0], [1.0]], dtype=torch.float64)
    >>> kernel_matrix(x, x, kernel="se", lengthscale=1.0, variance=2.0)
    tensor([[2.0000, 1.2131],
            [1.2131, 2.0000]], dtype=torch.float64)
    """
    r = distance(x1, x2, metric)
    return _per_task(variance, r) * correlation(kernel, r, lengthscale, period)


def space_time_kernel(
    x1: Tensor,
    x2: Tensor,
    *,
    space_dims: int,
    space_kernel: str | int | Tensor,
    space_lengthscale: float | Tensor,
    time_kernel: str | int | Tensor = "se",
    time_lengthscale: float | Tensor = 1.0,
    variance: float | Tensor = 1.0,
    metric: str = "euclidean",
    period: float | Tensor | None = None,
) -> Tensor:
    """Separable kernel ``variance · k_space(|s - s'|) · k_time(|t - t'|)``.

    Columns ``[:space_dims]`` of the inputs are space, the rest are time. With no time column
    this is :func:`kernel_matrix`.

    Examples
    --------
    >>> import torch
    >>> x = torch.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    >>> k = space_time_kernel(x, x, space_dims=2, space_kernel="se", space_lengthscale=1.0, time_lengthscale=1.0)
    >>> round(float(k[0, 1]), 4)
    0.6065
    """
    s1, s2 = x1[..., :space_dims], x2[..., :space_dims]
    k = kernel_matrix(
        s1, s2, kernel=space_kernel, lengthscale=space_lengthscale, variance=variance, metric=metric, period=period
    )
    if x1.shape[-1] > space_dims:
        rt = euclidean_distance(x1[..., space_dims:], x2[..., space_dims:])
        k = k * correlation(time_kernel, rt, time_lengthscale)
    return k
