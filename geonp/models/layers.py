"""Building blocks shared by the models: MLP, biased multi-head attention, KRBlock, Gaussian head."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import ScoreMod, attention

__all__ = ["MLP", "MultiHeadAttention", "KRBlock", "GaussianHead"]


class MLP(nn.Sequential):
    """``in → hidden[0] → … → out`` with GELU between layers."""

    def __init__(self, in_dim: int, hidden: Sequence[int], out_dim: int) -> None:
        layers: list[nn.Module] = []
        width = in_dim
        for w in hidden:
            layers += [nn.Linear(width, w), nn.GELU()]
            width = w
        layers.append(nn.Linear(width, out_dim))
        super().__init__(*layers)


class MultiHeadAttention(nn.Module):
    """Multi-head attention whose logits may depend on coordinates through a :class:`ScoreMod`.

    Tokens of width ``dim`` are projected to ``num_heads × head_dim`` for
    attention ("upscale to 128" in BSA-TNP) and back to ``dim``.
    """

    def __init__(self, dim: int, num_heads: int, head_dim: int, backend: str = "auto") -> None:
        super().__init__()
        self.num_heads, self.head_dim, self.backend = num_heads, head_dim, backend
        inner = num_heads * head_dim
        self.to_q = nn.Linear(dim, inner)
        self.to_kv = nn.Linear(dim, 2 * inner)
        self.out = nn.Linear(inner, dim)

    def split(self, t: Tensor) -> Tensor:
        """``[b, n, h·d]`` → ``[b, h, n, d]``."""
        b, n, _ = t.shape
        return t.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

    def keys_values(self, z: Tensor) -> tuple[Tensor, Tensor]:
        """Per-head keys and values ``[b, h, nk, d]`` of key tokens ``z [b, nk, dim]``."""
        k, v = self.to_kv(z).chunk(2, dim=-1)
        return self.split(k), self.split(v)

    def forward(
        self,
        zq: Tensor,
        kv: tuple[Tensor, Tensor],
        score: ScoreMod | None = None,
        xq: Tensor | None = None,
        xk: Tensor | None = None,
        key_mask: Tensor | None = None,
    ) -> Tensor:
        """Attend from query tokens ``zq [b, nq, dim]`` to precomputed keys/values."""
        q = self.split(self.to_q(zq))  # [b, h, nq, d]
        o = attention(q, kv[0], kv[1], score, xq, xk, key_mask, backend=self.backend)  # [b, h, nq, d]
        b, _, nq, _ = o.shape
        return self.out(o.transpose(1, 2).reshape(b, nq, -1))


class KRBlock(nn.Module):
    """Kernel-regression block (001 Alg. 2): one weight set for both streams.

    Context tokens self-attend; target tokens cross-attend to the context.  Targets
    never see each other, so any split of the targets gives the same result.
    ``prenorm=False`` gives the post-norm transformer block of TNP-D (001 Alg. 1).
    """

    def __init__(
        self, dim: int, num_heads: int, head_dim: int, ff_hidden: Sequence[int], prenorm: bool = True,
        backend: str = "auto",
    ) -> None:
        super().__init__()
        self.prenorm = prenorm
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = MultiHeadAttention(dim, num_heads, head_dim, backend)
        self.ff = MLP(dim, ff_hidden, dim)

    def context_keys(self, zc: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of the (normalised) context tokens, shared by both streams."""
        return self.attn.keys_values(self.norm1(zc) if self.prenorm else zc)

    def step(self, z: Tensor, kv, score, x, xc, mc) -> Tensor:
        """Update tokens ``z`` (context or targets) by attending to the context ``kv``."""
        if self.prenorm:
            z = z + self.attn(self.norm1(z), kv, score, x, xc, mc)
            return z + self.ff(self.norm2(z))
        z = self.norm1(z + self.attn(z, kv, score, x, xc, mc))
        return self.norm2(z + self.ff(z))


class GaussianHead(nn.Module):
    """MLP → Normal(loc, min_std + softplus(raw_scale))."""

    def __init__(self, dim: int, hidden: Sequence[int], y_dims: int, min_std: float) -> None:
        super().__init__()
        self.mlp = MLP(dim, hidden, 2 * y_dims)
        self.min_std = min_std

    def forward(self, z: Tensor) -> torch.distributions.Normal:
        loc, raw = self.mlp(z).chunk(2, dim=-1)
        return torch.distributions.Normal(loc, self.min_std + F.softplus(raw), validate_args=False)
