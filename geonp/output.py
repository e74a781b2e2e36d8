"""The output Dataset's metadata: CF attributes of the predicted variables, CRS and provenance.

No torch here.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone

import numpy as np
import xarray as xr

from . import geo
from .io.sources import input_files

__all__ = ["variable_attrs", "finish", "space_coords", "model_digest", "environment", "drop_time_scalars",
           "drop_grib_placeholders"]


def _version() -> str:
    from . import __version__

    return __version__


def variable_attrs(da: xr.DataArray, kind: str, var: str) -> dict:
    """CF attributes of ``{var}_mean`` / ``_std`` / ``_filled`` (``kind``) from the input variable ``da``."""
    src = da.attrs
    name = src.get("standard_name")
    if not name or str(name).lower() in ("unknown", "undefined", "none"):  # e.g. cfgrib's placeholder
        name = None
    attrs = {k: src[k] for k in ("units", *(("cell_methods",) if kind != "std" else ())) if k in src}
    long = src.get("long_name", var)
    if kind == "mean":
        attrs.update(long_name=f"{long} (predictive mean)", ancillary_variables=f"{var}_std")
        if name:
            attrs["standard_name"] = name
    elif kind == "std":
        attrs["long_name"] = f"{long} (predictive standard deviation)"
        if name:  # a CF standard name modifier: only on a real standard name
            attrs["standard_name"] = f"{name} standard_error"
    else:
        # no ancillary_variables: {var}_std is the uncertainty of {var}_mean, not of the observations kept here
        attrs.update(long_name=f"{long} (observations, gaps filled with the predictive mean)",
                     comment=f"observed values where the input has them, {var}_mean elsewhere; {var}_std is the "
                             f"standard deviation of {var}_mean")
        if name:
            attrs["standard_name"] = name
    return attrs


def drop_time_scalars(out: xr.Dataset, ds: xr.Dataset, names=("step", "time", "valid_time"),
                      standard_names=("time", "forecast_period", "forecast_reference_time")) -> xr.Dataset:
    """``out`` without the input's scalar time coordinates named ``names`` or with one of ``standard_names``.

    cfgrib's ``step`` (``forecast_period``, 0 h for an analysis) describes the input's forecast step:
    beside a forecast's ``lead_time`` it contradicts it, beside an infill it is no step of the output's.
    """
    return out.drop_vars([c for c in out.coords if out[c].ndim == 0 and c in ds.coords and (
        c in names or ds[c].attrs.get("standard_name") in standard_names)])


def drop_grib_placeholders(out: xr.Dataset, source: xr.Dataset | xr.DataArray | None, var) -> xr.Dataset:
    """``out`` without cfgrib's scalar coordinates that hold no information about ``var``.

    cfgrib gives every field a scalar ``number`` (``realization``, 0 outside an ensemble: the field's
    ``GRIB_totalNumber`` is 0) and a scalar level of the field's ``GRIB_typeOfLevel`` with no values
    of its own (``surface`` = 0, "original GRIB coordinate for key: level(surface)"). Beside a
    prediction they read as an ensemble member and a vertical level it has none of (a thirtieth
    new-user test). A member's number (``GRIB_totalNumber`` above 0) and real levels
    (``heightAboveGround`` = 2, ``isobaricInhPa`` = 500) stay.
    """
    if source is None:
        return out
    field = source if isinstance(source, xr.DataArray) else source[var] if var in source.variables else None
    grib = {} if field is None else {k: v for k, v in field.attrs.items() if str(k).startswith("GRIB_")}
    if not grib:
        return out
    drop = []
    for name, c in out.coords.items():
        if c.ndim or name not in source.coords:
            continue
        placeholder_level = (str(c.attrs.get("long_name", "")).startswith("original GRIB coordinate for key: level(")
                             and name == grib.get("GRIB_typeOfLevel") and float(c.values) == 0)
        lone_member = c.attrs.get("standard_name") == "realization" and grib.get("GRIB_totalNumber") == 0
        if placeholder_level or lone_member:
            drop.append(name)
    return out.drop_vars(drop)


def finish(out: xr.Dataset, layout: geo.Layout, model, task: str, lazy: bool,
            crs_layout: geo.Layout | None = None, source: xr.Dataset | xr.DataArray | None = None) -> xr.Dataset:
    """Add the CRS (of ``crs_layout``, default ``layout``) and global CF/provenance attributes; compute unless lazy.

    ``source``: the input Dataset, whose global attributes (a licence, the institution...) carry over,
    its ``history`` first, and whose files are recorded (``geonp_input``; :func:`geonp.to_zarr` will not
    write over them).

    A curvilinear grid read from 2-D latitude/longitude alone gets no CRS: WGS 84 describes those
    coordinates, not the grid's own axes (``rlat``/``rlon``, ``y``/``x``), and rioxarray would read
    it as the axes' CRS and place the grid elsewhere. The 2-D latitude/longitude stay in the output.
    """
    import pyproj

    from .domain import mask_outputs
    from .io.crs import in_axis_units, write_crs

    out = drop_grib_placeholders(mask_outputs(out), source, layout.var)  # NaN outside mask= (where it is undefined)
    where = crs_layout or layout
    if not _lonlat_off_axes(out, where):
        # the input's own grid mapping (carried as a coordinate) would name a second CRS beside the one written
        stale = [n for n, c in out.coords.items() if c.ndim == 0 and "grid_mapping_name" in c.attrs]
        out = out.drop_vars(stale)
        sx, sy = where.xy_scale
        out = write_crs(out, in_axis_units(pyproj.CRS.from_user_input(where.crs), sx) if sx == sy else where.crs)
    if not where.is_grid:  # CF discrete sampling geometry: stations
        out.attrs["featureType"] = "timeSeries" if {layout.time, "init_time"} & set(out.dims) else "point"
        station = layout.space_dims[0]
        if out.attrs["featureType"] == "timeSeries" and station in out.coords and station in out.dims:
            out[station].attrs["cf_role"] = "timeseries_id"  # the series' identifier (CF 9.5)
    given = {} if not isinstance(source, xr.Dataset) else {  # a DataArray's attributes are its variable's
        k: _netcdf_value(v) for k, v in source.attrs.items()
        if k not in _OWN_ATTRS and not str(k).startswith(("geonp_", "GRIB_"))}  # GRIB_*: how cfgrib decoded the file
    line = (f"{datetime.now(timezone.utc).isoformat(timespec='seconds')} geonp {_version()}: {task} of "
            f"{layout.var!r} with model {model.name!r} ({model.source or 'in memory'})")
    before = _netcdf_value(source.attrs.get("history", "")) if isinstance(source, xr.Dataset) else ""
    before = before.rstrip("\n") if isinstance(before, str) else str(before)
    targets = crs_layout is not None and crs_layout is not layout
    elevation = layout.elevation if not targets or crs_layout.elevation is not None else None
    out.attrs = {**given, **out.attrs}
    out.attrs.update({
        "Conventions": "CF-1.8",
        "title": f"geonp {task} of {layout.var}",
        "history": f"{before}\n{line}" if before else line,
        "source": f"geonp {_version()} neural process {model.name}",
        "geonp_version": _version(),
        "geonp_environment": environment(),  # again once an eager result is computed (the kernel ran or not)
        "geonp_model": model.name,
        "geonp_model_source": model.source or "in memory",
        "geonp_checkpoint_sha256": model.digest,
        "geonp_model_sha256": model_digest(model),
        "geonp_settings": json.dumps(dict(model.settings), sort_keys=True, default=str),
        "geonp_task": task,
        "geonp_input": "\n".join((input_files(source) if source is not None else []) or ["in memory"]),
        "geonp_targets": _targets_note(out, crs_layout) if targets else "the input's own points",
        "geonp_elevation": str(elevation) if elevation else "none",  # the covariates used
        "geonp_land": str(layout.land) if layout.land else "none",
    })
    if lazy:
        return out
    out = out.compute()
    out.attrs["geonp_environment"] = environment()
    return out


def _targets_note(out: xr.Dataset, layout: geo.Layout) -> str:
    """``targets=`` for the provenance: its dims, number of points and extent in its own coordinates."""
    points = int(np.prod([out.sizes[d] for d in layout.space_dims if d in out.sizes]))
    extent = [f"{name} {float(out[name].min()):g}..{float(out[name].max()):g}"
              for name in (layout.x, layout.y) if name in out.coords]
    return f"targets= ({', '.join(layout.space_dims)}): {points} points, {', '.join(extent)}"


def _netcdf_value(value):
    """An input attribute as NetCDF can store it: strings, numbers and lists of either as they are.

    Zarr attributes may hold anything JSON does: a dict becomes its JSON text, a list of lines (a
    ``history``) one text of lines, a boolean 0/1 and ``None`` an empty text, so that the output of such an
    input still writes to NetCDF.
    """
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (str, int, float, np.number, np.ndarray)):
        return value
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, str) for v in value):
            return "\n".join(value)
        if all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in value):
            return list(value)
    return json.dumps(value, default=str)


#: global attributes geonp sets itself (the input's are replaced, its history extended)
_OWN_ATTRS = ("Conventions", "title", "history", "source", "featureType")


def model_digest(model) -> str:
    """sha256 of everything a model predicts with: its weights, scales, calibration and settings.

    ``geonp_checkpoint_sha256`` covers the weights alone, the same for a model calibrated again
    (``fit(steps=0)``) on other data; this one tells those apart. Run records (times, losses) are left
    out, so two identical seeded fits share it.
    """
    h = hashlib.sha256(model.digest.encode())
    plain = {k: v for k, v in model.to_dict().items() if k not in ("metadata", "source")}
    h.update(json.dumps(plain, sort_keys=True, default=str).encode())
    return h.hexdigest()


def environment() -> str:
    """The versions a prediction ran with (the numbers change with torch, and with the compiled bias kernel)."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for name in ("torch", "numpy", "xarray", "dask"):
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            continue
    from .models import native

    why = native.status()  # known once a prediction ran here; a lazy output's may run elsewhere
    kernel = ("on" if why.startswith("ready") else "off: GEONP_NATIVE=0" if why.startswith("disabled") else
              "where it builds" if why == "not built yet" else "off: it did not build")
    return ", ".join([*found, f"compiled bias kernel {kernel}"])


def _lonlat_off_axes(out: xr.Dataset, layout: geo.Layout) -> bool:
    """Whether the CRS of ``layout`` is plain longitude/latitude and those are not the output's own axes."""
    from .io.units import is_plain_lonlat

    return layout.x in out.coords and out[layout.x].ndim > 1 and is_plain_lonlat(layout.crs)


#: CF attributes a latitude/longitude coordinate gets in the output when it has none of its own
_CF_LATLON = {"y": {"units": "degrees_north", "standard_name": "latitude", "long_name": "latitude"},
              "x": {"units": "degrees_east", "standard_name": "longitude", "long_name": "longitude"}}


def space_coords(ds: xr.Dataset, layout: geo.Layout) -> dict:
    """The coordinates of ``ds`` that lie on the space dims (copied to the output).

    Latitude and longitude without ``units`` (e.g. from a hand-made ``targets=``) get CF's.
    """
    keep = {}
    for name, c in ds.coords.items():
        if set(c.dims) <= set(layout.space_dims) and c.dims:
            axis = "y" if name == layout.y else "x" if name == layout.x else None
            # not rotated-pole rlat/rlon (degrees, but not latitude/longitude: CF's rotated names would be due)
            if layout.geographic and layout.plain_lonlat and axis and "units" not in c.attrs:
                c = c.copy().assign_attrs({**_CF_LATLON[axis], **c.attrs})
            keep[name] = c
    return keep
