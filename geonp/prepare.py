"""The variable to work on, its covariates and its layout, checked up front (no torch, no computation)."""

from __future__ import annotations

import xarray as xr

from . import domain, geo
from .errors import CoordinateError, VariableNotFoundError, VariableTypeError

__all__ = ["prepare"]

_COVARIATE_KEYWORDS = ("hour", "doy")


def _split_covariates(covariates) -> tuple[str | None, xr.DataArray | None, tuple[str, ...] | None]:
    """(elevation variable name, elevation DataArray, explicit covariate list or None for auto)."""
    if covariates is None:
        return None, None, None
    if isinstance(covariates, xr.DataArray):
        return None, covariates, ("elevation",)
    if isinstance(covariates, str):
        covariates = [covariates]
    if not isinstance(covariates, (list, tuple)) or not all(isinstance(c, (str, xr.DataArray)) for c in covariates):
        raise VariableTypeError(f"covariates= got {type(covariates).__name__}; expected names ('elevation', 'hour', "
                                "'doy', or a variable of the data), a list of them, or an elevation DataArray on "
                                "the data's space coordinates (xr.DataArray(dem, dims=..., coords=...)).")
    names, elev = [], None
    for c in covariates:
        if isinstance(c, xr.DataArray):
            return None, c, tuple(dict.fromkeys([*names, "elevation"]))
        if c in _COVARIATE_KEYWORDS or c == "elevation":
            names.append(c)
        else:
            elev = c
            names.append("elevation")
    return elev, None, tuple(dict.fromkeys(names))


def prepare(obj, var, *, crs, covariates, land, mask=None) -> tuple[xr.Dataset, geo.Layout, tuple[str, ...] | None]:
    """The dataset holding ``var``, its layout, and the covariates named explicitly (``None``: found automatically).

    An elevation passed as a DataArray in ``covariates=`` is added to the dataset as a coordinate, and
    ``mask=`` (where the field is defined) as :data:`geonp.domain.DOMAIN_COORD` (:func:`geonp.domain.restrict`).
    """
    elev_name, elev_da, explicit = _split_covariates(covariates)
    ds, name = geo.select_variable(obj, var)
    if elev_da is not None:  # scalar coordinates (a DEM cut to one row) would clash: its dims are checked later
        elev_name = "elevation" if name != "elevation" else "covariate_elevation"  # not the variable itself
        ds = ds.assign_coords({elev_name: elev_da.reset_coords(drop=True)})
    if elev_name is not None and elev_name not in ds.variables:
        raise VariableNotFoundError(f"covariate {elev_name!r} is not a variable or coordinate of the dataset; "
                                    f"expected one of {sorted(map(str, ds.variables))} or 'hour'/'doy'.")
    ds, layout = geo.describe(ds, name, crs=crs, elevation=elev_name, land=land)
    if elev_da is not None and set(ds[elev_name].dims) != set(layout.space_dims):
        raise CoordinateError(f"covariates= elevation has dims {list(elev_da.dims)}; expected the space dims of "
                              f"{name!r}, {list(layout.space_dims)}. Pass a DEM on the data's own grid or stations "
                              "(e.g. dem.interp_like(ds)).")
    ds = domain.restrict(ds, layout, mask)
    return ds, layout, explicit
