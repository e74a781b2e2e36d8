"""Scores of probabilistic predictions: NLL, RMSE, MAE, interval coverage and Gaussian CRPS.

Every function averages over all (unmasked) points of all tasks and returns a 0-d tensor; a
``mask`` (``True`` = a real point, shape ``[b, n]`` or that of ``y``) drops padding. Predictions
are :class:`torch.distributions.Normal` objects (or their mean, for RMSE and MAE); NLL and CRPS
are in the units of ``y`` (lower is better), coverage is a fraction.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.distributions import Normal

__all__ = ["gaussian_nll", "rmse", "mae", "coverage", "crps_gaussian", "gaussian_scores"]


def _mean(values: Tensor, mask: Tensor | None) -> Tensor:
    if mask is None:
        return values.mean()
    m = mask.to(torch.bool)
    while m.ndim < values.ndim:
        m = m.unsqueeze(-1)
    return values[m.expand_as(values)].mean()


def gaussian_nll(dist: Normal, y: Tensor, mask: Tensor | None = None) -> Tensor:
    """Mean negative log-likelihood per point, ``-log N(y | μ, σ²)``.

    Examples
    --------
    >>> import torch
    >>> from torch.distributions import Normal
    >>> round(float(gaussian_nll(Normal(torch.zeros(1), torch.ones(1)), torch.zeros(1))), 4)
    0.9189
    """
    return _mean(-dist.log_prob(y.to(dist.loc.dtype)), mask)


def rmse(mean: Tensor, y: Tensor, mask: Tensor | None = None) -> Tensor:
    """Root mean squared error.

    Examples
    --------
    >>> import torch
    >>> rmse(torch.tensor([0.0, 0.0]), torch.tensor([3.0, 4.0]))
    tensor(3.5355)
    """
    return _mean((mean - y.to(mean.dtype)).square(), mask).sqrt()


def mae(mean: Tensor, y: Tensor, mask: Tensor | None = None) -> Tensor:
    """Mean absolute error.

    Examples
    --------
    >>> import torch
    >>> mae(torch.tensor([0.0, 0.0]), torch.tensor([3.0, -4.0]))
    tensor(3.5000)
    """
    return _mean((mean - y.to(mean.dtype)).abs(), mask)


def coverage(dist: Normal, y: Tensor, level: float = 0.95, mask: Tensor | None = None) -> Tensor:
    """Fraction of points inside the central ``level`` predictive interval ``μ ± z σ``.

    A calibrated model scores ``level``.

    Examples
    --------
    >>> import torch
    >>> from torch.distributions import Normal
    >>> d = Normal(torch.zeros(3), torch.ones(3))
    >>> coverage(d, torch.tensor([0.0, 1.9, 2.0]))
    tensor(0.6667)
    """
    z = torch.special.ndtri(torch.tensor(0.5 + 0.5 * level, dtype=torch.float64)).item()
    inside = (y.to(dist.loc.dtype) - dist.loc).abs() <= z * dist.scale
    return _mean(inside.to(dist.loc.dtype), mask)


def crps_gaussian(dist: Normal, y: Tensor, mask: Tensor | None = None) -> Tensor:
    """Mean continuous ranked probability score of a Gaussian, in closed form.

    ``CRPS = σ [z (2Φ(z) - 1) + 2φ(z) - 1/√π]`` with ``z = (y - μ) / σ`` (Gneiting & Raftery 2007).

    Examples
    --------
    >>> import torch
    >>> from torch.distributions import Normal
    >>> round(float(crps_gaussian(Normal(torch.zeros(1), torch.ones(1)), torch.zeros(1))), 4)
    0.2337
    """
    z = (y.to(dist.loc.dtype) - dist.loc) / dist.scale
    pdf = torch.exp(-0.5 * z.square()) / math.sqrt(2.0 * math.pi)
    cdf = torch.special.ndtr(z)
    crps = dist.scale * (z * (2.0 * cdf - 1.0) + 2.0 * pdf - 1.0 / math.sqrt(math.pi))
    return _mean(crps, mask)


def gaussian_scores(dist: Normal, y: Tensor, mask: Tensor | None = None, level: float = 0.95) -> dict[str, float]:
    """All scores of a Gaussian prediction as floats.

    Returns
    -------
    dict
        ``nll`` (mean per point), ``rmse``, ``mae``, ``coverage`` (of the central ``level``
        interval) and ``crps``.

    Examples
    --------
    >>> import torch
    >>> from torch.distributions import Normal
    >>> from geonp.metrics import gaussian_scores  # also geonp.synthetic.scores
    >>> s = gaussian_scores(Normal(torch.zeros(2), torch.ones(2)), torch.zeros(2))
    >>> sorted(s), s["rmse"]
    (['coverage', 'crps', 'mae', 'nll', 'rmse'], 0.0)
    """
    return {
        "nll": float(gaussian_nll(dist, y, mask)),
        "rmse": float(rmse(dist.loc, y, mask)),
        "mae": float(mae(dist.loc, y, mask)),
        "coverage": float(coverage(dist, y, level, mask)),
        "crps": float(crps_gaussian(dist, y, mask)),
    }
