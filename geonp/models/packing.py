"""Packing points into compact tiles, so that tiled attention can skip far tile pairs' bias terms."""

from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["spatial_order", "take_points"]


def spatial_order(x: Tensor, tile: int) -> Tensor:
    """Per-row permutation ``[b, n]`` that packs points ``x [b, n, c]`` into compact tiles of ``tile`` points.

    Sort-Tile-Recursive packing (the R-tree bulk load of Leutenegger et al., 1997): sort along the first
    column and cut into slabs, sort each slab along the next column and cut again, and so on, with slab
    sizes that are multiples of ``tile``. Each run of ``tile`` consecutive sorted points then lies in one
    cell of a ``c``-dimensional partition, so its bounding box is small.
    """
    b, n, c = x.shape
    tiles = max(1, math.ceil(n / tile))
    slabs = math.ceil(tiles ** (1.0 / c))
    order = torch.arange(n, device=x.device).expand(b, n)
    group = torch.zeros(b, n, dtype=torch.long, device=x.device)
    position = torch.arange(n, device=x.device).expand(b, n)
    for level in range(c):
        coord = x[..., level].gather(1, order)
        by_coord = torch.argsort(coord, dim=1, stable=True)
        by_group = torch.argsort(group.gather(1, by_coord), dim=1, stable=True)  # groups are already sorted
        order = order.gather(1, by_coord.gather(1, by_group))
        group = position // (tile * slabs ** (c - 1 - level))
    return order


def take_points(t: Tensor | None, order: Tensor, dim: int) -> Tensor | None:
    """``t`` with its ``dim`` axis (the point axis) permuted per batch row by ``order [b, n]``."""
    if t is None:
        return None
    shape = [1] * t.dim()
    shape[0], shape[dim] = order.shape
    return t.gather(dim, order.view(shape).expand(*t.shape[:dim], order.shape[1], *t.shape[dim + 1:]))
