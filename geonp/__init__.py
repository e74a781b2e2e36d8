"""geonp: translation-invariant transformer neural processes for gridded and station data.

``import geonp`` registers the ``.np`` accessor on xarray objects (``ds.np.infill``,
``ds.np.forecast``, ``ds.np.fit``; see :mod:`geonp.api`) and exposes ``open_dataset``,
``to_zarr`` (:mod:`geonp.io`), ``Model`` and ``load_model`` (:mod:`geonp.model`, imported on
first use so that ``import geonp`` does not load torch). The model engine lives in
:mod:`geonp.models` (torch only), training in :mod:`geonp.train`, synthetic task generators in
:mod:`geonp.synthetic`.
"""

from __future__ import annotations

# pyproj must be imported before anything can load eccodes (cfgrib, xarray backends), or PROJ
# breaks and the interpreter can crash at exit; see docs/conventions.md.
import pyproj  # noqa: F401  isort: skip

from importlib.metadata import PackageNotFoundError, version

from . import accessor as _accessor  # noqa: F401  registers ds.np / da.np
from .allocator import keep_freed_memory
from .errors import (
    CheckpointError,
    CheckpointNotFoundError,
    CircularVariableWarning,
    ConfigError,
    CoordinateError,
    CRSError,
    DataFormatError,
    EmptyContextError,
    ExistingOutputError,
    FarFromDataWarning,
    GeonpError,
    InputNotFoundError,
    InvalidBatchError,
    MissingCovariateWarning,
    MissingReferenceWarning,
    MixedTimesWarning,
    ModelMismatchError,
    NeverObservedWarning,
    NoContextWarning,
    NoDataError,
    NonFiniteError,
    OutputExistsError,
    OutputLockedError,
    OutputPathError,
    ShortFitWarning,
    ShortHistoryWarning,
    SparseDataWarning,
    TimeAxisError,
    UncalibratedWarning,
    UnknownOptionError,
    UnvalidatedStepWarning,
    VariableNotFoundError,
    VariableTypeError,
)
from .io import open_dataset, to_zarr
from .openmp import passive_waits

passive_waits()  # none of the above loads torch: its OpenMP threads will sleep while they wait

try:
    __version__ = version("geonp")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = [
    "__version__",
    "open_dataset",
    "to_zarr",
    "Model",
    "load_model",
    "keep_freed_memory",
    "GeonpError",
    "FarFromDataWarning",
    "NeverObservedWarning",
    "NoContextWarning",
    "MissingCovariateWarning",
    "MissingReferenceWarning",
    "ShortFitWarning",
    "ShortHistoryWarning",
    "SparseDataWarning",
    "CircularVariableWarning",
    "UncalibratedWarning",
    "UnvalidatedStepWarning",
    "MixedTimesWarning",
    "InvalidBatchError",
    "EmptyContextError",
    "NonFiniteError",
    "UnknownOptionError",
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
    "CheckpointError",
    "CheckpointNotFoundError",
]


def __getattr__(name: str):
    # torch is imported only when a model is needed, so `import geonp` (and geonp.io) stay light
    if name in ("Model", "load_model"):
        from . import model

        return getattr(model, name)
    raise AttributeError(f"module 'geonp' has no attribute {name!r}")
