"""Building blocks shared by the models: MLP, biased multi-head attention, KRBlock, Gaussian head."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .attention import attention
from .score import ScoreMod

__all__ = ["MLP", "PositionMoments", "MultiHeadAttention", "KRBlock", "GaussianHead"]


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


class PositionMoments(nn.Module):
    """Attention-weighted local-linear regression of learned channels (a geonp addition).

    Softmax attention with a distance bias is a kernel smoother: it cannot see on which side of a
    query its keys lie, so next to the edge of a gap (or in a trend) it shrinks towards the mean
    and it cannot reproduce a smooth field exactly. With ``p`` channels ``u = W z`` per head, the
    keys' values also carry ``x``, ``x xᵀ``, ``u`` and ``u xᵀ`` (space columns only); from their
    attention-weighted sums each query gets, per head,

    * the local-linear estimate's correction ``-C_ux (C_xx + λ I)⁻¹ m`` of each channel, where
      ``m = Σ a (x_j - x_i)``, ``C_xx`` and ``C_ux`` are the weighted (co)variances of the keys'
      positions and channels and ``λ`` a small ridge;
    * the offset ``m / σ`` of the keys' centre and ``log σ²``, with ``σ² = tr C_xx / s``.

    Every one is a function of coordinate differences, so the model stays translation invariant.
    The features enter the attention output through a zero-initialised projection, so adding them
    to trained weights leaves the predictions unchanged.
    """

    def __init__(self, dim: int, num_heads: int, space_dims: int, channels: int) -> None:
        super().__init__()
        self.h, self.s, self.p = num_heads, space_dims, channels
        self.to_u = nn.Linear(dim, num_heads * channels)
        self.out = nn.Linear(num_heads * (channels + space_dims + 1), dim)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)
        rows, cols = torch.triu_indices(space_dims, space_dims)
        self.register_buffer("_rows", rows, persistent=False)
        self.register_buffer("_cols", cols, persistent=False)

    @property
    def num_channels(self) -> int:
        """Extra value channels per head: ``x``, upper triangle of ``x xᵀ``, ``u``, ``u xᵀ``."""
        s, p = self.s, self.p
        return s + s * (s + 1) // 2 + p + p * s

    def key_channels(self, z: Tensor, x: Tensor, key_mask: Tensor | None) -> Tensor:
        """Extra value channels ``[b, h, nk, num_channels]`` of key tokens ``z`` at coordinates ``x``."""
        b, n, _ = z.shape
        xs = x[..., : self.s].to(z.dtype)
        if key_mask is not None:  # padded keys get no weight, but may hold NaN: select, never multiply
            xs = torch.where(key_mask[..., None], xs, 0.0)
        u = self.to_u(z).view(b, n, self.h, self.p).transpose(1, 2)  # [b, h, n, p]
        xx = (xs[..., self._rows] * xs[..., self._cols])[:, None].expand(b, self.h, n, -1)
        ux = (u[..., :, None] * xs[:, None, :, None, :]).flatten(-2)  # [b, h, n, p·s]
        return torch.cat([xs[:, None].expand(b, self.h, n, self.s), xx, u, ux], -1)

    def features(self, o: Tensor, xq: Tensor) -> Tensor:
        """Output ``[b, nq, dim]`` from the attention-weighted channels ``o [b, h, nq, num_channels]``."""
        s, p = self.s, self.p
        xi = xq[..., :s].to(o.dtype)[:, None]  # [b, 1, nq, s]
        mbar, mxx, ubar, mux = o.split([s, s * (s + 1) // 2, p, p * s], -1)
        full = o.new_zeros(*o.shape[:-1], s, s)
        full[..., self._rows, self._cols] = mxx
        full[..., self._cols, self._rows] = mxx
        cxx = full - mbar[..., :, None] * mbar[..., None, :]  # weighted covariance of the key positions
        cux = mux.unflatten(-1, (p, s)) - ubar[..., :, None] * mbar[..., None, :]  # [.., p, s]
        m = mbar - xi  # weighted mean offset of the keys from the query
        var = cxx.diagonal(dim1=-2, dim2=-1).sum(-1).clamp_min(0.0) / s  # [b, h, nq]
        ridge = (1e-3 * var + 1e-4)[..., None, None] * torch.eye(s, dtype=o.dtype, device=o.device)
        slope = _solve_small(cxx + ridge, m)  # (C_xx + λI)⁻¹ m
        corr = -(cux * slope[..., None, :]).sum(-1)  # [b, h, nq, p]
        sigma = (var + 1e-4).sqrt()
        f = torch.cat([corr, m / sigma[..., None], (var + 1e-4).log()[..., None]], -1)  # [b, h, nq, p + s + 1]
        b, _, nq, _ = f.shape
        return self.out(f.transpose(1, 2).reshape(b, nq, -1))


def _solve_small(a: Tensor, b: Tensor) -> Tensor:
    """``a⁻¹ b`` for batches of small symmetric positive definite ``a [..., s, s]``; closed form for ``s ≤ 2``."""
    s = a.shape[-1]
    if s == 1:
        return b / a[..., 0]
    if s == 2:
        p, q, r = a[..., 0, 0], a[..., 0, 1], a[..., 1, 1]
        det = p * r - q * q
        return torch.stack([r * b[..., 0] - q * b[..., 1], p * b[..., 1] - q * b[..., 0]], -1) / det[..., None]
    return torch.linalg.solve(a, b[..., None])[..., 0]


class MultiHeadAttention(nn.Module):
    """Multi-head attention whose logits may depend on coordinates through a :class:`ScoreMod`.

    Tokens of width ``dim`` are projected to ``num_heads × head_dim`` for
    attention ("upscale to 128" in BSA-TNP) and back to ``dim``.
    """

    def __init__(
        self, dim: int, num_heads: int, head_dim: int, backend: str = "auto", space_dims: int = 0,
        moment_channels: int = 0,
    ) -> None:
        super().__init__()
        self.num_heads, self.head_dim, self.backend = num_heads, head_dim, backend
        inner = num_heads * head_dim
        self.to_q = nn.Linear(dim, inner)
        self.to_kv = nn.Linear(dim, 2 * inner)
        self.out = nn.Linear(inner, dim)
        self.moments = PositionMoments(dim, num_heads, space_dims, moment_channels) if moment_channels else None

    def split(self, t: Tensor) -> Tensor:
        """``[b, n, h·d]`` → ``[b, h, n, d]``."""
        b, n, _ = t.shape
        return t.view(b, n, self.num_heads, self.head_dim).transpose(1, 2)

    def keys_values(self, z: Tensor, x: Tensor | None = None, key_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Per-head keys and values ``[b, h, nk, d]`` of key tokens ``z [b, nk, dim]`` at coordinates ``x``.

        With position moments the values carry their extra channels after the ``d`` learned ones.
        """
        k, v = self.to_kv(z).chunk(2, dim=-1)
        k, v = self.split(k), self.split(v)
        if self.moments is not None:
            v = torch.cat([v, self.moments.key_channels(z, x, key_mask)], -1)
        return k, v

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
        o = attention(q, kv[0], kv[1], score, xq, xk, key_mask, backend=self.backend)  # [b, h, nq, d (+ moments)]
        b, _, nq, _ = o.shape
        out = self.out(o[..., : self.head_dim].transpose(1, 2).reshape(b, nq, -1))
        if self.moments is not None:
            out = out + self.moments.features(o[..., self.head_dim:], xq)
        return out


class KRBlock(nn.Module):
    """Kernel-regression block (001 Alg. 2): one weight set for both streams.

    Context tokens self-attend; target tokens cross-attend to the context.  Targets
    never see each other, so any split of the targets gives the same result.
    ``prenorm=False`` gives the post-norm transformer block of TNP-D (001 Alg. 1).
    """

    def __init__(
        self, dim: int, num_heads: int, head_dim: int, ff_hidden: Sequence[int], prenorm: bool = True,
        backend: str = "auto", space_dims: int = 0, moment_channels: int = 0,
    ) -> None:
        super().__init__()
        self.prenorm = prenorm
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = MultiHeadAttention(dim, num_heads, head_dim, backend, space_dims, moment_channels)
        self.ff = MLP(dim, ff_hidden, dim)

    def context_keys(self, zc: Tensor, xc: Tensor | None = None, mc: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Keys and values of the (normalised) context tokens at ``xc``, shared by both streams."""
        return self.attn.keys_values(self.norm1(zc) if self.prenorm else zc, xc, mc)

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
