"""``targets=``: the points to predict at, described like the data (:func:`geonp.geo.describe`).

No torch here.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .errors import CoordinateError, CRSError, GeonpError, VariableTypeError
from .geo import Layout, _is_lat, _is_lon, _read_crs, describe
from .surface import ELEVATION_NAMES, ELEVATION_STANDARD_NAMES, LAND_OPTIONS

__all__ = ["describe_targets"]


def describe_targets(targets, crs=None, land: str | bool | None = "data",
                     elevation: str | None = None) -> tuple[xr.Dataset, Layout]:
    """Coordinates to predict at, from a Dataset/DataArray (data values ignored; ``land`` as in :func:`describe`).

    ``elevation`` is the data's elevation name: a variable or coordinate of that name in ``targets``
    is their elevation too (``covariates="dem"`` with a ``dem`` on both); otherwise one is found by
    name or standard name, as in the data.

    The targets' own CRS (a ``spatial_ref``/``crs`` coordinate, e.g. from ``targets.rio.write_crs(...)``
    or :func:`geonp.io.write_crs`) wins; ``crs`` (the data's) is used for projected x/y targets that
    carry none, and a projected ``crs`` is ignored for longitude/latitude targets.

    Raises
    ------
    VariableTypeError, CoordinateError
        Not an xarray object; no space coordinates; time or other dims.
    CRSError
        Projected x/y targets without a CRS of their own and no ``crs``.
    """
    if isinstance(targets, xr.DataArray):
        targets = targets.to_dataset(name=targets.name or "__target__")
    if not isinstance(targets, xr.Dataset):
        raise VariableTypeError(f"targets= got a {type(targets).__name__}; expected an xarray Dataset or DataArray "
                                "whose coordinates are the points to predict at.")
    tds = _target_points(targets, elevation)
    if isinstance(land, str) and land not in LAND_OPTIONS and land not in tds.variables:
        land = "data"  # the source's mask by name: the targets' own mask, if they have one
    try:
        named = elevation if elevation is not None and elevation in tds.coords else None
        _, layout = describe(tds, "__target__", crs=_target_crs(tds, crs), land=land, elevation=named)
    except GeonpError as exc:  # the messages name the variable: here, the targets
        if "'__target__'" not in str(exc):
            raise
        raise type(exc)(str(exc).replace("'__target__'", "targets=")) from None
    if layout.time is not None or layout.extra_dims:
        raise CoordinateError("targets= must hold space coordinates only (no time or other dims); the time steps "
                              "come from the data.")
    return tds, layout


def _target_points(targets: xr.Dataset, elevation: str | None = None) -> xr.Dataset:
    """The targets' coordinates (and CRS) with a ``__target__`` variable of zeros on their space dims.

    A data variable that is an elevation by name (``elevation``, the data's, or one of
    :data:`~geonp.surface.ELEVATION_NAMES`) or standard name (a DEM opened from a GeoTIFF) is kept
    as a coordinate: it is the targets' elevation. The space dims follow the order of the targets'
    data variables (a raster's ``(y, x)``), not of their coordinates.
    """
    coords = xr.Dataset(coords={k: v for k, v in targets.coords.items()})
    for name, v in targets.data_vars.items():
        if v.ndim >= 1 and name not in coords.coords and (
                name == elevation or str(name).lower() in ELEVATION_NAMES
                or str(v.attrs.get("standard_name", "")).lower() in ELEVATION_STANDARD_NAMES):
            coords = coords.assign_coords({name: v.variable})
    ref = None
    for name, c in coords.coords.items():
        if c.ndim >= 1 and (_is_lat(name, c) or str(name).lower() in ("y", "northing")):
            ref = c
            break
    if ref is None:
        scalars = [str(n) for n, c in coords.coords.items() if c.ndim == 0 and (
            _is_lat(n, c) or _is_lon(n, c) or str(n).lower() in ("x", "y", "easting", "northing"))]
        if scalars:
            raise CoordinateError(f"targets= has its space coordinates {scalars} as scalars (one point without a "
                                  "dimension); expected them along a dim, e.g. targets.expand_dims('point') or "
                                  "xr.Dataset(coords={'lat': ('point', [39.5]), 'lon': ('point', [-105.0])}).")
        raise CoordinateError(f"targets= has no recognisable space coordinates (found {list(coords.coords)}); "
                              "expected latitude/longitude or x/y coordinates.")
    dims = []
    for c in coords.coords.values():
        if c.ndim >= 1 and (_is_lat(c.name, c) or _is_lon(c.name, c)
                            or str(c.name).lower() in ("x", "y", "easting", "northing")):
            dims += [d for d in c.dims if d not in dims]
    like = next((v.dims for v in targets.data_vars.values() if set(dims) <= set(v.dims)), None)
    if like is not None:
        dims = [d for d in like if d in dims]
    zeros = xr.DataArray(np.zeros([coords.sizes[d] for d in dims], dtype=np.float32), dims=dims)
    tds = coords.assign(__target__=zeros)
    for k in ("spatial_ref", "crs"):
        if k in targets.variables and k not in tds.variables:
            tds = tds.assign_coords({k: targets[k]})
    return tds


def _target_crs(tds: xr.Dataset, crs):
    """The CRS to describe the targets with: their own, else ``crs`` where it can apply (see describe_targets)."""
    if _read_crs(tds, None) is not None:
        return None  # describe reads the targets' own
    has_latlon = any(c.ndim >= 1 and _is_lat(n, c) for n, c in tds.coords.items()) and any(
        c.ndim >= 1 and _is_lon(n, c) for n, c in tds.coords.items())
    if has_latlon:
        given = _read_crs(tds, crs)
        return crs if given is None or given.is_geographic else None
    if crs is None:
        raise CRSError(
            "targets= has projected coordinates (x/y) but no coordinate reference system was found (no "
            "spatial_ref / grid_mapping variable), and the data's crs= was not given either; expected the CRS of "
            "the targets' x/y. Attach one, e.g. targets = targets.rio.write_crs('EPSG:27700') (after import "
            "rioxarray) or geonp.io.write_crs(targets, 'EPSG:27700'); on the command line pass --targets-crs.")
    return crs
