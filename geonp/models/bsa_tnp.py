"""BSA-TNP (003) and its KRBlock relatives TNP-KR (001) and TNP-D.

All three are an embedding, a stack of :class:`~geonp.models.layers.KRBlock`
and a Gaussian head; they differ in how coordinates enter:

* **BSA-TNP** – coordinates are *not* embedded; each block's attention gets
  an RBF-network bias on Δspace (F=5 per head) and Δtime (F=3), or a
  great-circle bias on longitude/latitude.  Translation (rotation) invariant.
* **TNP-KR** – coordinates embedded with the values, pre-norm KRBlocks, no bias.
* **TNP-D** – coordinates embedded, post-norm blocks (001 Alg. 1): not
  translation invariant, the seeds' failure case under shift.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from ..errors import ConfigError
from .base import ModelConfig, NeuralProcess, centre
from .batch import Batch
from .bias import METRICS, RBFBias, SumBias
from .layers import MLP, GaussianHead, KRBlock
from .proximity import num_proximity_features, proximity_features

__all__ = ["KRConfig", "BSATNP", "TNPKR", "TNPD", "with_proximity_features", "with_position_moments"]


@dataclass(frozen=True)
class KRConfig(ModelConfig):
    """Architecture of the KRBlock models (paper defaults of 003 App. A)."""

    token_dim: int = 64  # width of the tokens
    num_heads: int = 4  # attention heads
    head_dim: int = 32  # per-head width ("upscale to 128" = 4 × 32)
    num_layers: int = 6  # KRBlocks
    ff_hidden: tuple[int, ...] = (256,)  # feed-forward hidden layers ("256 and 64 units": 64 → 256 → 64)
    embed_hidden: tuple[int, ...] = (256, 128)  # embedding MLP hidden layers (→ token_dim)
    head_hidden: tuple[int, ...] = (256, 64)  # prediction head hidden layers (→ 2 y_dims)
    space_bases: int = 5  # RBF bases on Δspace per head per layer
    time_bases: int = 3  # RBF bases on Δtime per head per layer
    space_metric: str = "euclidean"  # or "geodesic": space columns are lon, lat in degrees
    space_lengthscales: tuple[float, float] = (0.02, 2.0)  # initial RBF lengthscale range (space units)
    time_lengthscales: tuple[float, float] = (0.5, 24.0)  # initial RBF lengthscale range (time units)
    attention_bias: bool = True  # BSA-TNP: bias from coordinates; False for TNP-KR / TNP-D
    embed_coords: bool = False  # embed coordinates in the tokens (TNP-KR, TNP-D; breaks invariance)
    prenorm: bool = True  # pre-norm KRBlocks; False = post-norm (TNP-D)
    backend: str = "auto"  # attention backend, see geonp.models.attention
    proximity_features: bool = False  # targets see their distance to the nearest context point (geonp addition)
    bias_covariates: tuple[int, ...] = ()  # covariate columns that also get an RBF bias, e.g. elevation (geonp)
    covariate_lengthscales: tuple[float, float] = (0.1, 3.0)  # its initial lengthscales (covariate units)
    position_moments: int = 0  # channels per head of attention-weighted local-linear regression (geonp; 0 = off)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_architecture(("token_dim", "num_heads", "head_dim", "num_layers"),
                                 ("ff_hidden", "embed_hidden", "head_hidden"))
        used = [("space_bases", self.space_dims), ("time_bases", self.time_dims)] if self.attention_bias else []
        for name, dims in used:
            if dims and getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1 for a biased model with coordinates, got "
                                  f"{getattr(self, name)}.")
        if self.space_metric not in METRICS:
            raise ConfigError(f"space_metric must be one of {METRICS}, got {self.space_metric!r}.")
        if self.space_metric == "geodesic" and self.space_dims != 2:
            raise ConfigError(
                f"space_metric='geodesic' needs space_dims=2 (longitude, latitude), got {self.space_dims}."
            )
        bad = [i for i in self.bias_covariates if not 0 <= int(i) < self.covariate_dims]
        if bad:
            raise ConfigError(
                f"bias_covariates={tuple(self.bias_covariates)} names covariate columns {bad} that do not exist; "
                f"expected indices in 0..{self.covariate_dims - 1} (covariate_dims={self.covariate_dims})."
            )
        if self.position_moments < 0:
            raise ConfigError(f"position_moments must be >= 0, got {self.position_moments}.")
        if self.position_moments and (self.space_dims == 0 or self.space_metric != "euclidean"):
            raise ConfigError(
                f"position_moments={self.position_moments} needs planar space coordinates (space_dims >= 1, "
                f"space_metric='euclidean'), got space_dims={self.space_dims}, space_metric={self.space_metric!r}; "
                "use position_moments=0."
            )
        if self.space_metric != "euclidean" and not (self.attention_bias or self.proximity_features):
            raise ConfigError(
                f"space_metric={self.space_metric!r} acts through the attention bias, which this model (TNP-D, TNP-KR: "
                "coordinates embedded in the tokens) does not have, so it would be ignored; use bsa-tnp for "
                "lon/lat on the sphere, or leave space_metric out."
            )
        if self.bias_covariates and not self.attention_bias:
            raise ConfigError("bias_covariates needs attention_bias=True (BSA-TNP).")
        if not self.attention_bias and not self.embed_coords:
            raise ConfigError(
                "with attention_bias=False and embed_coords=False the model never sees the coordinates; "
                "enable one of them."
            )


class BSATNP(NeuralProcess):
    """Biased Scan Attention TNP (003): KRBlocks with coordinate biases.

    Examples
    --------
    >>> import torch
    >>> from geonp.models import Batch, build_model
    >>> model = build_model("bsa-tnp", preset="small", space_dims=2)
    >>> batch = Batch(xc=torch.rand(1, 20, 2), yc=torch.randn(1, 20, 1), xt=torch.rand(1, 5, 2))
    >>> model(batch).loc.shape
    torch.Size([1, 5, 1])
    """

    name = "bsa-tnp"

    def __init__(self, config: KRConfig) -> None:
        super().__init__()
        self.config = c = config
        self.num_proximity = num_proximity_features(c.space_dims, c.time_dims) if c.proximity_features else 0
        in_dim = c.y_dims + 1 + c.covariate_dims + (c.x_dims if c.embed_coords else 0) + self.num_proximity
        self.embed = MLP(in_dim, c.embed_hidden, c.token_dim)
        self.blocks = nn.ModuleList(
            KRBlock(c.token_dim, c.num_heads, c.head_dim, c.ff_hidden, c.prenorm, c.backend, c.space_dims,
                    c.position_moments)
            for _ in range(c.num_layers)
        )
        self.biases = nn.ModuleList(self._make_bias() for _ in range(c.num_layers)) if c.attention_bias else None
        self.norm = nn.LayerNorm(c.token_dim) if c.prenorm else nn.Identity()
        self.head = GaussianHead(c.token_dim, c.head_hidden, c.y_dims, c.min_std)

    def _make_bias(self) -> SumBias:
        c = self.config
        parts = []
        if c.space_dims:
            parts.append(
                RBFBias(c.num_heads, c.space_bases, tuple(range(c.space_dims)), metric=c.space_metric,
                        lengthscales=c.space_lengthscales)
            )
        if c.time_dims:
            parts.append(
                RBFBias(c.num_heads, c.time_bases, tuple(range(c.space_dims, c.x_dims)),
                        lengthscales=c.time_lengthscales)
            )
        if c.bias_covariates:  # columns appended after space and time by prepare(); starts switched off
            cols = tuple(range(c.x_dims, c.x_dims + len(c.bias_covariates)))
            part = RBFBias(c.num_heads, c.time_bases, cols, lengthscales=c.covariate_lengthscales)
            with torch.no_grad():
                part.weight.zero_()
            parts.append(part)
        return SumBias(parts)

    def prepare(self, batch: Batch) -> Batch:
        c = self.config
        if not c.attention_bias:  # coordinates are embedded: leave them as given
            return batch
        # geodesic space columns are absolute lon/lat; only planar columns may be centred
        cols = list(range(c.space_dims)) if c.space_metric == "euclidean" else []
        batch = centre(batch, cols + list(range(c.space_dims, c.x_dims)))
        if c.bias_covariates:  # the biased covariates become extra coordinate columns
            sel = list(c.bias_covariates)
            batch = replace(batch, xc=torch.cat([batch.xc, batch.zc[..., sel].to(batch.xc.dtype)], -1),
                            xt=torch.cat([batch.xt, batch.zt[..., sel].to(batch.xt.dtype)], -1))
        return batch

    def _tokens(self, y: Tensor, obs: float, z: Tensor | None, x: Tensor, near: Tensor | None = None) -> Tensor:
        flag = y.new_full((*y.shape[:-1], 1), obs)
        parts = [y * obs, flag]
        if self.num_proximity:  # before the covariates, so that covariate columns can be appended when fitting
            parts.append(near if near is not None else y.new_zeros(*y.shape[:-1], self.num_proximity))  # context: 0
        if z is not None:
            parts.append(z)
        if self.config.embed_coords:
            parts.append(x)
        return self.embed(torch.cat(parts, dim=-1))

    def encode(self, batch: Batch) -> list[tuple]:
        """Run the context stream; return per-layer context keys/values for the targets."""
        zc = self._tokens(batch.yc, 1.0, batch.zc, batch.xc)
        state = []
        for i, block in enumerate(self.blocks):
            kv = block.context_keys(zc, batch.xc, batch.mc)
            score = self.biases[i] if self.biases is not None else None
            state.append((kv, score, batch.xc, batch.mc))
            if i < len(self.blocks) - 1:  # the last context update is never read
                zc = block.step(zc, kv, score, batch.xc, batch.xc, batch.mc)
        return state

    def decode(self, state: list[tuple], batch: Batch) -> torch.distributions.Normal:
        c = self.config
        near = None
        if self.num_proximity:
            near = proximity_features(batch.xt, batch.xc, batch.mc, c.space_dims, c.time_dims, c.space_metric)
        zt = self._tokens(torch.zeros_like(batch.xt[..., :1]).expand(*batch.xt.shape[:-1], c.y_dims),
                          0.0, batch.zt, batch.xt, near)
        for block, (kv, score, xc, mc) in zip(self.blocks, state):
            zt = block.step(zt, kv, score, batch.xt, xc, mc)
        return self.head(self.norm(zt))


class TNPKR(BSATNP):
    """TNP-KR (001): pre-norm KRBlocks on tokens that embed the coordinates; no bias."""

    name = "tnp-kr"


class TNPD(BSATNP):
    """TNP-D: post-norm transformer blocks with the TNP mask, coordinates embedded.

    Its masked attention (context ↔ context, targets → context, one weight set)
    is exactly a post-norm KRBlock, which is how it is computed here.
    """

    name = "tnp-d"


def with_proximity_features(model: BSATNP) -> BSATNP:
    """A copy of ``model`` with ``proximity_features=True`` that predicts exactly as ``model`` does.

    The embedding's weights for the new inputs start at zero, so training can continue from
    weights trained without them (how the shipped BSA-TNP weights gained them).
    """
    if not isinstance(model, BSATNP):
        raise ConfigError(
            f"proximity features need a KRBlock model (bsa-tnp, tnp-kr, tnp-d), got {type(model).__name__}."
        )
    if model.config.proximity_features:
        return model
    ref = next(model.parameters())
    new = type(model)(replace(model.config, proximity_features=True)).to(device=ref.device, dtype=ref.dtype)
    state = model.state_dict()
    w = state["embed.0.weight"]
    at = model.config.y_dims + 1  # the features sit after the values and the observation flag
    zeros = w.new_zeros(w.shape[0], new.num_proximity)
    state["embed.0.weight"] = torch.cat([w[:, :at], zeros, w[:, at:]], dim=1)
    new.load_state_dict(state)
    return new.train(model.training)


def with_position_moments(model: BSATNP, channels: int = 4) -> BSATNP:
    """A copy of ``model`` with ``position_moments=channels`` that predicts exactly as ``model`` does.

    The moments' output projections start at zero (see :class:`~geonp.models.layers.PositionMoments`),
    so training can continue from weights trained without them.
    """
    if not isinstance(model, BSATNP):
        raise ConfigError(
            f"position moments need a KRBlock model (bsa-tnp, tnp-kr, tnp-d), got {type(model).__name__}."
        )
    if model.config.position_moments == channels:
        return model
    if model.config.position_moments:
        raise ConfigError(f"the model already has position_moments={model.config.position_moments}; "
                          f"cannot change it to {channels}.")
    ref = next(model.parameters())
    new = type(model)(replace(model.config, position_moments=channels)).to(device=ref.device, dtype=ref.dtype)
    missing, unexpected = new.load_state_dict(model.state_dict(), strict=False)
    if unexpected or not all(".moments." in k for k in missing):
        raise ConfigError(
            f"cannot add position moments to this {type(model).__name__}: its weights do not match the "
            f"architecture (unexpected {unexpected[:3]}, missing {[k for k in missing if '.moments.' not in k][:3]}); "
            "pass a model built by geonp.models.build_model or loaded with load_model."
        )
    return new.train(model.training)
