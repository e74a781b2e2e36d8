"""Optional ``flex_attention`` backend: the bias fused into one compiled kernel (inference only).

``torch.nn.attention.flex_attention`` takes a ``score_mod(score, b, h, i, j)`` that can compute
BSA-TNP's bias inline from the coordinates, so nothing of size ``nq × nk`` is ever stored. It
compiles per shape, so geonp uses it only when asked (``backend="flex"``), only without gradients and
only on CUDA: torch's compiled CPU ``flex_attention`` (torch 2.13) returns NaN at some small sizes
(e.g. 15 queries × 40 keys), so CPU tensors are refused; ``backend="tiled"`` is the fast CPU path.
``benchmarks/attention.py`` measures where it pays off.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..errors import ConfigError

__all__ = ["flex_attention_biased"]

_COMPILED = None


def _compiled():
    global _COMPILED
    if _COMPILED is None:
        from torch.nn.attention.flex_attention import flex_attention

        _COMPILED = torch.compile(flex_attention, dynamic=False)
    return _COMPILED


def flex_attention_biased(q: Tensor, k: Tensor, v: Tensor, score, xq: Tensor | None, xk: Tensor | None,
                          key_mask: Tensor | None) -> Tensor:
    """Biased attention through compiled ``flex_attention`` (no gradients).

    Raises
    ------
    ConfigError
        Gradients are required, the score has no fused form (``score.flex_terms``), or the tensors are not
        on a CUDA device.
    """
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (q, k, v, xq, xk)):
        raise ConfigError("backend='flex' is inference-only (no CPU backward); use backend='tiled' for training.")
    terms = []
    if score is not None:
        make = getattr(score, "flex_terms", None)
        if make is None or not score.additive:
            raise ConfigError(
                f"{type(score).__name__} has no flex_attention form; use backend='tiled' (or 'auto') for it."
            )
        terms = make(xq, xk)
    if q.device.type != "cuda":
        raise ConfigError(
            f"backend='flex' runs on CUDA only, got tensors on {q.device.type}: torch's compiled CPU flex_attention "
            "returns NaN at some sizes. Use backend='tiled' (the default, the fast CPU path), or move the model "
            "and data to a CUDA device."
        )
    from .score import MASKED

    def score_mod(s, b, h, i, j):
        for term in terms:
            s = s + term(b, h, i, j)
        if key_mask is not None:
            s = torch.where(key_mask[b, j], s, torch.full_like(s, MASKED))
        return s

    return _compiled()(q, k, v, score_mod=score_mod)
