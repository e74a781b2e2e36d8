"""How far each target is from the nearest observation: distance features for the target tokens.

A softmax over biased logits is blind to the *absolute* size of the bias: adding the same
amount to every key's logit changes nothing. A target deep inside a data gap, or many steps
past the last observed frame, therefore attends much like a target next to the data, and the
model cannot tell it should be less certain. BSA-TNP with ``proximity_features=True`` (a geonp
addition, not in the seeds) gives each target token these distances as extra inputs:

* space only: ``log1p(d_s)``, ``d_s`` the distance to the nearest context point;
* time only: ``log1p(d_t)``, ``d_t`` the time to the nearest context point;
* space and time: ``log1p(d_t)``, ``log1p(d_s)`` over all context points, and ``log1p(d_s⁰)`` over the
  context points nearest in time (the target's own frame for infill, the last frame for a forecast).

Context tokens get zeros: they are observations. The features depend on coordinates only through
differences (great-circle distances for ``metric="geodesic"``) and minima over the context, so the
model stays translation (rotation) and permutation invariant.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .distances import great_circle_sqdist, pairwise_sqdist

__all__ = ["num_proximity_features", "proximity_features"]

#: query-context pairs per slice when measuring distances: a few ``[b, slice, nc]`` float tensors of
#: 8 MB each, whatever the number of context points (1M targets × 10K context stays in tens of MB)
PAIRS = 2**21
#: context times within this of the nearest one count as "nearest in time" (time units)
TIME_TOL = 1e-4


def num_proximity_features(space_dims: int, time_dims: int) -> int:
    """Number of features :func:`proximity_features` returns."""
    if space_dims and time_dims:
        return 3
    return 1 if (space_dims or time_dims) else 0


def proximity_features(
    xt: Tensor, xc: Tensor, mc: Tensor | None, space_dims: int, time_dims: int, metric: str = "euclidean",
    chunk: int | None = None,
) -> Tensor:
    """Distance features ``[b, nt, k]`` of targets ``xt [b, nt, x]`` to the context ``xc [b, nc, x]``.

    Parameters
    ----------
    xt, xc : Tensor
        Coordinates, space columns then time columns.
    mc : Tensor or None
        ``[b, nc]`` context mask (True = real point); padded points are ignored.
    space_dims, time_dims : int
        Number of space and time columns.
    metric : {"euclidean", "geodesic"}
        Space metric; ``"geodesic"`` reads the space columns as longitude, latitude in degrees.
    chunk : int, optional
        Targets per slice. By default as many as keep a slice's ``b × chunk × nc`` distances
        within :data:`PAIRS`, so that memory is bounded whatever the sizes.

    Returns
    -------
    Tensor
        ``log1p`` of the distances listed in the module docstring, in the coordinates' units.
    """
    k = num_proximity_features(space_dims, time_dims)
    b, nt, _ = xt.shape
    if k == 0 or nt == 0:
        return xt.new_zeros(b, nt, k)
    if chunk is None:
        chunk = max(1, PAIRS // max(1, b * xc.shape[1]))
    s_cols, t_cols = slice(0, space_dims), slice(space_dims, space_dims + time_dims)
    sqdist = great_circle_sqdist if metric == "geodesic" else pairwise_sqdist
    invalid = None if mc is None else ~mc[:, None, :]
    out = xt.new_empty(b, nt, k)
    for s in range(0, nt, chunk):
        q = xt[:, s : s + chunk]
        col = 0
        if time_dims:
            dt2 = pairwise_sqdist(q[..., t_cols], xc[..., t_cols])
            if invalid is not None:
                dt2.masked_fill_(invalid, float("inf"))
            dt2_min = dt2.amin(-1, keepdim=True)
            out[:, s : s + chunk, col : col + 1] = dt2_min
            col += 1
        if space_dims:
            ds2 = sqdist(q[..., s_cols], xc[..., s_cols])
            if invalid is not None:
                ds2.masked_fill_(invalid, float("inf"))
            out[:, s : s + chunk, col : col + 1] = ds2.amin(-1, keepdim=True)
            if time_dims:  # nearest in time: |dt| <= |dt|_min + TIME_TOL, compared squared (no sqrt per pair)
                far = dt2 > (dt2_min.sqrt() + TIME_TOL).square()
                out[:, s : s + chunk, col + 1 : col + 2] = ds2.masked_fill_(far, float("inf")).amin(-1, keepdim=True)
    return torch.log1p(out.clamp_min_(0).sqrt_())
