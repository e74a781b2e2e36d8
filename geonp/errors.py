"""Typed errors raised by geonp.

Every error subclasses :class:`GeonpError` and the builtin exception users would
expect (``ValueError``, ``KeyError``, ...), so ``except ValueError`` keeps working.
Messages say what was found, what was expected and how to fix it.
"""

from __future__ import annotations

import os
import sys
import threading
import uuid
import warnings
from collections import OrderedDict

__all__ = [
    "GeonpError",
    "InvalidBatchError",
    "EmptyContextError",
    "NonFiniteError",
    "UnknownOptionError",
    "CheckpointError",
    "CheckpointNotFoundError",
    "ConfigError",
    "CoordinateError",
    "CRSError",
    "VariableNotFoundError",
    "VariableTypeError",
    "NoDataError",
    "TimeAxisError",
    "ModelMismatchError",
    "OutputExistsError",
    "OutputLockedError",
    "ExistingOutputError",
    "OutputPathError",
    "DataFormatError",
    "InputNotFoundError",
    "NoContextWarning",
    "MissingCovariateWarning",
    "ShortHistoryWarning",
    "UnvalidatedStepWarning",
    "MixedTimesWarning",
    "MissingReferenceWarning",
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


class CoordinateError(GeonpError, ValueError):
    """Space or time coordinates are missing, out of range, non-monotonic or duplicated."""


class CRSError(CoordinateError):
    """A projected grid has no coordinate reference system, or the CRS cannot be read."""


class VariableNotFoundError(GeonpError, KeyError):
    """A variable named by the user is not in the dataset."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class VariableTypeError(GeonpError, TypeError):
    """A variable is not numeric, or the input is not an xarray object."""


class NoDataError(GeonpError, ValueError):
    """There is nothing to work with: all values are missing, or there are no gaps to fill."""


class TimeAxisError(GeonpError, ValueError):
    """A task needs a time axis that the data lack, or a lead time that is not a whole number of steps."""


class ModelMismatchError(GeonpError, ValueError):
    """A fitted model was trained on other variables, covariates or coordinate reference system."""


class OutputExistsError(GeonpError, FileExistsError):
    """The output path is taken: it exists and is not to be replaced, it is the input, or a run is writing it."""


class ExistingOutputError(OutputExistsError):
    """The output exists and overwriting was not asked for: nothing was done (the CLI exits 3)."""


class OutputLockedError(OutputExistsError):
    """Another run is writing the output (it holds ``<path>.lock``): wait for it, then run again (the CLI exits 4)."""


class OutputPathError(GeonpError, OSError):
    """The output cannot be written where it was asked for (its folder is a file, or takes no new files)."""


class DataFormatError(GeonpError, ValueError):
    """A file is of an unknown or unreadable format, or lacks the columns geonp needs."""


class InputNotFoundError(GeonpError, FileNotFoundError):
    """An input file or store does not exist."""


class NoContextWarning(UserWarning):
    """Some targets had no observation within their window and were left NaN."""


#: the text of every :class:`NoContextWarning` (one text, so that Python shows it once, not once per block)
NO_CONTEXT_MESSAGE = ("Some frames have no observation within their window (targets far from all the data get none): "
                      "their mean and std are NaN. Widen time_window= (or context_frames=), or halo= or tile= (a small "
                      "tile inside a large gap sees no data), to predict them.")


class FarFromDataWarning(UserWarning):
    """Some targets lie farther from the data than the weights have seen; their std was raised to the prior's."""


class CircularVariableWarning(UserWarning):
    """The variable looks like a direction (an angle), which geonp treats as a field on a line."""


class SparseDataWarning(UserWarning):
    """So few points are observed per frame that the intervals cannot be trusted (likely far too narrow)."""


class MissingCovariateWarning(UserWarning):
    """An elevation is left out: ``targets=`` lack the data's, or its relief is too small for a trend."""


class ShortFitWarning(UserWarning):
    """A fit on a time budget (``max_time=``) ran so few steps that it changed little, in a way no one can repeat."""


class ShortHistoryWarning(UserWarning):
    """A forecast starts from an initial time with a single frame of history, or from a frame without observations."""


class MissingReferenceWarning(UserWarning):
    """The values a diurnal reference adds back, ``y(valid - 24 h)``, are missing at some forecast points."""


class NeverObservedWarning(UserWarning):
    """Points of a grid have no value in any frame (land in a sea field?) and are filled like any gap; see ``mask=``."""


class UnvalidatedStepWarning(UserWarning):
    """A forecast with shipped weights on daily or longer steps, where they have not been validated."""


class UncalibratedWarning(UserWarning):
    """A forecast with the shipped weights left uncalibrated by ``calibrate="auto"``: too little history."""


class MixedTimesWarning(UserWarning):
    """Some times lie off the step of the others (stations reporting at :20 among others at :00)."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


#: (call key, category, message) of the warnings already given by the blocks of a prediction (see warn_user)
_GIVEN: OrderedDict = OrderedDict()
_GIVEN_LOCK = threading.Lock()
_GIVEN_MAX = 1024


class CallKey:
    """A key unique to one prediction call, for :func:`warn_user`'s ``once`` (its blocks warn alike).

    It does not enter dask's tokens: the graph's keys stay those of the same inputs and settings.
    """

    __slots__ = ("hex",)

    def __init__(self) -> None:
        self.hex = uuid.uuid4().hex

    def __dask_tokenize__(self) -> str:
        return "geonp-call-key"


def warn_user(message: str, category: type[Warning], once: CallKey | None = None) -> None:
    """``warnings.warn`` attributed to the first caller outside geonp (the user's line, not geonp's).

    Inside a dask task no user frame is on the stack; the warning then names the outermost frame.
    ``once`` (a :class:`CallKey`): warn at most once per key, category and message in this process.
    Every block of a prediction that lacks context warned alike, once per block under
    ``warnings.simplefilter("always")`` (a new-user report); Python's default filter showed it once.
    """
    if once is not None:
        given = (once.hex, category, message)
        with _GIVEN_LOCK:
            if given in _GIVEN:
                return
            _GIVEN[given] = None
            if len(_GIVEN) > _GIVEN_MAX:
                _GIVEN.popitem(last=False)
    level, frame = 2, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level if frame is not None else level - 1)
