"""Pairwise squared distances between query and key points, Euclidean or great-circle.

The biases (:mod:`geonp.models.bias`) and the proximity features (:mod:`geonp.models.proximity`) use
them; both compute from exact coordinate differences, which keeps full precision far from the origin.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["pairwise_sqdist", "great_circle_sqdist"]


def pairwise_sqdist(xq: Tensor, xk: Tensor) -> Tensor:
    """Squared Euclidean distances ``[b, nq, nk]`` from exact coordinate differences.

    Differences (not ``|x|² + |y|² - 2x·y``) keep full precision far from the origin.
    """
    out = None
    for c in range(xq.shape[-1]):
        diff = xq[:, :, None, c] - xk[:, None, :, c]
        out = diff * diff if out is None else torch.addcmul(out, diff, diff)
    return out


def unit_vectors(lonlat: Tensor) -> Tensor:
    """``[..., 2]`` longitude, latitude in degrees → ``[..., 3]`` unit vectors."""
    lon, lat = torch.deg2rad(lonlat[..., 0]), torch.deg2rad(lonlat[..., 1])
    return torch.stack((torch.cos(lat) * torch.cos(lon), torch.cos(lat) * torch.sin(lon), torch.sin(lat)), dim=-1)


def great_circle_sqdist(xq: Tensor, xk: Tensor) -> Tensor:
    """Squared great-circle distances ``[b, nq, nk]`` in degrees of arc.

    ``xq [b, nq, 2]`` and ``xk [b, nk, 2]`` hold longitude and latitude in degrees.
    The arc is ``2 asin(chord / 2)`` with the chord from exact 3-D differences.
    """
    chord2 = pairwise_sqdist(unit_vectors(xq), unit_vectors(xk))
    arc = 2.0 * torch.asin(torch.clamp(chord2.sqrt() * 0.5, max=1.0))
    return torch.rad2deg(arc).square()
