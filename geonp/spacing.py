"""Typical distances between points of a grid or a station network, in km. No torch here.

They set the space unit the models see (:class:`geonp.normalise.Normaliser`, which re-exports them).
"""

from __future__ import annotations

import numpy as np

__all__ = ["grid_axis_spacing_km", "grid_spacing_km", "mean_spacing", "station_spacing_km", "context_spacing_km"]


def grid_axis_spacing_km(xy_km: np.ndarray, shape: tuple[int, int]) -> tuple[float | None, float | None]:
    """Median neighbour distance along each grid axis, in km (``None`` for an axis of one cell)."""
    g = xy_km.reshape(*shape, 2)
    return tuple(float(np.median(np.linalg.norm(np.diff(g, axis=axis), axis=-1))) if shape[axis] > 1 else None
                 for axis in (0, 1))


def grid_spacing_km(xy_km: np.ndarray, shape: tuple[int, int]) -> float:
    """Geometric mean of the median neighbour distances along both grid axes, in km."""
    return mean_spacing(grid_axis_spacing_km(xy_km, shape))


def mean_spacing(steps) -> float:
    """Geometric mean of the per-axis spacings that are not ``None`` (1.0 when there is none)."""
    steps = [s for s in steps if s is not None]
    return float(np.sqrt(np.prod(steps))) if len(steps) == 2 else (steps[0] if steps else 1.0)


def station_spacing_km(xy_km: np.ndarray) -> float:
    """Typical spacing of scattered points: ``sqrt(bounding-box area / points)``, in km."""
    xy = np.asarray(xy_km, dtype=np.float64)
    if len(xy) < 2:
        return 1.0
    span = xy.max(0) - xy.min(0)
    area = float(np.prod(np.maximum(span, 1e-9)))
    if min(span) < 1e-6 * max(max(span), 1e-9):  # points on a line
        area = float(max(span)) ** 2 / len(xy)
    return float(np.sqrt(area / len(xy)))


def context_spacing_km(point_spacing_km: float, observed_fraction: float) -> float:
    """Spacing of the observed points when ``observed_fraction`` of the points are observed per frame."""
    f = float(np.clip(observed_fraction, 1e-6, 1.0))
    return float(point_spacing_km / np.sqrt(f))
