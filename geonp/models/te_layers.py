"""Translation-equivariant attention layers of TE-TNP and TE-PT-TNP (000 §3).

* :class:`TEAttention` – multi-head attention whose logits are
  ``ρ_h(q_n·k_m/√d, x_n − x_m)`` (:class:`TEScore`, 000 eq. 8; 004 eq. 0.2.3: one MLP maps the
  per-head dot products and the coordinate difference to per-head logits),
  computed by the shared tiled kernel, plus the optional location update
  (000 eq. 10) ``x_n ← x_n + 1/N Σ_h Σ_m (x_n − x_m) φ_h(α_{·,n,m})``.
* :class:`TEBlock` – pre-norm residual block around it: ``z + attn(LN z)``,
  then ``z + FF(LN z)``; one LayerNorm serves queries and keys.
* :class:`PseudoLocations` – TE-PT-TNP's initial pseudo-locations (000 eq. 11).

Coordinates enter only as differences, so tokens are translation invariant and
updated locations translation equivariant.  Nothing here materialises an
``nq × nk`` pair tensor beyond one tile of :data:`TE_TILE_ELEMENTS` elements
(counting the hidden width of ρ and φ).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from .attention import K_TILE, attention, tiled_attention
from .layers import MLP, MultiHeadAttention
from .score import MASKED, MIN_EXPONENT, ScoreMod

__all__ = ["TEScore", "TEAttention", "TEBlock", "PseudoLocations", "TE_TILE_ELEMENTS", "TE_ONE_TILE_ELEMENTS"]

#: elements of one ``[b, q_tile, k_tile, width]`` pair tensor inside ρ or φ (4 MB in float32). ρ and φ make
#: several passes over each pair tensor, so a tile that stays in the CPU cache is faster: against 2**24
#: (64 MB), a TE-PT-TNP forward took 1.3 instead of 2.5 CPU-s and a training step 2.8 instead of 4.0
#: (one thread, AMD EPYC, 2026-11-24; 2**19 and 2**21 were slower than 2**20). Results do not depend on it.
TE_TILE_ELEMENTS = 2**20
#: under autograd, a whole problem up to this many pair elements (64 MB) stays one tile (the location update
#: then reuses the attention's logits: cheaper at the seeds' training shapes); larger problems, and inference
#: (where the one tile cost 200 MB more peak memory and no time on the ERA5 month), use TE_TILE_ELEMENTS
TE_ONE_TILE_ELEMENTS = 2**24


class TEScore(ScoreMod):
    """TE attention logits ``ρ(q·k/√d, x_q − x_k)`` ("post" form, 000 eq. 8).

    One MLP with ``hidden`` layers maps the ``h`` per-head scaled dot products
    and the ``c`` coordinate differences of a pair to ``h`` logits.
    """

    additive = False

    def __init__(self, num_heads: int, coord_dims: int, hidden: tuple[int, ...] = (32, 32)) -> None:
        super().__init__()
        self.num_heads, self.coord_dims = num_heads, coord_dims
        layers: list[nn.Module] = []
        width = num_heads + coord_dims
        for w in hidden:
            layers += [nn.Linear(width, w), nn.GELU()]
            width = w
        layers.append(nn.Linear(width, num_heads))
        self.mlp = nn.Sequential(*layers)

    def forward(self, scores: Tensor, xq: Tensor, xk: Tensor) -> Tensor:
        diff = xq[:, :, None, :] - xk[:, None, :, :]  # [b, nq, nk, c]
        pair = torch.cat((scores.permute(0, 2, 3, 1), diff.to(scores.dtype)), dim=-1)  # [b, nq, nk, h + c]
        return self.mlp(pair).permute(0, 3, 1, 2)  # [b, h, nq, nk]

    def misfit(self, heads: int, columns: int) -> str | None:
        if (self.num_heads, self.coord_dims) != (heads, columns):
            return (f"the score takes {self.num_heads} heads and {self.coord_dims} coordinate columns, the attention "
                    f"has {heads} and {columns}; build it with TEScore({heads}, {columns})")
        return None


class TEAttention(nn.Module):
    """TE multi-head attention (000 eqs. 7–8) with the location update of eq. 10.

    Parameters
    ----------
    dim : int
        Token width.
    num_heads, head_dim : int
        Heads ``H`` and per-head query/key/value width.
    coord_dims : int
        Coordinate columns ``dx``.
    rho_hidden : sequence of int
        Hidden layers of ρ: ``(H dot products, Δx) → H logits``.
    phi_hidden : sequence of int, optional
        Hidden layers of φ: ``H attention weights → H location weights``;
        ``None`` switches the location update off (locations pass through).
    backend : str
        Attention backend when the location update is off (see
        :func:`~geonp.models.attention.attention`); with it on, the tiled kernel
        is always used because its row log-sum-exp is needed.
    """

    def __init__(
        self, dim: int, num_heads: int, head_dim: int, coord_dims: int, rho_hidden: Sequence[int],
        phi_hidden: Sequence[int] | None = None, backend: str = "auto",
    ) -> None:
        super().__init__()
        self.attn = MultiHeadAttention(dim, num_heads, head_dim, backend)
        self.score = TEScore(num_heads, coord_dims, tuple(rho_hidden))
        self.phi = MLP(num_heads, phi_hidden, num_heads) if phi_hidden is not None else None
        self.width = max(num_heads + coord_dims, *rho_hidden, *(phi_hidden or ()))
        self.tile_elements = TE_TILE_ELEMENTS  # memory knob only: results do not depend on it
        self.one_tile_elements = TE_ONE_TILE_ELEMENTS  # speed knob only (0: always tile by tile_elements)

    def tiles(self, b: int, nq: int, nk: int) -> tuple[int, int]:
        """Query and key tile sizes so that one ``[b, tq, tk, width]`` pair tensor holds about ``tile_elements``."""
        one_tile = self.one_tile_elements if torch.is_grad_enabled() else 0  # inference: bounded by the tile
        if nk <= K_TILE and b * nq * nk * self.width <= max(self.tile_elements, one_tile):
            return max(1, nq), max(1, nk)  # one tile: eq. 10 shares its logits with the attention
        k_tile = max(1, min(nk, K_TILE, self.tile_elements // max(1, b * self.width)))
        q_tile = max(1, min(nq, self.tile_elements // max(1, b * k_tile * self.width)))
        return q_tile, k_tile

    def forward(
        self, zq: Tensor, kv: tuple[Tensor, Tensor], xq: Tensor, xk: Tensor, key_mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Attend from ``zq [b, nq, dim]`` at ``xq [b, nq, dx]`` to keys/values at ``xk [b, nk, dx]``.

        Returns the token update ``[b, nq, dim]`` and the (updated) query locations ``[b, nq, dx]``.
        """
        a = self.attn
        q = a.split(a.to_q(zq))  # [b, h, nq, d]
        k, v = kv
        b, _, nq, _ = q.shape
        q_tile, k_tile = self.tiles(b, nq, k.shape[2])
        if self.phi is None:
            o = attention(q, k, v, self.score, xq, xk, key_mask, backend=a.backend, q_tile=q_tile, k_tile=k_tile)
            x_new = xq
        elif self._one_pass(q, k, v, key_mask, k_tile):
            o, x_new = self._one_key_tile(q, k, v, xq, xk, key_mask, q_tile)
        else:
            o, lse = tiled_attention(q, k, v, self.score, xq, xk, key_mask, q_tile=q_tile, k_tile=k_tile,
                                     return_lse=True)
            x_new = xq + self.location_step(q, k, xq, xk, key_mask, lse)
        return a.out(o.transpose(1, 2).reshape(b, nq, -1)), x_new  # [b, h, nq, d] → [b, nq, h·d] → [b, nq, dim]

    @staticmethod
    def _one_pass(q: Tensor, k: Tensor, v: Tensor, key_mask: Tensor | None, k_tile: int) -> bool:
        """Whether inference can take the attention and its location step from one evaluation of ρ per pair.

        With one key tile every query tile's log-sum-exp is known from its own logits. Not under
        autograd (the kernel's recomputing backward keeps memory bounded there), not with values wider
        than the keys, nor where a task has no real key (the kernel's uniform mean).
        """
        return (not torch.is_grad_enabled() and k.shape[2] <= k_tile and v.shape[-1] == q.shape[-1]
                and (key_mask is None or bool(key_mask.any(-1).all())))

    def _one_key_tile(self, q: Tensor, k: Tensor, v: Tensor, xq: Tensor, xk: Tensor, key_mask: Tensor | None,
                      q_tile: int) -> tuple[Tensor, Tensor]:
        """Attention ``[b, h, nq, e]`` and updated locations ``[b, nq, dx]`` with ρ evaluated once per pair.

        The same operations as :func:`~geonp.models.attention.tiled_attention` over one key tile followed
        by :meth:`location_step` (which evaluates ρ again): the same numbers, 12–16 % less CPU time for
        TE-PT-TNP infilling 48 and 96 ERA5 frames (docs/benchmarks.md, "TE-PT-TNP: ρ once per pair").
        """
        b, h, nq, _ = q.shape
        n = key_mask.sum(1) if key_mask is not None else torch.full((b,), k.shape[2], device=xq.device)
        inv_n = 1.0 / n.clamp_min(1).to(xq.dtype)[:, None, None]
        outs, shifts = [], []
        for qs in range(0, nq, q_tile):
            q_t, xq_t = q[:, :, qs:qs + q_tile], xq[:, qs:qs + q_tile]
            logits = self._logits(q_t, xq_t, k, xk, key_mask)
            lse = torch.logsumexp(logits, dim=-1)
            alpha = logits.sub_(lse[..., None]).clamp_(min=MIN_EXPONENT).exp_()  # [b, h, tq, nk]
            outs.append(torch.matmul(alpha, v))
            shifts.append(self._weighted_shift(alpha, xq_t, xk, key_mask))
        return torch.cat(outs, 2), xq + torch.cat(shifts, 1) * inv_n

    def location_step(
        self, q: Tensor, k: Tensor, xq: Tensor, xk: Tensor, key_mask: Tensor | None, lse: Tensor
    ) -> Tensor:
        """Eq. 10 increment ``1/N Σ_m (x_n − x_m) Σ_h φ_h(α_{·,n,m})``, ``[b, nq, dx]``.

        ``α = exp(logits − lse)`` is recomputed tile by tile from the kernel's row
        log-sum-exp.  Under autograd the normaliser gets its exact gradient through
        a zero-valued correction term (``d lse / d logit = α``) and every tile is
        checkpointed, so memory stays bounded by one tile in training too.
        """
        b, _, nq, _ = q.shape
        nk = k.shape[2]
        q_tile, k_tile = self.tiles(b, nq, nk)
        grad = torch.is_grad_enabled()
        n = key_mask.sum(1) if key_mask is not None else torch.full((b,), nk, device=xq.device)  # [b] real keys
        inv_n = 1.0 / n.clamp_min(1).to(xq.dtype)[:, None, None]  # [b, 1, 1]
        if q_tile >= nq and k_tile >= nk:  # one tile: share the logits between both passes
            logits = self._logits(q, xq, k, xk, key_mask)
            if grad:
                lse = lse + _lse_correction(logits, lse)
            return self._shift(q, xq, lse, k, xk, key_mask, logits) * inv_n

        def run(fn, *args):
            return checkpoint(fn, *args, use_reentrant=False) if grad else fn(*args)

        key_tiles = [
            (k[:, :, s:s + k_tile], xk[:, s:s + k_tile], None if key_mask is None else key_mask[:, s:s + k_tile])
            for s in range(0, nk, k_tile)
        ]
        rows = []
        for qs in range(0, nq, q_tile):
            q_t, xq_t, lse_t = q[:, :, qs:qs + q_tile], xq[:, qs:qs + q_tile], lse[:, :, qs:qs + q_tile]
            if grad:
                lse_t = lse_t + sum(run(self._lse_term, q_t, xq_t, lse_t, *kt) for kt in key_tiles)
            rows.append(sum(run(self._shift, q_t, xq_t, lse_t, *kt) for kt in key_tiles))
        return torch.cat(rows, 1) * inv_n  # [b, nq, dx]

    def _logits(self, q: Tensor, xq: Tensor, k: Tensor, xk: Tensor, key_mask: Tensor | None) -> Tensor:
        """Masked logits ``[b, h, tq, tk]`` of one tile, as the kernel computes them."""
        logits = self.score(torch.matmul(q, k.transpose(-1, -2)) * q.shape[-1] ** -0.5, xq, xk)
        if key_mask is not None:
            logits = logits.masked_fill(~key_mask[:, None, None, :], MASKED)
        return logits

    def _lse_term(self, q, xq, lse, k, xk, key_mask) -> Tensor:
        return _lse_correction(self._logits(q, xq, k, xk, key_mask), lse)

    def _shift(self, q, xq, lse, k, xk, key_mask, logits: Tensor | None = None) -> Tensor:
        """Unnormalised eq. 10 sum over one key tile, ``[b, tq, dx]``."""
        if logits is None:
            logits = self._logits(q, xq, k, xk, key_mask)
        alpha = (logits - lse[..., None]).clamp(min=MIN_EXPONENT).exp()  # [b, h, tq, tk]
        return self._weighted_shift(alpha, xq, xk, key_mask)

    def _weighted_shift(self, alpha: Tensor, xq: Tensor, xk: Tensor, key_mask: Tensor | None) -> Tensor:
        """``Σ_m (x_n − x_m) Σ_h φ_h(α_{·,n,m})`` over one key tile, ``[b, tq, dx]``, from its weights ``α``."""
        w = self.phi(alpha.permute(0, 2, 3, 1)).sum(-1)  # [b, tq, tk, h] → Σ_h φ_h → [b, tq, tk]
        if key_mask is not None:
            w = w.masked_fill(~key_mask[:, None, :], 0.0)  # padded keys move nothing (φ(0) ≠ 0)
        diff = xq[:, :, None, :] - xk[:, None, :, :]  # [b, tq, tk, dx]; exact differences
        return (w[..., None] * diff).sum(2)  # [b, tq, dx]


def _lse_correction(logits: Tensor, lse: Tensor) -> Tensor:
    """Zero ``[b, h, tq]`` whose gradient w.r.t. ``logits`` is ``α`` (that of the row log-sum-exp)."""
    alpha = (logits.detach() - lse[..., None]).clamp(min=MIN_EXPONENT).exp()
    return (alpha * (logits - logits.detach())).sum(-1)


class TEBlock(nn.Module):
    """Pre-norm TE attention block: ``z ← z + TEAttn(LN z, LN z_k)``, ``z ← z + FF(LN z)``.

    Parameters
    ----------
    dim, num_heads, head_dim, coord_dims, rho_hidden, phi_hidden, backend
        As for :class:`TEAttention` (``phi_hidden=None``: locations are not updated).
    ff_hidden : sequence of int
        Hidden layers of the pointwise feed-forward MLP.
    """

    def __init__(
        self, dim: int, num_heads: int, head_dim: int, coord_dims: int, rho_hidden: Sequence[int],
        ff_hidden: Sequence[int], phi_hidden: Sequence[int] | None = None, backend: str = "auto",
    ) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = TEAttention(dim, num_heads, head_dim, coord_dims, rho_hidden, phi_hidden, backend)
        self.ff = MLP(dim, ff_hidden, dim)

    def keys(self, zk: Tensor) -> tuple[Tensor, Tensor]:
        """Per-head keys and values ``[b, h, nk, d]`` of the normalised key tokens ``zk [b, nk, dim]``."""
        return self.attn.attn.keys_values(self.norm1(zk))

    def forward(
        self, z: Tensor, kv: tuple[Tensor, Tensor], x: Tensor, xk: Tensor, key_mask: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Update tokens ``z [b, n, dim]`` at ``x [b, n, dx]``; return new tokens and locations."""
        update, x_new = self.attn(self.norm1(z), kv, x, xk, key_mask)
        z = z + update
        return z + self.ff(self.norm2(z)), x_new


class PseudoLocations(nn.Module):
    """Initial pseudo-locations of TE-PT-TNP (000 eq. 11).

    ``v_m = v⁰_m + Σ_n softmax_n(ψ(u_m, z_n)) x_n`` with ψ a single-head dot-product
    attention between pseudo-tokens and context tokens.  The weights sum to one and
    depend on tokens only, so ``v`` moves with the data under translation.

    Parameters
    ----------
    dim : int
        Token width.
    num_pseudo : int
        Pseudo-tokens ``M``.
    coord_dims : int
        Coordinate columns ``dx``.
    qk_dim : int
        Query/key width of ψ.
    """

    def __init__(self, dim: int, num_pseudo: int, coord_dims: int, qk_dim: int) -> None:
        super().__init__()
        self.offset = nn.Parameter(torch.randn(num_pseudo, coord_dims))  # v⁰, N(0, 1) (000 App. F.1)
        self.to_q = nn.Linear(dim, qk_dim)
        self.to_k = nn.Linear(dim, qk_dim)

    def forward(self, u: Tensor, zc: Tensor, xc: Tensor, mc: Tensor | None = None) -> Tensor:
        """Pseudo-locations ``[b, M, dx]`` from ``u [b, M, dim]``, ``zc [b, nc, dim]``, ``xc [b, nc, dx]``."""
        q = self.to_q(u)[:, None]  # [b, 1, M, d]
        k = self.to_k(zc)[:, None]  # [b, 1, nc, d]
        mean = attention(q, k, xc[:, None], key_mask=mc)  # [b, 1, M, dx]
        return self.offset + mean[:, 0]  # [b, M, dx]
