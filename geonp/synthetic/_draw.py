"""Seeded random draws shared by the generators: priors, counts, and batched Gaussian samples.

Every draw takes the caller's ``torch.Generator``; distributions torch cannot seed (Beta,
Gamma) use a NumPy generator whose seed is itself drawn from the torch generator, so one torch
seed fixes everything.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from ..errors import ConfigError

__all__ = [
    "numpy_rng",
    "randint",
    "uniform",
    "log_uniform",
    "beta",
    "inverse_gamma",
    "cholesky_with_jitter",
    "sample_gaussian",
]

F64 = torch.float64


def numpy_rng(generator: torch.Generator) -> np.random.Generator:
    """A NumPy generator seeded by one draw from ``generator``.

    Examples
    --------
    >>> import torch
    >>> a = numpy_rng(torch.Generator().manual_seed(0)).integers(1000)
    >>> int(a) == int(numpy_rng(torch.Generator().manual_seed(0)).integers(1000))
    True
    """
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    return np.random.default_rng(seed)


def randint(low: int, high: int, generator: torch.Generator) -> int:
    """One integer uniform on ``[low, high]`` (both inclusive).

    Examples
    --------
    >>> import torch
    >>> randint(3, 3, torch.Generator().manual_seed(0))
    3
    """
    return int(torch.randint(int(low), int(high) + 1, (1,), generator=generator))


def uniform(shape: tuple[int, ...], low: float | Tensor, high: float | Tensor, generator: torch.Generator) -> Tensor:
    """Float64 draws uniform on ``[low, high)``.

    Examples
    --------
    >>> import torch
    >>> x = uniform((1000,), -2.0, 2.0, torch.Generator().manual_seed(0))
    >>> bool(x.min() >= -2.0) and bool(x.max() < 2.0)
    True
    """
    return low + (high - low) * torch.rand(shape, generator=generator, dtype=F64)


def log_uniform(shape: tuple[int, ...], low: float, high: float, generator: torch.Generator) -> Tensor:
    """Float64 draws whose log is uniform on ``[log low, log high)``.

    Examples
    --------
    >>> import torch
    >>> x = log_uniform((1000,), 0.25, 4.0, torch.Generator().manual_seed(0))
    >>> bool(x.min() >= 0.25) and bool(x.max() < 4.0)
    True
    """
    return torch.exp(uniform(shape, float(np.log(low)), float(np.log(high)), generator))


def beta(n: int, a: float, b: float, generator: torch.Generator) -> Tensor:
    """``n`` float64 draws from Beta(a, b).

    Examples
    --------
    >>> import torch
    >>> x = beta(2000, 3.0, 7.0, torch.Generator().manual_seed(0))
    >>> abs(float(x.mean()) - 0.3) < 0.02
    True
    """
    return torch.from_numpy(numpy_rng(generator).beta(a, b, size=n)).to(F64)


def inverse_gamma(n: int, shape: float, scale: float, generator: torch.Generator) -> Tensor:
    """``n`` float64 draws from InverseGamma(shape, scale) (density ∝ x^(-shape-1) exp(-scale/x)).

    Its mean is ``scale / (shape - 1)`` for ``shape > 1``.

    Examples
    --------
    >>> import torch
    >>> x = inverse_gamma(20000, 3.0, 30.0, torch.Generator().manual_seed(0))
    >>> abs(float(x.mean()) - 15.0) < 0.5
    True
    """
    gamma = numpy_rng(generator).gamma(shape, 1.0 / scale, size=n)
    return torch.from_numpy(1.0 / gamma).to(F64)


def cholesky_with_jitter(
    cov: Tensor, *, jitter: float = 1e-6, max_tries: int = 5, what: str = "covariance"
) -> tuple[Tensor, Tensor]:
    """Batched Cholesky factor, adding ``jitter × mean diagonal`` and growing it ×10 on failure.

    Parameters
    ----------
    cov : Tensor
        ``[b, n, n]`` symmetric matrices (float64). Modified in place: the jitter is added to
        its diagonal.
    jitter : float
        First relative jitter (0 allowed: try without, then 1e-10, ×10 ...).
    max_tries : int
        Factorisation attempts per task before giving up.
    what : str
        Name of the matrix, for the error message.

    Returns
    -------
    tuple of Tensor
        The ``[b, n, n]`` lower factors and the ``[b]`` relative jitter each task needed.

    Raises
    ------
    ConfigError
        A matrix is not positive definite even with the largest jitter.

    Examples
    --------
    >>> import torch
    >>> low, used = cholesky_with_jitter(torch.ones(1, 2, 2, dtype=torch.float64))
    >>> float(used[0]) >= 1e-6
    True
    """
    b = cov.shape[0]
    diag = cov.diagonal(dim1=-2, dim2=-1)
    scale = diag.mean(-1).clamp_min(1e-300)
    used = torch.zeros(b, dtype=cov.dtype, device=cov.device)
    step = jitter if jitter > 0 else 1e-10
    if jitter > 0:
        diag.add_((jitter * scale)[:, None])
        used += jitter
    low, info = torch.linalg.cholesky_ex(cov)
    tries = 1
    while bool((info != 0).any()):
        bad = torch.nonzero(info != 0).flatten()
        if tries >= max_tries:
            raise ConfigError(
                f"the {what} of tasks {bad.tolist()[:10]} is not positive definite even with a relative jitter "
                f"of {float(used[bad].max()):.1e}; expected a valid kernel. Use a kernel that is positive definite "
                "for this distance (e.g. 'exponential' on great-circle distance), shorter lengthscales, or fewer "
                "coincident points."
            )
        sub = cov[bad]
        sub.diagonal(dim1=-2, dim2=-1).add_((step * scale[bad])[:, None])
        used[bad] += step
        sub_low, sub_info = torch.linalg.cholesky_ex(sub)
        cov[bad] = sub
        low[bad] = sub_low
        info[bad] = sub_info
        step *= 10.0
        tries += 1
    return low, used


def sample_gaussian(
    cov: Tensor | Callable[[slice], Tensor],
    generator: torch.Generator,
    *,
    shape: tuple[int, int] | None = None,
    jitter: float = 1e-6,
    max_elements: int = 2**25,
) -> Tensor:
    """Zero-mean Gaussian draws ``L ε`` for a batch of covariance matrices (float64).

    The standard normals are drawn for the whole batch first, so the result does not depend on
    ``max_elements``, which only splits the work into sub-batches of tasks to bound memory.

    Parameters
    ----------
    cov : Tensor or callable
        ``[b, n, n]`` float64 covariances (modified in place: jitter on the diagonal), or a function
        ``cov(tasks: slice) -> [len(tasks), n, n]`` that builds them for a sub-batch of tasks.
    generator : torch.Generator
        Source of the standard normals.
    shape : tuple of int, optional
        ``(b, n)``; required when ``cov`` is a function.
    jitter : float
        Relative jitter of :func:`cholesky_with_jitter`.
    max_elements : int
        Largest number of matrix entries built and factorised at once.

    Returns
    -------
    Tensor
        ``[b, n]`` draws.

    Examples
    --------
    >>> import torch
    >>> cov = torch.eye(3, dtype=torch.float64).expand(2, 3, 3).clone()
    >>> tuple(sample_gaussian(cov, torch.Generator().manual_seed(0)).shape)
    (2, 3)
    """
    if isinstance(cov, Tensor):
        matrices = cov
        b, n, _ = matrices.shape

        def cov(tasks: slice) -> Tensor:
            return matrices[tasks]

    elif shape is None:
        raise ConfigError("sample_gaussian needs shape=(b, n) when cov is a function; pass the batch size and size.")
    else:
        b, n = shape
    eps = torch.randn((b, n, 1), generator=generator, dtype=F64)
    out = torch.empty((b, n), dtype=F64)
    step = max(1, max_elements // max(n * n, 1))
    for start in range(0, b, step):
        tasks = slice(start, start + step)
        low, _ = cholesky_with_jitter(cov(tasks), jitter=jitter)
        out[tasks] = (low @ eps[tasks]).squeeze(-1)
    return out
