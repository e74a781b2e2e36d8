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

from .bias import great_circle_sqdist, pairwise_sqdist

__all__ = ["num_proximity_features", "proximity_features"]

#: targets per slice when measuring distances, bounding memory to ``b × chunk × nc`` floats
CHUNK = 2048
#: context times within this of the nearest one count as "nearest in time" (time units)
TIME_TOL = 1e-4


def num_proximity_features(space_dims: int, time_dims: int) -> int:
    """Number of features :func:`proximity_features` returns."""
    if space_dims and time_dims:
        return 3
    return 1 if (space_dims or time_dims) else 0


def proximity_features(
    xt: Tensor, xc: Tensor, mc: Tensor | None, space_dims: int, time_dims: int, metric: str = "euclidean",
    chunk: int = CHUNK,
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
    chunk : int
        Targets per slice (memory bound).

    Returns
    -------
    Tensor
        ``log1p`` of the distances listed in the module docstring, in the coordinates' units.
    """
    k = num_proximity_features(space_dims, time_dims)
    b, nt, _ = xt.shape
    if k == 0 or nt == 0:
        return xt.new_zeros(b, nt, k)
    s_cols, t_cols = slice(0, space_dims), slice(space_dims, space_dims + time_dims)
    sqdist = great_circle_sqdist if metric == "geodesic" else pairwise_sqdist
    invalid = None if mc is None else ~mc[:, None, :]
    out = []
    for s in range(0, nt, chunk):
        q = xt[:, s : s + chunk]
        feats = []
        if time_dims:
            dt2 = pairwise_sqdist(q[..., t_cols], xc[..., t_cols])
            if invalid is not None:
                dt2 = dt2.masked_fill(invalid, float("inf"))
            dt2_min = dt2.amin(-1, keepdim=True)
            feats.append(dt2_min)
        if space_dims:
            ds2 = sqdist(q[..., s_cols], xc[..., s_cols])
            if invalid is not None:
                ds2 = ds2.masked_fill(invalid, float("inf"))
            feats.append(ds2.amin(-1, keepdim=True))
            if time_dims:
                dt = dt2.sqrt()
                nearest = dt <= dt2_min.sqrt() + TIME_TOL
                feats.append(ds2.masked_fill(~nearest, float("inf")).amin(-1, keepdim=True))
        out.append(torch.log1p(torch.cat(feats, -1).clamp_min(0).sqrt()))
    return torch.cat(out, 1)
