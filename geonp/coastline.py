"""The bundled global land fraction, for grids whose data carry no land–sea mask.

``geonp/static/land_fraction.npz`` holds, for every 0.05° cell of the globe (about 5.5 km), the
fraction of its GLOBE 1 km points that are land (built by ``scripts/build_land_fraction.py``;
read without executing code). :func:`grid_land_fraction` averages it over each cell of a grid,
lat/lon or projected, so a 0.25° ERA5 cell gets the land fraction of its own footprint, as
ERA5's ``lsm`` does; :func:`station_land_fraction` averages it over a disk around each station.
No torch here.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

__all__ = ["TABLE_PATH", "land_fraction_at", "land_fraction_smooth", "grid_land_fraction", "station_land_fraction",
           "footprint_land_fraction", "grid_steps", "MAX_SAMPLES", "STATION_RADIUS_KM"]

TABLE_PATH = Path(__file__).resolve().parent / "static" / "land_fraction.npz"
#: most sample points per axis of one grid cell (a cell of 0.45° or more is sampled 9 × 9 times)
MAX_SAMPLES = 9
_STEP_DEG = 0.05
#: radius of the disk a station's land fraction is the mean over (best of 0, 10, 25 and 50 km on the
#: Irish wind stations: docs/benchmarks.md, "The bundled land fraction")
STATION_RADIUS_KM = 10.0


@functools.lru_cache(maxsize=1)
def _table() -> tuple[np.ndarray, float, float, float, float, float]:
    """The land counts (``uint8``, 26 MB once loaded), points per cell, first cell centre and steps."""
    with np.load(TABLE_PATH, allow_pickle=False) as z:
        return (z["land"], float(z["points"]), float(z["lat0"]), float(z["lon0"]), float(z["dlat"]),
                float(z["dlon"]))


def _table_position(lon: np.ndarray, lat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fractional (row, column) of each point (degrees; any longitude range) in the table, cell centres whole."""
    counts, _, lat0, lon0, dlat, dlon = _table()
    lat = np.clip(np.asarray(lat, dtype=np.float64), -90.0, 90.0)
    lon = (np.asarray(lon, dtype=np.float64) + 180.0) % 360.0 - 180.0
    return np.clip((lat - lat0) / dlat, 0.0, counts.shape[0] - 1.0), (lon - lon0) / dlon


def land_fraction_at(lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """Land fraction (0 sea … 1 land) of the 0.05° cell holding each point (degrees; any longitude range)."""
    counts, points = _table()[:2]
    fi, fj = _table_position(lon, lat)
    return counts[np.rint(fi).astype(np.intp), np.rint(fj).astype(np.intp) % counts.shape[1]] / points


def land_fraction_smooth(lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """Land fraction at each point (degrees), bilinear between the 0.05° cell centres: continuous in position."""
    counts, points = _table()[:2]
    fi, fj = _table_position(lon, lat)
    i0 = np.minimum(np.floor(fi).astype(np.intp), counts.shape[0] - 2)
    j0 = np.floor(fj).astype(np.intp)
    u, v = fi - i0, fj - j0
    j1 = (j0 + 1) % counts.shape[1]
    j0 = j0 % counts.shape[1]
    top = (1 - v) * counts[i0, j0] + v * counts[i0, j1]
    bottom = (1 - v) * counts[i0 + 1, j0] + v * counts[i0 + 1, j1]
    return ((1 - u) * top + u * bottom) / points


def _wrapped_gradient(values: np.ndarray, axis: int, period: float | None) -> np.ndarray:
    """Centred differences along ``axis`` (one-sided at the edges), wrapped into ±period/2."""
    if values.shape[axis] < 2:
        return np.zeros_like(values)
    if period is None:
        return np.gradient(values, axis=axis)
    unwrapped = np.unwrap(values, period=period, axis=axis)  # a grid across the dateline steps by 0.25°, not 359.75°
    return np.gradient(unwrapped, axis=axis)


def grid_land_fraction(lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """Land fraction of each cell of a grid with point coordinates ``lon``, ``lat`` ``[ny, nx]`` (degrees).

    Each cell's footprint is spanned by its steps to the neighbouring points along both grid
    axes (so curvilinear and projected grids work too) and sampled every ~0.05° of latitude or
    longitude, whichever the step crosses more of (from 1 to
    :data:`MAX_SAMPLES` points per axis) in the bundled table; the samples' mean is the fraction.
    A grid of one row or column is sampled along its other axis only.
    """
    lon = np.asarray(lon, dtype=np.float64)
    lat = np.asarray(lat, dtype=np.float64)
    return footprint_land_fraction(lon, lat, *[(_wrapped_gradient(lon, axis, 360.0), _wrapped_gradient(lat, axis, None))
                                               for axis in (0, 1)])


def grid_steps(lon: np.ndarray, lat: np.ndarray) -> tuple[tuple[float, float], tuple[float, float]]:
    """Median ``(dlon, dlat)`` (degrees) of one step along each axis of a grid ``[ny, nx]``: its cell's two sides."""
    lon = np.asarray(lon, dtype=np.float64)
    lat = np.asarray(lat, dtype=np.float64)
    return tuple((float(np.median(_wrapped_gradient(lon, axis, 360.0))), float(np.median(_wrapped_gradient(lat, axis,
                                                                                                            None))))
                 for axis in (0, 1))


def footprint_land_fraction(lon: np.ndarray, lat: np.ndarray, side_a, side_b) -> np.ndarray:
    """Land fraction of the parallelogram about each point spanned by ``side_a`` and ``side_b``.

    Each side is ``(dlon, dlat)`` in degrees, a number or an array like ``lon``; the footprint is
    sampled every ~0.05° (1 to :data:`MAX_SAMPLES` points per side) in the bundled table.
    """
    steps = []
    for dlon, dlat in (side_a, side_b):
        dlon, dlat = np.broadcast_to(dlon, np.shape(lon)), np.broadcast_to(dlat, np.shape(lon))
        # table cells crossed by one step (the table is regular in degrees, so degrees count, not km)
        extent = float(np.median(np.maximum(np.abs(dlon), np.abs(dlat)))) if np.size(lon) else 0.0
        n = int(np.clip(np.ceil(extent / _STEP_DEG - 1e-9), 1, MAX_SAMPLES))
        offsets = (np.arange(n) + 0.5) / n - 0.5  # centres of n equal parts of the cell: 5 parts of 0.05° at 0.25°
        steps.append((offsets, dlon, dlat))
    (oa, lon_a, lat_a), (ob, lon_b, lat_b) = steps
    total = np.zeros_like(lon)
    for a in oa:
        for b in ob:
            total += land_fraction_at(lon + a * lon_a + b * lon_b, lat + a * lat_a + b * lat_b)
    return total / (len(oa) * len(ob))


def station_land_fraction(lon: np.ndarray, lat: np.ndarray, radius_km: float = STATION_RADIUS_KM) -> np.ndarray:
    """Land fraction of a disk of ``radius_km`` around each point ``[P]`` (degrees), from the bundled table.

    The disk is sampled on a 9 × 9 lattice clipped to the circle (49 points, 2.5 km apart at 10 km):
    a coastal station gets the share of land around it, not the 0 or 1 of the cell it sits in.
    """
    from .frames import EARTH_RADIUS_KM  # here: frames imports geo, which imports this module

    km_per_deg = np.deg2rad(EARTH_RADIUS_KM)
    lon = np.asarray(lon, dtype=np.float64)
    lat = np.asarray(lat, dtype=np.float64)
    grid = np.linspace(-1.0, 1.0, 9)
    a, b = np.meshgrid(grid, grid)
    inside = a ** 2 + b ** 2 <= 1.0 + 1e-9
    north = a[inside] * radius_km / km_per_deg
    coslat = np.maximum(np.cos(np.deg2rad(lat)), 1e-6)[:, None]
    east = b[inside][None, :] * radius_km / (km_per_deg * coslat)
    # bilinear between cell centres: a station moved by metres moves its fraction by as little (with the
    # cell holding each sample, 34 m moved a coastal station's fraction 0.56 -> 0.62 and its mean 0.2 K)
    return land_fraction_smooth(lon[:, None] + east, lat[:, None] + north[None, :]).mean(1)
