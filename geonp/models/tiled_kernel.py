"""The tiled attention kernel's inner loops and its autograd function (see :mod:`geonp.models.attention`).

Online softmax over key tiles for one query tile at a time (BSA eqs. 6–8, log-sum-exp form), the
forward pass with points sorted along the bias' coordinates for inference, and
:class:`_TiledAttention`, whose backward pass recomputes each tile so that gradients, too, never
hold more than a tile of logits. Everything here is private: :func:`geonp.models.attention.tiled_attention`
is the entry point.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..errors import ConfigError
from .packing import spatial_order, take_points
from .score import LOG2E, MASKED, MIN_EXPONENT, add_padding


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
    return score.fast_mask(xq_t, xk_t, km_t, dtype) if score is not None else add_padding(None, km_t, dtype)


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


