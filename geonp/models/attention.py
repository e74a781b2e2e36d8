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

from ..errors import ConfigError, UnknownOptionError
from .packing import spatial_order, take_points
from .score import LOG2E, MASKED, MIN_EXPONENT, ScoreMod

__all__ = ["ScoreMod", "MASKED", "MIN_EXPONENT", "LOG2E", "attention", "dense_attention", "tiled_attention",
           "default_tiles", "BACKENDS"]

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
    b, h, nq, d = q.shape
    nk = k.shape[2]
    if b * h * nq == 0:  # nothing to compute (and torch's private CPU kernels crash on zero heads)
        out = q.new_zeros(b, h, nq, v.shape[-1]) + q[..., :1] * 0  # q is empty: no values, but a graph to q
        return (out, q.new_zeros(b, h, nq)) if return_lse else out
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
    if reorder and cols and not needs_grad and (nq > q_tile or nk > k_tile):
        # inference over several tiles: sort points along the bias' coordinates so that each tile is compact
        # and far tiles prune their bias (ScoreMod.fast_bias); the result does not depend on the order
        with torch.no_grad():
            out, lse = _sorted_forward(q, k, v, xq, xk, key_mask, score, q_tile, k_tile, scale, cols)
    else:
        out, lse = _TiledAttention.apply(q, k, v, xq, xk, key_mask, score, q_tile, k_tile, scale, len(params), *params)
    if empty is not None:
        out = torch.where(empty[:, None, None, None], v.mean(2, keepdim=True), out)
        lse = lse.masked_fill(empty[:, None, None], MASKED)
    return (out, lse) if return_lse else out


def _sorted_forward(q, k, v, xq, xk, key_mask, score, q_tile, k_tile, scale, cols) -> tuple[Tensor, Tensor]:
    """Forward pass (no autograd) with queries and keys sorted along ``cols``, results in the callers' order."""
    ko = spatial_order(xk[..., list(cols)], k_tile)
    k, v = take_points(k, ko, 2), take_points(v, ko, 2)
    xk, key_mask = take_points(xk, ko, 1), take_points(key_mask, ko, 1)
    qo = spatial_order(xq[..., list(cols)], q_tile)
    b, h, nq, _ = q.shape
    out = q.new_empty(b, h, nq, v.shape[-1])
    lse = q.new_empty(b, h, nq)
    for qs in range(0, nq, q_tile):
        idx = qo[:, qs : min(nq, qs + q_tile)]
        q_t, xq_t = take_points(q, idx, 2), take_points(xq, idx, 1)
        o_t, l_t = _query_tile(q_t, k, v, score, xq_t, xk, key_mask, k_tile, scale)
        out.scatter_(2, idx[:, None, :, None].expand(b, h, idx.shape[1], out.shape[-1]), o_t)
        lse.scatter_(2, idx[:, None, :].expand(b, h, idx.shape[1]), l_t)
    return out, lse


def _query_tile(q_t, k, v, score, xq_t, xk, key_mask, k_tile, scale, keep=None) -> tuple[Tensor, Tensor]:
    """Output and log-sum-exp of one query tile over every key tile (online softmax, eq. 8).

    ``keep`` (a list) receives each key tile's float mask on the CPU fast path (see :func:`_tile_forward`).
    """
    nk = k.shape[2]
    acc, acc_lse = None, None
    for ks in range(0, nk, k_tile):
        ke = min(nk, ks + k_tile)
        o_j, l_j = _tile_forward(
            q_t, k[:, :, ks:ke], v[:, :, ks:ke], score, xq_t, None if xk is None else xk[:, ks:ke],
            None if key_mask is None else key_mask[:, ks:ke], scale, keep,
        )
        if acc is None:
            acc, acc_lse = o_j, l_j
            continue
        new_lse = torch.logaddexp(acc_lse, l_j)  # eq. 8: m, ℓ and the rescaling k^(j) in one step
        acc = acc * (acc_lse - new_lse).exp_()[..., None] + o_j * (l_j - new_lse).exp_()[..., None]
        acc_lse = new_lse
    return acc, acc_lse


def _tile_logits(q_t, k_t, score, xq_t, xk_t, km_t, scale) -> Tensor:
    """Logits of one tile, ``[b, h, tq, tk]`` (no autograd graph for the bias)."""
    if score is not None and score.additive:
        bias = score.fast_bias(xq_t, xk_t)
        shape = (q_t.shape[0], q_t.shape[1], q_t.shape[2], k_t.shape[2])
        logits = torch.matmul(q_t, k_t.transpose(-1, -2)).mul_(scale)
        if bias is not None:
            logits.add_(bias.expand(shape))
    else:
        logits = torch.matmul(q_t, k_t.transpose(-1, -2)).mul_(scale)
        if score is not None:
            logits = score(logits, xq_t, xk_t)
    if km_t is not None:
        logits = logits.masked_fill(~km_t[:, None, None, :], MASKED)
    return logits


def _additive_mask(score, xq_t, xk_t, km_t, dtype) -> Tensor | None:
    """Float mask for scaled_dot_product_attention: the bias plus padding."""
    mask = score.fast_bias(xq_t, xk_t) if score is not None else None
    if km_t is not None:
        pad = torch.zeros(km_t.shape, dtype=dtype, device=km_t.device).masked_fill_(~km_t, MASKED)[:, None, None, :]
        if mask is None:
            mask = pad
        else:  # fast_bias returns a fresh tensor, or a broadcast view that must not be written
            mask = mask.add_(pad) if mask.is_contiguous() else mask + pad
    return mask


def _tile_forward(q_t, k_t, v_t, score, xq_t, xk_t, km_t, scale, keep=None) -> tuple[Tensor, Tensor]:
    """Output and log-sum-exp of one (query tile, key tile) pair.

    On the CPU fast path the float mask (bias plus padding, or ``None``) is appended to ``keep`` when given.
    """
    if (
        (score is None or score.additive)
        and q_t.device.type == "cpu"
        and q_t.dtype in (torch.float32, torch.float64)
        and v_t.shape[-1] == q_t.shape[-1]
    ):
        mask = _additive_mask(score, xq_t, xk_t, km_t, q_t.dtype)
        if mask is not None:
            mask = mask.expand(q_t.shape[0], q_t.shape[1], q_t.shape[2], k_t.shape[2])
        if keep is not None:
            keep.append(mask)
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q_t, k_t, v_t, 0.0, False, attn_mask=mask, scale=scale
        )
        return out, lse
    logits = _tile_logits(q_t, k_t, score, xq_t, xk_t, km_t, scale)
    lse = torch.logsumexp(logits, dim=-1)
    return torch.matmul(logits.sub_(lse[..., None]).clamp_(min=MIN_EXPONENT).exp_(), v_t), lse


class _TiledAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, xq, xk, key_mask, score, q_tile, k_tile, scale, n_params, *params):
        b, h, nq, d = q.shape
        out = q.new_empty(b, h, nq, v.shape[-1])
        lse = q.new_empty(b, h, nq)
        # a problem of one tile keeps its bias for the backward pass (no second evaluation of the RBF terms);
        # memory stays one tile, as the backward's own recomputation would use
        keep = [] if nq <= q_tile and k.shape[2] <= k_tile and score is not None and score.additive else None
        with torch.no_grad():
            for qs in range(0, nq, q_tile):
                qe = min(nq, qs + q_tile)
                out[:, :, qs:qe], lse[:, :, qs:qe] = _query_tile(
                    q[:, :, qs:qe], k, v, score, None if xq is None else xq[:, qs:qe], xk, key_mask, k_tile, scale,
                    keep,
                )
        ctx.bias_tile = keep[0] if keep else None
        ctx.save_for_backward(q, k, v, xq, xk, key_mask, out, lse)
        ctx.score, ctx.tiles, ctx.scale, ctx.n_params = score, (q_tile, k_tile), scale, n_params
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, grad_out, _grad_lse):
        if not torch.is_grad_enabled():
            return _TiledAttention._backward(ctx, grad_out)
        # create_graph=True: no graph of its own, so the gradients fail loudly if differentiated again
        with torch.no_grad():
            grads = _TiledAttention._backward(ctx, grad_out)
        return tuple(None if g is None else _FirstOrderOnly.apply(g.detach().requires_grad_()) for g in grads)

    @staticmethod
    def _backward(ctx, grad_out):
        q, k, v, xq, xk, key_mask, out, lse = ctx.saved_tensors
        score, (q_tile, k_tile) = ctx.score, ctx.tiles
        params = [p for p in score.parameters() if p.requires_grad] if score is not None else []
        b, h, nq, d = q.shape
        nk = k.shape[2]
        scale = ctx.scale
        grad_out = grad_out.contiguous()
        delta = (grad_out * out).sum(-1)  # [b, h, nq]
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        dparams = [torch.zeros_like(p) for p in params]
        need_xq = xq is not None and xq.requires_grad
        need_xk = xk is not None and xk.requires_grad
        dxq = torch.zeros_like(xq) if need_xq else None
        dxk = torch.zeros_like(xk) if need_xk else None
        general = score is not None and not score.additive
        for qs in range(0, nq, q_tile):
            qe = min(nq, qs + q_tile)
            q_t, do_t = q[:, :, qs:qe], grad_out[:, :, qs:qe]
            for ks in range(0, nk, k_tile):
                ke = min(nk, ks + k_tile)
                k_t, v_t = k[:, :, ks:ke], v[:, :, ks:ke]
                km_t = None if key_mask is None else key_mask[:, ks:ke]
                xq_t = None if xq is None else xq[:, qs:qe].detach().requires_grad_(need_xq)
                xk_t = None if xk is None else xk[:, ks:ke].detach().requires_grad_(need_xk)
                analytic = None
                if score is not None and score.additive and not (need_xq or need_xk):
                    analytic = score  # try the parameter-gradient fast path below
                with torch.enable_grad():
                    # additive logits are built in base 2 (times log₂e, see LOG2E) at no extra pass
                    raw = torch.matmul(q_t, k_t.transpose(-1, -2)) * (scale if general else scale * LOG2E)
                    if general:
                        raw.requires_grad_(True)
                        graph_out = logits = score(raw, xq_t, xk_t)
                    elif score is not None:
                        with torch.set_grad_enabled(analytic is None):
                            if analytic is None:
                                graph_out = score.bias(xq_t, xk_t)
                            elif ctx.bias_tile is not None:  # the forward's mask of this (only) tile
                                graph_out = ctx.bias_tile
                            else:
                                graph_out = score.fast_bias(xq_t, xk_t)
                        if graph_out is None:  # zero on this tile (far apart); gradients still come from bias_grad
                            graph_out = raw.new_zeros(())
                        logits = torch.add(raw, graph_out.detach(), alpha=LOG2E)
                    else:
                        graph_out, logits = None, raw
                logits = logits.detach()
                if general:
                    logits = logits.mul(LOG2E)
                if km_t is not None:
                    logits = logits.masked_fill(~km_t[:, None, None, :], MASKED)
                lse2 = lse[:, :, qs:qe, None] * LOG2E
                p = logits.sub_(lse2).clamp_(min=LOG2E * MIN_EXPONENT).exp2_()  # [b, h, tq, tk]
                dv[:, :, ks:ke] += torch.matmul(p.transpose(-1, -2), do_t)
                dlogits = torch.matmul(do_t, v_t.transpose(-1, -2)).sub_(delta[:, :, qs:qe, None]).mul_(p)
                draw = dlogits
                fast = analytic.bias_grad(xq_t, xk_t, dlogits) if analytic is not None and params else None
                if fast is not None:
                    for i, g in enumerate(fast):
                        dparams[i] += g
                elif graph_out is not None and (general or params or need_xq or need_xk):
                    if analytic is not None:  # no analytic gradient: rebuild the bias with a graph
                        with torch.enable_grad():
                            graph_out = score.bias(xq_t, xk_t)
                    inputs = ([raw] if general else []) + list(params)
                    inputs += [t for t, need in ((xq_t, need_xq), (xk_t, need_xk)) if need]
                    go = dlogits if general else _sum_to(dlogits, graph_out.shape)
                    grads = list(torch.autograd.grad(graph_out, inputs, go, allow_unused=True))
                    if general:
                        draw = grads.pop(0)
                    for i in range(len(params)):
                        if grads[i] is not None:
                            dparams[i] += grads[i]
                    rest = grads[len(params):]
                    if need_xq and (g := rest.pop(0)) is not None:
                        dxq[:, qs:qe] += g
                    if need_xk and (g := rest.pop(0)) is not None:
                        dxk[:, ks:ke] += g
                if draw is None:
                    continue
                dq[:, :, qs:qe] += torch.matmul(draw, k_t).mul_(scale)
                dk[:, :, ks:ke] += torch.matmul(draw.transpose(-1, -2), q_t).mul_(scale)
        return (dq, dk, dv, dxq, dxk, None, None, None, None, None, None, *dparams)


class _FirstOrderOnly(torch.autograd.Function):
    """Identity on a first-order gradient of the tiled kernel whose own backward raises (no double backward)."""

    @staticmethod
    def forward(ctx, g):
        return g.view_as(g)

    @staticmethod
    def backward(ctx, _grad):
        raise ConfigError(
            "second-order gradients through the tiled attention kernel (backend='auto' or 'tiled') are not "
            "supported: its backward pass is first-order only. Build the model with backend='dense' (or call "
            "attention(..., backend='dense')) for higher-order gradients."
        )


def _sum_to(t: Tensor, shape: torch.Size) -> Tensor:
    """Sum ``t`` over the dimensions where ``shape`` broadcasts (size 1)."""
    dims = [i for i, (a, s) in enumerate(zip(t.shape, shape)) if s == 1 and a != 1]
    return t.sum(dims, keepdim=True) if dims else t


