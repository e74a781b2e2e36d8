"""Helpers shared by several test modules (import as ``from _helpers import ...``)."""

import torch

from geonp.models import Batch


def random_batch(*, b=2, nc, nt, dx, dz=0, dy=1, dtype=torch.float64, offset=0.0, seed=1):
    """Build a random, unpadded batch from its own seeded generator.

    Parameters
    ----------
    b, nc, nt : int
        Tasks, context points and target points.
    dx, dz, dy : int
        Input, covariate (``0``: no ``zc``/``zt``) and output dimensions.
    dtype : torch.dtype
        Dtype of every tensor.
    offset : float
        Added to every input; inputs are otherwise uniform on ``[-2, 2)``.
    seed : int
        Seed of the generator, so equal arguments give equal batches.

    Returns
    -------
    Batch
        ``xc``, ``xt`` uniform and ``yc``, ``yt`` (and ``zc``, ``zt``) standard normal.
    """
    g = torch.Generator().manual_seed(seed)
    return Batch(
        xc=torch.rand(b, nc, dx, generator=g, dtype=dtype) * 4 - 2 + offset,
        yc=torch.randn(b, nc, dy, generator=g, dtype=dtype),
        xt=torch.rand(b, nt, dx, generator=g, dtype=dtype) * 4 - 2 + offset,
        yt=torch.randn(b, nt, dy, generator=g, dtype=dtype),
        zc=torch.randn(b, nc, dz, generator=g, dtype=dtype) if dz else None,
        zt=torch.randn(b, nt, dz, generator=g, dtype=dtype) if dz else None,
    )


def shift_batch(batch, by):
    """Return ``batch`` with ``by`` added to every context and target input, without ``yt``.

    Parameters
    ----------
    batch : Batch
        The batch to move.
    by : float
        Offset added to ``xc`` and ``xt``.

    Returns
    -------
    Batch
        ``xc + by``, ``yc``, ``xt + by``, ``zc`` and ``zt``.
    """
    return Batch(xc=batch.xc + by, yc=batch.yc, xt=batch.xt + by, zc=batch.zc, zt=batch.zt)
