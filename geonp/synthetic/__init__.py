"""Synthetic task generators (GP benchmarks of the seeds, space-time pretraining) and the exact-GP oracle.

>>> import torch
>>> from geonp.synthetic import GP2D, gp_posterior, scores
>>> batch, params = GP2D(num_context=(64, 64), num_targets=64).sample_with_params(4, torch.Generator().manual_seed(0))
>>> sorted(scores(gp_posterior(batch, params, noisy_targets=True), batch.yt))
['coverage', 'crps', 'mae', 'nll', 'rmse']
"""

from __future__ import annotations

from ._common import TaskGenerator
from .gp import GP1D, GP2D, GP2D_VARIANTS
from .kernels import KERNEL_NAMES, METRIC_NAMES, correlation, kernel_matrix, space_time_kernel
from .oracle import gp_posterior, scores
from .spacetime import SPACETIME_MODES, SpaceTimeGP
from .spherical import SPHERICAL_ROTATIONS, SphericalGP

__all__ = [
    "TaskGenerator",
    "GP1D",
    "GP2D",
    "GP2D_VARIANTS",
    "SpaceTimeGP",
    "SPACETIME_MODES",
    "SphericalGP",
    "SPHERICAL_ROTATIONS",
    "KERNEL_NAMES",
    "METRIC_NAMES",
    "correlation",
    "kernel_matrix",
    "space_time_kernel",
    "gp_posterior",
    "scores",
]
