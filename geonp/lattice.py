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

Gap filling keeps its tiles (the targets are the data's own points, and chunking never changes
them); global data without a single metric frame keep theirs too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .chunked import Problem

__all__ = ["MAX_TILE_POINTS", "applies", "lattice_ids", "cell"]

#: targets of one tile at most (a cell with more is cut into runs, each with the cell's window)
MAX_TILE_POINTS = 4096


def applies(problem: Problem) -> bool:
    """Whether ``problem``'s targets are tiled on the lattice: ``targets=`` on data with a metric frame."""
    return (not problem.fill_gaps and problem.frame is not None and problem.target.km is not None
            and problem.source.km is not None)


def lattice_ids(problem: Problem, tile: float) -> np.ndarray:
    """``[P, 3]`` tile keys of the targets: the lattice cell (two columns), then the run within it."""
    side = float(tile) * problem.unit_km
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
    """The centre (km, in the data's frame) and the half-diagonal (km) of lattice cell ``key[:2]``."""
    side = float(tile) * problem.unit_km
    return (np.asarray(key[:2], dtype=np.float64) + 0.5) * side, side / np.sqrt(2.0)
