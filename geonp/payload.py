"""A model as plain data for dask workers, rebuilt once per process and device; the device choice.

:mod:`geonp.inference` predicts with it inside dask tasks.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass

import numpy as np
import torch

from .errors import ConfigError
from .models import NeuralProcess, model_from_config

__all__ = ["ModelPayload", "net_from_payload", "resolve_device"]


@dataclass(frozen=True)
class ModelPayload:
    """A model as plain data, cheap to send to dask workers."""

    name: str
    config: dict
    state: dict  # parameter name -> numpy array
    digest: str

    @classmethod
    def from_net(cls, net: NeuralProcess) -> ModelPayload:
        """Capture ``net``'s architecture and weights."""
        state = {k: v.detach().cpu().numpy().copy() for k, v in net.state_dict().items()}
        h = hashlib.sha256(net.name.encode())
        for k in sorted(state):
            h.update(k.encode())
            h.update(np.ascontiguousarray(state[k]).tobytes())
        return cls(net.name, net.config.to_dict(), state, h.hexdigest())

    def __dask_tokenize__(self):
        return ("geonp.ModelPayload", self.digest)


_CACHE: dict[tuple[str, str], NeuralProcess] = {}
_LOCK = threading.Lock()


def net_from_payload(payload: ModelPayload, device: torch.device) -> NeuralProcess:
    """Return the model of ``payload`` on ``device``, built once per process and device."""
    key = (payload.digest, str(device))
    with _LOCK:
        net = _CACHE.get(key)
        if net is None:
            net = model_from_config(payload.name, payload.config)
            net.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in payload.state.items()})
            net = net.to(device).eval()
            if len(_CACHE) > 8:
                _CACHE.clear()
            _CACHE[key] = net
    return net


def resolve_device(device: str | torch.device | None) -> torch.device:
    """``"auto"`` → CUDA when available, else CPU; anything else as torch reads it."""
    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ConfigError(f"device={device!r} is not a device torch knows; expected 'auto', 'cpu' or 'cuda'.") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device='cuda' was asked for but no CUDA GPU is available; use device='auto' or 'cpu'.")
    if dev.type not in ("cpu", "cuda"):  # mps, xpu, meta, ...: torch knows them, geonp is not checked on them
        raise ConfigError(f"device={device!r}: geonp runs on 'cpu' or 'cuda'; expected 'auto', 'cpu' or 'cuda'.")
    return dev
