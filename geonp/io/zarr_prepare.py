"""Make a Dataset ready for a Zarr write (no I/O): CF attributes, clean encodings, chunks.

:func:`prepare` returns a shallow copy whose encodings keep only what still holds (dtype, fill
value, packing, units, calendar, grid mapping), whose in-memory variables are chunked (about
:data:`TARGET_CHUNK_BYTES` per chunk) and whose Zarr chunks equal its dask chunks, with the CRS's
``spatial_ref`` attached as CF ``grid_mapping`` and geonp's global attributes (``Conventions``,
``history``, provenance). :mod:`geonp.io.zarr` writes it.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from datetime import datetime, timezone
from typing import Any

import numpy as np
import xarray as xr

__all__ = ["prepare", "attr_value", "CONVENTIONS", "TARGET_CHUNK_BYTES"]

CONVENTIONS = "CF-1.8"
TARGET_CHUNK_BYTES = 16 * 2**20  # chunks for in-memory variables: about 16 MiB, whole along all but the first dim

# encoding keys worth keeping from a source file; everything else (chunks, preferred_chunks, compressors,
# filters, NetCDF zlib/contiguous/chunksizes, GRIB/rasterio source keys, ...) would clash with Zarr or is stale
_KEEP_ENCODING = ("dtype", "_FillValue", "missing_value", "scale_factor", "add_offset", "units", "calendar",
                  "grid_mapping", "_Unsigned")


def _geonp_version() -> str:
    from .. import __version__  # late: geonp/__init__ imports this package

    return __version__


def attr_value(value: Any) -> Any:
    """Make an attribute value JSON-serialisable (numbers, strings, lists); anything else becomes its string."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        return [attr_value(v) for v in value]
    return str(value)


def _global_attrs(existing: Mapping[str, Any], attrs: Mapping[str, Any] | None, history: str) -> dict:
    """Global attributes with ``Conventions``, the caller's provenance and a new ``history`` line.

    A ``history`` among ``attrs`` is added to the dataset's own (the lines of how it was made), not
    put in their place, unless it already starts with them.
    """
    out = {str(k): attr_value(v) for k, v in existing.items()}
    out.setdefault("Conventions", CONVENTIONS)
    extra = {str(k): attr_value(v) for k, v in (attrs or {}).items()}
    previous = str(out.get("history", "")).rstrip("\n")
    given = str(extra.pop("history", "")).rstrip("\n")
    if given and not given.startswith(previous):
        given = f"{previous}\n{given}" if previous else given
    previous = given or previous
    out.update(extra)
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    line = f"{stamp} geonp {_geonp_version()}: {history}"
    out["history"] = f"{previous}\n{line}" if previous else line
    return out


def _clean_encoding(var: xr.Variable) -> dict:
    """Keep only the CF encoding keys that carry meaning into a new Zarr store.

    Integer packing (``dtype`` int with ``scale_factor``/``add_offset``) of float data is dropped too: it was
    chosen for the source's range, and new values (predictions, spreads) outside it would be clipped.
    """
    encoding = {k: v for k, v in var.encoding.items() if k in _KEEP_ENCODING}
    packed = np.dtype(encoding.get("dtype", var.dtype)).kind in "iu"
    if var.dtype.kind == "f" and packed:
        for key in ("dtype", "scale_factor", "add_offset", "_FillValue", "missing_value", "_Unsigned"):
            encoding.pop(key, None)
    return encoding


def _fixed_time_units(var: xr.Variable) -> None:
    """Datetimes without units of their own are written as int64 counts since 1970, of the coarsest exact unit.

    xarray picks units from the values it writes (a forecast's ``init_time``: ``days since`` its first),
    so a store appended to later with ``to_zarr(append_dim=...)`` read an appended 2019-03-07T22 as
    2019-03-29T23 (a twenty-seventh new-user test). Seconds, or milli-, micro- or nanoseconds where the
    values hold fractions of a second; cftime dates in their own calendar (seconds or microseconds).
    """
    if "units" in var.encoding or var.size == 0 or var.dtype.kind not in "MO" or var.chunks is not None:
        return  # a lazy variable is no time coordinate: its values are not read here
    values = np.asarray(var.values).ravel()
    if var.dtype.kind == "M":
        if np.isnat(values).any():
            return
        unit = next(u for u in ("s", "ms", "us", "ns")
                    if np.array_equal(values.astype(f"datetime64[{u}]").astype(values.dtype), values))
    elif var.dtype == object and all(type(v).__module__.startswith("cftime") for v in values):
        unit = "s" if all(v.microsecond == 0 for v in values) else "us"
        var.encoding["calendar"] = values[0].calendar
    else:
        return
    name = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}[unit]
    var.encoding.update(units=f"{name} since 1970-01-01", dtype="int64")


def _regular_size(chunks: tuple[int, ...]) -> int:
    """Return the Zarr chunk length for dask chunks: theirs if equal but a smaller last one, else the largest."""
    regular = all(c == chunks[0] for c in chunks[:-1]) and chunks[-1] <= chunks[0]
    return chunks[0] if regular else max(chunks)


def _dim_chunks(ds: xr.Dataset) -> dict[Hashable, int]:
    """Return a chunk length per dimension, from the first dask-backed data variable that chunks it."""
    out: dict[Hashable, int] = {}
    for var in ds.data_vars.values():
        if var.chunks is not None:
            for dim, chunks in var.variable.chunksizes.items():
                out.setdefault(dim, _regular_size(chunks))
    return out


def _leading_chunk(var: xr.Variable, sizes: Mapping[Hashable, int]) -> int:
    """Chunk length along the first dimension so that a chunk, whole along the others, is about 16 MiB."""
    other = math.prod(sizes[d] for d in var.dims[1:])
    return max(1, min(var.shape[0], TARGET_CHUNK_BYTES // max(1, other * var.dtype.itemsize)))


def _chunk_in_memory(ds: xr.Dataset) -> xr.Dataset:
    """Turn numeric in-memory data variables into dask arrays, on the chunk grid of the dask variables."""
    dim_chunks = _dim_chunks(ds)
    for name, var in ds.data_vars.items():
        if var.chunks is not None or var.ndim == 0 or var.dtype.kind not in "biufc":
            continue
        for index, dim in enumerate(var.dims):
            if dim not in dim_chunks:
                dim_chunks[dim] = _leading_chunk(var.variable, ds.sizes) if index == 0 else ds.sizes[dim]
        ds[name] = var.chunk({d: dim_chunks[d] for d in var.dims})
    return ds


def _load_small(ds: xr.Dataset) -> xr.Dataset:
    """Compute dask-backed coordinates and scalar data variables: they are written with the metadata."""
    coords = {n: v.variable.compute() for n, v in ds.coords.items() if v.chunks is not None}
    scalars = {n: v.compute() for n, v in ds.data_vars.items() if v.chunks is not None and v.ndim == 0}
    return ds.assign_coords(coords).assign(scalars)


def _region_dim(ds: xr.Dataset) -> tuple[Hashable | None, int]:
    """Find the first dimension (in data-variable order) that dask chunks more than once, else the first one.

    Returns the dimension and its chunk length (from the variable that chunks it), or ``(None, 0)``.
    """
    candidates = [pair for v in ds.data_vars.values() if v.chunks is not None for pair in v.variable.chunksizes.items()]
    if not candidates:
        return None, 0
    dim, chunks = next(((d, c) for d, c in candidates if len(c) > 1), candidates[0])
    return dim, _regular_size(chunks)


def _align_chunks(ds: xr.Dataset, region_dim: Hashable | None, region_chunk: int) -> xr.Dataset:
    """Make each dask variable's chunks Zarr-compatible and record them as its Zarr chunks.

    Each variable keeps its own chunks where they are regular (equal but a smaller last one); along the
    region dimension all variables share one chunk length, so that a region is one chunk of each.
    """
    for name, var in ds.data_vars.items():
        if var.chunks is None:
            continue
        sizes = {d: region_chunk if d == region_dim else _regular_size(c) for d, c in var.variable.chunksizes.items()}
        encoding = dict(var.encoding)
        ds[name] = var.chunk(sizes)
        ds[name].encoding = {**encoding, "chunks": tuple(sizes[d] for d in var.dims)}
    return ds


def _chunk_coords(ds: xr.Dataset) -> xr.Dataset:
    """Give the coordinates that are not indexes (``valid_time``, 2-D lat/lon) the data's Zarr chunks.

    Written whole, ``xr.open_zarr`` chunked them one way and the data another, and the store's
    ``ds.chunks`` raised "inconsistent chunks" (a new-user report).
    """
    sizes: dict[Hashable, int] = {}
    for var in ds.data_vars.values():
        for dim, size in zip(var.dims, var.encoding.get("chunks") or ()):
            sizes.setdefault(dim, int(size))
    for name, coord in ds.coords.items():
        if name not in ds.indexes and coord.ndim and all(d in sizes for d in coord.dims):
            coord.encoding["chunks"] = tuple(min(sizes[d], ds.sizes[d]) for d in coord.dims)
    return ds


def _attach_grid_mapping(ds: xr.Dataset) -> xr.Dataset:
    """Point data variables without a ``grid_mapping`` at a ``spatial_ref``/``crs`` coordinate holding a CRS."""
    names = [n for n in ("spatial_ref", "crs") if n in ds.coords and ds.coords[n].ndim == 0]
    name = next((n for n in names if set(ds.coords[n].attrs) & {"crs_wkt", "spatial_ref", "grid_mapping_name"}), None)
    if name is None:
        return ds
    for var in ds.data_vars.values():
        if "grid_mapping" not in var.attrs and "grid_mapping" not in var.encoding:
            var.encoding["grid_mapping"] = name
    return ds


def prepare(ds: xr.Dataset, attrs: Mapping[str, Any] | None, history: str) -> tuple[xr.Dataset, Hashable | None]:
    """Return a shallow copy ready to write (clean encodings, Zarr chunks = dask chunks) and the region dim."""
    ds = _load_small(ds.copy(deep=False))
    for var in ds.variables.values():
        var.encoding = _clean_encoding(var)
        _fixed_time_units(var)
        if "grid_mapping" in var.attrs:  # both places would make xarray refuse to write; the attribute wins
            var.encoding.pop("grid_mapping", None)
    ds = _chunk_in_memory(ds)
    region_dim, region_chunk = _region_dim(ds)
    ds = _chunk_coords(_align_chunks(ds, region_dim, region_chunk))
    ds = _attach_grid_mapping(ds)
    ds.attrs = _global_attrs(ds.attrs, attrs, history)
    ds.encoding = {}
    return ds, region_dim
