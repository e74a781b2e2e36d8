"""Station tables in CSV → an :class:`xarray.Dataset` with a ``station`` dim (and ``time`` when given).

One row per observation; columns are found case-insensitively (see :func:`open_csv`). No torch here.
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip  (before cfgrib can load eccodes; see geonp/__init__.py)

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from ..errors import CRSError, DataFormatError, warn_user
from ..report_times import warn_mixed_times
from .crs import write_crs

__all__ = ["open_csv"]

# station-table columns, matched case-insensitively, first match wins
_STATION_COLUMNS = ("station", "station_id", "id", "name")
_LAT_COLUMNS = ("lat", "latitude")
_LON_COLUMNS = ("lon", "longitude")
_TIME_COLUMNS = ("time", "date", "datetime")
_ELEVATION_COLUMNS = ("elevation", "altitude", "height", "elev")


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
        shown = f"{cols}" if len(cols) <= 12 else f"{cols[:8]} ... ({len(cols)} columns)"
        wide = (" A file with one column per station or per time (wide) must be melted to one row per "
                "observation first (pandas.melt)." if len(cols) > 12 else "")
        separator = (" It looks separated by ';' or tabs, not commas: open it with geonp.open_dataset(path, "
                     "sep=';') (or sep='\\t'), or save it with commas." if len(cols) == 1 and any(
                         ch in cols[0] for ch in ";\t") else "")
        raise DataFormatError(
            f"{path.name!r} has columns {shown}; expected station coordinates as 'lat'/'latitude' and "
            "'lon'/'longitude' (or projected 'x' and 'y' with crs=), plus optional 'station' (or "
            "'station_id', 'id', 'name'), 'time' (or 'date', 'datetime') and 'elevation'; rename the columns."
            + wide + separator
        )
    if not has_latlon and crs is None:
        raise CRSError(
            f"{path.name!r} gives station positions as projected 'x'/'y' columns but no crs was given; "
            "expected the coordinate reference system of x/y; pass crs=, e.g. crs='EPSG:27700' (on the command "
            "line --crs for the input, --targets-crs for a --targets file)"
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


def open_csv(path: Path, *, chunks: Any = None, crs: pyproj.CRS | None = None, dayfirst: bool | None = None,
             **kwargs: Any) -> xr.Dataset:
    """Read a station table: one row per observation (station, position, optional time, values).

    ``dayfirst`` reads dates like ``01/02/1990`` day first (1 February); ``None`` takes the order the
    values show (a first number above 12 is a day), else month first with a warning (:func:`_day_first`).
    """
    try:
        df = pd.read_csv(path, **kwargs)
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as err:
        raise DataFormatError(
            f"pandas could not read {path.name!r} as CSV ({err}); expected a comma-separated table with a "
            "header row; pass sep=... or other pandas.read_csv options"
        ) from err
    found = _station_columns(df, path, crs)
    df = _read_missing_markers(df.dropna(how="all"), found, path)
    df = df.assign(_station=_station_ids(df, found).to_numpy())
    if found["time"] is not None:
        column = df[found["time"]]
        df["_time"] = _parse_times(column, path, _day_first(column, dayfirst, path))
        _check_times(df["_time"], column, path)
    _warn_sentinels(df, _data_columns(df, found), path)
    ds = _station_table_to_dataset(df, found, path)
    if "time" in ds.dims and ds.data_vars:  # stations reporting at :20 among others at :00: said on opening
        warn_mixed_times(ds[next(iter(ds.data_vars))], "time")
    if crs is not None:
        ds = write_crs(ds, crs)
    return ds if chunks is None else ds.chunk(chunks)


_NUMBER_DATE = re.compile(r"^\s*(\d{1,2})[/.\-](\d{1,2})[/.\-]\d{2,4}\b")


def _day_first(column: pd.Series, dayfirst: bool | None, path: Path) -> bool:
    """Whether dates like ``01/02/1990`` are day first: as given, else as the values show.

    Without ``dayfirst``, a first number above 12 somewhere means day first, a second one above 12
    month first; when every date reads both ways, month first (pandas' default) with a warning.
    """
    if dayfirst is not None:
        return bool(dayfirst)
    parts = column.dropna().astype(str).str.extract(_NUMBER_DATE)
    if parts.empty or parts.isna().any(axis=None):
        return False  # ISO or other forms: no day/month order to choose
    first, second = parts[0].astype(int), parts[1].astype(int)
    if (first > 12).any() or (second > 12).any():
        return bool((first > 12).any() and not (second > 12).any())
    if (first != second).any():
        example = column.dropna().astype(str).iloc[int(np.argmax((first != second).to_numpy()))]
        warn_user(
            f"{path.name!r}: time column {column.name!r} has dates like {example!r} that read either way (day/month "
            "or month/day); they are read month first, as pandas does. Pass dayfirst=True to "
            "geonp.open_dataset (CLI --dayfirst) if the day comes first, or dayfirst=False to silence this.",
            UserWarning)
    return False


def _parse_times(column: pd.Series, path: Path, dayfirst: bool = False) -> pd.Series:
    """Parse a time column (``01/02/1990`` as 1 February when ``dayfirst``), with a readable error.

    Integer dates ``YYYYMMDD`` (and ``YYYYMMDDHH``) are read as such; other numbers are refused. Times
    with a UTC offset (``Z``, ``+01:00``, mixed offsets too) are converted to UTC, without a timezone.
    """
    numeric = _digit_times(column, path)
    if numeric is not None:
        return numeric
    try:
        return _to_naive_utc(column, dayfirst=dayfirst)
    except (ValueError, TypeError):
        pass
    try:  # ISO dates of mixed precision, e.g. 2019-03-01 and 2019-03-01T12:00
        return _to_naive_utc(column, format="ISO8601")
    except (ValueError, TypeError) as err:
        raise DataFormatError(
            f"{path.name!r}: time column {column.name!r} could not be parsed as dates ({err}); expected ISO "
            "dates such as 2019-03-01 or 2019-03-01T12:00 (or dates like 01/02/1990 in one order: pass "
            "dayfirst=True for day/month/year); fix the column or rename it if it is not a time"
        ) from err


def _to_naive_utc(column: pd.Series, **kwargs: Any) -> pd.Series:
    """``pd.to_datetime``, with times that carry a timezone or UTC offset converted to UTC and made naive."""
    try:
        times = pd.to_datetime(column, **kwargs)
    except ValueError as err:  # mixed offsets ("Mixed timezones detected. Pass utc=True ...")
        try:
            times = pd.to_datetime(column, utc=True, **kwargs)
        except (ValueError, TypeError):
            raise err from None
    if not pd.api.types.is_datetime64_any_dtype(times):  # objects: aware and naive times mixed
        times = pd.to_datetime(column, utc=True, **kwargs)
    if getattr(times.dt, "tz", None) is not None:
        times = times.dt.tz_convert("UTC").dt.tz_localize(None)
    return times


_DIGIT_FORMATS = {8: ("%Y%m%d", "YYYYMMDD"), 10: ("%Y%m%d%H", "YYYYMMDDHH")}


def _digit_times(column: pd.Series, path: Path) -> pd.Series | None:
    """Times written as integers (or digit strings): ``YYYYMMDD`` or ``YYYYMMDDHH``; refuse other numbers.

    ``None`` when the column is not made of numbers (ordinary date strings).
    """
    values = column.dropna()
    if values.empty or pd.api.types.is_bool_dtype(column):
        return None
    if pd.api.types.is_numeric_dtype(column):
        integral = bool(np.all(np.mod(values.to_numpy(dtype=float), 1) == 0))
        digits = values.astype("int64").astype(str) if integral else values.astype(str)
    else:
        digits = values.astype(str).str.strip()
        if not digits.str.fullmatch(r"\d+").all():
            return None
    lengths = digits.str.len()
    if lengths.nunique() == 1 and int(lengths.iloc[0]) in _DIGIT_FORMATS:
        fmt, form = _DIGIT_FORMATS[int(lengths.iloc[0])]
        parsed = pd.to_datetime(digits, format=fmt, errors="coerce")
        if not parsed.isna().any():
            return parsed.reindex(column.index)
        bad = digits[parsed.isna()]
        if len(bad) <= len(digits) / 2:  # mostly dates: name the bad one (else numbers of another kind)
            raise DataFormatError(
                f"{path.name!r}: time column {column.name!r} holds {form} numbers, but {bad.iloc[0]!r} (line "
                f"{int(bad.index[0]) + 2}) is not a valid date; expected every value as {form}; fix that value"
            )
    example = digits[lengths != 8].iloc[0] if (lengths != 8).any() else digits.iloc[0]
    raise DataFormatError(
        f"{path.name!r}: time column {column.name!r} holds numbers such as {example!r}, which are not dates; "
        "expected dates such as 2019-03-01 or 2019-03-01T12:00, or integer dates YYYYMMDD (19900601) or "
        "YYYYMMDDHH (1990060112); write the times in one of these forms (e.g. seconds since 1970 with "
        "pandas.to_datetime(df.time, unit='s')), or rename the column if it is not a time"
    )


def _check_times(times: pd.Series, column: pd.Series, path: Path) -> None:
    """Refuse rows without a time and times before 1800 (numbers read as dates, most likely)."""
    if times.isna().any():
        rows = (times.index[times.isna()][:5] + 2).tolist()  # +2: 1-based, after the header line
        raise DataFormatError(
            f"{path.name!r}: {int(times.isna().sum())} row(s) have no time in column {column.name!r}, e.g. "
            f"lines {rows}; expected a time in every row (those rows would be lost); fill in the times or "
            "delete those rows"
        )
    if len(times) and times.min() < pd.Timestamp("1800-01-01"):
        first = int(np.argmin(times.to_numpy()))
        raise DataFormatError(
            f"{path.name!r}: time column {column.name!r} gives {column.iloc[first]!r} (line "
            f"{int(times.index[first]) + 2}), read as {times.iloc[first]}, before 1800; expected dates such "
            "as 2019-03-01; write the times as dates (numbers such as years or seconds are not read as dates)"
        )


# written for missing values in station tables (pandas' own NA strings are read as NaN already)
_MISSING_MARKERS = frozenset({"", "m", "-", "--", "---", "t", "na", "n/a", "nan", "null", "none", "missing", "*",
                              "?", "."})
# values that stand for "missing" in station files; flagged when they lie far outside the other values
SENTINELS = (-99999.0, -9999.9, -9999.0, -999.9, -999.0, -99.99, -99.9, 9999.0, 9999.9, 99999.0)


def _data_columns(df: pd.DataFrame, found: dict[str, str | None]) -> list[Any]:
    """The numeric columns that become data variables."""
    used = {c for c in found.values() if c} | {"_station", "_time"}
    return [c for c in df.columns if c not in used and pd.api.types.is_numeric_dtype(df[c])]


def _read_missing_markers(df: pd.DataFrame, found: dict[str, str | None], path: Path) -> pd.DataFrame:
    """Read value columns that write missing values as text (``M``, ``-``, ``T``, ...) as numbers with NaN.

    A text column counts as a value column when most of its other cells are numbers; one with cells that
    are still not numbers is refused. Columns without numbers (names, flags) stay text.
    """
    used = {c for c in found.values() if c}
    for column in df.columns:
        if column in used or pd.api.types.is_numeric_dtype(df[column]) or pd.api.types.is_bool_dtype(df[column]):
            continue
        text = df[column].astype("string").str.strip()
        missing = (text.isna() | text.str.lower().isin(_MISSING_MARKERS)).fillna(True).to_numpy(dtype=bool)
        numbers = pd.to_numeric(text.where(~missing).astype(object), errors="coerce")
        written = int((~missing).sum())
        numeric = int(numbers.notna().sum())
        if numeric == 0 or numeric < written / 2:
            continue  # a text column
        bad = text[~missing & numbers.isna().to_numpy()]
        if len(bad):
            raise DataFormatError(
                f"{path.name!r}: column {column!r} holds numbers but also {len(bad)} cell(s) that are not, such "
                f"as {bad.iloc[0]!r} (line {int(bad.index[0]) + 2}); expected numbers, with missing values "
                "left empty or written as NA, NaN, M, - or T; fix those cells, or pass na_values=[...] (as for "
                "pandas.read_csv) to read them as missing"
            )
        df = df.assign(**{str(column): numbers.astype(float)})
    return df


def _warn_sentinels(df: pd.DataFrame, columns: Sequence[Any], path: Path) -> None:
    """Warn about value columns whose extreme looks like a missing-value sentinel (-9999, ...)."""
    for column in columns:
        values = df[column].to_numpy(dtype=float)
        values = values[np.isfinite(values)]
        if values.size < 2:
            continue
        for sentinel in (values.min(), values.max()):
            if not np.any(np.isclose(sentinel, SENTINELS, rtol=0, atol=1e-9)):
                continue
            count = int(np.sum(values == sentinel))
            others = values[values != sentinel]
            far = others.size == 0 or np.min(np.abs(others - sentinel)) > 0.1 * abs(sentinel)
            if count >= 2 and far:
                name = str(column)
                warn_user(
                    f"{path.name!r}: column {name!r} has {count} values of {sentinel:g}, far from its other "
                    f"values; this looks like a missing-value marker, but it is read as data. Mask it with "
                    f"ds[{name!r}] = ds[{name!r}].where(ds[{name!r}] != {sentinel:g}), or pass "
                    f"na_values=[{sentinel:g}] to geonp.open_dataset (CLI: --na-values {sentinel:g}), or leave those "
                    "cells empty in the file.",
                    UserWarning)


def _station_table_to_dataset(df: pd.DataFrame, found: dict[str, str | None], path: Path) -> xr.Dataset:
    """Pivot the observation rows to ``(time, station)`` arrays with per-station coordinates."""
    used = {c for c in found.values() if c} | {"_station", "_time"}
    data_columns = _data_columns(df, found)
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
        _check_unique(df, ["_station"], path, found)
        table = df.set_index("_station")[data_columns].reindex(stations)
        variables = {str(c): ("station", table[c].to_numpy(dtype=float)) for c in data_columns}
        return xr.Dataset(variables, coords=coords)
    _check_unique(df, ["_time", "_station"], path, found)
    times = np.sort(pd.unique(df["_time"].dropna()))
    coords["time"] = ("time", times)
    variables = {}
    for column in data_columns:
        table = df.pivot(index="_time", columns="_station", values=column).reindex(index=times, columns=stations)
        variables[str(column)] = (("time", "station"), table.to_numpy(dtype=float))
    return xr.Dataset(variables, coords=coords)


def _check_unique(df: pd.DataFrame, keys: list[str], path: Path, found: dict[str, str | None]) -> None:
    """Refuse two rows for the same station (and time), naming the first such station and time.

    The rows are named by their values, which a user can search the file for: pandas skips blank
    and comment lines, so row positions are not line numbers.
    """
    duplicated = df.duplicated(keys, keep=False)
    if not duplicated.any():
        return
    first = df[duplicated].iloc[0]
    same = df[duplicated & (df[keys] == first[keys]).all(axis=1)]
    station = found["station"]
    where = (f"station {first[station]!r}" if station is not None
             else "the station at " + ", ".join(f"{found[r]}={first[found[r]]}" for r in ("lat", "lon", "x", "y")
                                                if found[r] is not None))
    if len(keys) == 2:
        where += f" at {found['time']}={df.loc[same.index[0], found['time']]!r}"
        fix = "remove or average the duplicates"
    else:
        fix = "remove the duplicates, or add a time column if the rows are observations at different times"
    raise DataFormatError(
        f"{path.name!r} has {len(same)} rows for {where} ({int(duplicated.sum())} duplicated rows in all); "
        f"expected one row per station{' and time' if len(keys) == 2 else ''}; {fix}"
    )
