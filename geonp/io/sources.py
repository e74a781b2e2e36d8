"""The files a Dataset was read from, for provenance and for never writing over an input. No torch here."""

from __future__ import annotations

import os

import xarray as xr

__all__ = ["input_files"]


def input_files(ds: xr.Dataset | xr.DataArray) -> list[str]:
    """The files ``ds`` (or any of its variables) was read from, as absolute paths (URLs as they are).

    Three sources: the ``encoding["source"]`` xarray sets when it opens a file; the files that the
    lazy (dask) variables still read, found in their graphs (:func:`_graph_files`: these survive
    ``.where``, ``.astype``, selections, ``open_mfdataset`` and ``concat``, which drop the encoding); and,
    for a geonp output read back, the inputs it records (``attrs["geonp_input"]``). A prediction
    records them (:func:`geonp.output.finish`) and :func:`geonp.to_zarr` will not write over them.
    """
    variables = list(ds.variables.values()) if isinstance(ds, xr.Dataset) else [ds.variable]
    found = [ds.encoding.get("source"), *(v.encoding.get("source") for v in variables)]
    found += [f for v in variables for f in _graph_files(v)]
    recorded = str(ds.attrs.get("geonp_input", "")).splitlines()  # read from a geonp output: its own inputs too
    files = [os.fspath(f) for f in dict.fromkeys(found) if isinstance(f, (str, os.PathLike))]
    files = [f if "://" in f else os.path.abspath(f) for f in files]  # a batch log's relative paths, made whole
    return list(dict.fromkeys(files + [r for r in recorded if r != "in memory"]))


def _graph_files(variable: xr.Variable) -> list:
    """The files a lazy variable's dask graph reads: its xarray backend arrays' Zarr stores and NetCDF files.

    xarray puts each lazily opened variable in the graph as its backend array, wrapped in indexing
    adapters (``.array``): a ``ZarrArrayWrapper`` holds the zarr array (``._array.store``, whose ``root``
    is the store's folder), a NetCDF wrapper its ``datastore`` (``._filename``). Anything else is passed by.
    """
    if variable.chunks is None:  # not dask-backed (and .data would read a lazily opened file into memory)
        return []
    data = variable.data
    out = []
    for value in dict(data.__dask_graph__()).values():
        for _ in range(8):  # down the adapters (ImplicitToExplicitIndexingAdapter, CopyOnWriteArray, ...)
            store = getattr(getattr(value, "_array", None), "store", None)
            where = getattr(store, "root", None) or getattr(store, "path", None)
            where = where or getattr(getattr(value, "datastore", None), "_filename", None)
            if isinstance(where, (str, os.PathLike)) and str(where):
                out.append(os.fspath(where))
                break
            value = getattr(value, "array", None)
            if value is None:
                break
    return out
