"""Biased multi-head attention: one exact kernel for every model.

Computes ``softmax(Q Kᵀ / √d + B) V`` where the bias ``B`` (or, more generally,
the logit function) depends on the raw coordinates of query and key points.
:func:`tiled_attention` works on tiles of queries and keys with an online
softmax over key tiles (BSA eqs. 6–8, in log-sum-exp form), recomputes each
tile in the backward pass, and so never materialises an ``nq × nk`` tensor
beyond one tile.  :func:`dense_attention` is the reference it is tested
against.

Shapes: ``q [b, h, nq, d]``, ``k [b, h, nk, d]``, ``v [b, h, nk, e]``,
coordinates ``xq [b, nq, c]``, ``xk [b, nk, c]``, ``key_mask [b, nk]``
(``True`` = a real key), output ``[b, h, nq, e]``.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from ..errors import ConfigError, InvalidBatchError, UnknownOptionError
from .score import LOG2E, MASKED, MIN_EXPONENT, ScoreMod
from .tiled_kernel import _sorted_forward, _TiledAttention

__all__ = ["ScoreMod", "MASKED", "MIN_EXPONENT", "LOG2E", "attention", "dense_attention", "tiled_attention",
           "default_tiles", "check_inputs", "BACKENDS"]

BACKENDS = ("auto", "tiled", "dense", "flex")
#: default number of elements of one [b, h, q_tile, k_tile] tile (16 MB in float32). Against 2**24 (64 MB),
#: a BSA-TNP forward of 4 tasks × 2,400 context × 4,096 targets took 17 instead of 25-26 CPU-s and 48 hours
#: of the ERA5 infill 14-16 instead of 17 CPU-s; the bare kernel and a training step were unchanged
#: (one thread, AMD EPYC, 2026-11-25, the other core busy). Results do not depend on it beyond rounding.
TILE_ELEMENTS = 2**22
#: under autograd, a whole problem up to this many elements (64 MB) stays one tile, so that training reuses
#: the forward pass' bias in the backward pass (every batch of the seeds' GP shape); larger problems, and
#: inference (no backward pass to share with), use TILE_ELEMENTS
ONE_TILE_ELEMENTS = 2**24
K_TILE = 1024
#: tiles on a GPU (128 MB in float32): there every tile costs a few kernel launches and a host sync, so
#: fewer, larger tiles win; memory still grows with the tile, not the problem (benchmarks/gpu.py)
GPU_TILE_ELEMENTS = 2**25
GPU_K_TILE = 4096


def default_tiles(b: int, h: int, nq: int, nk: int, elements: int = TILE_ELEMENTS,
                  key_tile: int = K_TILE) -> tuple[int, int]:
    """Query and key tile sizes so that one ``[b, h, q_tile, k_tile]`` tile holds about ``elements``.

    Under autograd (training), a problem with at most :data:`K_TILE` keys and :data:`ONE_TILE_ELEMENTS`
    elements in all is one tile; without it the tiles stay near ``elements``, which bounds the peak memory
    of inference by the tile. ``elements`` and ``key_tile`` must be positive integers (else ConfigError).
    """
    _check_tile("elements", elements)
    _check_tile("key_tile", key_tile)
    k_tile = max(1, min(nk, key_tile))
    one_tile = ONE_TILE_ELEMENTS if torch.is_grad_enabled() else 0
    if nk <= key_tile and b * h * nq * nk <= max(elements, one_tile):
        return max(1, nq), k_tile
    q_tile = max(1, min(nq, elements // max(1, b * h * k_tile)))
    return q_tile, k_tile


def _check_tile(name: str, value, optional: bool = False) -> None:
    """Raise :class:`~geonp.errors.ConfigError` unless ``value`` is a positive int (or ``None`` if ``optional``)."""
    if optional and value is None:
        return
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ConfigError(
            f"{name} must be a positive integer (a tile size in points), got {value!r}; "
            f"pass e.g. {name}=256{', or None for the default' if optional else ''}."
        )


def check_inputs(q: Tensor, k: Tensor, v: Tensor, score: ScoreMod | None = None, xq: Tensor | None = None,
                 xk: Tensor | None = None, key_mask: Tensor | None = None) -> None:
    """Refuse inputs whose shapes do not fit together (the tiled kernel would read past them).

    ``q [b, h, nq, d]``, ``k [b, h, nk, d]``, ``v [b, h, nk, dv]``; with a ``score``, coordinates
    ``xq [b, nq, c]`` and ``xk [b, nk, c]``; ``key_mask`` boolean ``[b, nk]``. Raises
    :class:`~geonp.errors.InvalidBatchError`. Shapes only: nothing is synchronised with a device.
    """
    found = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise InvalidBatchError(f"attention takes q, k and v of rank 4 [batch, heads, points, features]; got {found}.")
    if not (q.dtype == k.dtype == v.dtype and q.dtype.is_floating_point):
        raise InvalidBatchError(f"attention needs q, k and v of one floating dtype; got {q.dtype}, {k.dtype} and "
                                f"{v.dtype}. Convert them with .to(q.dtype).")
    b, h, nq, d = q.shape
    if k.shape[:2] != (b, h) or v.shape[:3] != k.shape[:3] or k.shape[3] != d:
        raise InvalidBatchError(
            f"attention needs q [b, h, nq, d], k [b, h, nk, d] and v [b, h, nk, dv] with the same b and h, the same d "
            f"in q and k and the same nk in k and v; got {found}. Expand or reshape them to match (no broadcasting).")
    nk = k.shape[2]
    if score is not None:
        for name, x, n in (("xq", xq, nq), ("xk", xk, nk)):
            if x is None or x.dim() != 3 or x.shape[:2] != (b, n):
                got = None if x is None else tuple(x.shape)
                raise InvalidBatchError(f"a score needs coordinates {name} [{b}, {n}, columns] for {found}; got {got}.")
        if not xq.dtype == xk.dtype == q.dtype:
            raise InvalidBatchError(f"coordinates xq and xk need q's dtype {q.dtype}; got {xq.dtype} and {xk.dtype}. "
                                    "Convert them with .to(q.dtype).")
        if xq.shape[2] != xk.shape[2]:
            raise InvalidBatchError(f"xq and xk need the same coordinate columns; got {tuple(xq.shape)} and "
                                    f"{tuple(xk.shape)}.")
        problem = score.misfit(h, xq.shape[2])
        if problem is not None:
            raise InvalidBatchError(f"{type(score).__name__} does not fit {found}: {problem}.")
    if key_mask is not None and (key_mask.dtype != torch.bool or tuple(key_mask.shape) != (b, nk)):
        raise InvalidBatchError(f"key_mask must be boolean [{b}, {nk}] (True for a real key) for {found}; got "
                                f"{key_mask.dtype} {tuple(key_mask.shape)}. Use mask.bool().")


def dense_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    score: ScoreMod | None = None,
    xq: Tensor | None = None,
    xk: Tensor | None = None,
    key_mask: Tensor | None = None,
) -> Tensor:
    """Reference implementation: materialise all logits, softmax, weight ``v``.

    Masked logits are a large finite negative constant, so a query whose keys are all masked gets the
    uniform average of ``v`` over every key. Supports gradients of any order.
    """
    check_inputs(q, k, v, score, xq, xk, key_mask)
    logits = torch.matmul(q, k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    if score is not None:
        logits = score(logits, xq, xk)
    if key_mask is not None:
        logits = logits.masked_fill(~key_mask[:, None, None, :], MASKED)
    return torch.matmul(torch.softmax(logits, dim=-1), v)


def attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    score: ScoreMod | None = None,
    xq: Tensor | None = None,
    xk: Tensor | None = None,
    key_mask: Tensor | None = None,
    *,
    backend: str = "auto",
    q_tile: int | None = None,
    k_tile: int | None = None,
) -> Tensor:
    """Biased multi-head attention with a choice of backend.

    Parameters
    ----------
    q, k, v : Tensor
        ``[b, h, nq, d]``, ``[b, h, nk, d]``, ``[b, h, nk, e]``.
    score : ScoreMod, optional
        Bias or logit function of the coordinates; ``None`` for plain attention.
    xq, xk : Tensor, optional
        ``[b, nq, c]`` and ``[b, nk, c]`` coordinates passed to ``score``.
    key_mask : Tensor, optional
        ``[b, nk]`` bool, ``True`` for real keys.
    backend : {"auto", "tiled", "dense", "flex"}
        ``"tiled"`` (and ``"auto"``) is the memory-bounded kernel (first-order gradients only);
        ``"dense"`` the reference (gradients of any order); ``"flex"`` compiled ``flex_attention`` with
        the bias fused (CUDA and inference only, see ``flex.py``).
    q_tile, k_tile : int, optional
        Positive tile sizes (memory knob only: results do not depend on them); ``None`` picks them.

    Returns
    -------
    Tensor
        ``[b, h, nq, e]``.

    Raises
    ------
    UnknownOptionError
        ``backend`` is not one of :data:`BACKENDS`.
    ConfigError
        A tile size is not a positive integer, or ``backend="flex"`` is asked for CPU tensors, with
        gradients or with a score that has no fused form.
    """
    _check_tile("q_tile", q_tile, optional=True)
    _check_tile("k_tile", k_tile, optional=True)
    if backend == "dense":
        return dense_attention(q, k, v, score, xq, xk, key_mask)
    if backend == "flex":
        from .flex import flex_attention_biased

        return flex_attention_biased(q, k, v, score, xq, xk, key_mask)
    if backend not in BACKENDS:
        raise UnknownOptionError(f"unknown attention backend {backend!r}; expected one of {BACKENDS}.")
    return tiled_attention(q, k, v, score, xq, xk, key_mask, q_tile=q_tile, k_tile=k_tile)


def tiled_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    score: ScoreMod | None = None,
    xq: Tensor | None = None,
    xk: Tensor | None = None,
    key_mask: Tensor | None = None,
    *,
    q_tile: int | None = None,
    k_tile: int | None = None,
    return_lse: bool = False,
    reorder: bool = True,
) -> Tensor | tuple[Tensor, Tensor]:
    """Exact attention computed tile by tile (see module docstring).

    With ``return_lse=True`` also returns the row log-sum-exp of the logits,
    ``[b, h, nq]`` (no gradient flows through it).  ``reorder`` lets inference over
    several tiles sort the points along the bias' coordinates (:func:`~geonp.models.packing.spatial_order`)
    so that tiles are compact and far tile pairs skip their bias terms; the result does
    not depend on it, only the speed.

    A query whose keys are all masked gets the uniform average of ``v``, as in :func:`dense_attention`.
    Gradients are first-order only: a second backward pass through them raises
    :class:`~geonp.errors.ConfigError` (use ``backend="dense"``), as does a ``q_tile`` or ``k_tile``
    that is not a positive integer or ``None``.
    """
    _check_tile("q_tile", q_tile, optional=True)
    _check_tile("k_tile", k_tile, optional=True)
    check_inputs(q, k, v, score, xq, xk, key_mask)
    b, h, nq, d = q.shape
    nk = k.shape[2]
    if b * h * nq == 0:  # nothing to compute (and torch's private CPU kernels crash on zero heads)
        out = q.new_zeros(b, h, nq, v.shape[-1]) + q[..., :1] * 0  # q is empty: no values, but a graph to q
        return (out, q.new_zeros(b, h, nq)) if return_lse else out
    if nk == 0:  # no keys: an empty average, zeros, as dense_attention gives (log-sum-exp of nothing: -inf)
        out = q.new_zeros(b, h, nq, v.shape[-1]) + (q.sum() + k.sum() + v.sum()) * 0  # keep the inputs' graph
        return (out, q.new_full((b, h, nq), float("-inf"))) if return_lse else out
    dq, dk = (default_tiles(b, h, nq, nk) if q.device.type == "cpu"
              else default_tiles(b, h, nq, nk, GPU_TILE_ELEMENTS, GPU_K_TILE))
    q_tile = q_tile or dq
    k_tile = k_tile or dk
    scale = d**-0.5
    empty = None if key_mask is None or nk == 0 else ~key_mask.any(-1)
    if empty is not None and bool(empty.any()):
        # a task without real keys: dense weighs all keys equally (every logit MASKED), which the online softmax
        # cannot (MASKED + log(nk) rounds to MASKED); computed over all keys, replaced by the mean of v below
        key_mask = key_mask | empty[:, None]
    else:
        empty = None
    if v.shape[-1] > d:  # wider values (position moments): zero columns keep QKᵀ and the fused CPU kernel
        q, k = F.pad(q, (0, v.shape[-1] - d)), F.pad(k, (0, v.shape[-1] - d))
    params: Sequence[Tensor] = [p for p in score.parameters() if p.requires_grad] if score is not None else []
    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (q, k, v, xq, xk, *params)
    )
    cols = score.order_columns if score is not None and score.additive else ()
    if reorder and cols and not needs_grad and nk > k_tile:
        # inference over several key tiles: sort points along the bias' coordinates so that each tile is compact
        # and far tile pairs prune their bias (ScoreMod.fast_bias); the result does not depend on the order.
        # With one key tile a query tile is pruned only where it lies far from every key, which sorting the
        # queries seldom brings about: gathering them into order and scattering the outputs back (every layer)
        # would cost more than it saves (8 % of a whole-month ERA5 infill, docs/benchmarks.md)
        with torch.no_grad():
            out, lse = _sorted_forward(q, k, v, xq, xk, key_mask, score, q_tile, k_tile, scale, cols)
    else:
        out, lse = _TiledAttention.apply(q, k, v, xq, xk, key_mask, score, q_tile, k_tile, scale, len(params), *params)
    if empty is not None:
        out = torch.where(empty[:, None, None, None], v.mean(2, keepdim=True), out)
        lse = lse.masked_fill(empty[:, None, None], MASKED)
    return (out, lse) if return_lse else out
