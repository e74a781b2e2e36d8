"""Safe checkpoints: one ``torch.save`` of tensors and plain data, loaded with ``weights_only=True``.

A checkpoint is a dict ``{"format": "geonp-checkpoint", "format_version": 1,
"geonp_version", "model", "config", "state_dict", "metadata"}``; training
checkpoints (written by :func:`geonp.train.train`) add ``"training"`` (optimizer
state, step, RNG states, elapsed budgets).  Loading checks the zip archive's
CRCs, refuses any pickled Python object (so it never executes code from the
file) and rebuilds the model from its config with
:func:`geonp.models.model_from_config`.
"""

from __future__ import annotations

import logging
import os
import pickle
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from ._files import check_archive as _check_archive
from ._files import check_plain as _check_plain
from ._files import write_atomic as _write
from .errors import CheckpointError, ConfigError, OutputExistsError, UnknownOptionError
from .models import NeuralProcess, get_spec, model_from_config, model_names

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "save_model",
    "load_model",
    "read_checkpoint",
    "save_training_state",
    "load_training_state",
]

logger = logging.getLogger(__name__)

FORMAT = "geonp-checkpoint"
#: bump when the layout changes; files with a larger version are refused with an upgrade hint
FORMAT_VERSION = 1
_SHOWN = 5  # keys listed in mismatch messages


def save_model(model: NeuralProcess, path: str | os.PathLike, *, metadata: dict | None = None) -> Path:
    """Write ``model`` (name, config, weights) to ``path``, atomically.

    Parameters
    ----------
    model : NeuralProcess
        A model built by :func:`geonp.models.build_model`.
    path : str or PathLike
        Destination file (parent folders are created). An existing file is replaced
        only once the new one is complete, so a crash never leaves a half-written file.
    metadata : dict, optional
        Plain data (str, int, float, bool, None, tensors, and lists/dicts of them)
        stored with the model, e.g. training data description or scores.

    Returns
    -------
    Path
        The path written.

    Raises
    ------
    CheckpointError
        ``metadata`` holds something other than plain data.
    OutputExistsError
        ``path`` is an existing directory.

    See Also
    --------
    load_model

    Examples
    --------
    >>> import tempfile, torch
    >>> from geonp.models import build_model
    >>> model = build_model("bsa-tnp", preset="small", space_dims=1, num_layers=1)
    >>> path = save_model(model, tempfile.mkdtemp() + "/model.pt", metadata={"note": "demo"})
    >>> load_model(path).name
    'bsa-tnp'
    """
    check_destination(path)
    return _write(_model_payload(model, metadata), path)


def check_destination(path: str | os.PathLike) -> None:
    """Raise :class:`~geonp.errors.OutputExistsError` when ``path``, where a checkpoint is to go, is a directory."""
    if Path(path).is_dir():
        raise OutputExistsError(
            f"cannot write a checkpoint to {path}: it is an existing directory; expected a file path. "
            f"Pass a file name inside it, e.g. {Path(path) / 'model.pt'}."
        )


def load_model(
    path: str | os.PathLike, *, expected_name: str | None = None, map_location: str | torch.device = "cpu"
) -> NeuralProcess:
    """Rebuild a model saved by :func:`save_model` (or a training checkpoint), never executing code.

    Parameters
    ----------
    path : str or PathLike
        The checkpoint file.
    expected_name : str, optional
        Refuse checkpoints of another model (e.g. ``"bsa-tnp"``).
    map_location : str or torch.device
        Device the returned model lives on.

    Returns
    -------
    NeuralProcess
        The model in eval mode, with the saved weights (and their dtype).

    Raises
    ------
    CheckpointNotFoundError
        No file at ``path`` (also a ``FileNotFoundError``).
    CheckpointError
        Not a geonp checkpoint, truncated or corrupt, unsafe (pickled Python objects),
        a newer format, another model than ``expected_name``, or weights that do not
        fit the stored config.

    See Also
    --------
    save_model, read_checkpoint
    """
    payload = read_checkpoint(path)
    name = payload["model"]
    if expected_name is not None:
        expected = get_spec(expected_name).name
        if name != expected:
            raise CheckpointError(
                f"{path} holds a {name!r} model; expected {expected!r}. Pick a checkpoint of a {expected} model, "
                f"or load it without expected_name= to get the {name} model."
            )
    model = _build(payload, path)
    _load_weights(model, payload["state_dict"], path, cast=True)
    return model.to(map_location).eval()


def read_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read and validate a checkpoint's contents (tensors on CPU) without building the model.

    Use it to read ``metadata`` or ``config`` cheaply.

    Raises
    ------
    CheckpointNotFoundError, CheckpointError
        As in :func:`load_model`.
    """
    path = Path(path)
    _check_archive(path)
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if "Unsupported" in ln or "WeightsUnpickler" in ln]
        reason = lines[0] if lines else str(exc).splitlines()[0]
        raise CheckpointError(
            f"{path} is not a safe geonp checkpoint: it holds pickled Python objects, not only tensors and plain "
            f"data, and weights_only loading refused it ({reason}). geonp never executes code from a file; "
            "re-save the model with geonp.checkpoint.save_model from a trusted session."
        ) from None
    except Exception as exc:  # the zip is intact but its records are not a torch checkpoint
        raise CheckpointError(
            f"{path} is corrupt: torch.load failed with {type(exc).__name__}: {exc}. "
            "Re-save or re-download the checkpoint."
        ) from exc
    _check_payload(payload, path)
    return payload


def save_training_state(
    path: str | os.PathLike,
    model: NeuralProcess,
    *,
    optimizer: torch.optim.Optimizer,
    state: dict[str, Any],
    metadata: dict | None = None,
) -> Path:
    """Write a training checkpoint: the model checkpoint plus optimizer and loop ``state``.

    ``state`` must be plain data (see :func:`save_model`); :func:`geonp.train.train`
    stores the step, RNG states, elapsed budgets, history and best weights there.
    The file is also readable by :func:`load_model` (current weights). An existing directory at ``path``
    raises :class:`~geonp.errors.OutputExistsError`.
    """
    check_destination(path)
    payload = _model_payload(model, metadata)
    training = dict(state, optimizer=optimizer.state_dict())
    _check_plain(training, "training state")
    payload["training"] = training
    return _write(payload, path)


def load_training_state(
    path: str | os.PathLike, model: NeuralProcess, *, optimizer: torch.optim.Optimizer | None = None
) -> dict[str, Any]:
    """Load a training checkpoint into ``model`` (and ``optimizer``); return the loop state.

    Raises
    ------
    CheckpointNotFoundError, CheckpointError
        As in :func:`load_model`; also when the file has no training state or holds
        another model or config than ``model``.
    """
    payload = read_checkpoint(path)
    training = payload.get("training")
    if not isinstance(training, dict) or "optimizer" not in training:
        raise CheckpointError(
            f"{path} is a model checkpoint without training state; expected one written by "
            "geonp.train.train(..., checkpoint=path). Start a new run with resume=False, or load the "
            "model with load_model."
        )
    if payload["model"] != model.name:
        raise CheckpointError(
            f"{path} holds the training state of a {payload['model']!r} model; expected {model.name!r}. "
            f"Resume with a {payload['model']} model or start fresh with resume=False."
        )
    current = model.config.to_dict()
    diff = sorted(k for k in set(current) | set(payload["config"]) if current.get(k) != payload["config"].get(k))
    if diff:
        shown = {k: (payload["config"].get(k), current.get(k)) for k in diff[:_SHOWN]}
        raise CheckpointError(
            f"{path} was written for another {model.name} config: (saved, given) differ on {shown}. "
            "Build the model with the saved config (read_checkpoint(path)['config']) or start fresh with resume=False."
        )
    _load_weights(model, payload["state_dict"], path, cast=False)
    if optimizer is not None:
        try:
            optimizer.load_state_dict(training["optimizer"])
        except (ValueError, KeyError, TypeError, RuntimeError) as exc:
            raise CheckpointError(
                f"{path} has optimizer state that does not fit this optimizer ({exc}); "
                "resume with the same model and optimizer settings, or start fresh with resume=False."
            ) from exc
    return {k: v for k, v in training.items() if k != "optimizer"}


# ---------------------------------------------------------------------------- helpers


def _geonp_version() -> str:
    import geonp  # late: geonp/__init__ may import this module

    return geonp.__version__


def _model_payload(model: NeuralProcess, metadata: dict | None) -> dict[str, Any]:
    if not isinstance(model, NeuralProcess) or not model.name:
        raise CheckpointError(
            f"save_model got a {type(model).__name__}; expected a geonp NeuralProcess built by "
            "geonp.models.build_model (its name and config are saved to rebuild it)."
        )
    metadata = {} if metadata is None else metadata
    if not isinstance(metadata, dict):
        raise CheckpointError(f"metadata is a {type(metadata).__name__}; expected a dict of plain data.")
    _check_plain(metadata, "metadata")
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "geonp_version": _geonp_version(),
        "model": model.name,
        "config": model.config.to_dict(),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "metadata": metadata,
    }


def _check_payload(payload: Any, path: Path) -> None:
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        found = f"a dict with keys {sorted(map(str, payload))[:_SHOWN]}" if isinstance(payload, dict) else (
            f"a {type(payload).__name__}"
        )
        raise CheckpointError(
            f"{path} is not a geonp checkpoint: it holds {found}; expected a dict with format={FORMAT!r}. "
            "For a bare state_dict, build the model and call model.load_state_dict; otherwise write the file "
            "with geonp.checkpoint.save_model."
        )
    version = payload.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CheckpointError(f"{path} has format_version {version!r}; expected an int >= 1. The file is damaged.")
    if version > FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has checkpoint format_version {version} (written by geonp {payload.get('geonp_version')}); "
            f"this geonp {_geonp_version()} reads format_version <= {FORMAT_VERSION}. Upgrade geonp "
            "(pip install -U geonp)."
        )
    kinds = {"model": str, "config": dict, "state_dict": dict, "metadata": dict}
    bad = [k for k, kind in kinds.items() if not isinstance(payload.get(k), kind)]
    if bad:
        raise CheckpointError(
            f"{path} is a damaged geonp checkpoint: entries {bad} are missing or of the wrong type "
            f"(expected {', '.join(f'{k}: {t.__name__}' for k, t in kinds.items())}). Re-save the model."
        )
    if not all(isinstance(v, Tensor) for v in payload["state_dict"].values()):
        raise CheckpointError(f"{path} is a damaged geonp checkpoint: its state_dict holds non-tensor values.")


def _build(payload: dict, path: str | os.PathLike) -> NeuralProcess:
    name = payload["model"]
    try:
        return model_from_config(name, payload["config"])
    except UnknownOptionError:
        raise CheckpointError(
            f"{path} holds a {name!r} model, which this geonp ({_geonp_version()}) does not know; known models are "
            f"{model_names()}. Load it with the geonp that wrote it ({payload.get('geonp_version')})."
        ) from None
    except (ConfigError, TypeError, ValueError) as exc:
        raise CheckpointError(
            f"{path} has a config this geonp cannot build a {name} model from ({exc}). It was written by geonp "
            f"{payload.get('geonp_version')}; load it with that version or re-save it."
        ) from exc


def _load_weights(model: NeuralProcess, state_dict: dict[str, Tensor], path: str | os.PathLike, *, cast: bool) -> None:
    """Strict ``load_state_dict`` with a message listing missing/unexpected keys and shape mismatches."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(expected))
    shapes = {
        k: (tuple(state_dict[k].shape), tuple(expected[k].shape))
        for k in sorted(set(expected) & set(state_dict))
        if state_dict[k].shape != expected[k].shape
    }
    if missing or unexpected or shapes:
        problems = []
        if missing:
            problems.append(f"{len(missing)} missing keys {missing[:_SHOWN]}")
        if unexpected:
            problems.append(f"{len(unexpected)} unexpected keys {unexpected[:_SHOWN]}")
        if shapes:
            shown = dict(list(shapes.items())[:_SHOWN])
            problems.append(f"{len(shapes)} shape mismatches (saved, expected) {shown}")
        raise CheckpointError(
            f"{path}: its weights do not fit a {model.name} model built from its config: {'; '.join(problems)}. "
            "The file was edited or written by an incompatible geonp; re-save the model with save_model."
        )
    if cast:  # keep the saved precision (e.g. a model trained in float64)
        dtypes = {v.dtype for v in state_dict.values() if v.is_floating_point()}
        if len(dtypes) == 1 and (dtype := dtypes.pop()) != next(model.parameters()).dtype:
            model.to(dtype)
    model.load_state_dict(state_dict)
