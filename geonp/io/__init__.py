"""Reading and writing data: any supported format in, CF-annotated Zarr out, CRS handling.

No torch here: this layer works with xarray, pandas, pyproj and zarr only.
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip  (before anything can load eccodes; see geonp/__init__.py)

from .crs import read_crs, write_crs
from .open import open_dataset
from .zarr import to_zarr

__all__ = ["open_dataset", "to_zarr", "read_crs", "write_crs"]
