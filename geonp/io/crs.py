"""Read and write the coordinate reference system (CRS) of xarray objects, CF and rioxarray style.

:func:`write_crs` stores the CRS the way ``rioxarray``'s ``obj.rio.write_crs`` does: a scalar integer
coordinate (``spatial_ref``) whose attributes hold the WKT (``crs_wkt``, and ``spatial_ref`` for GDAL)
and the CF grid-mapping attributes, and ``grid_mapping="spatial_ref"`` in the *encoding* of every data
variable (and of the Dataset itself). xarray turns that encoding into the ``grid_mapping`` attribute on
write and back into encoding when a store is opened with ``decode_coords="all"``, so the CRS survives a
round trip through NetCDF or Zarr and is found by both :func:`read_crs` and ``obj.rio.crs``.
rioxarray is optional: nothing here needs it, it is only a last fallback in :func:`read_crs`.
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip  (before anything can load eccodes; see geonp/__init__.py)

import math
import warnings
from collections.abc import Hashable, Iterator
from typing import Any

import numpy as np
import xarray as xr
from pyproj import CRS, Transformer
from pyproj.exceptions import CRSError as PyprojCRSError
from pyproj.exceptions import ProjError

from ..errors import CRSError

__all__ = ["read_crs", "write_crs", "parse_crs", "check_grid_mapping", "missing_crs_detail", "in_axis_units"]

_WKT_ATTRS = ("crs_wkt", "spatial_ref")
_DEFAULT_NAMES = ("spatial_ref", "crs")


def parse_crs(crs: Any) -> CRS:
    """Turn anything :meth:`pyproj.CRS.from_user_input` accepts into a :class:`pyproj.CRS`.

    Parameters
    ----------
    crs : Any
        An EPSG code or string (``4326``, ``"EPSG:27700"``), a PROJ string, WKT, a :class:`pyproj.CRS`,
        or any object with a ``to_wkt`` method (e.g. ``rasterio.crs.CRS``).

    Returns
    -------
    pyproj.CRS
        The parsed CRS.

    Raises
    ------
    CRSError
        If ``crs`` cannot be parsed.
    """
    if isinstance(crs, CRS):
        return crs
    try:
        return CRS.from_user_input(crs)
    except (pyproj.exceptions.CRSError, TypeError, ValueError) as err:
        raise CRSError(
            f"could not read the coordinate reference system crs={crs!r} ({err}); expected anything "
            "pyproj.CRS.from_user_input accepts, e.g. 'EPSG:4326', 27700, a PROJ string "
            "('+proj=laea +lat_0=52 +lon_0=10 ...') or WKT; fix the value or leave crs unset"
        ) from err


#: CF grid-mapping parameters that are numbers (or lists of numbers)
_CF_NUMBERS = ("grid_north_pole_latitude", "grid_north_pole_longitude", "north_pole_grid_longitude",
               "latitude_of_projection_origin", "longitude_of_projection_origin", "longitude_of_central_meridian",
               "straight_vertical_longitude_from_pole", "standard_parallel", "scale_factor_at_central_meridian",
               "scale_factor_at_projection_origin", "false_easting", "false_northing", "semi_major_axis",
               "semi_minor_axis", "inverse_flattening", "earth_radius", "longitude_of_prime_meridian",
               "perspective_point_height")


def _refuse_text_numbers(attrs: dict, where: str, name: str | None = None) -> None:
    """Raise for a CF grid-mapping parameter stored as text (``"39.25"``): pyproj answers with a PROJJSON dump.

    ``name`` is the grid-mapping variable, for the fix in the message.
    """
    for key in _CF_NUMBERS:
        value = attrs.get(key)
        if isinstance(value, (str, bytes)):
            try:
                number = float(value)
            except ValueError:
                number = None
            target = f"ds[{name!r}].attrs[{key!r}]" if name is not None else f"the attribute {key!r}"
            fix = f"{target} = {number!r}" if number is not None else f"set {target} to its number"
            raise CRSError(f"{where} has {key}={value!r}, text; expected a number. Fix it ({fix}) or pass crs= "
                           "explicitly.")


def _crs_from_attrs(attrs: dict, where: str, name: str | None = None) -> CRS | None:
    """Read a CRS from grid-mapping attributes (WKT first, then CF parameters); ``None`` if there are none."""
    for key in _WKT_ATTRS:
        if attrs.get(key):
            try:
                return CRS.from_user_input(attrs[key])
            except pyproj.exceptions.CRSError as err:
                raise CRSError(
                    f"{where} has a {key!r} attribute that is not a valid CRS ({err}); expected WKT or a PROJ "
                    "string; fix the attribute or pass crs= explicitly"
                ) from err
    if "grid_mapping_name" in attrs:
        _refuse_text_numbers(attrs, where, name)
        try:
            return CRS.from_cf(dict(attrs))
        except (pyproj.exceptions.CRSError, KeyError, ValueError) as err:
            raise CRSError(
                f"{where} has CF grid-mapping attributes (grid_mapping_name={attrs['grid_mapping_name']!r}) that "
                f"pyproj cannot turn into a CRS ({err}); expected complete CF grid-mapping parameters; fix the "
                "attributes or pass crs= explicitly"
            ) from err
    return None


def _grid_mapping_names(obj: xr.Dataset | xr.DataArray) -> Iterator[Hashable]:
    """Yield the grid-mapping variable names referenced by the data variables (attrs or encoding)."""
    arrays = list(obj.data_vars.values()) if isinstance(obj, xr.Dataset) else [obj]
    for da in [*arrays, obj]:
        for source in (da.attrs, da.encoding):
            value = source.get("grid_mapping")
            if isinstance(value, str) and value.strip():
                # CF's extended form "crsA: x y crsB: lat lon" names several; take each name
                for token in value.split():
                    if token.endswith(":"):
                        yield token[:-1]
                    elif ":" not in value:
                        yield token


def _variable(obj: xr.Dataset | xr.DataArray, name: Hashable) -> xr.Variable | None:
    """Return the variable or coordinate called ``name``, or ``None``."""
    if name in obj.coords:
        return obj.coords[name].variable
    if isinstance(obj, xr.Dataset) and name in obj.variables:
        return obj.variables[name]
    return None


def _crs_from_rioxarray(obj: xr.Dataset | xr.DataArray) -> CRS | None:
    """Ask rioxarray (if installed) for the CRS, e.g. a GeoTIFF-style ``crs`` attribute."""
    try:
        import rioxarray  # noqa: F401  (registers the .rio accessor)
    except ImportError:
        return None
    try:
        found = obj.rio.crs
    except Exception:  # noqa: BLE001 - rioxarray raises many types for objects it cannot read; treat as "no CRS"
        return None
    return None if found is None else CRS.from_user_input(found.to_wkt())


def read_crs(obj: xr.Dataset | xr.DataArray, crs: Any = None) -> CRS | None:
    """Find the coordinate reference system of a Dataset or DataArray.

    Looks, in order, at: the explicit ``crs`` argument; the variable named by a data variable's
    ``grid_mapping`` attribute or encoding (its ``crs_wkt``/``spatial_ref`` WKT, or its CF grid-mapping
    attributes); a coordinate called ``spatial_ref`` or ``crs``; rioxarray's ``obj.rio.crs`` if rioxarray
    is installed.

    Parameters
    ----------
    obj : xarray.Dataset or xarray.DataArray
        The object to inspect.
    crs : Any, optional
        A CRS given by the user; it wins over anything stored in ``obj``.

    Returns
    -------
    pyproj.CRS or None
        The CRS, or ``None`` when none is recorded.

    Raises
    ------
    CRSError
        If ``crs`` is invalid, or a stored grid mapping cannot be parsed.
    """
    if crs is not None:
        return parse_crs(crs)
    seen = []
    for name in [*_grid_mapping_names(obj), *_DEFAULT_NAMES]:
        var = _variable(obj, name)
        if name in seen or var is None:
            continue
        seen.append(name)
        found = _crs_from_attrs(var.attrs, f"grid-mapping variable {name!r}", str(name))
        if found is not None:
            return found
    return _crs_from_rioxarray(obj)


def _grid_mapping_attrs(crs: CRS) -> dict:
    """Return the attributes rioxarray writes on its grid-mapping coordinate: CF parameters plus the WKT twice."""
    attrs: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # to_cf warns for CRSs without a CF equivalent; the WKT still has it all
        try:
            attrs = dict(crs.to_cf())
        except KeyError:  # same fallback as rioxarray
            attrs = {}
    wkt = crs.to_wkt()
    attrs["spatial_ref"] = wkt  # GDAL's name
    attrs["crs_wkt"] = wkt  # CF's name
    return attrs


def write_crs(obj: xr.Dataset | xr.DataArray, crs: Any, name: str = "spatial_ref") -> xr.Dataset | xr.DataArray:
    """Attach a CRS the way ``rioxarray``'s ``write_crs`` does, without needing rioxarray.

    Parameters
    ----------
    obj : xarray.Dataset or xarray.DataArray
        The object to label; it is not modified.
    crs : Any
        Anything :meth:`pyproj.CRS.from_user_input` accepts.
    name : str, default "spatial_ref"
        Name of the scalar grid-mapping coordinate.

    Returns
    -------
    xarray.Dataset or xarray.DataArray
        A shallow copy with a scalar ``int64`` coordinate ``name`` carrying ``crs_wkt``, ``spatial_ref`` and
        the CF grid-mapping attributes, and ``grid_mapping=name`` in the encoding of every data variable.

    Raises
    ------
    CRSError
        If ``crs`` cannot be parsed.
    """
    parsed = parse_crs(crs)
    out = obj.copy(deep=False)
    if name in out.coords:
        out = out.drop_vars(name)
    out = out.assign_coords({name: xr.Variable((), np.int64(0), _grid_mapping_attrs(parsed))})
    arrays = [out[v] for v in out.data_vars] if isinstance(out, xr.Dataset) else []
    for da in [*arrays, out]:
        da.attrs.pop("grid_mapping", None)
        da.encoding["grid_mapping"] = name
    out.attrs.pop("crs", None)  # a stale GeoTIFF-style attribute would contradict the new CRS (rioxarray does this too)
    return out


def in_axis_units(crs: CRS, factor: float) -> CRS:
    """``crs`` with its linear axes in units ``factor`` times its own: km for 1000 on a CRS in metres.

    Output coordinates keep the input's units (x/y in km, ``units="km"``, on a CRS in metres); the CRS
    written beside them must count in those units too, since GDAL and rioxarray place a raster by its
    coordinates in the CRS's own unit (an ERA5 grid in km on a Lambert CRS in metres landed 1000 times
    too close to the projection's origin). ``crs`` itself when ``factor`` is 1 or it has no linear axes.
    """
    from pyproj import get_units_map

    if factor == 1.0 or not crs.is_projected:
        return crs
    spec = crs.to_json_dict()
    axes = spec.get("coordinate_system", {}).get("axis", [])
    if not axes:
        return crs
    si = float(crs.axis_info[0].unit_conversion_factor) * factor
    name = next((n for n, u in get_units_map(category="linear").items() if math.isclose(float(u.conv_factor), si)),
                f"{si:g} metre")
    for axis in axes:
        axis["unit"] = {"type": "LinearUnit", "name": name, "conversion_factor": si}
    spec.pop("id", None)  # no longer the registered CRS (whose axes are in its own unit)
    return CRS.from_json_dict(spec)


def missing_crs_detail(ds: xr.Dataset, var: str) -> str:
    """Why no CRS was read: a ``grid_mapping`` attribute naming a missing variable, or a grid mapping nothing links."""
    named = ds[var].attrs.get("grid_mapping") or ds[var].encoding.get("grid_mapping")
    if named and str(named).split(":")[0].strip() not in ds.variables:
        return (f"its grid_mapping attribute names {named!r}, which is not in the dataset: keep that variable "
                "when selecting")
    loose = [str(n) for n, v in ds.variables.items() if "grid_mapping_name" in v.attrs]
    if loose:
        return (f"{loose[0]!r} holds a grid mapping that no attribute links to {var!r}: set "
                f"ds[{var!r}].attrs['grid_mapping'] = {loose[0]!r}")
    return "no spatial_ref / grid_mapping variable"


def check_grid_mapping(ds: xr.Dataset, lon: str, lat: str, crs: CRS) -> None:
    """Refuse a grid mapping that puts the grid's cells elsewhere than its 2-D ``lon``/``lat`` do.

    The points are read from the 2-D coordinates and the grid mapping is written to the output, so
    the two must agree: a rotated pole given with another pole, or 2-D latitudes flipped against
    the grid's rows, predicted from one and labelled with the other. Checked at the corners and the
    centre, on grids whose dims have 1-D coordinates marked as the CRS's axes (CF ``axis`` X/Y or
    ``standard_name`` grid_longitude/grid_latitude, e.g. CORDEX's rlon/rlat).
    """
    if ds[lat].ndim != 2 or ds[lon].dims != ds[lat].dims:
        return
    axes = {}
    for d in ds[lat].dims:
        c = ds.coords.get(d)
        if c is None or c.ndim != 1:
            return
        axis, name = str(c.attrs.get("axis", "")).upper(), str(c.attrs.get("standard_name", "")).lower()
        if axis == "X" or name == "grid_longitude":
            axes["x"] = d
        elif axis == "Y" or name == "grid_latitude":
            axes["y"] = d
    if set(axes) != {"x", "y"}:
        return
    ydim, xdim = ds[lat].dims
    ny, nx = ds.sizes[ydim], ds.sizes[xdim]
    cells = [(0, 0), (0, nx - 1), (ny - 1, 0), (ny - 1, nx - 1), (ny // 2, nx // 2)]
    gx = np.array([float(ds[axes["x"]].values[j if axes["x"] == xdim else i]) for i, j in cells])
    gy = np.array([float(ds[axes["y"]].values[i if axes["y"] == ydim else j]) for i, j in cells])
    try:
        lon_m, lat_m = Transformer.from_crs(crs, 4326, always_xy=True).transform(gx, gy)
    except ProjError:
        return
    lon_d = np.array([float(ds[lon].values[i, j]) for i, j in cells])
    lat_d = np.array([float(ds[lat].values[i, j]) for i, j in cells])
    off = np.hypot((lon_m - lon_d + 180.0) % 360.0 - 180.0, lat_m - lat_d)
    if np.all(np.isfinite(off)) and off.max() > 0.05:
        k = int(np.argmax(off))
        try:
            name = crs.to_cf().get("grid_mapping_name") or crs.name
        except PyprojCRSError:
            name = crs.name
        raise CRSError(
            f"the grid mapping ({name!r}) and the 2-D coordinates {lon!r}/{lat!r} disagree: cell "
            f"{cells[k]} of ({ydim}, {xdim}) is at lon {lon_m[k]:.2f}, lat {lat_m[k]:.2f} by the grid mapping and at "
            f"lon {lon_d[k]:.2f}, lat {lat_d[k]:.2f} by {lon!r}/{lat!r}; expected the same place. Fix the grid "
            f"mapping's attributes (e.g. the pole), or drop it (the 2-D coordinates alone define the points) or "
            f"drop {lon!r}/{lat!r}."
        )
