"""Tiles of ``targets=`` on a lattice fixed in the data's frame (numpy only, no torch).

A tile is predicted from the window about it (:func:`geonp.tiling.window`), so a target's
prediction depends on its window. When the tiles were cut from the targets themselves (their
extent, their grid's shape), asking for other targets beside a point moved its tile and its window:
the twenty-fourth new-user test found one Colorado July point 0.45 °C apart alone and in a list of
432, and a UTM cell 1.81 °C (std 1.17) alone and inside its grid. Here the tiles are the cells of a
lattice of ``tile`` model units anchored at the origin of the data's frame, and a cell's window is
the cell's (its centre, its half-diagonal), whatever targets lie in it; each target is coarsened by
its own distance to the data (:func:`geonp.reach.target_factors`). So a point gets the same
prediction whichever other targets are asked for (to float rounding: the targets of a cell that
share a factor are predicted together). A cell holding many targets is cut into runs of at
most :data:`MAX_TILE_POINTS`, all with the cell's window.

Global data have no single metric frame: there the lattice is fixed on the sphere (:func:`_sphere_cells`),
bands of latitude from the south pole, each cut into sectors from −180° (so 0..360 and −180..180
target longitudes fall in the same cells), the bands touching the poles one cap each, and a cell's
window is centred on the cell's centre (its own equidistant frame). Gap filling keeps its tiles (the
targets are the data's own points, and chunking never changes them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .frames import EARTH_RADIUS_KM, radius_km

if TYPE_CHECKING:
    from .chunked import Problem

__all__ = ["MAX_TILE_POINTS", "applies", "lattice_ids", "cell"]

#: targets of one tile at most (a cell with more is cut into runs, each with the cell's window)
MAX_TILE_POINTS = 4096


def applies(problem: Problem) -> bool:
    """Whether ``problem``'s targets are tiled on the lattice: ``targets=`` (in a metric frame, or on the sphere)."""
    if problem.fill_gaps:
        return False
    return problem.frame is None or (problem.target.km is not None and problem.source.km is not None)


def _on_sphere(problem: Problem) -> bool:
    return problem.frame is None


def _bands(side_km: float) -> tuple[int, float]:
    """Number of latitude bands of about ``side_km`` and their height in degrees."""
    count = max(1, int(np.ceil(180.0 / np.rad2deg(side_km / EARTH_RADIUS_KM))))
    return count, 180.0 / count


def _sectors(band: int, count: int, height: float, side_km: float) -> int:
    """Cells along longitude in ``band``: sectors about ``side_km`` wide at its equatorward edge; 1 in a cap."""
    if count >= 3 and band in (0, count - 1):
        return 1
    lo = -90.0 + band * height
    edge = 0.0 if lo < 0.0 < lo + height else min(abs(lo), abs(lo + height))
    return max(1, int(np.ceil(2.0 * np.pi * EARTH_RADIUS_KM * np.cos(np.deg2rad(edge)) / side_km)))


def _sphere_cells(lon: np.ndarray, lat: np.ndarray, side_km: float) -> np.ndarray:
    """``[P, 2]`` cells on the sphere (band, sector) of points at ``lon``/``lat`` (degrees, either convention)."""
    count, height = _bands(side_km)
    band = np.clip(np.floor((np.asarray(lat, dtype=np.float64) + 90.0) / height), 0, count - 1).astype(np.int64)
    sectors = np.array([_sectors(b, count, height, side_km) for b in range(count)])[band]
    east = np.mod(np.asarray(lon, dtype=np.float64) + 180.0, 360.0)  # degrees east of -180
    return np.column_stack([band, np.minimum(np.floor(east * sectors / 360.0), sectors - 1).astype(np.int64)])


def _sphere_cell(band: int, sector: int, side_km: float) -> tuple[np.ndarray, float]:
    """A cell on the sphere: its centre (lon, lat in degrees) and the distance (km) from it to its farthest edge."""
    count, height = _bands(side_km)
    n = _sectors(band, count, height, side_km)
    lo, hi = -90.0 + band * height, -90.0 + (band + 1) * height
    if count >= 3 and band in (0, count - 1):  # a polar cap (as _sectors decides), centred on its pole
        pole = -90.0 if band == 0 else 90.0
        return np.array([0.0, pole]), float(np.deg2rad(height) * EARTH_RADIUS_KM)
    west, east = -180.0 + sector * 360.0 / n, -180.0 + (sector + 1) * 360.0 / n
    centre = np.array([(west + east) / 2.0, (lo + hi) / 2.0])
    edge = np.linspace(0.0, 1.0, 33)  # the outline, sampled: a cell's farthest point need not be a corner
    along, up = west + (east - west) * edge, lo + (hi - lo) * edge
    lons = np.concatenate([along, along, np.full(33, west), np.full(33, east)])
    lats = np.concatenate([np.full(33, lo), np.full(33, hi), up, up])
    return centre, radius_km(lons, lats, (float(centre[0]), float(centre[1])))


def lattice_ids(problem: Problem, tile: float) -> np.ndarray:
    """``[P, 3]`` tile keys of the targets: the lattice cell (two columns), then the run within it."""
    side = float(tile) * problem.unit_km
    if _on_sphere(problem):
        cells = _sphere_cells(problem.target.lon, problem.target.lat, side)
    else:
        cells = np.floor(np.asarray(problem.target.km, dtype=np.float64) / side).astype(np.int64)
    order = np.lexsort((np.arange(len(cells)), cells[:, 1], cells[:, 0]))  # by cell, then by index
    ordered = cells[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    starts = np.flatnonzero(new)
    rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.append(starts, len(order))))
    runs = np.empty(len(order), dtype=np.int64)
    runs[order] = rank // MAX_TILE_POINTS
    return np.column_stack([cells, runs])


def cell(key: np.ndarray, problem: Problem, tile: float) -> tuple[np.ndarray, float]:
    """The centre and the reach (km) of lattice cell ``key[:2]``.

    In a metric frame the centre is in km and the reach the half-diagonal; on the sphere the centre is
    (lon, lat) in degrees and the reach the great-circle distance to the cell's farthest edge.
    """
    side = float(tile) * problem.unit_km
    if _on_sphere(problem):
        return _sphere_cell(int(key[0]), int(key[1]), side)
    return (np.asarray(key[:2], dtype=np.float64) + 0.5) * side, side / np.sqrt(2.0)
