"""TE-TNP and TE-PT-TNP: translation-equivariant transformer neural processes (000 §3, §3.1).

Both embed only values and covariates; coordinates enter the attention logits
through differences (``ρ(q·k/√d, x_n − x_m)``, 000 eq. 8) and are carried beside
the tokens, updated layer by layer with 000 eq. 10.  Predictions are therefore
invariant to translating every coordinate.

* **TE-TNP** – per layer, the context self-attends (TE-MHSA) and the targets
  cross-attend to the updated context tokens at the previous context locations
  (TE-MHCA, 000 Fig. 1(b)).  Cost ``O(nc² + nc·nt)``.
* **TE-PT-TNP** – IST-style with ``M`` pseudo-tokens ``U`` at pseudo-locations
  ``V`` (init 000 eq. 11): per layer ``(U, V) ← TE-MHCA(U → context)``,
  ``Z_c ← TE-MHCA(Z_c → U)``, ``Z_t ← TE-MHCA(Z_t → U)``.  Cost ``O(M (nc + nt))``.

In both, targets never see each other, so decoding targets in slices is exact.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from ..errors import ConfigError
from .base import ModelConfig, NeuralProcess, centre
from .batch import Batch
from .layers import MLP, GaussianHead
from .te_layers import PseudoLocations, TEBlock

__all__ = ["TEConfig", "TEPTConfig", "TETNP", "TEPTTNP"]


@dataclass(frozen=True)
class TEConfig(ModelConfig):
    """Architecture of TE-TNP (paper defaults of 000 App. F.1 and the tetnp reference configs)."""

    token_dim: int = 128  # token width D_z
    num_heads: int = 8  # attention heads H
    head_dim: int = 16  # per-head query/key/value width D_QK = D_V
    num_layers: int = 5  # TE attention layers
    ff_hidden: tuple[int, ...] = (128,)  # pointwise feed-forward hidden layers (tetnp: one of width D_z)
    embed_hidden: tuple[int, ...] = (128, 128)  # context embedding MLP(y, z) hidden layers (2 × D_z)
    head_hidden: tuple[int, ...] = (128, 128)  # Gaussian head hidden layers (2 × D_z)
    rho_hidden: tuple[int, ...] = (128, 128)  # ρ: (H dot products, Δx) → H logits (2 × D_z)
    phi_hidden: tuple[int, ...] = (128, 128)  # φ: H attention weights → H location weights, eq. 10 (2 × D_z)
    update_locations: bool = True  # eq. 10 location updates; False keeps locations fixed (000 App. F.5 ablation)
    backend: str = "auto"  # attention backend of layers without location update, see geonp.models.attention

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_architecture(("token_dim", "num_heads", "head_dim", "num_layers"),
                                 ("ff_hidden", "embed_hidden", "head_hidden", "rho_hidden", "phi_hidden"))


@dataclass(frozen=True)
class TEPTConfig(TEConfig):
    """Architecture of TE-PT-TNP: :class:`TEConfig` plus the pseudo-tokens (003 App. A: 32)."""

    num_pseudo: int = 32  # pseudo-tokens M (and pseudo-locations)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_pseudo < 1:
            raise ConfigError(f"num_pseudo must be >= 1, got {self.num_pseudo}; the paper uses 8 to 128.")


def _zero_padding(batch: Batch) -> Batch:
    """Zero every padded entry, so NaN or huge padding never reaches the arithmetic."""

    def fill(t: Tensor | None, mask: Tensor | None) -> Tensor | None:
        if t is None or mask is None:
            return t
        return torch.where(mask[..., None], t, torch.zeros((), dtype=t.dtype, device=t.device))

    return replace(
        batch, xc=fill(batch.xc, batch.mc), yc=fill(batch.yc, batch.mc), zc=fill(batch.zc, batch.mc),
        xt=fill(batch.xt, batch.mt), zt=fill(batch.zt, batch.mt),
    )


class _TEModel(NeuralProcess):
    """Shared parts: value/covariate embedding, target token, head, centring."""

    config: TEConfig

    def __init__(self, config: TEConfig) -> None:
        super().__init__()
        self.config = c = config
        self.embed = MLP(c.y_dims + c.covariate_dims, c.embed_hidden, c.token_dim)  # Z_c⁰ = MLP(y, z)
        self.target_token = nn.Parameter(torch.randn(c.token_dim))  # learned, N(0, 1) init (000 App. F.1)
        self.target_embed = MLP(c.covariate_dims, c.embed_hidden, c.token_dim) if c.covariate_dims else None
        self.norm = nn.LayerNorm(c.token_dim)
        self.head = GaussianHead(c.token_dim, c.head_hidden, c.y_dims, c.min_std)

    def _block(self, update: bool) -> TEBlock:
        c = self.config
        phi = c.phi_hidden if update and c.update_locations else None
        return TEBlock(c.token_dim, c.num_heads, c.head_dim, c.x_dims, c.rho_hidden, c.ff_hidden, phi, c.backend)

    def prepare(self, batch: Batch) -> Batch:
        """Zero the padding and centre every coordinate column per task (float64; numerics only)."""
        return centre(_zero_padding(batch), list(range(self.config.x_dims)))

    def _context_tokens(self, batch: Batch) -> Tensor:
        parts = [batch.yc] if batch.zc is None else [batch.yc, batch.zc]
        return self.embed(torch.cat(parts, dim=-1))  # [b, nc, y_dims + dz] → [b, nc, D]

    def _target_tokens(self, batch: Batch) -> Tensor:
        b, nt, _ = batch.xt.shape
        zt = self.target_token.expand(b, nt, -1)  # [D] → [b, nt, D]; independent of x_t
        return zt if self.target_embed is None else zt + self.target_embed(batch.zt)

    def _predict(self, zt: Tensor) -> torch.distributions.Normal:
        return self.head(self.norm(zt))


class TETNP(_TEModel):
    """Translation-equivariant TNP (000 §3): TE-MHSA on the context, TE-MHCA for the targets.

    Parameters
    ----------
    config : TEConfig
        Architecture; see :func:`~geonp.models.build_model` for presets.

    Examples
    --------
    >>> import torch
    >>> from geonp.models import Batch, build_model
    >>> model = build_model("te-tnp", preset="small", space_dims=2)
    >>> batch = Batch(xc=torch.rand(1, 20, 2), yc=torch.randn(1, 20, 1), xt=torch.rand(1, 5, 2))
    >>> model(batch).loc.shape
    torch.Size([1, 5, 1])
    """

    name = "te-tnp"

    def __init__(self, config: TEConfig) -> None:
        super().__init__(config)
        last = config.num_layers - 1
        # locations computed in the last layer are never read, so that layer has no φ
        self.context_blocks = nn.ModuleList(self._block(update=i < last) for i in range(config.num_layers))
        self.target_blocks = nn.ModuleList(self._block(update=i < last) for i in range(config.num_layers))

    def encode(self, batch: Batch) -> list[tuple]:
        """Run the context stream; return per layer the target blocks' keys/values and context locations."""
        zc, xc = self._context_tokens(batch), batch.xc
        state = []
        for cb, tb in zip(self.context_blocks, self.target_blocks):
            zc_new, xc_new = cb(zc, cb.keys(zc), xc, xc, batch.mc)
            state.append((tb.keys(zc_new), xc))  # updated tokens at the previous locations (000 Fig. 1(b))
            zc, xc = zc_new, xc_new
        return state

    def decode(self, state: list[tuple], batch: Batch) -> torch.distributions.Normal:
        zt, xt = self._target_tokens(batch), batch.xt
        for tb, (kv, xc) in zip(self.target_blocks, state):
            zt, xt = tb(zt, kv, xt, xc, batch.mc)
        return self._predict(zt)


class TEPTTNP(_TEModel):
    """Pseudo-token TE-TNP, IST style (000 §3.1): cost linear in context and target size.

    Parameters
    ----------
    config : TEPTConfig
        Architecture; see :func:`~geonp.models.build_model` for presets.

    Examples
    --------
    >>> import torch
    >>> from geonp.models import Batch, build_model
    >>> model = build_model("te-pt-tnp", preset="small", space_dims=2)
    >>> batch = Batch(xc=torch.rand(1, 20, 2), yc=torch.randn(1, 20, 1), xt=torch.rand(1, 5, 2))
    >>> model(batch).loc.shape
    torch.Size([1, 5, 1])
    """

    name = "te-pt-tnp"
    config: TEPTConfig

    def __init__(self, config: TEPTConfig) -> None:
        super().__init__(config)
        c, layers = config, config.num_layers
        self.pseudo_tokens = nn.Parameter(torch.randn(c.num_pseudo, c.token_dim))  # U, N(0, 1) init
        self.pseudo_init = PseudoLocations(c.token_dim, c.num_pseudo, c.x_dims, c.head_dim)  # eq. 11
        self.pseudo_blocks = nn.ModuleList(self._block(update=True) for _ in range(layers))  # U → context
        # the last layer's context update is never read, so there are layers − 1 context blocks
        self.context_blocks = nn.ModuleList(self._block(update=False) for _ in range(layers - 1))  # context → U
        self.target_blocks = nn.ModuleList(self._block(update=False) for _ in range(layers))  # targets → U

    def encode(self, batch: Batch) -> list[tuple]:
        """Run pseudo-tokens and context; return per layer the target blocks' keys/values and ``V``."""
        zc, xc, mc = self._context_tokens(batch), batch.xc, batch.mc
        u = self.pseudo_tokens.expand(zc.shape[0], -1, -1)  # [M, D] → [b, M, D]
        v = self.pseudo_init(u, zc, xc, mc)  # [b, M, dx]
        state = []
        for i, pb in enumerate(self.pseudo_blocks):
            u, v = pb(u, pb.keys(zc), v, xc, mc)
            state.append((self.target_blocks[i].keys(u), v))
            if i < len(self.context_blocks):
                cb = self.context_blocks[i]
                zc, _ = cb(zc, cb.keys(u), xc, v)
        return state

    def decode(self, state: list[tuple], batch: Batch) -> torch.distributions.Normal:
        zt = self._target_tokens(batch)
        for tb, (kv, v) in zip(self.target_blocks, state):
            zt, _ = tb(zt, kv, batch.xt, v)
        return self._predict(zt)
