"""Write a Dataset to a Zarr store safely: never half-written, resumable, chunked like the computation.

:func:`to_zarr` writes into a sibling store ``<path>.partial`` and renames it to ``path`` only when
everything is written. It first writes the metadata (and the small in-memory variables), then the
dask-backed data one region at a time (one dask chunk along the first chunked dimension), recording each
finished region in the partial store's group attributes (``.zattrs``). Running the same write again after an
interruption finds that file, checks that it describes the same dataset (variables, dims, shapes,
chunks, dtypes, index coordinates, in-memory values and attributes but ``history``) and writes only the
regions still missing; a partial store of another run (another model or options) is discarded.

The store is Zarr format 2 with consolidated metadata (``.zmetadata``). Why format 2: with zarr-python 3
both formats read back with ``xarray.open_zarr(path, decode_coords="all")`` and ``.rio.crs``, but
consolidated metadata is part of the format-2 specification only (zarr-python warns that format 3's is
not, and other readers may ignore it), and format 2 is also readable by zarr-python 2 (``zarr>=2.16`` is
geonp's floor), GDAL and older xarray, so the store works everywhere.
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip  (before anything can load eccodes; see geonp/__init__.py)

import hashlib
import json
import os
import shutil
import sys
import uuid
from collections.abc import Hashable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask.base
import numpy as np
import xarray as xr
import zarr
from tqdm.auto import tqdm

from ..errors import ConfigError, GeonpError, UnknownOptionError, VariableTypeError, warn_user
from ..progress import bar_options, region_progress
from ..variables import UNNAMED
from .lock import check_store_path, write_lock
from .sources import input_files
from .zarr_prepare import attr_value, prepare

__all__ = ["to_zarr"]

ZARR_FORMAT = 2  # see the module docstring
# zarr-python 2 (and the xarray versions that go with it) know only format 2 and take no zarr_format argument
_FORMAT_KWARGS = {"zarr_format": ZARR_FORMAT} if int(zarr.__version__.split(".")[0]) >= 3 else {}
PROGRESS_ATTR = "_geonp_write_progress"  # in the partial store's .zattrs
PARTIAL_SUFFIX = ".partial"


@dataclass
class _Plan:
    """What to write after the metadata: the steps, keyed by a stable name."""

    region_dim: Hashable | None
    regions: list[tuple[int, int]]  # [start, stop) along region_dim, one per dask chunk
    region_vars: list[Hashable]  # dask-backed data variables along region_dim
    static_vars: list[Hashable]  # dask-backed data variables without region_dim

    def keys(self) -> list[str]:
        keys = [f"region:{start}:{stop}" for start, stop in self.regions]
        return keys + (["static"] if self.static_vars else [])


def _sources(ds: xr.Dataset) -> list[tuple[str, str]]:
    """The files ``ds`` was opened or computed from, as :func:`geonp.io.lock.check_apart` pairs.

    Those it was opened from (``encoding["source"]``), and those a geonp prediction read
    (``attrs["geonp_input"]``, :func:`geonp.output.input_files`): a prediction carries no encoding of its
    input, so ``to_zarr(ds.np.infill(...), <the input's store>, overwrite=True)`` replaced its own input.
    """
    return [("the file the data were read from", s) for s in input_files(ds)]


def to_zarr(
    ds: xr.Dataset | xr.DataArray,
    path: str | os.PathLike,
    *,
    overwrite: bool = False,
    attrs: Mapping[str, Any] | None = None,
    progress: bool = True,
    history: str | None = None,
    **unknown: Any,
) -> Path:
    """Write ``ds`` to a Zarr store at ``path``: atomically, resumably, with provenance.

    Parameters
    ----------
    ds : xarray.Dataset or xarray.DataArray
        The data. Dask-backed variables are computed region by region with the active dask scheduler
        (a ``dask.distributed`` Client works); numeric in-memory variables are chunked first.
    path : str or os.PathLike
        The store to create (a directory, conventionally ending in ``.zarr``).
    overwrite : bool, default False
        Replace an existing ``path``, which must be a Zarr store (a directory holding ``.zgroup``,
        ``.zmetadata``, ``.zarray`` or ``zarr.json``): a file or another directory is never replaced. The
        old store is removed only once the new one is complete.
    attrs : Mapping, optional
        Provenance to add to the global attributes (geonp version, model name, checkpoint hash, ...);
        a ``history`` here is added to the dataset's own history lines, not put in their place.
    progress : bool, default True
        Show a progress bar of the regions on stderr.
    history : str, optional
        What was done, for the line appended to the ``history`` attribute; default ``"wrote <name>"``.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    OutputExistsError
        If ``path`` exists and ``overwrite`` is False or it is not a Zarr store; ``path`` is, holds or lies
        inside the file ``ds`` was read from; another run is writing it (``<path>.lock``).
    VariableTypeError
        ``ds`` is not an xarray Dataset or DataArray.
    UnknownOptionError
        An option this function does not take (xarray's ``mode=``, ``append_dim=``...).
    ConfigError
        ``path`` ends in the suffix of another format (``.nc``, ``.tif``, ...), or a variable's name holds
        ``/`` (a group path to Zarr).
    GeonpError
        Any geonp error raised while computing ``ds`` (bad input found late). The partial store this
        call began is removed first; one left by an earlier, interrupted run is kept.
    """
    if unknown:  # xarray's own to_zarr options (mode=, append_dim=, region=...): a TypeError before
        raise UnknownOptionError(
            f"geonp.to_zarr got {', '.join(f'{k}=' for k in unknown)}; it takes path, overwrite=, attrs=, progress= "
            "and history=. It writes a whole new store at once (resuming an interrupted write of the same data); to "
            "append to or update part of a store use xarray's own ds.to_zarr(path, mode='a', append_dim=...).")
    if not isinstance(ds, (xr.Dataset, xr.DataArray)):
        raise VariableTypeError(f"to_zarr got a {type(ds).__name__}; expected an xarray Dataset or DataArray, e.g. "
                                "the result of ds.np.infill(...) or xr.DataArray(values, dims=...).")
    if isinstance(ds, xr.DataArray):
        ds = ds.to_dataset(name=ds.name if ds.name is not None else UNNAMED)  # as predictions name it
    slashed = [str(n) for n in ds.variables if "/" in str(n)]
    if slashed:
        raise ConfigError(f"variable names {slashed} hold '/', which Zarr reads as a group path; rename them before "
                          f"writing, e.g. ds.rename({{{slashed[0]!r}: {slashed[0].replace('/', '_')!r}}}).")
    path = check_store_path(path, overwrite, _sources(ds))
    prepared, region_dim = prepare(ds, attrs, history or f"wrote {path}")  # the path as given: batch logs differ
    plan = _plan(prepared, region_dim)
    fingerprint = _fingerprint(prepared, plan, _in_memory_digest(ds))
    with write_lock(path):
        check_store_path(path, overwrite)  # a run that held the lock may have finished it meanwhile
        _write(prepared, plan, path, fingerprint, progress)
    return path


def _write(prepared: xr.Dataset, plan: _Plan, path: Path, fingerprint: dict, progress: bool) -> None:
    """Write (or resume) the partial store, then move it into place."""
    partial = path.with_name(path.name + PARTIAL_SUFFIX)
    done = _resume(partial, fingerprint)
    started = done is None
    if started:
        _start(prepared, partial, fingerprint)
        done = []
    try:
        _write_steps(prepared, plan, partial, fingerprint, done, progress)
    except GeonpError:
        # bad input found while computing (it would fail again): leave nothing behind that this call began;
        # a crash or an interrupt keeps the partial store, so that rerunning the command finishes the job
        if started:
            _remove(partial)
        raise
    _finish(prepared, partial, path)


def _plan(ds: xr.Dataset, region_dim: Hashable | None) -> _Plan:
    """List the regions along ``region_dim`` (one per dask chunk) and the variables written in each step."""
    lazy = [n for n, v in ds.data_vars.items() if v.chunks is not None]
    if region_dim is None:
        return _Plan(None, [], [], [])
    region_vars = [n for n in lazy if region_dim in ds[n].dims]
    chunks = ds[region_vars[0]].chunksizes[region_dim]
    stops = np.cumsum(chunks).tolist()
    regions = list(zip([0, *stops[:-1]], stops, strict=True))
    static_vars = [n for n in lazy if region_dim not in ds[n].dims]
    return _Plan(region_dim, regions, region_vars, static_vars)


def _in_memory_digest(ds: xr.Dataset) -> str:
    """sha256 of the variables' names and contents (before any chunking).

    In-memory variables by their values; dask-backed ones (what the run computes, not read here) by
    their graph's deterministic name (:func:`dask.base.tokenize`), which covers the options of the
    computation (``halo=``, ``land=``, ...) and the input it reads (a file's path and modification
    time): a rerun with other options, or after the input was rewritten, starts afresh.
    """
    values = hashlib.sha256()
    for name in sorted(ds.variables, key=str):
        var = ds.variables[name]
        values.update(str(name).encode())
        if var.chunks is not None:
            values.update(str(getattr(var.data, "name", None) or dask.base.tokenize(var.data)).encode())
            continue
        data = np.asarray(var.values)
        values.update(np.ascontiguousarray(data.astype(str) if data.dtype.kind == "O" else data).tobytes())
    return values.hexdigest()


def _fingerprint(ds: xr.Dataset, plan: _Plan, in_memory: str) -> dict:
    """Describe what a partial store must match to be resumed.

    Layout, dtypes, chunks, index coordinates, the ``in_memory`` digest (:func:`_in_memory_digest` of
    the caller's dataset) and every attribute but the global ``history`` (whose time stamp changes
    with each run): a rerun with another model, other options or other provenance starts afresh
    instead of keeping the regions an earlier, different run wrote.
    """
    variables = {}
    for name, var in ds.variables.items():
        chunks = var.encoding.get("chunks")
        variables[str(name)] = {
            "dims": [str(d) for d in var.dims],
            "shape": list(var.shape),
            "dtype": str(var.dtype),
            "chunks": list(chunks) if chunks is not None else None,
            "attrs": _digest(json.dumps({str(k): attr_value(v) for k, v in var.attrs.items()}, sort_keys=True)),
        }
    digest = hashlib.sha256()
    for name in sorted(ds.indexes, key=str):
        digest.update(str(name).encode())
        digest.update(np.ascontiguousarray(ds.indexes[name].to_numpy()).astype(str).tobytes())
    attrs = {str(k): attr_value(v) for k, v in ds.attrs.items() if k != "history"}
    fingerprint = {
        "zarr_format": ZARR_FORMAT,
        "region_dim": None if plan.region_dim is None else str(plan.region_dim),
        "steps": plan.keys(),
        "variables": variables,
        "indexes": digest.hexdigest(),
        "values": in_memory,
        "attrs": _digest(json.dumps(attrs, sort_keys=True)),
    }
    return json.loads(json.dumps(fingerprint))


def _digest(text: str) -> str:
    """Short sha256 hex digest of a string."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# -------------------------------------------------------------------------------------------- write


def _remove(path: Path) -> None:
    """Delete a store, file or link if it exists."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _record(partial: Path, fingerprint: dict, done: list[str]) -> None:
    """Record the finished steps in the partial store's group attributes (``.zattrs``, a small JSON file).

    A loose JSON file in the store would make zarr-python 3 warn that it is not part of the hierarchy on
    every region write; group attributes are untouched by xarray's ``mode="r+"`` region writes.
    """
    group = zarr.open_group(str(partial), mode="r+", **_FORMAT_KWARGS)
    group.attrs[PROGRESS_ATTR] = {"fingerprint": fingerprint, "done": list(done)}


def _resume(partial: Path, fingerprint: dict) -> list[str] | None:
    """Return the steps already written to a matching partial store; else remove it and return ``None``."""
    try:
        recorded = zarr.open_group(str(partial), mode="r", **_FORMAT_KWARGS).attrs.get(PROGRESS_ATTR)
    except Exception:  # noqa: BLE001 - missing, not a group, unreadable metadata: all mean "start again"
        recorded = None
    if isinstance(recorded, dict) and recorded.get("fingerprint") == fingerprint:
        return [str(k) for k in recorded.get("done", [])]
    if partial.exists():  # a batch log should show that an earlier run's regions were not reused
        warn_user(f"{str(partial)!r} holds the unfinished write of another run (other data, options or chunks); it "
                  "is discarded and the store written from the start.", UserWarning)
    _remove(partial)  # missing, unreadable, or another dataset: start again
    return None


def _start(ds: xr.Dataset, partial: Path, fingerprint: dict) -> None:
    """Create the partial store: all metadata and the in-memory variables; dask data come later."""
    partial.parent.mkdir(parents=True, exist_ok=True)
    ds.to_zarr(partial, mode="w", compute=False, **_FORMAT_KWARGS, consolidated=False)
    _record(partial, fingerprint, [])


def _bare(ds: xr.Dataset, names: list[Hashable]) -> xr.Dataset:
    """Select the named data variables without coordinates (those are already in the store)."""
    sub = ds[names]
    return sub.drop_vars(list(sub.coords))


def _write_step(ds: xr.Dataset, plan: _Plan, key: str, partial: Path) -> None:
    """Compute and write one step (a region or the static variables) with the active dask scheduler."""
    if key == "static":
        _bare(ds, plan.static_vars).to_zarr(partial, mode="r+", consolidated=False)
        return
    start, stop = (int(v) for v in key.split(":")[1:])
    region = {plan.region_dim: slice(start, stop)}
    _bare(ds, plan.region_vars).isel(region).to_zarr(partial, mode="r+", region=region, consolidated=False)


def _write_steps(ds: xr.Dataset, plan: _Plan, partial: Path, fingerprint: dict, done: list[str], progress: bool):
    """Write the steps not yet done, recording each one as soon as it is on disk."""
    keys = plan.keys()
    todo = [k for k in keys if k not in done]
    if progress and len(todo) < len(keys):  # a batch log says what the rerun reused (a thirtieth new-user test)
        sys.stderr.write(f"geonp: resuming the write of {str(partial).removesuffix(PARTIAL_SUFFIX)}: "
                         f"{len(keys) - len(todo)} of {len(keys)} regions already written\n")
    with tqdm(total=len(keys), initial=len(keys) - len(todo), disable=not progress, **bar_options(sys.stderr),
              desc=f"writing {str(partial).removesuffix(PARTIAL_SUFFIX)}", unit="region") as bar:
        for i, key in enumerate(todo, start=len(keys) - len(todo) + 1):
            with region_progress(sys.stderr, f"geonp: region {i}/{len(keys)}") if progress else nullcontext():
                _write_step(ds, plan, key, partial)
            done.append(key)
            _record(partial, fingerprint, done)
            bar.update(1)


def _finish(ds: xr.Dataset, partial: Path, path: Path) -> None:
    """Set the final attributes, consolidate the metadata and move the store into place."""
    group = zarr.open_group(str(partial), mode="r+", **_FORMAT_KWARGS)
    # this run's attributes (and history line, also when an earlier run wrote the metadata), without the
    # progress record; a crash from here to the rename only costs a rewrite, never a half-written `path`
    group.attrs.put(dict(ds.attrs))
    zarr.consolidate_metadata(str(partial), **_FORMAT_KWARGS)
    if not (path.exists() or path.is_symlink()):
        os.replace(partial, path)
        return
    old = path.with_name(f"{path.name}.old-{uuid.uuid4().hex[:8]}")
    os.replace(path, old)
    os.replace(partial, path)
    _remove(old)
