"""The RBF bias of a whole tile at once, a basis at a time: the GPU form of :class:`~geonp.models.bias.RBFBias`.

On the CPU the bias is evaluated in cache-sized chunks (``bias.BIAS_CHUNK``); on a GPU that means
thousands of tiny kernel launches per tile (0.1 TFLOP/s on an H200, docs/benchmarks.md "GPU"), so
there each basis is evaluated over the whole tile instead: a few large kernels. The terms are the
same, in the same order per head (``2^max(-log2(e) b d², floor)``, weighted, summed over the bases),
so both forms agree to rounding. ``GEONP_FUSED_BIAS=1`` compiles the forward sum into one pass
(:func:`fused_bias_kernel`, an experiment until measured on a GPU).
"""

from __future__ import annotations

import logging
import os

import torch
from torch import Tensor

__all__ = ["whole_tiles", "rbf_terms", "rbf_sum", "grad_sums", "fused_bias_kernel"]

logger = logging.getLogger(__name__)
_FUSED: dict = {}  # the compiled rbf_terms (GEONP_FUSED_BIAS=1), or None once it failed


def whole_tiles(x: Tensor) -> bool:
    """Whether a tile's bias is evaluated whole, a basis at a time (GPUs), not in cache-sized chunks (CPU)."""
    return x.device.type != "cpu"


def rbf_terms(d2: Tensor, neg_rate: Tensor, weight: Tensor, floor: float) -> Tensor:
    """``Σ_f weight[h, f] · 2^max(neg_rate[h, f] · d2, floor)``: ``[b, h, nq, nk]`` from ``d2`` ``[b, 1, nq, nk]``.

    The forward sum as one expression, for :func:`fused_bias_kernel` to compile into a single pass
    over the tile (:func:`rbf_sum` makes four passes per basis).
    """
    out = weight[:, 0, None, None] * torch.exp2(torch.clamp(d2 * neg_rate[:, 0, None, None], min=floor))
    for f in range(1, neg_rate.shape[1]):
        out = out + weight[:, f, None, None] * torch.exp2(torch.clamp(d2 * neg_rate[:, f, None, None], min=floor))
    return out


def fused_bias_kernel():
    """:func:`rbf_terms` compiled by ``torch.compile`` (dynamic shapes) when ``GEONP_FUSED_BIAS=1``, else ``None``.

    Off by default until measured on a GPU (``benchmarks/gpu.py``): it would replace the ~20 passes
    of :func:`rbf_sum` over each tile by one. A compiler failure switches it off for the rest of
    the process, with a warning.
    """
    if os.environ.get("GEONP_FUSED_BIAS", "0") != "1":
        return None
    if "kernel" not in _FUSED:
        _FUSED["kernel"] = torch.compile(rbf_terms, dynamic=True)
    return _FUSED["kernel"]


def rbf_sum(d2: Tensor, neg_rate: Tensor, weight: Tensor, floor: float) -> Tensor:
    """The bias ``[b, h, nq, nk]`` of squared distances ``d2`` ``[b, 1, nq, nk]``.

    ``neg_rate`` and ``weight`` are ``[h, F]`` (base-2 exponent factors; zero weight for skipped
    terms). Compiled into one pass with ``GEONP_FUSED_BIAS=1``, else a basis at a time.
    """
    fused = fused_bias_kernel()
    if fused is not None:
        try:
            return fused(d2, neg_rate, weight, floor)
        except Exception as exc:  # noqa: BLE001  a compiler failure: fall back to the eager form below
            logger.warning("GEONP_FUSED_BIAS: the compiled bias failed (%s); using the eager one.", exc)
            _FUSED["kernel"] = None
    b, _, nq, nk = d2.shape
    out = d2.new_zeros(b, neg_rate.shape[0], nq, nk)
    term = torch.empty_like(out)
    for f in range(neg_rate.shape[1]):
        torch.mul(d2, neg_rate[None, :, f, None, None], out=term).clamp_(min=floor).exp2_()
        out.addcmul_(term, weight[None, :, f, None, None].expand_as(term))
    return out


def grad_sums(d2: Tensor, grad: Tensor, neg_rate: Tensor, floor: float, g_weight: Tensor, g_decay: Tensor) -> None:
    """Add ``Σ g 2^e`` and ``Σ g d² 2^e`` per ``(head, basis)`` to the float64 ``[h, F]`` ``g_weight``/``g_decay``.

    ``d2`` is ``[b, 1, nq, nk]``, ``grad`` ``[b, h, nq, nk]``, ``neg_rate`` ``[h, F]``.
    """
    gd = grad * d2
    term = torch.empty_like(grad)
    for f in range(neg_rate.shape[1]):
        torch.mul(d2, neg_rate[None, :, f, None, None], out=term).clamp_(min=floor).exp2_()
        g_weight[:, f] += (term * grad).sum((0, 2, 3), dtype=torch.float64)
        g_decay[:, f] += (term * gd).sum((0, 2, 3), dtype=torch.float64)
