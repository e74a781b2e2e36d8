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

from ..errors import CRSError, DataFormatError, InputNotFoundError
from .crs import parse_crs, write_crs

__all__ = ["open_dataset", "SUFFIXES"]

GRIB_SUFFIXES = (".grib", ".grb", ".grib2", ".grb2")
NETCDF_SUFFIXES = (".nc", ".nc4", ".netcdf", ".cdf", ".h5")
ZARR_SUFFIXES = (".zarr",)
GEOTIFF_SUFFIXES = (".tif", ".tiff")
CSV_SUFFIXES = (".csv",)
SUFFIXES = GRIB_SUFFIXES + NETCDF_SUFFIXES + ZARR_SUFFIXES + GEOTIFF_SUFFIXES + CSV_SUFFIXES

# station-table columns, matched case-insensitively, first match wins
_STATION_COLUMNS = ("station", "station_id", "id", "name")
_LAT_COLUMNS = ("lat", "latitude")
_LON_COLUMNS = ("lon", "longitude")
_TIME_COLUMNS = ("time", "date", "datetime")
_ELEVATION_COLUMNS = ("elevation", "altitude", "height", "elev")


def open_dataset(path: str | os.PathLike, *, chunks: Any = None, crs: Any = None, **kwargs: Any) -> xr.Dataset:
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
        If the suffix is unknown, the optional reader is not installed, or the file cannot be read.
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
    if reader is _open_csv:
        return _open_csv(path, chunks=chunks, crs=parsed_crs, **kwargs)
    ds = reader(path, chunks=chunks, **kwargs)
    return ds if parsed_crs is None else write_crs(ds, parsed_crs)


def _reader_for(path: Path) -> Callable[..., xr.Dataset]:
    """Pick the reader from the suffix of ``path``."""
    suffix = path.suffix.lower()
    for suffixes, reader in (
        (GRIB_SUFFIXES, _open_grib),
        (NETCDF_SUFFIXES, _open_netcdf),
        (ZARR_SUFFIXES, _open_zarr),
        (GEOTIFF_SUFFIXES, _open_geotiff),
        (CSV_SUFFIXES, _open_csv),
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
    """Open a GRIB file with cfgrib, without writing index files, and put valid times on ``time``."""
    try:
        import cfgrib  # noqa: F401
    except (ImportError, RuntimeError) as err:  # RuntimeError: cfgrib present but the eccodes library is not
        raise _missing_dependency("cfgrib and eccodes", "grib", "GRIB files", err) from err
    backend_kwargs = {"indexpath": "", **kwargs.pop("backend_kwargs", {})}
    try:
        ds = xr.open_dataset(path, engine="cfgrib", chunks=chunks, backend_kwargs=backend_kwargs, **kwargs)
    except cfgrib.dataset.DatasetBuildError as err:
        raise DataFormatError(
            f"{path.name!r} holds GRIB messages that do not form one hypercube ({err}); expected one kind of "
            "field per file; select one with backend_kwargs={'filter_by_keys': {'typeOfLevel': ..., "
            "'shortName': ...}}"
        ) from err
    return grib_valid_time(ds)


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
    return out.transpose("time", ...)


def _analysis_valid_time(ds: xr.Dataset) -> xr.Dataset:
    """``time`` := ``valid_time`` for a cfgrib Dataset without a ``step`` dimension."""
    if "valid_time" not in ds.coords or "time" not in ds.coords:
        return ds
    valid = ds["valid_time"]
    if np.array_equal(ds["time"].values, valid.values):
        return ds
    if valid.dims not in ((), ("time",)):
        return ds  # an unusual layout: leave cfgrib's coordinates alone rather than guess
    return ds.assign_coords(forecast_reference_time=ds["time"].variable, time=valid.variable)


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
        return single.to_dataset(name=names[0] if names else stem)
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


# ----------------------------------------------------------------------------------------- stations


def _find_column(columns: Sequence[str], candidates: Sequence[str]) -> str | None:
    """Return the first column whose lower-cased name is one of ``candidates`` (in candidate order)."""
    lower = {c.lower().strip(): c for c in reversed(list(columns))}
    return next((lower[c] for c in candidates if c in lower), None)


def _station_columns(df: pd.DataFrame, path: Path, crs: pyproj.CRS | None) -> dict[str, str | None]:
    """Locate the id, coordinate, time and elevation columns of a station table."""
    cols = [str(c) for c in df.columns]
    found = {
        "station": _find_column(cols, _STATION_COLUMNS),
        "lat": _find_column(cols, _LAT_COLUMNS),
        "lon": _find_column(cols, _LON_COLUMNS),
        "x": _find_column(cols, ("x",)),
        "y": _find_column(cols, ("y",)),
        "time": _find_column(cols, _TIME_COLUMNS),
        "elevation": _find_column(cols, _ELEVATION_COLUMNS),
    }
    has_latlon = bool(found["lat"] and found["lon"])
    has_xy = bool(found["x"] and found["y"])
    if not (has_latlon or has_xy):
        raise DataFormatError(
            f"{path.name!r} has columns {cols}; expected station coordinates as 'lat'/'latitude' and "
            "'lon'/'longitude' (or projected 'x' and 'y' with crs=), plus optional 'station' (or "
            "'station_id', 'id', 'name'), 'time' (or 'date', 'datetime') and 'elevation'; rename the columns"
        )
    if not has_latlon and crs is None:
        raise CRSError(
            f"{path.name!r} gives station positions as projected 'x'/'y' columns but no crs was given; "
            "expected the coordinate reference system of x/y; pass crs=, e.g. crs='EPSG:27700'"
        )
    if has_latlon and crs is not None and not crs.is_geographic:
        raise CRSError(
            f"{path.name!r} has 'lat'/'lon' columns but crs={crs.name!r} is projected; expected a geographic "
            "CRS (e.g. 'EPSG:4326') for latitude/longitude; drop crs= or rename the columns to x/y"
        )
    if not has_latlon:
        found["lat"] = found["lon"] = None
    return found


def _per_station(df: pd.DataFrame, key: str, column: str, path: Path) -> np.ndarray:
    """One value per station of a column that must not vary within a station."""
    counts = df.groupby(key, sort=False)[column].nunique(dropna=True)
    if (counts > 1).any():
        bad = counts.index[counts > 1][:3].tolist()
        raise DataFormatError(
            f"{path.name!r}: column {column!r} takes several values for station(s) {bad}; expected one "
            f"{column!r} per station; give moving stations different ids or fix the values"
        )
    return df.groupby(key, sort=False)[column].first().to_numpy()


def _station_ids(df: pd.DataFrame, found: dict[str, str | None]) -> pd.Series:
    """Station ids: the id column, or one id per distinct position when there is none."""
    if found["station"] is not None:
        return df[found["station"]]
    position = [c for c in (found["lat"], found["lon"], found["x"], found["y"]) if c]
    return df.groupby(position, sort=False).ngroup()


def _open_csv(path: Path, *, chunks: Any = None, crs: pyproj.CRS | None = None, **kwargs: Any) -> xr.Dataset:
    """Read a station table: one row per observation (station, position, optional time, values)."""
    try:
        df = pd.read_csv(path, **kwargs)
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as err:
        raise DataFormatError(
            f"pandas could not read {path.name!r} as CSV ({err}); expected a comma-separated table with a "
            "header row; pass sep=... or other pandas.read_csv options"
        ) from err
    found = _station_columns(df, path, crs)
    df = df.assign(_station=_station_ids(df, found).to_numpy())
    if found["time"] is not None:
        df["_time"] = _parse_times(df[found["time"]], path)
    ds = _station_table_to_dataset(df, found, path)
    if crs is not None:
        ds = write_crs(ds, crs)
    return ds if chunks is None else ds.chunk(chunks)


def _parse_times(column: pd.Series, path: Path) -> pd.Series:
    """Parse a time column, with a readable error."""
    try:
        return pd.to_datetime(column)
    except (ValueError, TypeError):
        pass
    try:  # ISO dates of mixed precision, e.g. 2019-03-01 and 2019-03-01T12:00
        return pd.to_datetime(column, format="ISO8601")
    except (ValueError, TypeError) as err:
        raise DataFormatError(
            f"{path.name!r}: time column {column.name!r} could not be parsed as dates ({err}); expected ISO "
            "dates such as 2019-03-01 or 2019-03-01T12:00; fix the column or rename it if it is not a time"
        ) from err


def _station_table_to_dataset(df: pd.DataFrame, found: dict[str, str | None], path: Path) -> xr.Dataset:
    """Pivot the observation rows to ``(time, station)`` arrays with per-station coordinates."""
    used = {c for c in found.values() if c} | {"_station", "_time"}
    data_columns = [c for c in df.columns if c not in used and pd.api.types.is_numeric_dtype(df[c])]
    stations = pd.unique(df["_station"])
    coords: dict[str, Any] = {"station": ("station", stations)}
    names = {"lat": "lat", "lon": "lon", "x": "x", "y": "y", "elevation": "elevation"}
    for role, name in names.items():
        if found[role] is not None:
            coords[name] = ("station", _per_station(df, "_station", found[role], path).astype(float))
    for column in df.columns:
        if column not in used and column not in data_columns:  # text columns fixed per station, e.g. names
            if (df.groupby("_station", sort=False)[column].nunique(dropna=False) <= 1).all():
                coords[str(column)] = ("station", df.groupby("_station", sort=False)[column].first().to_numpy())
    if "_time" not in df:
        _check_unique(df, ["_station"], path)
        table = df.set_index("_station")[data_columns].reindex(stations)
        variables = {str(c): ("station", table[c].to_numpy(dtype=float)) for c in data_columns}
        return xr.Dataset(variables, coords=coords)
    _check_unique(df, ["_time", "_station"], path)
    times = np.sort(pd.unique(df["_time"].dropna()))
    coords["time"] = ("time", times)
    variables = {}
    for column in data_columns:
        table = df.pivot(index="_time", columns="_station", values=column).reindex(index=times, columns=stations)
        variables[str(column)] = (("time", "station"), table.to_numpy(dtype=float))
    return xr.Dataset(variables, coords=coords)


def _check_unique(df: pd.DataFrame, keys: list[str], path: Path) -> None:
    """Refuse two rows for the same station (and time)."""
    duplicated = df.duplicated(keys, keep=False)
    if duplicated.any():
        rows = (df.index[duplicated][:3] + 2).tolist()  # +2: 1-based, after the header line
        what = "station and time" if len(keys) == 2 else "station (and there is no time column)"
        raise DataFormatError(
            f"{path.name!r} has several rows for the same {what}, e.g. lines {rows}; expected one row per "
            "station and time; remove the duplicates or add a 'time' column"
        )
