"""File-level safety of checkpoints: plain-data checks, zip/CRC checks and atomic writes."""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
import zipfile
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .errors import CheckpointError, CheckpointNotFoundError

MODEL_MAGIC = b"PK\x03\x04"  # torch.save writes a zip archive
logger = logging.getLogger("geonp.checkpoint")
_PLAIN = (type(None), bool, int, float, str, Tensor, torch.dtype, torch.Size)


def check_plain(obj: Any, where: str) -> None:
    """Refuse anything ``torch.load(weights_only=True)`` would refuse to read back."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if not isinstance(key, (str, int)):
                raise CheckpointError(
                    f"{where} has a key {key!r} of type {type(key).__name__}; expected str or int keys."
                )
            check_plain(value, f"{where}[{key!r}]")
    elif type(obj) in (list, tuple):
        for i, value in enumerate(obj):
            check_plain(value, f"{where}[{i}]")
    elif not (type(obj) in _PLAIN or isinstance(obj, Tensor)):  # exact types: a str subclass pickles as an object
        raise CheckpointError(
            f"{where} is a {type(obj).__name__}; checkpoints hold only tensors and plain data (str, int, float, "
            "bool, None, and lists/dicts of them). Convert it, e.g. with str() or .tolist()."
        )


def write_atomic(payload: dict, path: str | os.PathLike) -> Path:
    """``torch.save`` to a temporary file next to ``path``, fsync, then ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    with contextlib.suppress(OSError):  # make the rename durable (POSIX); harmless where unsupported
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    logger.debug("wrote checkpoint %s", path)
    return path


def check_archive(path: Path) -> None:
    """Existence, zip magic and CRCs, before anything is unpickled."""
    if not path.exists():
        raise CheckpointNotFoundError(
            f"no checkpoint at {path}: the file does not exist. Check the path, or write one with "
            "geonp.checkpoint.save_model(model, path)."
        )
    if path.is_dir():
        raise CheckpointError(
            f"{path} is a directory; expected a model file written by Model.save or `geonp fit --out` "
            "(a data store such as a .zarr directory is an input, not a model)."
        )
    with open(path, "rb") as f:
        head = f.read(len(MODEL_MAGIC))
    if not head:
        raise CheckpointError(
            f"{path} is empty (0 bytes); expected a geonp checkpoint. Its write was interrupted: save it again."
        )
    if head != MODEL_MAGIC:
        raise CheckpointError(
            f"{path} is not a geonp checkpoint: it is not a torch zip archive (it starts with {head!r}, expected "
            f"{MODEL_MAGIC!r}). Write checkpoints with geonp.checkpoint.save_model."
        )
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise CheckpointError(
            f"{path} is truncated or corrupt: it starts like a zip archive but cannot be read ({exc}). "
            "Re-save or re-download the checkpoint."
        ) from None
    if bad is not None:
        raise CheckpointError(
            f"{path} is corrupt: its record {bad!r} fails the CRC check. Re-save or re-download the checkpoint."
        )


