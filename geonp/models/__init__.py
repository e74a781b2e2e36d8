"""Neural-process models on tensors (torch only; no xarray here).

>>> from geonp.models import build_model, Batch
"""

from __future__ import annotations

from .attention import attention, dense_attention, tiled_attention
from .base import ModelConfig, NeuralProcess
from .batch import Batch
from .bsa_tnp import BSATNP, TNPD, TNPKR, KRConfig
from .registry import ModelSpec, build_model, get_spec, model_from_config, model_names, register
from .te_tnp import TEPTTNP, TETNP, TEConfig, TEPTConfig
from .windows import predict_in_windows

_SMALL_KR = dict(
    token_dim=32, num_heads=4, head_dim=16, num_layers=4, ff_hidden=(128, 32), embed_hidden=(128, 64),
    head_hidden=(128, 32),
)
_KR_FLAGS = {
    "bsa-tnp": (BSATNP, dict(attention_bias=True, embed_coords=False, prenorm=True)),
    "tnp-kr": (TNPKR, dict(attention_bias=False, embed_coords=True, prenorm=True)),
    "tnp-d": (TNPD, dict(attention_bias=False, embed_coords=True, prenorm=False)),
}
for _name, (_cls, _flags) in _KR_FLAGS.items():
    register(ModelSpec(_name, _cls, KRConfig, {"paper": {}, "small": dict(_SMALL_KR)}, _flags))

_SMALL_TE = dict(
    token_dim=32, num_heads=4, head_dim=8, num_layers=3, ff_hidden=(32,), embed_hidden=(32, 32),
    head_hidden=(32, 32), rho_hidden=(32, 32), phi_hidden=(32, 32),
)
register(ModelSpec("te-tnp", TETNP, TEConfig, {"paper": {}, "small": dict(_SMALL_TE)}, {}))
register(ModelSpec("te-pt-tnp", TEPTTNP, TEPTConfig, {"paper": {}, "small": dict(_SMALL_TE, num_pseudo=16)}, {}))

__all__ = [
    "Batch",
    "ModelConfig",
    "NeuralProcess",
    "KRConfig",
    "BSATNP",
    "TNPKR",
    "TNPD",
    "TEConfig",
    "TEPTConfig",
    "TETNP",
    "TEPTTNP",
    "attention",
    "dense_attention",
    "tiled_attention",
    "predict_in_windows",
    "build_model",
    "model_names",
    "model_from_config",
    "get_spec",
    "register",
    "ModelSpec",
]
