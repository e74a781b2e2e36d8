"""The variable to work on: which one, and its missing values as NaN (no torch).

:func:`select_variable` picks the data variable a call predicts (named, or the only numeric one) and
refuses what geonp cannot read as a field: not numeric, still packed, empty. Missing values users
bring in other forms (±inf, the ``_FillValue``/``missing_value`` of data opened undecoded) become NaN.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import pandas as pd
import xarray as xr

from .errors import CircularVariableWarning, CoordinateError, VariableNotFoundError, VariableTypeError, warn_user

__all__ = ["select_variable"]

#: the name of an unnamed DataArray, in predictions (``value_mean``) and in a store written from it (``value``)
UNNAMED = "value"

#: names read as latitude / longitude (also when held as data variables: then never the variable to predict)
LAT_NAMES = ("lat", "latitude", "nav_lat", "lats", "y_lat")
LON_NAMES = ("lon", "longitude", "long", "nav_lon", "lons", "x_lon")


def _describes_the_field(v: xr.DataArray) -> bool:
    """A CF flag variable (``flag_values``/``flag_masks``: quality flags) or a land–sea mask (by name or CF name)."""
    from .surface import LAND_NAMES, LAND_STANDARD_NAMES

    return bool({"flag_values", "flag_masks"} & set(v.attrs)) or str(v.name).lower() in LAND_NAMES or (
        v.attrs.get("standard_name") in LAND_STANDARD_NAMES)


def select_variable(obj: xr.Dataset | xr.DataArray, var: str | None) -> tuple[xr.Dataset, str]:
    """The dataset and the name of the variable to work on.

    Raises
    ------
    VariableTypeError
        ``obj`` is not an xarray object, or the variable is not numeric.
    VariableNotFoundError
        ``var`` is not a data variable, or it was omitted and there are several or none.
    CoordinateError
        The variable has a dim of size 0 (an empty selection).
    """
    if isinstance(obj, xr.DataArray):
        name = str(obj.name) if obj.name is not None else (var or UNNAMED)  # outputs are named "{name}_mean"
        if var is not None and var != name:
            raise VariableNotFoundError(f"variable {var!r} requested but the DataArray is named {name!r}; "
                                        "omit var= or pass the Dataset that holds it.")
        ds = obj.rename(name).to_dataset()
        var = name
    elif isinstance(obj, xr.Dataset):
        ds = obj
        data_vars = [str(v) for v in ds.data_vars]
        if isinstance(var, (list, tuple)) or not isinstance(var, Hashable):
            raise VariableNotFoundError(f"var={var!r}; expected the name of one variable (geonp predicts one "
                                        "variable at a time: call it once per variable).")
        if var is None:
            # latitude/longitude held as data variables are coordinates, CF flags (quality) and land-sea masks
            # describe the field: none is a candidate
            numeric = [v for v in data_vars if np.issubdtype(ds[v].dtype, np.number) and ds[v].ndim > 0
                       and not np.issubdtype(ds[v].dtype, np.bool_) and v.lower() not in LAT_NAMES + LON_NAMES
                       and not _describes_the_field(ds[v])]
            if not numeric:
                found = ", ".join(f"{v} ({ds[v].dtype})" for v in data_vars) or "none"
                raise VariableNotFoundError(
                    f"the dataset has no numeric data variable to predict (data variables: {found}); expected one "
                    "holding the field, e.g. ds['t2m'] = ... or geonp.open_dataset(path) on the data file.")
            if len(numeric) != 1:
                raise VariableNotFoundError(
                    f"the dataset has {len(numeric)} numeric data variables {numeric}; expected one, or name it: "
                    f"e.g. var={numeric[0]!r} (ds.np.infill({numeric[0]!r}), ds.np.forecast({numeric[0]!r}, ...))."
                )
            var = numeric[0]
        elif var not in ds.data_vars:
            where = " is a coordinate, not a data variable" if var in ds.coords else " is not in the dataset"
            raise VariableNotFoundError(
                f"variable {var!r}{where}; its data variables are {data_vars}. Pick one of them."
            )
    else:
        raise VariableTypeError(f"expected an xarray Dataset or DataArray, got {type(obj).__name__}; "
                                "open files with geonp.open_dataset(path).")
    if not np.issubdtype(ds[var].dtype, np.number) or np.issubdtype(ds[var].dtype, np.complexfloating):
        raise VariableTypeError(f"variable {var!r} has dtype {ds[var].dtype}; expected a real numeric variable. "
                                "Pick a numeric variable or convert it with .astype('float32').")
    packing = sorted(k for k in ("scale_factor", "add_offset", "_FillValue", "missing_value") if k in ds[var].attrs)
    if np.issubdtype(ds[var].dtype, np.integer) and packing:
        raise VariableTypeError(f"variable {var!r} holds raw packed integers ({ds[var].dtype} with {packing} in its "
                                "attributes): its values are not decoded and its missing values are not NaN. Decode "
                                "it first: xr.decode_cf(ds), or open the file without mask_and_scale=False.")
    empty = [str(d) for d, n in ds[var].sizes.items() if n == 0]
    if empty:
        axis = ds[empty[0]].values if empty[0] in ds.coords else None
        raise CoordinateError(
            f"variable {var!r} has no values along {empty} (size 0): the selection is empty"
            f"{'' if axis is None else f' ({empty[0]} = {axis.tolist()})'}. A slice along a descending axis "
            "(ERA5's latitude runs 90 → -90) selects nothing when given in ascending order: reverse it, e.g. "
            "ds.sel(latitude=slice(55, 50)).")
    if {"scale_factor", "add_offset"} & set(packing):
        raise VariableTypeError(f"variable {var!r} has {packing} in its attributes: its values are still packed "
                                "(not decoded). Decode it first: xr.decode_cf(ds), or open the file without "
                                "mask_and_scale=False.")
    _warn_if_direction(ds[var], str(var))
    return _naive_utc_times(ds.assign({var: _missing_as_nan(ds[var])})), str(var)


#: units of an angle (not of latitude/longitude, which are never the variable)
_ANGLE_UNITS = ("degree", "degrees", "deg", "°", "radian", "radians", "rad")


def _warn_if_direction(da: xr.DataArray, name: str) -> None:
    """Warn when the variable is a direction: a CF ``*_direction`` standard name or angle units."""
    standard = str(da.attrs.get("standard_name", "")).lower()
    units = str(da.attrs.get("units", "")).strip().lower()
    if standard.endswith("direction") or units in _ANGLE_UNITS:
        warn_user(f"{name!r} looks like a direction (standard_name {standard or 'none'!r}, units {units or 'none'!r}): "
                  "geonp treats its values as a field on a line, so 359 and 1 degrees are 358 apart and means across "
                  "north wrap wrongly (a synthetic wind direction around north: mean error 19 degrees, worst 180). "
                  "Predict its components instead (u and v, or sin and cos of the angle) and recombine them, e.g. "
                  "np.degrees(np.arctan2(s, c)) % 360 (0.5 degrees on the same field).", CircularVariableWarning)


def _naive_utc_times(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with time-zone-aware coordinates (``datetime64[ns, UTC]``, pandas') as UTC without a zone.

    ``pd.to_datetime(..., utc=True)`` then ``to_xarray()`` gives them; geonp's times are UTC, as the
    station CSV reader makes them.
    """
    aware = {k: c for k, c in ds.coords.items() if isinstance(c.dtype, pd.DatetimeTZDtype)}
    if not aware:
        return ds
    fixed = {k: (c.dims, pd.DatetimeIndex(c.variable.to_index()).tz_convert(None).to_numpy("datetime64[ns]"), c.attrs)
             for k, c in aware.items() if c.ndim == 1}  # pandas holds them as an index: one dim
    return ds.assign_coords(fixed)


def _missing_as_nan(da: xr.DataArray) -> xr.DataArray:
    """``da`` with ±inf and the values its CF ``_FillValue``/``missing_value`` attributes declare set to NaN.

    Decoded data carry those attributes in ``encoding``, not ``attrs``; in ``attrs`` they mean the file was
    opened undecoded (``mask_and_scale=False``) and its fill values are still in the data, where they
    would be taken for real values. Lazy: nothing is computed here.
    """
    if not np.issubdtype(da.dtype, np.floating):
        return da
    fills = [v for k in ("_FillValue", "missing_value") for v in np.atleast_1d(da.attrs.get(k, []))
             if isinstance(v, (int, float, np.number)) and np.isfinite(v)]
    if not fills and da.chunks is None and (not da.variable._in_memory or not np.isinf(da.values).any()):
        # in memory with nothing to mask: no copy; a file's lazily read variable is not read here (that loaded
        # all of it, chunks= or not): its infinities are masked where it is chunked (geonp.chunked._dask_data)
        return da
    ok = np.isfinite(da)
    for v in fills:
        ok = ok & (da != v)
    out = da.where(ok)
    out.attrs = {k: v for k, v in da.attrs.items() if k not in ("_FillValue", "missing_value")}
    out.encoding = dict(da.encoding)
    return out
