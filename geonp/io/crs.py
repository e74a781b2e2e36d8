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

import warnings
from collections.abc import Hashable, Iterator
from typing import Any

import numpy as np
import xarray as xr
from pyproj import CRS

from ..errors import CRSError

__all__ = ["read_crs", "write_crs", "parse_crs"]

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


def _crs_from_attrs(attrs: dict, where: str) -> CRS | None:
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
        found = _crs_from_attrs(var.attrs, f"grid-mapping variable {name!r}")
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
