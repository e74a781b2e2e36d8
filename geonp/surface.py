"""Surface fields of the data: elevation and the land–sea mask, for the static trends (:mod:`geonp.trend`).

Elevation is found by name or CF standard name (surface geopotential is divided by g). A variable
or coordinate on the space dims (and perhaps time) named like a land–sea mask (``lsm`` in ERA5,
``sftlf`` in CMIP, ``land_sea_mask``, ``landmask``, ...) or with the CF standard name
``land_binary_mask`` or ``land_area_fraction`` is read as the land fraction of each point, 0 (sea)
to 1 (land); percentages are converted. A grid's mask is smoothed over about one cell
(:func:`geonp.trend.smooth_grid`): 2 m temperature changes over tens of km across a coast, not
within one cell. Data without a mask get one from the bundled global land fraction
(:mod:`geonp.coastline`: each grid cell's footprint, or a 10 km disk around each station) unless
``land="data"`` or ``"none"`` (:func:`land_name`). No torch here.
"""

from __future__ import annotations

import re

import dask
import numpy as np
import xarray as xr

from .coastline import footprint_land_fraction, grid_land_fraction, grid_steps, station_land_fraction
from .errors import ConfigError, CoordinateError, MissingCovariateWarning, VariableNotFoundError, warn_user
from .poles import ring_axis
from .trend import MIN_RELIEF_M, smooth_grid

__all__ = ["elevation_name", "find_elevation", "static_elevation", "land_name", "find_land", "LAND_SMOOTH_CELLS", "G0",
           "COASTLINE", "LAND_OPTIONS"]

#: the heights an elevation may take (m): the Dead Sea shore to Everest, with a margin
MIN_ELEVATION_M, MAX_ELEVATION_M = -500.0, 9000.0
ELEVATION_NAMES = ("elevation", "altitude", "height", "orography", "orog", "elev", "surface_altitude", "hgt", "z",
                   "dem", "topography", "topo")
ELEVATION_STANDARD_NAMES = ("surface_altitude", "height_above_mean_sea_level", "altitude", "height_above_sea_level")
_GEOPOTENTIAL_NAMES = ("surface_geopotential", "geopotential_at_surface")
G0 = 9.80665
LAND_NAMES = ("lsm", "land_sea_mask", "landsea_mask", "land_mask", "landmask", "land_fraction", "landfrac", "sftlf")
LAND_STANDARD_NAMES = ("land_binary_mask", "land_area_fraction")

#: Gaussian smoothing of a grid's land fraction, in cells (best of 0, 1, 1.5, 2 on ERA5 at 0.25°)
LAND_SMOOTH_CELLS = 1.0
#: ``Layout.land`` of a grid whose land fraction comes from the bundled table (:mod:`geonp.coastline`)
COASTLINE = "<bundled land fraction>"
#: what ``land=`` takes besides a variable name
LAND_OPTIONS = ("auto", "data", "none")


def _attr(obj, key: str) -> str:
    return str(obj.attrs.get(key, "")).lower()


def _named(ds: xr.Dataset, names: tuple, standard_names: tuple, usable) -> list[str]:
    """The coordinates, then data variables, that match, in that order.

    A match is accepted by ``usable(name, value)`` and has its lower-cased name in ``names`` or its
    CF standard name in ``standard_names``.
    """
    return [str(key) for key, v in list(ds.coords.items()) + list(ds.data_vars.items())
            if usable(str(key), v) and (str(key).lower() in names or _attr(v, "standard_name") in standard_names)]


def _find_named(ds: xr.Dataset, names: tuple, standard_names: tuple, usable) -> str | None:
    """The name of the first coordinate, then data variable, that matches (:func:`_named`); else ``None``."""
    found = _named(ds, names, standard_names, usable)
    return found[0] if found else None


def _is_mask(v: xr.DataArray, space_dims: set, time: str | None) -> bool:
    """On the space dims (and perhaps time), with numbers or booleans (``frac > 0.5``: 0 sea, 1 land)."""
    dims = set(v.dims)
    return bool(dims & space_dims) and dims <= space_dims | {time} and _is_numeric_or_bool(v)


def _is_numeric_or_bool(v: xr.DataArray) -> bool:
    return np.issubdtype(v.dtype, np.number) or np.issubdtype(v.dtype, np.bool_)


def land_name(ds: xr.Dataset, space_dims: set, time: str | None = None, land: str | bool | None = "data",
              var: str | None = None) -> str | None:
    """The land–sea mask to use: a variable or coordinate of ``ds``, :data:`COASTLINE`, or ``None``.

    Parameters
    ----------
    land : {"auto", "data", "none"}, str, bool or None
        ``"data"``: a mask among ``ds``'s variables and coordinates on ``space_dims``, found by
        name or CF standard name (one that also has the ``time`` dim, as ERA5's ``lsm`` downloaded
        beside a variable, counts: its first time step is read). ``"auto"`` (``True``): the same,
        else the bundled land fraction (:mod:`geonp.coastline`). ``"none"`` (``False``,
        ``None``): no land–sea trend. Any other string names the mask.

    Raises
    ------
    VariableNotFoundError, CoordinateError, ConfigError
        A named mask that is missing or not on the space dims; an option of the wrong type.
    """
    if land is None or land is False or land == "none":
        return None
    if land is True:
        land = "auto"
    if not isinstance(land, str):
        raise ConfigError(f"land={land!r} is not an option; expected one of {list(LAND_OPTIONS)} or the name of a "
                          "land-sea mask variable.")
    if land not in LAND_OPTIONS:
        if land not in ds.variables:
            raise VariableNotFoundError(f"land-sea mask {land!r} is not a variable or coordinate of the dataset; "
                                        f"found {sorted(map(str, ds.variables))}. Expected one of them or "
                                        f"{list(LAND_OPTIONS)}.")
        if not _is_mask(ds[land], space_dims, time):
            raise CoordinateError(f"land-sea mask {land!r} has dims {ds[land].dims} and dtype {ds[land].dtype}; "
                                  f"expected numeric or boolean values on the space dims {sorted(space_dims)} (and "
                                  "perhaps time). Pass the land fraction of each point, 0 (sea) to 1 (land).")
        return land
    found = _find_named(ds, LAND_NAMES, LAND_STANDARD_NAMES,
                        lambda key, v: key != var and _is_mask(v, space_dims, time))
    return found if found is not None else COASTLINE if land == "auto" else None


def find_land(ds: xr.Dataset, layout, lon: np.ndarray | None = None,
              lat: np.ndarray | None = None) -> np.ndarray | None:
    """Land fraction ``[P]`` (0 sea … 1 land) on ``layout``'s space points, smoothed on grids, or ``None``.

    ``lon``/``lat`` ``[P]`` (degrees) are the points, needed for :data:`COASTLINE`.

    Raises
    ------
    CoordinateError
        The mask has missing values or values outside 0–1 (0–100 in %).
    """
    name = getattr(layout, "land", None)
    if name is None:
        return None
    if name == COASTLINE:
        if len(layout.space_dims) == 1:  # stations: the land around each, over a disk
            return station_land_fraction(lon, lat)
        shape = tuple(ds.sizes[d] for d in layout.space_dims)
        values = grid_land_fraction(np.reshape(lon, shape), np.reshape(lat, shape))
        return smooth_grid(values, LAND_SMOOTH_CELLS, _ring(lon, lat, shape)).reshape(-1)
    v = ds[name]
    v = v.isel({d: 0 for d in v.dims if d not in layout.space_dims}, drop=True)  # a mask repeated in time
    da = ds[layout.var]
    template = da.isel({d: 0 for d in da.dims if d not in layout.space_dims}, drop=True)
    values = v.broadcast_like(template).transpose(*layout.space_dims).values.astype(np.float64)
    if str(v.attrs.get("units", "")).strip() in ("%", "percent"):
        values = values / 100.0
    bad = ~np.isfinite(values) | (values < -1e-6) | (values > 1 + 1e-6)
    if bad.any():
        raise CoordinateError(
            f"land-sea mask {name!r} has {int(bad.sum())} of {values.size} values that are missing or outside "
            f"0..1 (found {np.nanmin(values):g} to {np.nanmax(values):g}); expected the land fraction of every "
            f"point (0 sea, 1 land; units '%' for percentages). Fill it, e.g. ds[{name!r}].fillna(0), or drop it.")
    values = np.clip(values, 0.0, 1.0)
    if len(layout.space_dims) == 2:
        values = smooth_grid(values, LAND_SMOOTH_CELLS, _ring(lon, lat, values.shape))
    return values.reshape(-1)


def _ring(lon: np.ndarray | None, lat: np.ndarray | None, shape: tuple[int, ...]) -> int | None:
    """The axis of a global grid whose ends meet (smoothed across them: the same in either longitude convention)."""
    if lon is None or lat is None:
        return None
    return ring_axis(np.reshape(lon, shape), np.reshape(lat, shape))


def land_like_source(lon: np.ndarray, lat: np.ndarray, source_lon: np.ndarray, source_lat: np.ndarray,
                     source_shape: tuple[int, ...]) -> np.ndarray:
    """The bundled land fraction at points ``lon``/``lat`` ``[P]`` measured as the source's own was.

    A land trend is fitted on the source points' land fractions, so a target (``targets=``) must get
    its own the same way, whatever the targets' spacing: around a station source, a station's disk;
    on a grid source, a box of the source's cell smoothed as :func:`find_land` smooths it (the
    variance-matched box, ``sqrt(1 + 12 σ²)`` cells on a side). A coarse target grid measured over
    its own cells would give a point far out at sea the land of a cell 90° wide, and make each
    target's prediction depend on the other targets.
    """
    lon, lat = np.asarray(lon, dtype=np.float64), np.asarray(lat, dtype=np.float64)
    if len(source_shape) == 1:
        return station_land_fraction(lon, lat)
    sides = grid_steps(np.reshape(source_lon, source_shape), np.reshape(source_lat, source_shape))
    width = float(np.sqrt(1.0 + 12.0 * LAND_SMOOTH_CELLS**2))
    return footprint_land_fraction(lon, lat, *[(width * dlon, width * dlat) for dlon, dlat in sides])


#: names of vertical coordinates: a field on one of them lies above the surface
_VERTICAL_NAMES = ("level", "levels", "isobaricinhpa", "isobaricinpa", "pressure_level", "pressure_levels", "plev",
                   "lev", "pressure", "model_level", "hybrid", "height_above_ground")
_PRESSURE_UNITS = ("hpa", "pa", "mbar", "millibar", "mb", "kpa")


def _vertical(name, c: xr.DataArray) -> bool:
    return (str(name).lower() in _VERTICAL_NAMES or _attr(c, "standard_name") == "air_pressure"
            or (c.ndim <= 1 and _attr(c, "units") in _PRESSURE_UNITS))


def _aloft(v: xr.DataArray, ds: xr.Dataset | None = None) -> bool:
    """Whether ``v`` lies above the surface: on a vertical coordinate (a dim or a scalar one, e.g. 500 hPa).

    ERA5's pressure-level ``z`` (geopotential at 500 hPa, ~5,500 m) is no terrain height, though named like
    the surface geopotential of single-level files; cfgrib's ``GRIB_typeOfLevel`` says which it is. A
    geopotential (by name ``z``, standard name or units) in a dataset ``ds`` with a vertical coordinate
    is taken to be aloft too (a time mean of ``z`` at one level keeps no level of its own).
    """
    level = _attr(v, "GRIB_typeOfLevel")
    if level and level != "surface":
        return True
    if any(_vertical(name, c) for name, c in v.coords.items()):
        return True
    geopotential = (str(v.name).lower() == "z" or _attr(v, "standard_name") == "geopotential"
                    or _unit_powers(_attr(v, "units")) in _GEOPOTENTIAL_UNITS)
    return bool(ds is not None and geopotential and any(_vertical(n, c) for n, c in ds.coords.items()))


def elevation_name(ds: xr.Dataset, space_dims: set, name: str | None, var: str | None = None) -> str | None:
    """The elevation to use: a variable or coordinate of ``ds``, or ``None``.

    A given ``name`` must be a variable or coordinate on ``space_dims``; without one, a numeric one on
    the space dims is found by name or CF standard name (surface geopotential included). The variable
    being predicted, ``var``, is never its own elevation (infilling a DEM called ``elevation`` or a
    geopotential ``z``).

    Raises
    ------
    VariableNotFoundError, CoordinateError
        A named elevation that is missing, not on the space dims, or ``var`` itself.
    ConfigError
        The elevation's units are not a length or geopotential (:func:`elevation_factor`).
    """
    if name is not None:
        _check_named_elevation(ds, space_dims, name, var)
        found = name
    else:
        found = _find_named(ds, ELEVATION_NAMES + _GEOPOTENTIAL_NAMES,
                            ELEVATION_STANDARD_NAMES + _GEOPOTENTIAL_NAMES,
                            lambda key, v: key != var and bool(v.dims) and set(v.dims) <= space_dims
                            and np.issubdtype(v.dtype, np.number) and not _aloft(v, ds))
    if found is not None:
        elevation_factor(found, ds[found])  # refuse latitude, temperature, ... before any computation
    return found


def static_elevation(ds: xr.Dataset, space_dims: set, other_dims: set, name: str | None,
                     var: str | None = None) -> xr.Dataset:
    """``ds`` with an elevation repeated along time (or another dim of the data) reduced to the space dims.

    ERA5's surface geopotential downloaded beside t2m has a time dim, and stations read from a long
    table (``df.set_index(["time", "station"]).to_xarray()``) get their elevation on ``(time, station)``,
    NaN where a station has no row. Each point takes its value along those dims (NaN only where it has
    none). The elevation is ``name`` when given, else every variable or coordinate named like one
    (:func:`elevation_name` then chooses); ``var`` is never one. Reading it for the check costs one
    pass over the elevation.

    Raises
    ------
    CoordinateError
        The elevation changes along those dims (it is not one elevation per point).
    """
    if name is not None:
        keys = [name] if name in ds.variables and name != var else []
    else:
        keys = _named(ds, ELEVATION_NAMES + _GEOPOTENTIAL_NAMES, ELEVATION_STANDARD_NAMES + _GEOPOTENTIAL_NAMES,
                      lambda key, v: key != var and not _aloft(v, ds))
    for key in keys:
        v = ds[key]
        along = [d for d in v.dims if d not in space_dims]
        if not along or not set(v.dims) & space_dims or not set(along) <= other_dims or not _is_numeric_or_bool(v):
            continue
        with xr.set_options(keep_attrs=True):
            lo, hi = dask.compute(v.min(along, skipna=True), v.max(along, skipna=True))  # one read of the elevation
        lo_v, hi_v = np.asarray(lo.values, dtype=np.float64), np.asarray(hi.values, dtype=np.float64)
        both = np.isfinite(lo_v) & np.isfinite(hi_v)
        spread = np.abs(hi_v - lo_v)[both]
        if spread.size and spread.max() > 1e-4 * max(float(np.abs(hi_v[both]).max()), 1.0):
            if name is None:  # found by its name only: a field that changes in time is no elevation
                continue
            raise CoordinateError(
                f"elevation {key!r} has dims {v.dims} and changes along {along} (by up to {spread.max():g}); "
                "expected one elevation per point, on the space dims. Select the one to use, e.g. "
                f"ds[{key!r}].isel({along[0]}=0), or drop it (ds.drop_vars({key!r})).")
        ds = ds.drop_vars(key).assign_coords({key: hi.reset_coords(drop=True)})
    return ds


def _check_named_elevation(ds: xr.Dataset, space_dims: set, name: str, var: str | None) -> None:
    if name not in ds.variables:
        raise VariableNotFoundError(f"elevation {name!r} is not a variable or coordinate of the dataset; "
                                    f"found {sorted(map(str, ds.variables))}.")
    if name == var:
        raise CoordinateError(f"elevation {name!r} is the variable being predicted; a variable cannot be its own "
                              "covariate. Drop covariates= (or --covariates) or name another elevation variable.")
    if not set(ds[name].dims) <= space_dims or not ds[name].dims:
        raise CoordinateError(f"elevation {name!r} has dims {ds[name].dims}; expected dims among the space "
                              f"dims {sorted(space_dims)}.")


#: lengths an elevation may be given in, and their size in metres
_LENGTH_UNITS = {
    "m": 1.0, "metre": 1.0, "metres": 1.0, "meter": 1.0, "meters": 1.0, "gpm": 1.0,
    "km": 1000.0, "kilometre": 1000.0, "kilometres": 1000.0, "kilometer": 1000.0, "kilometers": 1000.0,
    "dam": 10.0, "ft": 0.3048, "feet": 0.3048, "foot": 0.3048, "international_foot": 0.3048, "masl": 1.0,
    "us_survey_foot": 1200 / 3937, "us_survey_feet": 1200 / 3937, "ftus": 1200 / 3937,
}
#: unit symbols with their powers: "m2 s-2", "m**2/s**2", "m^2 s^-2", "m+2 s-2", "J/kg"
_UNIT_TOKEN = re.compile(r"(/)|([a-z]+)\s*(?:\*\*|\^)?\s*([+-]?\d+)?")
_GEOPOTENTIAL_UNITS = ({"m": 2, "s": -2}, {"j": 1, "kg": -1})


def _unit_powers(units: str) -> dict[str, int]:
    """The symbols of ``units`` with their powers, e.g. ``{"m": 2, "s": -2}`` for ``"m**2/s**2"``."""
    powers: dict[str, int] = {}
    sign = 1
    for divide, symbol, power in _UNIT_TOKEN.findall(units.lower()):
        if divide:
            sign = -1
            continue
        powers[symbol] = powers.get(symbol, 0) + sign * int(power or 1)
    return {k: p for k, p in powers.items() if p}


def elevation_factor(name: str, v: xr.DataArray) -> float:
    """What to multiply elevation ``v`` by to get metres: 1/g for geopotential, 1000 for km, 0.3048 for feet.

    No units count as metres; a length may be followed by words (``"m above sea level"``).

    Raises
    ------
    ConfigError
        Units that are neither a length nor geopotential (``degrees_north``, ``K``, ...): another
        coordinate (e.g. latitude) was named as the elevation, or its units need fixing.
    """
    units = str(v.attrs.get("units", "")).strip()
    if str(name).lower() in _GEOPOTENTIAL_NAMES or _attr(v, "standard_name") in _GEOPOTENTIAL_NAMES:
        return 1.0 / G0
    if not units:
        return 1.0
    if _unit_powers(units) in _GEOPOTENTIAL_UNITS:
        return 1.0 / G0
    if units.lower().replace(" ", "_") in _LENGTH_UNITS:  # "US survey foot"
        return _LENGTH_UNITS[units.lower().replace(" ", "_")]
    words = units.lower().split()
    if words[0] in _LENGTH_UNITS and not any(c.isdigit() or c in "/*^" for c in units):  # not "m s-1"
        return _LENGTH_UNITS[words[0]]
    raise ConfigError(
        f"elevation {name!r} has units {units!r}; expected a length (m, km, ft) or a geopotential (m2 s-2). "
        "Only elevation (or surface geopotential) can be the elevation covariate: name the elevation variable "
        "instead (e.g. covariates='orography', CLI --covariates orography), or leave it out (a variable named "
        f"like elevation is found on its own: drop or rename {name!r}); if it is elevation, convert it to metres "
        f"and set ds[{name!r}].attrs['units'] = 'm'.")


def find_elevation(ds: xr.Dataset, layout) -> np.ndarray | None:
    """Elevation in metres on the space dims (geopotential, km and feet converted), or ``None``."""
    if layout.elevation is None:
        return None
    v = ds[layout.elevation]
    da = ds[layout.var]
    template = da.isel({d: 0 for d in da.dims if d not in layout.space_dims}, drop=True)
    values = v.broadcast_like(template).transpose(*layout.space_dims).values.astype(np.float64)
    if not np.isfinite(values).all():
        bad = int((~np.isfinite(values)).sum())
        if len(layout.space_dims) == 1:  # stations: name them; the fix is per station, not a DEM
            dim = layout.space_dims[0]
            labels = ds[dim].values if dim in ds.coords else np.arange(values.size)
            missing = [str(x) for x in np.asarray(labels)[~np.isfinite(values)][:5]]
            raise CoordinateError(
                f"elevation {layout.elevation!r} is missing (NaN) at {bad} of {values.size} stations (e.g. "
                f"{', '.join(missing)}); expected one at every station, as the elevation trend is fitted to and "
                f"added back at every station. Look those elevations up, leave those stations out (e.g. "
                f"ds.where(ds[{layout.elevation!r}].notnull(), drop=True)), or predict without the elevation "
                f"trend by dropping the coordinate (ds.drop_vars({layout.elevation!r})).")
        if layout.var == "__target__":
            raise CoordinateError(f"elevation {layout.elevation!r} of targets= is missing (NaN) at {bad} of "
                                  f"{values.size} points (a DEM's nodata cells?); expected a value at every target. "
                                  "Fill them (e.g. with 0 at sea), or leave those points out of targets=.")
        raise CoordinateError(f"elevation {layout.elevation!r} is missing (NaN) at {bad} of {values.size} points "
                              f"of {layout.var!r}'s grid; expected a value at every point. A DEM that "
                              "covers only part of the data, or another grid, leaves holes: pass one on the data's "
                              "own coordinates (e.g. dem.interp_like(ds)), or fill its gaps (e.g. with 0 at sea).")
    values = values * elevation_factor(layout.elevation, v)
    units = str(v.attrs.get("units", "")).strip()
    if layout.var != "__target__" and 0 < float(np.std(values)) < MIN_RELIEF_M:
        given = f"units {units!r}" if units else "no units (read as metres)"
        warn_user(f"elevation {layout.elevation!r} has {given} and spreads by only {float(np.std(values)):.3g} m "
                  f"(std; {values.min():g} to {values.max():g} m): under {MIN_RELIEF_M:g} m of relief, too little "
                  "for an elevation trend, so it is left out. If its values are in km, say so: "
                  f"ds[{layout.elevation!r}].attrs['units'] = 'km' (Colorado stations in km read as metres: "
                  "RMSE 2.61 °C, 0.95 with the units).", MissingCovariateWarning)
    if values.min() < MIN_ELEVATION_M or values.max() > MAX_ELEVATION_M:
        whose = "targets=" if layout.var == "__target__" else repr(layout.var)
        raise CoordinateError(
            f"elevation {layout.elevation!r} of {whose} runs from {values.min():g} to {values.max():g} m; expected "
            f"heights on the Earth's surface ({MIN_ELEVATION_M:g} to {MAX_ELEVATION_M:g} m). A DEM's nodata value "
            "(e.g. -9999) read as a height, or other units? Mask nodata first (e.g. dem.where(dem != -9999), or "
            "rioxarray.open_rasterio(path, masked=True)) and give the units (units='ft' for feet).")
    return values
