"""Surface fields of the data: elevation and the land–sea mask, for the static trends (:mod:`geonp.trend`).

Elevation is found by name or CF standard name (surface geopotential is divided by g). A variable
or coordinate on the space dims (and perhaps time) named like a land–sea mask (``lsm`` in ERA5,
``sftlf`` in CMIP, ``land_sea_mask``, ``landmask``, ...) or with the CF standard name
``land_binary_mask`` or ``land_area_fraction`` is read as the land fraction of each point, 0 (sea)
to 1 (land); percentages are converted. A grid's mask is smoothed over about one cell
(:func:`geonp.trend.smooth_grid`): 2 m temperature changes over tens of km across a coast, not
within one cell. No torch here.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .errors import CoordinateError, VariableNotFoundError
from .trend import smooth_grid

__all__ = ["elevation_name", "find_elevation", "land_name", "find_land", "LAND_SMOOTH_CELLS", "G0"]

_ELEVATION_NAMES = ("elevation", "altitude", "height", "orography", "orog", "elev", "surface_altitude", "hgt", "z")
_ELEVATION_STANDARD_NAMES = ("surface_altitude", "height_above_mean_sea_level", "altitude", "height_above_sea_level")
_GEOPOTENTIAL_NAMES = ("surface_geopotential", "geopotential_at_surface")
G0 = 9.80665
_LAND_NAMES = ("lsm", "land_sea_mask", "landsea_mask", "land_mask", "landmask", "land_fraction", "landfrac", "sftlf")
_LAND_STANDARD_NAMES = ("land_binary_mask", "land_area_fraction")

#: Gaussian smoothing of a grid's land fraction, in cells (best of 0, 1, 1.5, 2 on ERA5 at 0.25°)
LAND_SMOOTH_CELLS = 1.0


def land_name(ds: xr.Dataset, space_dims: set, time: str | None = None) -> str | None:
    """The land–sea mask among ``ds``'s variables and coordinates on ``space_dims``, or ``None``.

    A mask that also has the ``time`` dim (as ERA5's ``lsm`` downloaded beside a variable) counts:
    its first time step is read.
    """
    for key, v in list(ds.coords.items()) + list(ds.data_vars.items()):
        dims = set(v.dims)
        if not dims & space_dims or not dims <= space_dims | {time} or not np.issubdtype(v.dtype, np.number):
            continue
        if str(key).lower() in _LAND_NAMES or str(v.attrs.get("standard_name", "")).lower() in _LAND_STANDARD_NAMES:
            return str(key)
    return None


def find_land(ds: xr.Dataset, layout) -> np.ndarray | None:
    """Land fraction ``[P]`` (0 sea … 1 land) on ``layout``'s space points, smoothed on grids, or ``None``.

    Raises
    ------
    CoordinateError
        The mask has missing values or values outside 0–1 (0–100 in %).
    """
    name = getattr(layout, "land", None)
    if name is None:
        return None
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
        values = smooth_grid(values, LAND_SMOOTH_CELLS)
    return values.reshape(-1)


def _attr(obj, key: str) -> str:
    return str(obj.attrs.get(key, "")).lower()


def elevation_name(ds: xr.Dataset, space_dims: set, name: str | None) -> str | None:
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


def find_elevation(ds: xr.Dataset, layout) -> np.ndarray | None:
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
