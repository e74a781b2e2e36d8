"""Validation of a dataset's space and time coordinates once their axes are found (numpy only, no torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from . import timeaxis
from .errors import CoordinateError

if TYPE_CHECKING:
    from .geo import Layout

__all__ = ["check_coordinates"]


def check_coordinates(ds: xr.Dataset, layout: Layout) -> None:
    """Refuse coordinates a prediction cannot use, saying how to fix them.

    Missing positions, latitudes outside [-90, 90], longitudes outside [-180, 360], a grid axis
    that is not monotonic, has duplicates or has its two halves swapped, repeated station labels,
    and missing, duplicate or unsorted times.

    Raises
    ------
    CoordinateError
        The first problem found.
    """
    for name in (layout.y, layout.x):  # projected x/y as well as longitude/latitude
        values = np.asarray(ds[name].values, dtype=np.float64)
        bad = int((~np.isfinite(values)).sum())
        if bad:
            raise CoordinateError(
                f"coordinate {name!r} has {bad} missing (NaN or infinite) value(s) of {values.size}; expected a "
                f"position for every point. Drop those points first, e.g. ds.where(ds[{name!r}].notnull(), "
                "drop=True)."
            )
    if layout.geographic:
        lat = np.asarray(ds[layout.y].values, dtype=np.float64)
        lon = np.asarray(ds[layout.x].values, dtype=np.float64)
        grid = "" if layout.plain_lonlat else "grid "  # a rotated pole's rlat/rlon
        if np.abs(lat).max() > 90.0:
            raise CoordinateError(f"{grid}latitude {layout.y!r} has values from {np.nanmin(lat)} to {np.nanmax(lat)}; "
                                  "expected finite values in [-90, 90]. Check that latitude and longitude are not "
                                  "swapped and that the units are degrees.")
        if lon.min() < -180.0 or lon.max() > 360.0:
            _refuse_longitude(lon, layout.x, f"{grid}longitude")
    for name in (layout.x, layout.y):
        c = ds[name]
        if c.ndim == 1 and layout.is_grid and c.dims[0] in layout.space_dims:
            values = np.asarray(c.values, dtype=np.float64)
            if layout.geographic and name == layout.x:
                _check_contiguous_longitude(values, name)
                if layout.var != "__target__":  # targets may repeat a meridian (a cyclic column to plot)
                    _check_repeated_meridian(values, name)
                values = np.rad2deg(np.unwrap(np.deg2rad(values)))  # a grid across the dateline is monotonic here
            _check_monotonic(values, name)
    if layout.geographic and layout.is_grid:
        _check_radian_axis(ds, layout)
    if not layout.is_grid:
        dim = layout.space_dims[0]
        if dim in ds.indexes and not ds.indexes[dim].is_unique:
            twice = ds.indexes[dim][ds.indexes[dim].duplicated()].unique()
            raise CoordinateError(f"station coordinate {dim!r} repeats {len(twice)} label(s), e.g. "
                                  f"{[str(v) for v in twice[:3]]}; expected one entry per station. Drop repeats with "
                                  f"ds.drop_duplicates({dim!r}) or give the stations distinct labels.")
    if layout.time is not None:
        t = ds[layout.time].values
        if np.issubdtype(t.dtype, np.datetime64) and np.isnat(t).any():
            raise CoordinateError(f"time coordinate {layout.time!r} has {int(np.isnat(t).sum())} missing (NaT) "
                                  f"value(s) of {t.size}; expected a time for every frame. Drop them first, e.g. "
                                  f"ds.sel({{{layout.time!r}: ds[{layout.time!r}].notnull()}}).")
        if len(t) > 1:
            d = timeaxis.steps_seconds(t) if timeaxis.is_time(t) else None
            if d is not None and not (d > 0).all():
                kind = "duplicate" if (d == 0).any() else "non-monotonic"
                raise CoordinateError(f"time coordinate {layout.time!r} has {kind} values; expected strictly "
                                      "increasing times. Sort with ds.sortby('time') and drop duplicates with "
                                      "ds.drop_duplicates('time').")


def _refuse_longitude(lon: np.ndarray, name: str, label: str = "longitude") -> None:
    """Raise for longitudes outside [-180, 360]: degrees running past 360, or not degrees at all.

    ``label`` names the axis: ``"grid longitude"`` for a rotated pole's rlon.
    """
    found = f"{label} {name!r} has values from {lon.min():g} to {lon.max():g}; expected degrees in [-180, 360]."
    if lon.min() >= -180.0 and lon.max() <= 720.0:
        raise CoordinateError(
            f"{found} They look like degrees that run past 360 (wrap-around columns repeated after 360, or a "
            f"region across 0° counted on from 360). Bring them into -180..180 first, e.g. "
            f"ds.assign_coords({name}=(ds.{name} + 180) % 360 - 180).sortby({name!r}), or drop the repeated "
            f"columns, e.g. ds.sel({name}=ds.{name} < 360).")
    if lon.min() >= -360.0 and lon.max() <= 360.0:
        raise CoordinateError(
            f"{found} They look like degrees counted from another meridian (a tripolar ocean grid's -280..80, or "
            f"-360..0). Bring them into -180..180 first, e.g. ds.assign_coords({name}=(ds.{name} + 180) % 360 - 180) "
            f"(and .sortby({name!r}) for a 1-D axis).")
    raise CoordinateError(f"{found} Convert radians or projected metres to degrees first.")


def _check_contiguous_longitude(values: np.ndarray, name: str) -> None:
    """Refuse a sorted longitude axis whose two ends meet in the middle (a region across 0° in 0..360 order)."""
    d = np.diff(values)
    if len(values) < 3 or not ((d > 0).all() or (d < 0).all()):
        return
    jump = int(np.argmax(np.abs(d)))
    if abs(d[jump]) > 180.0:
        raise CoordinateError(
            f"longitude {name!r} jumps from {values[jump]:g} to {values[jump + 1]:g} between two neighbouring "
            "columns: the grid is one region stored with its two halves swapped (a region across 0° in 0..360 "
            "order, or across 180° in -180..180 order), so neighbouring columns are not neighbours on the "
            f"ground. Put the columns in geographic order first, e.g. ds.roll({name}=-{jump + 1}, roll_coords=True) "
            f"or ds.assign_coords({name}=(ds.{name} + 180) % 360 - 180).sortby({name!r}).")


def _check_repeated_meridian(values: np.ndarray, name: str) -> None:
    """Refuse a longitude axis that holds one meridian twice (0 and 360, or -180 and 180): a cyclic column."""
    wrapped = np.round(np.mod(values, 360.0), 9) % 360.0
    _, first, counts = np.unique(wrapped, return_index=True, return_counts=True)
    if (counts > 1).any():
        i = int(first[np.argmax(counts > 1)])
        twice = values[np.flatnonzero(wrapped == wrapped[i])]
        raise CoordinateError(
            f"longitude {name!r} holds the meridian {wrapped[i]:g}° twice ({', '.join(f'{v:g}' for v in twice)}): "
            "a cyclic column repeated at the end of a global grid; expected each meridian once. Drop the repeat, "
            f"e.g. ds.isel({name}=slice(None, -1)).")


#: how close the ratio of two angular axes' steps must come to 180/π to read as radians labelled degrees
RADIAN_RATIO_TOLERANCE = 0.01


def _check_radian_axis(ds: xr.Dataset, layout: Layout) -> None:
    """Refuse a grid whose one angular axis steps 180/π times finer than the other and stays within ±2π.

    That is an axis in radians labelled (or taken) as degrees, e.g. a rotated pole's ``rlat`` of
    0.0077 next to an ``rlon`` of 0.44 (docs/benchmarks.md, "A ninth new-user test"): read as
    degrees, its cells would be 57 times too close together. A real grid has no such ratio.
    """
    steps = {}
    for name, scale in zip((layout.x, layout.y), layout.xy_scale):
        c = ds[name]
        if c.ndim != 1 or c.dims[0] not in layout.space_dims or c.size < 2:
            return
        values = np.asarray(c.values, dtype=np.float64) * scale
        steps[name] = (float(np.median(np.abs(np.diff(values)))), float(np.abs(values).max()))
    (fine, (step, reach)), (coarse, (other, _)) = sorted(steps.items(), key=lambda kv: kv[1][0])
    if step > 0 and reach <= 2 * np.pi and abs(other / step / np.degrees(1.0) - 1.0) < RADIAN_RATIO_TOLERANCE:
        raise CoordinateError(
            f"coordinate {fine!r} steps by {step:.4g} while {coarse!r} steps by {other:.4g} (degrees): a ratio of "
            f"{other / step:.2f}, which is 180/π, and {fine!r} stays within ±{reach:.3g}. {fine!r} looks like radians "
            f"taken as degrees; expected both axes in degrees. Convert it first, e.g. "
            f"ds = ds.assign_coords({{{fine!r}: np.rad2deg(ds[{fine!r}]).assign_attrs(ds[{fine!r}].attrs)}}).")


def _check_monotonic(values: np.ndarray, name: str) -> None:
    """Refuse a grid axis with duplicate values or one that is neither increasing nor decreasing."""
    if len(values) < 2:
        return
    d = np.diff(values)
    if (d == 0).any():
        raise CoordinateError(f"coordinate {name!r} has duplicate values; expected a grid with distinct "
                              f"coordinates. Drop them with ds.drop_duplicates({name!r}).")
    if not ((d > 0).all() or (d < 0).all()):
        raise CoordinateError(f"coordinate {name!r} is neither increasing nor decreasing; expected a monotonic "
                              f"grid axis. Sort it with ds.sortby({name!r}).")
