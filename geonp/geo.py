"""Find the space and time axes of a dataset and validate them (:mod:`geonp.frames` maps them to model space).

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
import xarray as xr

from . import timeaxis
from .coordinates import check_coordinates
from .errors import CoordinateError, CRSError, TimeAxisError
from .io.crs import check_grid_mapping, missing_crs_detail
from .surface import elevation_name, find_elevation, land_name, static_elevation
from .variables import LAT_NAMES, LON_NAMES, select_variable

__all__ = [
    "Layout",
    "canonical_flips",
    "canonical_grid",
    "closes_circle",
    "describe",
    "select_variable",
    "find_elevation",
]


_X_NAMES = ("x", "easting", "projection_x_coordinate", "xc", "rlon")
_Y_NAMES = ("y", "northing", "projection_y_coordinate", "yc", "rlat")


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
    land : str or None
        A land–sea mask on the space dims, if found (:mod:`geonp.surface`).
    xy_scale : (float, float)
        Factors that bring the values of ``x``/``y`` (in their own CF ``units``, e.g. km) into the
        axis unit of ``crs_wkt`` (e.g. metres): :func:`geonp.frames.space_points` applies them.
    plain_lonlat : bool
        ``x``/``y`` are longitude/latitude on the Earth as they stand; when False (projected x/y,
        a rotated pole's ``rlon``/``rlat``, radians...) real positions come from transforming them
        from ``crs_wkt`` to EPSG:4326 (:func:`geonp.frames.lonlat_of`).
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
    land: str | None = None
    xy_scale: tuple[float, float] = (1.0, 1.0)
    plain_lonlat: bool = True

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
            "extra_dims": list(self.extra_dims), "elevation": self.elevation, "land": self.land,
            "xy_scale": list(self.xy_scale), "plain_lonlat": self.plain_lonlat,
        }


def _attr(obj, key: str) -> str:
    return str(obj.attrs.get(key, "")).lower()


def _is_lat(name: Hashable, c: xr.DataArray) -> bool:
    return (
        _attr(c, "standard_name") == "latitude"
        or _attr(c, "units") in ("degrees_north", "degree_north", "degrees_n", "degree_n")
        or str(name).lower() in LAT_NAMES
    )


def _is_lon(name: Hashable, c: xr.DataArray) -> bool:
    return (
        _attr(c, "standard_name") == "longitude"
        or _attr(c, "units") in ("degrees_east", "degree_east", "degrees_e", "degree_e")
        or str(name).lower() in LON_NAMES
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
        if dim in ds.coords and timeaxis.is_time(ds[dim].values):
            return str(dim)
    return None


_TIME_DIMS = ("time", "valid_time", "date", "datetime")


def _refuse_time_not_dates(ds: xr.Dataset, da: xr.DataArray) -> None:
    """Refuse a dim named like time (or marked as time by CF) whose coordinate holds no dates.

    Read as an extra dim, each of its steps would be predicted alone, without the frames around it
    (ISO strings from a CSV read without ``parse_dates``: +49 % RMSE on ERA5, silently).
    """
    for dim in da.dims:
        if dim not in ds.coords:
            continue
        c = ds[dim]
        if str(dim).lower() in _TIME_DIMS or c.attrs.get("standard_name") == "time" or c.attrs.get("axis") == "T":
            example = c.values.flat[0] if c.size else None
            units = c.attrs.get("units")
            undecoded = (f" (its units {units!r} are not CF time units, '<unit> since <date>', so they were not "
                         "decoded)" if isinstance(units, str) and units.strip() else "")
            raise TimeAxisError(
                f"{str(dim)!r} holds {c.dtype} values such as {example!r}, not dates{undecoded}; geonp would predict "
                "each of its steps alone, without the frames around it. Assign datetimes (e.g. "
                f"ds[{str(dim)!r}] = pd.to_datetime(ds[{str(dim)!r}].values)) or CF units such as 'hours since "
                f"2019-03-01' and decode them (xr.decode_cf); if it is not time, rename the dim "
                f"(ds.rename({{{str(dim)!r}: 'member'}})).")


def _promote_time(ds: xr.Dataset, da: xr.DataArray) -> xr.Dataset:
    """Make a datetime (or cftime) coordinate held along a dim (not as its index) the dimension coordinate."""
    for dim in da.dims:
        if dim in ds.coords and timeaxis.is_time(ds[dim].values):
            return ds
    for dim in da.dims:
        for name, c in ds.coords.items():
            if name != dim and c.dims == (dim,) and timeaxis.is_time(c.values):
                return ds.swap_dims({dim: name})
    return ds


def describe(
    obj: xr.Dataset | xr.DataArray,
    var: str | None = None,
    *,
    crs=None,
    elevation: str | None = None,
    land: str | bool | None = "data",
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
    land : {"data", "auto", "none"} or str
        The land–sea mask: one found in the data, that or else the bundled land fraction, none,
        or a variable's name (:func:`geonp.surface.land_name`).

    Returns
    -------
    (Dataset, Layout)

    Raises
    ------
    CoordinateError
        No recognisable space coordinates, latitude/longitude out of range, non-monotonic or
        duplicate grid or time coordinates.
    CRSError
        Projected x/y coordinates without a CRS, or x/y whose ``units`` do not suit the CRS (degrees
        on a projected CRS; an unknown unit raises :class:`CoordinateError`).
    TimeAxisError
        A time coordinate held as numbers with CF units (``"hours since ..."``) that cannot be
        decoded; decodable ones are decoded (:func:`geonp.timeaxis.decode_cf_times`).
    """
    ds, var = select_variable(obj, var)
    ds = timeaxis.decode_cf_times(ds, ds[var].dims)  # e.g. opened with decode_times=False
    ds = _promote_time(ds, ds[var])
    da = ds[var]
    dims = set(da.dims)
    time = _find_time(ds, da)
    if time is None:
        _refuse_time_not_dates(ds, da)
    space_candidates = dims - {time}

    lat = _find(ds, space_candidates, _is_lat, LAT_NAMES)
    lon = _find(ds, space_candidates, _is_lon, LON_NAMES)
    if lat and lon and not ({*ds[lat].dims, *ds[lon].dims} & space_candidates):
        lat = lon = None
    scale, plain = (1.0, 1.0), True
    if lat and lon:
        x, y, geographic = lon, lat, True
        given = _read_crs(ds, crs)
        if given is not None and not given.is_geographic:
            raise CRSError(f"the data have longitude/latitude coordinates ({lon}, {lat}) but crs={given.name!r} is "
                           "projected; drop crs= or pass the CRS of projected x/y coordinates.")
        # the points are read from lon/lat; the CRS written back is the grid's own (e.g. a rotated pole
        # whose rlat/rlon are the output's dims), WGS 84 when the data name none
        if given is not None:
            check_grid_mapping(ds, lon, lat, given)
        wkt = (given if given is not None else pyproj.CRS.from_epsg(4326)).to_wkt()
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
                f"({missing_crs_detail(ds, var)}). Pass crs= (e.g. crs='EPSG:27700', or for a rotated pole "
                "crs='+proj=ob_tran +o_proj=longlat +o_lat_p=<pole lat> +o_lon_p=0 +lon_0=<pole lon + 180>', CLI "
                "--crs) or write one with ds.rio.write_crs(...)."
            )
        geographic = bool(found.is_geographic)
        wkt = found.to_wkt()
        scale, plain = _xy_units(ds, x, y, found)
    space_dims = tuple(d for d in da.dims if d in {*ds[x].dims, *ds[y].dims})
    if not space_dims or len(space_dims) > 2:
        raise CoordinateError(f"coordinates {x!r}/{y!r} span dims {space_dims}; expected one station dim or two grid "
                              "dims of the variable.")
    extra = tuple(str(d) for d in da.dims if d not in space_dims and d != time)
    ds = static_elevation(ds, set(space_dims), {time, *extra} - {None}, elevation, var)  # one per point
    elev = elevation_name(ds, set(space_dims), elevation, var)
    mask = land_name(ds, set(space_dims), time, land, var)
    layout = Layout(var, tuple(map(str, space_dims)), x, y, geographic, wkt, time, extra, elev, mask, scale, plain)
    check_coordinates(ds, layout)
    return ds, layout


def _read_crs(ds: xr.Dataset, crs) -> pyproj.CRS | None:
    from .io.crs import read_crs  # io/ is torch-free too

    return read_crs(ds, crs=crs)


def _xy_units(ds: xr.Dataset, x: str, y: str, crs: pyproj.CRS) -> tuple[tuple[float, float], bool]:
    """``Layout.xy_scale`` and ``Layout.plain_lonlat`` of x/y coordinates in ``crs``.

    x/y in their own units (e.g. km on a CRS in metres) are scaled into the CRS's; a rotated pole
    is geographic to pyproj but its rlon/rlat are not longitude/latitude.
    """
    from .io.units import axis_scale, is_plain_lonlat

    return (axis_scale(ds[x], x, crs), axis_scale(ds[y], y, crs)), is_plain_lonlat(crs)


def canonical_flips(ds: xr.Dataset, layout: Layout) -> dict:
    """Indexers that turn a grid's axes into one orientation: x increasing, y decreasing (north up).

    Calibration and training draw their held-out points and tasks by array position, so a grid and
    its reversed copy were calibrated on other draws (a rotated grid's forecast moved by 0.012 K with
    rlat reversed: docs/benchmarks.md, "A ninth new-user test"). North up is the orientation of
    GRIB and GeoTIFF files, so theirs read as they are. Longitudes are compared unwrapped (an axis
    across the dateline is increasing); a global longitude axis is ordered from −180° eastwards (an
    index array: :func:`_ring_order`). Axes without a 1-D coordinate of their own are left alone.
    """
    flips: dict = {}
    if len(layout.space_dims) != 2:
        return flips
    for dim, want_increasing in zip(layout.space_dims, (False, True)):
        if dim not in ds.coords or ds[dim].ndim != 1 or ds.sizes[dim] < 2:
            continue
        v = np.asarray(ds[dim].values, dtype=np.float64)
        if layout.geographic and layout.plain_lonlat and dim == layout.x:
            v = np.rad2deg(np.unwrap(np.deg2rad(v)))
        if (v[-1] > v[0]) != want_increasing:
            flips[dim] = slice(None, None, -1)
    ring = _ring_order(ds, layout)
    if ring is not None:  # a global longitude axis from -180 eastwards, whatever meridian it starts at
        flips.pop(layout.x, None)
        if not (ring == np.arange(len(ring))).all():
            flips[layout.x] = ring
    return flips


def _ring_order(ds: xr.Dataset, layout: Layout) -> np.ndarray | None:
    """The order by ``(lon + 180) mod 360`` of a plain longitude axis that closes the circle, else ``None``.

    Calibrations on a global grid stored from 0° and from −180° drew other points: forecasts 0.28 K
    apart, a twenty-ninth new-user test.
    """
    dim = layout.x
    if (len(layout.space_dims) != 2 or dim not in ds.dims or dim not in ds.coords or ds[dim].ndim != 1
            or not (layout.geographic and layout.plain_lonlat) or ds.sizes[dim] < 3):
        return None
    lon = np.mod(np.asarray(ds[dim].values, dtype=np.float64) + 180.0, 360.0)
    return np.argsort(lon, kind="stable") if closes_circle(lon) else None


def closes_circle(lon: np.ndarray) -> bool:
    """Whether longitudes (degrees, any order, at least 3) go round the circle: no gap over twice the median."""
    line = np.sort(np.mod(np.asarray(lon, dtype=np.float64), 360.0))
    if len(line) < 3:
        return False
    gaps = np.diff(np.append(line, line[0] + 360.0))
    return bool(gaps.max() <= 2.0 * np.median(gaps))


def canonical_grid(ds: xr.Dataset, layout: Layout, *others: xr.Dataset | None) -> tuple:
    """``ds`` (and ``others``) in :func:`canonical_flips` order, a global longitude axis as −180 … 180.

    For draws by array position (calibrations, fits): a global grid stored from 0° or from 180°
    descending is then the very array stored from −180°, coordinate values included (values that
    jumped from 355° to 0° inside the axis still moved its calibration by 0.13 K).
    """
    flips = canonical_flips(ds, layout)
    out = [None if d is None else d.isel(flips) for d in (ds, *others)]
    if _ring_order(ds, layout) is not None:
        lon = out[0][layout.x]
        wrapped = lon.copy(data=np.mod(np.asarray(lon.values, dtype=np.float64) + 180.0, 360.0) - 180.0)
        out = [None if d is None else d.assign_coords({layout.x: wrapped}) for d in out]
    return tuple(out)
