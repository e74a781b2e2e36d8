"""Find the space and time axes of a dataset, validate them, and map points to model space.

Everything here is numpy, pandas, pyproj and xarray; no torch.

**Geometry** (recorded in ``docs/geometry.md``). The models only see coordinate *differences*,
so any metric frame works. Longitude/latitude points are mapped to an azimuthal equidistant
projection in km, centred on the data (one centre for the whole dataset when it spans at most
:data:`REGIONAL_RADIUS_KM` from its centre, so chunked and unchunked runs see identical
coordinates; otherwise one centre per window). Distances from the centre are exact and
distortion stays small within a window, the dateline is just another meridian, and poles are
ordinary points. Projected x/y grids with a CRS use their own coordinates, converted to km.
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip  (before anything can load eccodes)

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from .errors import CoordinateError, CRSError, VariableNotFoundError, VariableTypeError

__all__ = [
    "Layout",
    "describe",
    "select_variable",
    "Frame",
    "make_frame",
    "space_points",
    "time_hours",
    "time_step_hours",
    "find_elevation",
    "REGIONAL_RADIUS_KM",
]

#: datasets within this radius of their centre share one projection centre
REGIONAL_RADIUS_KM = 2500.0
EARTH_RADIUS_KM = 6371.0088

_LAT_NAMES = ("lat", "latitude", "nav_lat", "lats", "y_lat")
_LON_NAMES = ("lon", "longitude", "long", "nav_lon", "lons", "x_lon")
_X_NAMES = ("x", "easting", "projection_x_coordinate", "xc", "rlon")
_Y_NAMES = ("y", "northing", "projection_y_coordinate", "yc", "rlat")
_ELEVATION_NAMES = ("elevation", "altitude", "height", "orography", "orog", "elev", "surface_altitude", "hgt", "z")
_ELEVATION_STANDARD_NAMES = ("surface_altitude", "height_above_mean_sea_level", "altitude", "height_above_sea_level")
_GEOPOTENTIAL_NAMES = ("surface_geopotential", "geopotential_at_surface")
G0 = 9.80665


@dataclass(frozen=True)
class Layout:
    """Where the axes of one variable are.

    Attributes
    ----------
    var : str
        The variable.
    space_dims : tuple of str
        ``(y_dim, x_dim)`` of a grid (or of a curvilinear grid), or ``(station_dim,)``.
    x, y : str
        Names of the horizontal coordinates (longitude/latitude, or projected x/y).
    geographic : bool
        ``x``/``y`` are longitude/latitude in degrees.
    crs_wkt : str
        The coordinate reference system of ``x``/``y`` (EPSG:4326 when geographic).
    time : str or None
        The time dimension, if any.
    extra_dims : tuple of str
        Other dimensions (ensemble member, level...): each index is a separate problem.
    elevation : str or None
        A variable or coordinate holding elevation in metres, if found.
    """

    var: str
    space_dims: tuple[str, ...]
    x: str
    y: str
    geographic: bool
    crs_wkt: str
    time: str | None
    extra_dims: tuple[str, ...]
    elevation: str | None = None

    @property
    def is_grid(self) -> bool:
        """Two space dimensions (regular or curvilinear grid) rather than a station list."""
        return len(self.space_dims) == 2

    @property
    def crs(self) -> pyproj.CRS:
        """The CRS as a pyproj object."""
        return pyproj.CRS.from_wkt(self.crs_wkt)

    def to_dict(self) -> dict:
        """Plain-data form (saved with fitted models)."""
        return {
            "var": self.var, "space_dims": list(self.space_dims), "x": self.x, "y": self.y,
            "geographic": self.geographic, "crs_wkt": self.crs_wkt, "time": self.time,
            "extra_dims": list(self.extra_dims), "elevation": self.elevation,
        }


def select_variable(obj: xr.Dataset | xr.DataArray, var: str | None) -> tuple[xr.Dataset, str]:
    """The dataset and the name of the variable to work on.

    Raises
    ------
    VariableTypeError
        ``obj`` is not an xarray object, or the variable is not numeric.
    VariableNotFoundError
        ``var`` is not a data variable, or it was omitted and there are several.
    """
    if isinstance(obj, xr.DataArray):
        name = obj.name if obj.name is not None else (var or "value")
        if var is not None and var != name:
            raise VariableNotFoundError(f"variable {var!r} requested but the DataArray is named {name!r}; "
                                        "omit var= or pass the Dataset that holds it.")
        ds = obj.to_dataset(name=name)
        var = name
    elif isinstance(obj, xr.Dataset):
        ds = obj
        data_vars = [str(v) for v in ds.data_vars]
        if var is None:
            numeric = [v for v in data_vars if np.issubdtype(ds[v].dtype, np.number) and ds[v].ndim > 0]
            if len(numeric) != 1:
                raise VariableNotFoundError(
                    f"the dataset has {len(numeric)} numeric data variables {numeric}; expected one, "
                    "or name it: e.g. ds.np.infill('t2m') or --var t2m."
                )
            var = numeric[0]
        elif var not in ds.data_vars:
            raise VariableNotFoundError(
                f"variable {var!r} is not in the dataset; its data variables are {data_vars}. Pick one of them."
            )
    else:
        raise VariableTypeError(f"expected an xarray Dataset or DataArray, got {type(obj).__name__}; "
                                "open files with geonp.open_dataset(path).")
    if not np.issubdtype(ds[var].dtype, np.number) or np.issubdtype(ds[var].dtype, np.complexfloating):
        raise VariableTypeError(f"variable {var!r} has dtype {ds[var].dtype}; expected a real numeric variable. "
                                "Pick a numeric variable or convert it with .astype('float32').")
    return ds, str(var)


def _attr(obj, key: str) -> str:
    return str(obj.attrs.get(key, "")).lower()


def _is_lat(name: Hashable, c: xr.DataArray) -> bool:
    return (
        _attr(c, "standard_name") == "latitude"
        or _attr(c, "units") in ("degrees_north", "degree_north", "degrees_n", "degree_n")
        or str(name).lower() in _LAT_NAMES
    )


def _is_lon(name: Hashable, c: xr.DataArray) -> bool:
    return (
        _attr(c, "standard_name") == "longitude"
        or _attr(c, "units") in ("degrees_east", "degree_east", "degrees_e", "degree_e")
        or str(name).lower() in _LON_NAMES
    )


def _find(ds: xr.Dataset, dims: set, test, names: Sequence[str] = ()) -> str | None:
    """The first coordinate (then data variable) passing ``test`` whose dims lie in ``dims``."""
    candidates = list(ds.coords.items()) + [(k, v) for k, v in ds.data_vars.items() if str(k).lower() in names]
    for name, c in candidates:
        if c.ndim >= 1 and set(c.dims) <= dims and test(name, c):
            return str(name)
    return None


def _find_time(ds: xr.Dataset, da: xr.DataArray) -> str | None:
    for dim in da.dims:
        if dim in ds.coords and np.issubdtype(ds[dim].dtype, np.datetime64):
            return str(dim)
    return None


def _promote_time(ds: xr.Dataset, da: xr.DataArray) -> xr.Dataset:
    """Make a datetime coordinate held along a dim (not as its index) the dimension coordinate."""
    for dim in da.dims:
        if dim in ds.coords and np.issubdtype(ds[dim].dtype, np.datetime64):
            return ds
    for dim in da.dims:
        for name, c in ds.coords.items():
            if name != dim and c.dims == (dim,) and np.issubdtype(c.dtype, np.datetime64):
                return ds.swap_dims({dim: name})
    return ds


def describe(
    obj: xr.Dataset | xr.DataArray,
    var: str | None = None,
    *,
    crs=None,
    elevation: str | None = None,
) -> tuple[xr.Dataset, Layout]:
    """Find and validate the axes of ``var``.

    Parameters
    ----------
    obj : Dataset or DataArray
        The data.
    var : str, optional
        The variable; may be omitted when there is one numeric data variable.
    crs : optional
        CRS of projected x/y coordinates (anything ``pyproj.CRS.from_user_input`` takes); read
        from the data (``spatial_ref``/``grid_mapping``) when omitted.
    elevation : str, optional
        Name of an elevation variable or coordinate; found by name or CF standard name when omitted.

    Returns
    -------
    (Dataset, Layout)

    Raises
    ------
    CoordinateError
        No recognisable space coordinates, latitude/longitude out of range, non-monotonic or
        duplicate grid or time coordinates.
    CRSError
        Projected x/y coordinates without a CRS.
    """
    ds, var = select_variable(obj, var)
    ds = _promote_time(ds, ds[var])
    da = ds[var]
    dims = set(da.dims)
    time = _find_time(ds, da)
    space_candidates = dims - {time}

    lat = _find(ds, space_candidates, _is_lat, _LAT_NAMES)
    lon = _find(ds, space_candidates, _is_lon, _LON_NAMES)
    if lat and lon and not ({*ds[lat].dims, *ds[lon].dims} & space_candidates):
        lat = lon = None
    if lat and lon:
        x, y, geographic = lon, lat, True
        wkt = pyproj.CRS.from_epsg(4326).to_wkt()
        given = _read_crs(ds, crs)
        if given is not None and not given.is_geographic:
            raise CRSError(f"the data have longitude/latitude coordinates ({lon}, {lat}) but crs={given.name!r} is "
                           "projected; drop crs= or pass the CRS of projected x/y coordinates.")
    else:
        x = _find(ds, space_candidates, lambda n, c: _attr(c, "standard_name") == "projection_x_coordinate"
                  or _attr(c, "axis") == "x" or str(n).lower() in _X_NAMES)
        y = _find(ds, space_candidates, lambda n, c: _attr(c, "standard_name") == "projection_y_coordinate"
                  or _attr(c, "axis") == "y" or str(n).lower() in _Y_NAMES)
        if not (x and y):
            raise CoordinateError(
                f"no recognisable space coordinates for {var!r}: its dims are {list(da.dims)} and the coordinates "
                f"are {[str(c) for c in ds.coords]}. Expected latitude/longitude (names like lat/latitude and "
                "lon/longitude, or CF standard_name/units) or projected x/y with a CRS. Rename them, e.g. "
                "ds.rename({'nav_lat': 'lat', 'nav_lon': 'lon'}), or set CF attributes."
            )
        found = _read_crs(ds, crs)
        if found is None:
            raise CRSError(
                f"{var!r} has projected coordinates ({x}, {y}) but no coordinate reference system was found "
                "(no spatial_ref / grid_mapping variable). Pass crs= (e.g. crs='EPSG:27700', CLI --crs) or write "
                "one with ds.rio.write_crs(...)."
            )
        geographic = bool(found.is_geographic)
        wkt = found.to_wkt()
    space_dims = tuple(d for d in da.dims if d in {*ds[x].dims, *ds[y].dims})
    if not space_dims or len(space_dims) > 2:
        raise CoordinateError(f"coordinates {x!r}/{y!r} span dims {space_dims}; expected one station dim or two grid "
                              "dims of the variable.")
    extra = tuple(str(d) for d in da.dims if d not in space_dims and d != time)
    elev = _elevation_name(ds, set(space_dims), elevation)
    layout = Layout(var, tuple(map(str, space_dims)), x, y, geographic, wkt, time, extra, elev)
    _check_coordinates(ds, layout)
    return ds, layout


def _read_crs(ds: xr.Dataset, crs) -> pyproj.CRS | None:
    from .io.crs import read_crs  # io/ is torch-free too

    return read_crs(ds, crs=crs)


def _elevation_name(ds: xr.Dataset, space_dims: set, name: str | None) -> str | None:
    if name is not None:
        if name not in ds.variables:
            raise VariableNotFoundError(f"elevation {name!r} is not a variable or coordinate of the dataset; "
                                        f"found {sorted(map(str, ds.variables))}.")
        if not set(ds[name].dims) <= space_dims or not ds[name].dims:
            raise CoordinateError(f"elevation {name!r} has dims {ds[name].dims}; expected dims among the space "
                                  f"dims {sorted(space_dims)}.")
        return name
    for key, v in list(ds.coords.items()) + list(ds.data_vars.items()):
        if not v.dims or not set(v.dims) <= space_dims or not np.issubdtype(v.dtype, np.number):
            continue
        if (str(key).lower() in _ELEVATION_NAMES + _GEOPOTENTIAL_NAMES
                or _attr(v, "standard_name") in _ELEVATION_STANDARD_NAMES + _GEOPOTENTIAL_NAMES):
            return str(key)
    return None


def find_elevation(ds: xr.Dataset, layout: Layout) -> np.ndarray | None:
    """Elevation in metres on the space dims (geopotential converted), or ``None``."""
    if layout.elevation is None:
        return None
    v = ds[layout.elevation]
    da = ds[layout.var]
    template = da.isel({d: 0 for d in da.dims if d not in layout.space_dims}, drop=True)
    values = v.broadcast_like(template).transpose(*layout.space_dims).values.astype(np.float64)
    name = layout.elevation.lower()
    if name in _GEOPOTENTIAL_NAMES or _attr(v, "standard_name") in _GEOPOTENTIAL_NAMES or _attr(v, "units") in (
        "m**2 s**-2", "m2 s-2", "m^2/s^2"
    ):
        values = values / G0
    if _attr(v, "units") in ("km", "kilometres", "kilometers"):
        values = values * 1000.0
    return values


def _check_coordinates(ds: xr.Dataset, layout: Layout) -> None:
    if layout.geographic:
        lat = np.asarray(ds[layout.y].values, dtype=np.float64)
        lon = np.asarray(ds[layout.x].values, dtype=np.float64)
        finite = np.isfinite(lat).all() and np.isfinite(lon).all()
        if not finite or np.abs(lat).max() > 90.0:
            raise CoordinateError(f"latitude {layout.y!r} has values from {np.nanmin(lat)} to {np.nanmax(lat)}; "
                                  "expected finite values in [-90, 90]. Check that latitude and longitude are not "
                                  "swapped and that the units are degrees.")
        if lon.min() < -180.0 or lon.max() > 360.0:
            raise CoordinateError(f"longitude {layout.x!r} has values from {lon.min()} to {lon.max()}; expected "
                                  "degrees in [-180, 360]. Convert radians or projected metres first.")
    for name in (layout.x, layout.y):
        c = ds[name]
        if c.ndim == 1 and layout.is_grid and c.dims[0] in layout.space_dims:
            values = np.asarray(c.values, dtype=np.float64)
            if layout.geographic and name == layout.x:
                values = np.rad2deg(np.unwrap(np.deg2rad(values)))  # a grid across the dateline is monotonic here
            _check_monotonic(values, name)
    if layout.time is not None:
        t = ds[layout.time].values
        if len(t) > 1:
            d = np.diff(t.astype("datetime64[ns]").astype(np.int64)) if np.issubdtype(t.dtype, np.datetime64) else None
            if d is not None and not (d > 0).all():
                kind = "duplicate" if (d == 0).any() else "non-monotonic"
                raise CoordinateError(f"time coordinate {layout.time!r} has {kind} values; expected strictly "
                                      "increasing times. Sort with ds.sortby('time') and drop duplicates with "
                                      "ds.drop_duplicates('time').")


def _check_monotonic(values: np.ndarray, name: str) -> None:
    if len(values) < 2:
        return
    d = np.diff(values)
    if (d == 0).any():
        raise CoordinateError(f"coordinate {name!r} has duplicate values; expected a grid with distinct "
                              f"coordinates. Drop them with ds.drop_duplicates({name!r}).")
    if not ((d > 0).all() or (d < 0).all()):
        raise CoordinateError(f"coordinate {name!r} is neither increasing nor decreasing; expected a monotonic "
                              f"grid axis. Sort it with ds.sortby({name!r}).")


# --- model space -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Frame:
    """A metric frame for horizontal coordinates: azimuthal equidistant km, or a projected CRS in km."""

    kind: str  # "aeqd" or "projected"
    lon0: float = 0.0
    lat0: float = 0.0
    km_per_unit: float = 1.0  # projected: size of the CRS's axis unit in km

    def to_km(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``[n, 2]`` coordinates in km in this frame."""
        x = np.asarray(x, dtype=np.float64).ravel()
        y = np.asarray(y, dtype=np.float64).ravel()
        if self.kind == "projected":
            return np.stack([x, y], -1) * self.km_per_unit
        t = _aeqd(self.lon0, self.lat0)
        e, n = t.transform(x, y)
        return np.stack([np.asarray(e), np.asarray(n)], -1)

    def to_dict(self) -> dict:
        """Plain-data form."""
        return {"kind": self.kind, "lon0": self.lon0, "lat0": self.lat0, "km_per_unit": self.km_per_unit}


_AEQD_CACHE: dict[tuple[float, float], pyproj.Transformer] = {}


def _aeqd(lon0: float, lat0: float) -> pyproj.Transformer:
    key = (round(lon0, 9), round(lat0, 9))
    if key not in _AEQD_CACHE:
        if len(_AEQD_CACHE) > 256:
            _AEQD_CACHE.clear()
        _AEQD_CACHE[key] = pyproj.Transformer.from_crs(
            "EPSG:4326", f"+proj=aeqd +lat_0={lat0} +lon_0={lon0} +datum=WGS84 +units=km", always_xy=True
        )
    return _AEQD_CACHE[key]


def centre_of(lon: np.ndarray, lat: np.ndarray) -> tuple[float, float]:
    """Centre of points on the sphere (normalised mean of unit vectors), in degrees."""
    lon = np.deg2rad(np.asarray(lon, dtype=np.float64).ravel())
    lat = np.deg2rad(np.asarray(lat, dtype=np.float64).ravel())
    v = np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)]).mean(1)
    norm = np.linalg.norm(v)
    if norm < 1e-9:  # points spread over the whole globe: any centre is as good
        return 0.0, 0.0
    v = v / norm
    return float(np.rad2deg(np.arctan2(v[1], v[0]))), float(np.rad2deg(np.arcsin(np.clip(v[2], -1, 1))))


def radius_km(lon: np.ndarray, lat: np.ndarray, centre: tuple[float, float]) -> float:
    """Largest great-circle distance from ``centre`` to the points, in km."""
    lon0, lat0 = np.deg2rad(centre)
    lon = np.deg2rad(np.asarray(lon, dtype=np.float64).ravel())
    lat = np.deg2rad(np.asarray(lat, dtype=np.float64).ravel())
    c = np.sin(lat0) * np.sin(lat) + np.cos(lat0) * np.cos(lat) * np.cos(lon - lon0)
    return float(np.arccos(np.clip(c, -1.0, 1.0)).max() * EARTH_RADIUS_KM)


def space_points(ds: xr.Dataset, layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """Horizontal coordinates of every point of the space dims, flattened in C order: ``(x, y)``."""
    xa = ds[layout.x].transpose(*[d for d in layout.space_dims if d in ds[layout.x].dims])
    ya = ds[layout.y].transpose(*[d for d in layout.space_dims if d in ds[layout.y].dims])
    shape = tuple(ds.sizes[d] for d in layout.space_dims)
    if layout.is_grid and xa.ndim == 1 and ya.ndim == 1:
        xi = layout.space_dims.index(xa.dims[0])
        yi = layout.space_dims.index(ya.dims[0])
        grids = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
        x = np.asarray(xa.values, dtype=np.float64)[grids[xi]]
        y = np.asarray(ya.values, dtype=np.float64)[grids[yi]]
    else:
        x = np.broadcast_to(np.asarray(xa.values, dtype=np.float64), shape)
        y = np.broadcast_to(np.asarray(ya.values, dtype=np.float64), shape)
    return x.reshape(-1), y.reshape(-1)


def make_frame(ds: xr.Dataset, layout: Layout) -> Frame:
    """The metric frame of the dataset (see the module docstring)."""
    if not layout.geographic:
        crs = layout.crs
        factor = crs.axis_info[0].unit_conversion_factor if crs.axis_info else 1.0
        return Frame("projected", km_per_unit=float(factor) / 1000.0)
    x, y = space_points(ds, layout)
    lon0, lat0 = centre_of(x, y)
    return Frame("aeqd", lon0, lat0)


def is_regional(ds: xr.Dataset, layout: Layout) -> bool:
    """Whether one projection centre serves the whole dataset."""
    if not layout.geographic:
        return True
    x, y = space_points(ds, layout)
    return radius_km(x, y, centre_of(x, y)) <= REGIONAL_RADIUS_KM


def lonlat_of(ds: xr.Dataset, layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """Longitude/latitude in degrees of every space point (projected data are transformed)."""
    x, y = space_points(ds, layout)
    if layout.geographic:
        return x, y
    t = pyproj.Transformer.from_crs(layout.crs, "EPSG:4326", always_xy=True)
    lon, lat = t.transform(x, y)
    return np.asarray(lon), np.asarray(lat)


# --- time ----------------------------------------------------------------------------------


def time_hours(values: np.ndarray, reference: np.datetime64 | None = None) -> np.ndarray:
    """Hours since ``reference`` (default 1970-01-01) as float64."""
    t = pd.to_datetime(np.asarray(values)).values.astype("datetime64[ns]")
    ref = np.datetime64("1970-01-01T00:00", "ns") if reference is None else np.datetime64(reference, "ns")
    return (t - ref).astype("timedelta64[ns]").astype(np.float64) / 3.6e12


def time_step_hours(values: np.ndarray) -> float:
    """The data's time step in hours: the median spacing (1.0 for a single time)."""
    h = time_hours(values)
    if len(h) < 2:
        return 1.0
    return float(np.median(np.diff(h)))
