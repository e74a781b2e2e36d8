"""How coordinates enter attention logits: the :class:`ScoreMod` interface and the logit constants.

Biases (:mod:`geonp.models.bias`) implement it; the kernels (:mod:`geonp.models.attention`) call it.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

__all__ = ["ScoreMod", "MASKED", "MIN_EXPONENT", "LOG2E", "add_padding", "key_padding"]

#: logit given to padded keys: finite, so an all-padding tile yields weights of exactly zero, never NaN
MASKED = -1e30
#: exponents are clamped here: exp(-80) ≈ 2e-35 is zero at float32 precision, and CPUs evaluate
#: exp up to ~40× slower once results fall into the denormal range
MIN_EXPONENT = -80.0
#: exponentials on the CPU's hot paths are taken as ``exp2(x log₂e)``: torch evaluates exp2 about 40 % faster
#: than exp there (0.83 against 1.38 ns per element on the benchmark machine, same run), and the factor folds into
#: a scale that is applied anyway
LOG2E = math.log2(math.e)


class ScoreMod(nn.Module):
    """How coordinates enter the attention logits.

    Subclasses with ``additive = True`` implement :meth:`bias` and give logits
    ``scores + bias(xq, xk)`` (the fast path).  Others implement
    :meth:`forward` mapping scaled dot products and coordinates to logits.
    """

    additive: bool = True

    def bias(self, xq: Tensor, xk: Tensor) -> Tensor:
        """Bias ``[b, h or 1, nq, nk]`` from coordinates ``[b, nq, c]``, ``[b, nk, c]``."""
        raise NotImplementedError

    #: coordinate columns whose spread bounds the bias (set by biases that prune far tiles, see
    #: :meth:`fast_bias`); attention then sorts points along them so that tiles are compact
    order_columns: tuple[int, ...] = ()

    def fast_bias(self, xq: Tensor, xk: Tensor) -> Tensor | None:
        """Same values as :meth:`bias`, without autograd, as a new tensor the caller may modify.

        ``None`` means the bias is zero on the whole tile to float precision (every term is below the
        dtype's resolution): the caller adds nothing.
        """
        return self.bias(xq, xk)

    def fast_mask(self, xq: Tensor, xk: Tensor, key_mask: Tensor | None, dtype: torch.dtype) -> Tensor | None:
        """The float mask of ``scaled_dot_product_attention``: :meth:`fast_bias` plus :data:`MASKED` at padded keys.

        ``key_mask [b, nk]`` is ``True`` at real keys (``None``: no padding); ``dtype`` that of the queries.
        """
        return add_padding(self.fast_bias(xq, xk), key_mask, dtype)

    def bias_grad(self, xq: Tensor, xk: Tensor, grad: Tensor) -> list[Tensor] | None:
        """Gradients of ``(grad * bias(xq, xk)).sum()`` for each trainable parameter.

        Optional fast path of the backward pass (coordinates without gradients);
        ``None`` means "use autograd on :meth:`bias`".
        """
        return None

    def forward(self, scores: Tensor, xq: Tensor, xk: Tensor) -> Tensor:
        """Logits ``[b, h, nq, nk]`` from scaled dot products ``scores`` and coordinates."""
        return scores + self.bias(xq, xk)

    def misfit(self, heads: int, columns: int) -> str | None:
        """Why this score cannot serve ``heads`` heads on ``columns`` coordinate columns (``None``: it can).

        Reads the ``num_heads`` (1 broadcasts) and ``columns`` attributes of scores that have them, and asks
        the ``parts`` of a composite one.
        """
        for part in getattr(self, "parts", ()):
            if (problem := part.misfit(heads, columns)) is not None:
                return problem
        n, cols = getattr(self, "num_heads", None), tuple(getattr(self, "columns", ()))
        if n is not None and n not in (1, heads):
            return f"the bias has {n} heads, the attention {heads}; build it with num_heads={heads}"
        if cols and (max(cols) >= columns or min(cols) < -columns):
            return f"the bias reads coordinate columns {cols} of {columns}; pass coordinates with those columns"
        return None


def key_padding(key_mask: Tensor, dtype: torch.dtype) -> Tensor:
    """``[b, nk]``: 0 at real keys (``key_mask`` True), :data:`MASKED` at padded ones."""
    return torch.zeros(key_mask.shape, dtype=dtype, device=key_mask.device).masked_fill_(~key_mask, MASKED)


def add_padding(mask: Tensor | None, key_mask: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """``mask [b, h, nq, nk]`` (or ``None``) plus :data:`MASKED` at padded keys; ``mask`` when there are none.

    ``mask`` is written in place when it is a fresh tensor; a broadcast view (see ``RBFBias``) is never written.
    """
    if key_mask is None:
        return mask
    pad = key_padding(key_mask, dtype)[:, None, None, :]
    if mask is None:
        return pad
    return mask.add_(pad) if mask.is_contiguous() else mask + pad
