"""The exact-GP oracle: the predictive of the true generating GP, the best any model can score.

:func:`gp_posterior` conditions the GP with the task's true kernel, lengthscale(s), variance and
noise (the ``params`` of ``sample_with_params``) on the context, in float64, batched.
:func:`scores` re-exports :func:`geonp.metrics.gaussian_scores`.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.distributions import Normal

from ..errors import ConfigError
from ..metrics import gaussian_scores
from ..models.batch import Batch
from ._common import params_covariance
from ._draw import cholesky_with_jitter

__all__ = ["gp_posterior", "scores"]

scores = gaussian_scores

_REQUIRED = ("kernel", "lengthscale", "variance", "noise_std", "metric", "space_dims")


def gp_posterior(
    batch: Batch, params: dict[str, Tensor], *, noisy_targets: bool, max_elements: int = 2**24
) -> Normal:
    """Exact GP predictive at the targets given the context, with the true hyperparameters.

    Parameters
    ----------
    batch : Batch
        Tasks with ``dy = 1``; ``mc`` (context padding) is honoured.
    params : dict of Tensor
        Per-task parameters from ``sample_with_params``: ``kernel``, ``lengthscale``, ``period``,
        ``variance``, ``noise_std``, ``metric``, ``space_dims``; for space-time tasks also
        ``time_kernel`` and ``time_lengthscale``, and with terrain ``elevation_lengthscale`` (the
        elevation is the first column of ``zc``/``zt``); for standardised tasks ``y_shift`` and
        ``y_scale`` (the predictive is returned in the batch's standardised units).
    noisy_targets : bool
        ``True`` adds the noise variance (predictive of noisy observations, to score ``yt``);
        ``False`` gives the predictive of the noiseless values (to score ``params["ft"]``).
    max_elements : int
        Largest ``b × targets × context`` block built at once (targets are processed in chunks).

    Returns
    -------
    torch.distributions.Normal
        float64, ``loc`` and ``scale`` of shape ``[b, nt, 1]``.

    Raises
    ------
    ConfigError
        ``params`` lacks a key, or mixes metrics or space dims within the batch.

    Examples
    --------
    >>> import torch
    >>> from geonp.synthetic import GP2D
    >>> gen = GP2D(num_context=(64, 64), num_targets=32)
    >>> batch, params = gen.sample_with_params(2, torch.Generator().manual_seed(0))
    >>> dist = gp_posterior(batch, params, noisy_targets=True)
    >>> tuple(dist.loc.shape), dist.loc.dtype
    ((2, 32, 1), torch.float64)
    """
    missing = [k for k in _REQUIRED if k not in params]
    if missing:
        raise ConfigError(
            f"params lacks {missing}; expected the dict returned by a generator's sample_with_params "
            f"(keys {list(_REQUIRED)} and more)."
        )
    f64 = torch.float64
    xc, xt = batch.xc.to(f64), batch.xt.to(f64)
    if "elevation_lengthscale" in params:  # the elevation (first covariate) is the kernel's last input column
        xc = torch.cat([xc, batch.zc.to(f64)[..., :1]], dim=-1)
        xt = torch.cat([xt, batch.zt.to(f64)[..., :1]], dim=-1)
    b = xc.shape[0]
    shift = params.get("y_shift", torch.zeros(b, dtype=f64)).to(f64).reshape(b, 1)
    scale = params.get("y_scale", torch.ones(b, dtype=f64)).to(f64).reshape(b, 1)
    y = batch.yc.to(f64)[..., 0] * scale + shift
    noise_var = params["noise_std"].to(f64).square().reshape(b, 1)

    def cov(x1: Tensor, x2: Tensor) -> Tensor:
        return params_covariance(params, x1, x2)


    k_cc = cov(xc, xc)
    k_cc.diagonal(dim1=-2, dim2=-1).add_(noise_var)
    mc = None
    if batch.mc is not None:
        mc = batch.mc.to(f64)
        k_cc = k_cc * mc[:, :, None] * mc[:, None, :]
        k_cc.diagonal(dim1=-2, dim2=-1).add_(1.0 - mc)
        y = y * mc
    low, _ = cholesky_with_jitter(k_cc, jitter=0.0, what="context covariance")
    alpha = torch.cholesky_solve(y.unsqueeze(-1), low)

    nt, nc = xt.shape[1], xc.shape[1]
    chunk = max(1, max_elements // max(b * nc, 1))
    prior_var = params["variance"].to(f64).reshape(b, 1)
    means, variances = [], []
    for start in range(0, nt, chunk):
        k_tc = cov(xt[:, start : start + chunk], xc)
        if mc is not None:
            k_tc = k_tc * mc[:, None, :]
        means.append((k_tc @ alpha).squeeze(-1))
        v = torch.linalg.solve_triangular(low, k_tc.transpose(-1, -2), upper=False)
        variances.append(prior_var - v.square().sum(-2))
    mean = torch.cat(means, dim=1)
    var = torch.cat(variances, dim=1).clamp_min(1e-12)
    if noisy_targets:
        var = var + noise_var
    loc = (mean - shift) / scale
    std = var.sqrt() / scale
    return Normal(loc.unsqueeze(-1), std.unsqueeze(-1))
