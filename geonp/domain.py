"""Where a field is defined: ``mask=`` (sea-surface temperature over the sea, a level above the ground).

Points outside the mask are no part of the field: their values are not context, they are not gaps
(neither predicted nor counted in the gaps' sizes and the data's density), and every output is NaN
there. The mask travels with the dataset as the coordinate :data:`DOMAIN_COORD`, so that every
problem built from it (prediction, calibration, fitting) sees it; :func:`geonp.output.finish` applies
it to the outputs and drops it. xarray / numpy only.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .errors import ConfigError, CoordinateError, VariableNotFoundError

__all__ = ["DOMAIN_COORD", "restrict", "find_domain", "mask_outputs", "NEVER_OBSERVED_MIN_FRAMES"]

#: the coordinate that carries ``mask=`` through a prediction (True: a point of the field)
DOMAIN_COORD = "geonp_domain"

#: records with fewer frames than this are not checked for points never observed (one frame's hole is never observed)
NEVER_OBSERVED_MIN_FRAMES = 4


def restrict(ds: xr.Dataset, layout, mask) -> xr.Dataset:
    """``ds`` with ``layout.var`` missing outside ``mask`` and the mask as :data:`DOMAIN_COORD` (``mask=None``: as is).

    ``mask`` is ``"observed"`` (the points with a value in at least one frame: reads the variable
    once), the name of a variable or coordinate, or a DataArray, on the space dims: booleans, or
    0/1 numbers, True (1) where the field is defined.

    Raises
    ------
    VariableNotFoundError
        ``mask`` names nothing in the dataset.
    CoordinateError
        The mask lies on other dims, holds values other than True/False (0/1), or has no True value.
    ConfigError
        ``mask="observed"`` on data without time (every gap would be outside it), or a mask of another type.
    """
    if mask is None:
        return ds
    space = list(layout.space_dims)
    var = ds[layout.var]
    if isinstance(mask, str) and mask == "observed":
        if layout.time is None:
            raise ConfigError(f"mask='observed' keeps the points of {layout.var!r} with a value in some frame, but "
                              "the data have no time axis, so every gap would lie outside it; pass a mask of where "
                              "the field is defined (e.g. mask=ds.lsm < 0.5) or leave mask= out.")
        m = var.notnull().any([d for d in var.dims if d not in space]).compute()
        name = "mask='observed'"
    elif isinstance(mask, str):
        if mask not in ds.variables:
            raise VariableNotFoundError(f"mask={mask!r} is not a variable or coordinate of the dataset; expected one "
                                        f"of {sorted(map(str, ds.variables))}, 'observed', or a boolean DataArray.")
        m, name = ds[mask], f"mask {mask!r}"
    elif isinstance(mask, xr.DataArray):
        m, name = mask, "mask="
    else:
        raise ConfigError(f"mask={type(mask).__name__}; expected 'observed', the name of a variable or coordinate, "
                          "or a boolean DataArray on the space dims (True where the field is defined).")
    if set(m.dims) != set(space):
        raise CoordinateError(f"{name} has dims {list(m.dims)}; expected the space dims of {layout.var!r}, {space} "
                              "(a 2-D mask for a grid, one value per station; drop time with .isel(time=0)).")
    values = np.asarray(m.transpose(*space).values)
    if values.dtype != bool:
        number = values.astype(np.float64) if np.issubdtype(values.dtype, np.number) else None
        if number is None or not np.isin(number, (0.0, 1.0)).all():
            raise CoordinateError(f"{name} holds {values.dtype} values other than True/False or 0/1; expected a "
                                  "boolean mask, True where the field is defined (e.g. mask=ds.lsm < 0.5 for the sea).")
        values = number == 1.0
    if not values.any():
        raise CoordinateError(f"{name} is False everywhere: no point of {layout.var!r} would be predicted. Expected "
                              "True where the field is defined.")
    inside = xr.DataArray(values, dims=space, coords={d: ds[d] for d in space if d in ds.coords},
                          attrs={"geonp_mask": f"{name}: {int(values.sum())} of {values.size} points"})
    y = var.where(inside).astype(var.dtype).assign_attrs(var.attrs)
    y.encoding = dict(var.encoding)
    return ds.assign({layout.var: y}).assign_coords({DOMAIN_COORD: inside})


def find_domain(ds: xr.Dataset, layout) -> np.ndarray | None:
    """The mask ``[P]`` (bool, in the order of ``layout.space_dims``), or ``None`` when there is none."""
    if DOMAIN_COORD not in ds.coords:
        return None
    return np.asarray(ds[DOMAIN_COORD].transpose(*layout.space_dims).values, dtype=bool).reshape(-1)


def mask_outputs(out: xr.Dataset) -> xr.Dataset:
    """Outputs NaN outside the mask (variables on its dims), without the mask's coordinate."""
    if DOMAIN_COORD not in out.coords:
        return out
    inside = out[DOMAIN_COORD]
    out = out.assign_attrs(geonp_mask=inside.attrs.get("geonp_mask", "mask="))  # provenance: NaN outside it
    for name, v in out.data_vars.items():
        if set(inside.dims) <= set(v.dims):
            masked = v.where(inside).assign_attrs(v.attrs)
            masked.encoding = dict(v.encoding)
            out[name] = masked
    return out.drop_vars(DOMAIN_COORD)
