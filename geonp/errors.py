"""Typed errors raised by geonp.

Every error subclasses :class:`GeonpError` and the builtin exception users would
expect (``ValueError``, ``KeyError``, ...), so ``except ValueError`` keeps working.
Messages say what was found, what was expected and how to fix it.
"""

from __future__ import annotations

__all__ = [
    "GeonpError",
    "InvalidBatchError",
    "EmptyContextError",
    "NonFiniteError",
    "UnknownOptionError",
    "CheckpointError",
    "CheckpointNotFoundError",
    "ConfigError",
]


class GeonpError(Exception):
    """Base class of every error raised on purpose by geonp."""


class InvalidBatchError(GeonpError, ValueError):
    """A batch has the wrong rank, feature count, dtype or batch size."""


class EmptyContextError(GeonpError, ValueError):
    """A task has no context points, so there is nothing to condition on."""


class NonFiniteError(GeonpError, ValueError):
    """Inputs contain NaN or infinite values where finite values are required."""


class UnknownOptionError(GeonpError, KeyError):
    """A name (model, preset, backend, option) is not one geonp knows."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class ConfigError(GeonpError, ValueError):
    """A configuration value is out of range or inconsistent."""


class CheckpointError(GeonpError, ValueError):
    """A checkpoint is corrupt, of another model or version, or not a geonp file."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """No checkpoint file exists at the given path."""
