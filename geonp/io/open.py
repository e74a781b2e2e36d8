"""Open gridded or station data as an :class:`xarray.Dataset`, whatever the file format.

:func:`open_dataset` dispatches on the file suffix: GRIB (cfgrib), NetCDF/HDF5, Zarr, GeoTIFF (rioxarray)
and station tables in CSV. The result always has a ``time`` dimension holding *valid* times (for GRIB
forecasts too), dask arrays when ``chunks=`` is given, and the CRS attached when ``crs=`` is given.
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip  (before cfgrib can load eccodes; see geonp/__init__.py)

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ..errors import DataFormatError, InputNotFoundError
from .crs import parse_crs, write_crs
from .stations import open_csv

__all__ = ["open_dataset", "SUFFIXES"]

GRIB_SUFFIXES = (".grib", ".grb", ".grib2", ".grb2")
#: GRIB data up to this many bytes are read when opened without ``chunks`` (see :func:`_open_grib`)
GRIB_LOAD_BYTES = 2**30
NETCDF_SUFFIXES = (".nc", ".nc4", ".netcdf", ".cdf", ".h5")
ZARR_SUFFIXES = (".zarr",)
GEOTIFF_SUFFIXES = (".tif", ".tiff")
CSV_SUFFIXES = (".csv",)
SUFFIXES = GRIB_SUFFIXES + NETCDF_SUFFIXES + ZARR_SUFFIXES + GEOTIFF_SUFFIXES + CSV_SUFFIXES



def open_dataset(path: str | os.PathLike, *, chunks: Any = None, crs: Any = None, dayfirst: bool | None = None,
                 **kwargs: Any) -> xr.Dataset:
    """Open a GRIB, NetCDF, Zarr, GeoTIFF or station-CSV file as a Dataset.

    Parameters
    ----------
    path : str or os.PathLike
        The file (or Zarr directory). The format is chosen from the suffix, case-insensitively:
        ``.grib .grb .grib2 .grb2`` (needs ``geonp[grib]``), ``.nc .nc4 .netcdf .cdf .h5``, ``.zarr``,
        ``.tif .tiff`` (needs ``geonp[geotiff]``) and ``.csv`` (one row per station observation).
    chunks : Any, optional
        Passed to the reader; any value but ``None`` gives dask-backed variables. For CSV files the
        table is read into memory and then chunked.
    crs : Any, optional
        A coordinate reference system (anything :meth:`pyproj.CRS.from_user_input` takes) to attach
        with :func:`geonp.io.write_crs`. Required for a CSV with ``x``/``y`` columns.
    dayfirst : bool, optional
        CSV only (other formats store typed times): read dates like ``01/02/1990`` day first
        (1 February) when ``True``, month first when ``False``. By default the order the values show
        is taken (a first number above 12 is a day); dates that read both ways are read month first,
        with a warning.
    na_values : sequence of float, optional
        Values that mean "missing" (``-999``, ``-9999``, ...; a fill value the file does not declare):
        read as NaN in every numeric data variable (lazily). For CSV files pandas' ``na_values``.
    **kwargs
        Passed on to the reader (``xarray.open_dataset``, ``xarray.open_zarr``,
        ``rioxarray.open_rasterio`` or ``pandas.read_csv``). For GRIB, ``backend_kwargs`` are merged
        with ``{"indexpath": ""}`` so no index files are written next to the data.

    Returns
    -------
    xarray.Dataset
        The data. GRIB forecasts (``time`` x ``step``) are flattened to one ``time`` dimension of valid
        times (which reads them into memory unless ``chunks=`` is given); station tables have dimensions
        ``(time, station)`` or ``(station,)``.

    Raises
    ------
    InputNotFoundError
        If ``path`` does not exist.
    DataFormatError
        If the suffix is unknown, the optional reader is not installed, or the file cannot be read (a GRIB
        message corrupt or truncated, as a partial download leaves it); for a
        CSV also times that are numbers other than ``YYYYMMDD``/``YYYYMMDDHH``, before 1800 or missing in
        some rows, and value columns holding text other than missing markers (``NA``, ``M``, ``-``, ``T``).
    CRSError
        If ``crs`` is invalid, or a CSV with ``x``/``y`` columns comes without ``crs``.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise InputNotFoundError(
            f"no file or directory at {str(path)!r}; expected an existing input file ({', '.join(SUFFIXES)}); "
            "check the path and the current directory"
        )
    parsed_crs = None if crs is None else parse_crs(crs)
    reader = _reader_for(path)
    if reader is open_csv:
        return open_csv(path, chunks=chunks, crs=parsed_crs, dayfirst=dayfirst, **kwargs)
    na_values = kwargs.pop("na_values", None)
    ds = _mask_values(reader(path, chunks=chunks, **kwargs), na_values)
    return ds if parsed_crs is None else write_crs(ds, parsed_crs)


def _mask_values(ds: xr.Dataset, na_values) -> xr.Dataset:
    """``ds`` with ``na_values`` read as NaN in its numeric (non-boolean) data variables; attributes kept."""
    if na_values is None:
        return ds
    values = np.atleast_1d(np.asarray(na_values, dtype=np.float64))
    for name, v in ds.data_vars.items():
        if np.issubdtype(v.dtype, np.number) and not np.issubdtype(v.dtype, np.bool_):
            masked = v.where(~v.isin(values)).assign_attrs(v.attrs)
            masked.encoding = dict(v.encoding)
            ds[name] = masked
    return ds


def _reader_for(path: Path) -> Callable[..., xr.Dataset]:
    """Pick the reader from the suffix of ``path``."""
    suffix = path.suffix.lower()
    for suffixes, reader in (
        (GRIB_SUFFIXES, _open_grib),
        (NETCDF_SUFFIXES, _open_netcdf),
        (ZARR_SUFFIXES, _open_zarr),
        (GEOTIFF_SUFFIXES, _open_geotiff),
        (CSV_SUFFIXES, open_csv),
    ):
        if suffix in suffixes:
            return reader
    raise DataFormatError(
        f"cannot tell the format of {path.name!r} from its suffix {suffix or '(none)'!r}; expected one of "
        f"{', '.join(SUFFIXES)}; rename the file or open it with xarray and pass the Dataset instead"
    )


def _missing_dependency(package: str, extra: str, fmt: str, err: ImportError) -> DataFormatError:
    """Build the error for an optional reader that is not installed."""
    return DataFormatError(
        f"reading {fmt} needs {package}, which could not be imported ({err}); expected it installed; "
        f'run: pip install "geonp[{extra}]"'
    )


# --------------------------------------------------------------------------------------------- GRIB


def _open_grib(path: Path, *, chunks: Any = None, **kwargs: Any) -> xr.Dataset:
    """Open a GRIB file with cfgrib, without writing index files, and put valid times on ``time``.

    Without ``chunks``, or with ``chunks={}`` (the reader's own chunks, as the CLI asks for), data up to
    :data:`GRIB_LOAD_BYTES` are read now. cfgrib has no chunks of its own: ``chunks={}`` gave one dask
    chunk of the whole file, decoded again by every compute (a forecast of 2 inits from the ERA5 month
    with ``--chunks time=24,latitude=16,longitude=16``: 62 s, 18 s read first; reading all 744 fields
    takes about 4 s). Larger files stay as they were asked for: convert them to Zarr for chunked runs
    (user guide).
    """
    try:
        import cfgrib  # noqa: F401
    except (ImportError, RuntimeError) as err:  # RuntimeError: cfgrib present but the eccodes library is not
        raise _missing_dependency("cfgrib and eccodes", "grib", "GRIB files", err) from err
    # errors="raise": a corrupt or truncated message (a partial download) is an error, not a shorter record
    backend_kwargs = {"indexpath": "", "errors": "raise", **kwargs.pop("backend_kwargs", {})}
    try:
        ds = xr.open_dataset(path, engine="cfgrib", chunks=chunks, backend_kwargs=backend_kwargs, **kwargs)
    except _grib_errors() as err:
        raise DataFormatError(
            f"{path.name!r} holds a corrupt or truncated GRIB message ({type(err).__name__}: {err}); expected whole "
            "messages. Download the file again (a partial download ends mid-message), or pass "
            "backend_kwargs={'errors': 'warn'} to read the messages before it."
        ) from err
    except cfgrib.dataset.DatasetBuildError as err:
        raise DataFormatError(
            f"{path.name!r} holds GRIB messages that do not form one hypercube ({err}); expected one kind of "
            "field per file; select one with backend_kwargs={'filter_by_keys': {'typeOfLevel': ..., "
            "'shortName': ...}}"
        ) from err
    ds = grib_valid_time(ds)
    if (chunks is None or (isinstance(chunks, dict) and not chunks)) and (
            sum(v.nbytes for v in ds.data_vars.values()) <= GRIB_LOAD_BYTES):
        ds = ds.load()  # chunks={} (the reader's own): cfgrib has none, and gave one dask chunk of the whole file
    return ds


def _grib_errors() -> tuple[type[BaseException], ...]:
    """The errors eccodes raises for a message it cannot read (``gribapi.errors.GribInternalError``), if importable."""
    try:
        from gribapi.errors import GribInternalError
    except ImportError:  # pragma: no cover - cfgrib without gribapi
        return ()
    return (GribInternalError,)


def grib_valid_time(ds: xr.Dataset) -> xr.Dataset:
    """Make the ``time`` dimension of a cfgrib Dataset hold the valid time of each field.

    cfgrib puts the forecast reference time on ``time`` and the lead time on ``step``. Analyses have
    a scalar ``step`` and need nothing but ``time = valid_time``; forecasts with a ``step`` dimension are
    stacked so that each field sits at its valid time, keeping ``forecast_reference_time`` and ``step``
    as coordinates along ``time``.

    Parameters
    ----------
    ds : xarray.Dataset
        A Dataset as opened by cfgrib.

    Returns
    -------
    xarray.Dataset
        The Dataset with a ``time`` dimension (or scalar coordinate) of valid times and a matching
        ``valid_time`` coordinate.

    Raises
    ------
    DataFormatError
        If several fields share a valid time (overlapping forecasts).
    """
    if "step" not in ds.dims:
        return _analysis_valid_time(ds)
    if "time" not in ds.dims:
        ds = ds.expand_dims("time") if "time" in ds.coords else ds.expand_dims(time=[np.datetime64("NaT", "ns")])
    valid = ds["time"] + ds["step"]
    if "valid_time" in ds.coords and ds["valid_time"].dims:
        valid = ds["valid_time"].broadcast_like(valid)
    ds = ds.drop_vars("valid_time", errors="ignore").assign_coords(_valid=valid)
    stacked = ds.stack(_field=("time", "step"))
    reference, step, valid = (stacked[n].values for n in ("time", "step", "_valid"))
    stacked = stacked.drop_vars(["_field", "time", "step", "_valid"])
    out = stacked.assign_coords(
        time=("_field", valid), forecast_reference_time=("_field", reference), step=("_field", step)
    ).swap_dims(_field="time")
    _check_unique_times(out)
    out = out.assign_coords(valid_time=("time", out["time"].values)).sortby("time")
    return _valid_time_attrs(out.transpose("time", ...))


def _analysis_valid_time(ds: xr.Dataset) -> xr.Dataset:
    """``time`` := ``valid_time`` for a cfgrib Dataset without a ``step`` dimension."""
    if "valid_time" not in ds.coords or "time" not in ds.coords:
        return ds
    valid = ds["valid_time"]
    if np.array_equal(ds["time"].values, valid.values):
        return _valid_time_attrs(ds)
    if valid.dims not in ((), ("time",)):
        return ds  # an unusual layout: leave cfgrib's coordinates alone rather than guess
    return _valid_time_attrs(ds.assign_coords(forecast_reference_time=ds["time"].variable, time=valid.variable))


def _valid_time_attrs(ds: xr.Dataset) -> xr.Dataset:
    """``time`` labelled as what it now holds, valid times (cfgrib labels it ``forecast_reference_time``)."""
    time = ds["time"].variable.copy(deep=False)
    time.attrs = {"standard_name": "time", "long_name": "time"}
    return ds.assign_coords(time=time)


def _check_unique_times(ds: xr.Dataset) -> None:
    """Refuse several fields at one valid time, which would make ``time`` ambiguous."""
    index = pd.Index(ds["time"].values)
    if index.is_unique:
        return
    duplicates = index[index.duplicated()].unique()[:3]
    raise DataFormatError(
        f"several GRIB fields share a valid time (e.g. {', '.join(str(t) for t in duplicates)}): the file holds "
        "overlapping forecasts; expected one field per valid time; keep one lead time, e.g. "
        "xr.open_dataset(path, engine='cfgrib').sel(step=...) and pass that Dataset instead"
    )


# ------------------------------------------------------------------------------------ NetCDF, Zarr


def _open_netcdf(path: Path, *, chunks: Any = None, **kwargs: Any) -> xr.Dataset:
    """Open NetCDF or HDF5 with xarray; grid-mapping and bounds variables become coordinates."""
    kwargs.setdefault("decode_coords", "all")
    try:
        return xr.open_dataset(path, chunks=chunks, **kwargs)
    except (OSError, ValueError) as err:
        raise DataFormatError(
            f"xarray could not read {path.name!r} as NetCDF/HDF5 ({err}); expected a NetCDF-3/4 or "
            "HDF5 (h5netcdf) file; check the file is complete, or pass engine=... to choose the reader"
        ) from err


def _is_consolidated(path: Path) -> bool:
    """Whether a Zarr store (format 2 or 3) has consolidated metadata."""
    if (path / ".zmetadata").is_file():
        return True
    group = path / "zarr.json"
    if group.is_file():
        try:
            return json.loads(group.read_text()).get("consolidated_metadata") is not None
        except (OSError, ValueError):
            return False
    return False


def _open_zarr(path: Path, *, chunks: Any = None, **kwargs: Any) -> xr.Dataset:
    """Open a Zarr directory store (format 2 or 3, consolidated or not)."""
    if not path.is_dir():
        raise DataFormatError(
            f"{path.name!r} is a file, but a .zarr store is a directory; expected a Zarr directory store; "
            "give the store's folder, or rename the file to its real format"
        )
    kwargs.setdefault("decode_coords", "all")
    kwargs.setdefault("consolidated", _is_consolidated(path))
    try:
        return xr.open_zarr(path, chunks=chunks, **kwargs)
    except (OSError, ValueError, KeyError) as err:
        raise DataFormatError(
            f"xarray could not read {str(path)!r} as a Zarr store ({err}); expected a complete store with "
            "zarr.json or .zgroup metadata; if it was being written, run the write again to finish it"
        ) from err


# ------------------------------------------------------------------------------------------ GeoTIFF


def _open_geotiff(path: Path, *, chunks: Any = None, **kwargs: Any) -> xr.Dataset:
    """Open a GeoTIFF with rioxarray; nodata becomes NaN and one band becomes one 2-D variable."""
    try:
        import rioxarray
    except ImportError as err:
        raise _missing_dependency("rioxarray", "geotiff", "GeoTIFF files", err) from err
    kwargs.setdefault("mask_and_scale", True)
    opened = rioxarray.open_rasterio(path, chunks=chunks, **kwargs)
    if isinstance(opened, xr.Dataset):
        return opened
    if isinstance(opened, list):
        raise DataFormatError(
            f"{path.name!r} holds {len(opened)} subdatasets of different shapes; expected one raster grid; "
            "pick one with rioxarray.open_rasterio(path, variable=...) and pass that Dataset instead"
        )
    return _raster_to_dataset(opened, path.stem)


def _band_names(da: xr.DataArray) -> list[str] | None:
    """Return the band descriptions (rioxarray's ``long_name``) if every band has a distinct, non-empty one."""
    names = da.attrs.get("long_name")
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, Sequence) or len(names) != da.sizes.get("band", 1):
        return None
    names = [str(n) for n in names]
    return names if all(names) and len(set(names)) == len(names) else None


def _raster_to_dataset(da: xr.DataArray, stem: str) -> xr.Dataset:
    """Turn rioxarray's ``(band, y, x)`` DataArray into a Dataset, keeping ``spatial_ref``."""
    names = _band_names(da)
    if "band" not in da.dims or da.sizes["band"] == 1:
        single = da.squeeze("band", drop=True) if "band" in da.dims else da
        # a description that reads as a name ("t2m") names the variable; a sentence ("2 metre
        # temperature", as rioxarray writes a long_name) stays its long_name, and the file names it
        named = bool(names) and names[0].isidentifier()
        out = single.to_dataset(name=names[0] if named else stem)
        if names and not named:
            out[stem].attrs["long_name"] = names[0]
        return out
    if names is None:
        return da.to_dataset(name=stem)
    variables = {}
    for index, name in enumerate(names):
        band = da.isel(band=index, drop=True)
        band.attrs = {**da.attrs, "long_name": name}
        variables[name] = band
    out = xr.Dataset(variables)
    for name in names:
        out[name].encoding = dict(da.encoding)
    return out
