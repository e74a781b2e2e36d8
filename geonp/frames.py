"""Model-space geometry: metric frames for horizontal coordinates (time: :mod:`geonp.timeaxis`).

The models only see coordinate *differences*, so any metric frame works. Longitude/latitude
points are mapped to an azimuthal equidistant projection in km, centred on the data (one centre
for the whole dataset when it spans at most :data:`REGIONAL_RADIUS_KM` from its centre, so
chunked and unchunked runs see identical coordinates; otherwise one centre per window). Projected
x/y grids with a CRS use their own coordinates, converted to km (from their own ``units``, through
the CRS's axis unit). Real longitude/latitude come from the CRS (:func:`lonlat_of`): a rotated pole's
``rlon``/``rlat`` are transformed, never read as longitude/latitude. See ``docs/geometry.md``.
No torch here.
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip  (before anything can load eccodes)

from dataclasses import dataclass

import numpy as np
import xarray as xr

from .errors import CRSError
from .geo import Layout

__all__ = [
    "Frame", "make_frame", "space_points", "lonlat_of", "centre_of", "radius_km", "is_regional",
    "grid_steps_km", "positions_km", "REGIONAL_RADIUS_KM", "EARTH_RADIUS_KM",
]

#: datasets within this radius of their centre share one projection centre
REGIONAL_RADIUS_KM = 2500.0
EARTH_RADIUS_KM = 6371.0088


@dataclass(frozen=True)
class Frame:
    """A metric frame for horizontal coordinates: azimuthal equidistant km, or a projected CRS in km."""

    kind: str  # "aeqd" or "projected"
    lon0: float = 0.0
    lat0: float = 0.0
    km_per_unit: float = 1.0  # projected: size of the CRS's axis unit in km

    def to_km(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``[n, 2]`` coordinates in km in this frame."""
        x = np.asarray(x, dtype=np.float64).ravel()
        y = np.asarray(y, dtype=np.float64).ravel()
        if self.kind == "projected":
            return np.stack([x, y], -1) * self.km_per_unit
        # about the polar axis the ellipsoid is symmetric: one projection per latitude of the centre serves every
        # longitude (a global grid's windows along a row share it; each new projection costs ~9 ms)
        e, n = _aeqd(0.0, self.lat0).transform(x - self.lon0, y)
        return np.stack([np.asarray(e), np.asarray(n)], -1)

    def to_dict(self) -> dict:
        """Plain-data form."""
        return {"kind": self.kind, "lon0": self.lon0, "lat0": self.lat0, "km_per_unit": self.km_per_unit}


_AEQD_CACHE: dict[tuple[float, float], pyproj.Transformer] = {}


def _aeqd(lon0: float, lat0: float) -> pyproj.Transformer:
    key = (round(lon0, 9), round(lat0, 9))
    if key not in _AEQD_CACHE:
        if len(_AEQD_CACHE) > 256:
            _AEQD_CACHE.clear()
        _AEQD_CACHE[key] = pyproj.Transformer.from_crs(
            "EPSG:4326", f"+proj=aeqd +lat_0={lat0} +lon_0={lon0} +datum=WGS84 +units=km", always_xy=True
        )
    return _AEQD_CACHE[key]


def centre_of(lon: np.ndarray, lat: np.ndarray) -> tuple[float, float]:
    """Centre of points on the sphere (normalised mean of unit vectors), in degrees."""
    lon = np.deg2rad(np.asarray(lon, dtype=np.float64).ravel())
    lat = np.deg2rad(np.asarray(lat, dtype=np.float64).ravel())
    v = np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)]).mean(1)
    norm = np.linalg.norm(v)
    if norm < 1e-9:  # points spread over the whole globe: any centre is as good
        return 0.0, 0.0
    v = v / norm
    if np.hypot(v[0], v[1]) < 1e-9:  # a pole (a polar cap's rings): its longitude is rounding noise, fix it
        return 0.0, float(np.copysign(90.0, v[2]))
    return float(np.rad2deg(np.arctan2(v[1], v[0]))), float(np.rad2deg(np.arcsin(np.clip(v[2], -1, 1))))


def radius_km(lon: np.ndarray, lat: np.ndarray, centre: tuple[float, float]) -> float:
    """Largest great-circle distance from ``centre`` to the points, in km."""
    lon0, lat0 = np.deg2rad(centre)
    lon = np.deg2rad(np.asarray(lon, dtype=np.float64).ravel())
    lat = np.deg2rad(np.asarray(lat, dtype=np.float64).ravel())
    c = np.sin(lat0) * np.sin(lat) + np.cos(lat0) * np.cos(lat) * np.cos(lon - lon0)
    return float(np.arccos(np.clip(c, -1.0, 1.0)).max() * EARTH_RADIUS_KM)


def space_points(ds: xr.Dataset, layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """Horizontal coordinates of every point of the space dims, flattened in C order: ``(x, y)``.

    In the axis unit of ``layout.crs``: x/y stored in other units (``units="km"`` on a CRS in
    metres) are scaled by ``layout.xy_scale``. Every position geonp uses comes from here.
    """
    xa = ds[layout.x].transpose(*[d for d in layout.space_dims if d in ds[layout.x].dims])
    ya = ds[layout.y].transpose(*[d for d in layout.space_dims if d in ds[layout.y].dims])
    shape = tuple(ds.sizes[d] for d in layout.space_dims)
    sx, sy = layout.xy_scale
    if layout.is_grid and xa.ndim == 1 and ya.ndim == 1:
        xi = layout.space_dims.index(xa.dims[0])
        yi = layout.space_dims.index(ya.dims[0])
        grids = np.meshgrid(*[np.arange(n) for n in shape], indexing="ij")
        x = (np.asarray(xa.values, dtype=np.float64) * sx)[grids[xi]]
        y = (np.asarray(ya.values, dtype=np.float64) * sy)[grids[yi]]
    else:
        x = np.broadcast_to(np.asarray(xa.values, dtype=np.float64) * sx, shape)
        y = np.broadcast_to(np.asarray(ya.values, dtype=np.float64) * sy, shape)
    return x.reshape(-1), y.reshape(-1)


def make_frame(ds: xr.Dataset, layout: Layout) -> Frame:
    """The metric frame of the dataset (see the module docstring)."""
    if not layout.geographic:
        crs = layout.crs
        factor = crs.axis_info[0].unit_conversion_factor if crs.axis_info else 1.0
        return Frame("projected", km_per_unit=float(factor) / 1000.0)
    lon, lat = lonlat_of(ds, layout)  # a rotated pole's real positions, not its rlon/rlat
    return Frame("aeqd", *centre_of(lon, lat))


def is_regional(ds: xr.Dataset, layout: Layout) -> bool:
    """Whether one projection centre serves the whole dataset."""
    if not layout.geographic:
        return True
    lon, lat = lonlat_of(ds, layout)
    return radius_km(lon, lat, centre_of(lon, lat)) <= REGIONAL_RADIUS_KM


def positions_km(ds: xr.Dataset, layout: Layout) -> np.ndarray:
    """``[P, 3]`` positions in km of every space point, flattened as :func:`space_points`, for distances between them.

    On longitude/latitude points on the sphere of :data:`EARTH_RADIUS_KM` (a chord is the great-circle
    distance to 1e-5 at 100 km, with no projection to centre on a global grid); projected x/y in km,
    with z = 0. Points off the Earth are non-finite.
    """
    if not layout.geographic:
        x, y = space_points(ds, layout)
        km = make_frame(ds, layout).km_per_unit
        return np.stack([x * km, y * km, np.zeros_like(x)], -1)
    lon, lat = (np.deg2rad(v) for v in lonlat_of(ds, layout))
    return EARTH_RADIUS_KM * np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], -1)


def lonlat_of(ds: xr.Dataset, layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """Longitude/latitude in degrees (EPSG:4326) of every space point.

    Plain longitude/latitude as they are; anything else (projected x/y, a rotated pole's
    ``rlon``/``rlat``, radians) transformed from ``layout.crs`` (``Layout.plain_lonlat``).

    Points off the Earth (the corners of a geostationary disc) come back as non-finite values.

    Raises
    ------
    CRSError
        pyproj cannot transform from ``layout.crs`` to EPSG:4326.
    """
    x, y = space_points(ds, layout)
    if layout.geographic and layout.plain_lonlat:
        return x, y
    try:
        t = pyproj.Transformer.from_crs(layout.crs, "EPSG:4326", always_xy=True)
        lon, lat = (np.asarray(v, dtype=np.float64) for v in t.transform(x, y))
    except pyproj.exceptions.ProjError as err:
        raise CRSError(f"could not transform {layout.x!r}/{layout.y!r} from the CRS {layout.crs.name!r} to "
                       f"longitude/latitude ({err}); expected coordinates and a CRS pyproj can place on the Earth. "
                       "Check the CRS (crs=, grid_mapping) and the coordinates' units.") from err
    return lon, lat


def grid_steps_km(lon: np.ndarray, lat: np.ndarray) -> tuple[float | None, float | None]:
    """Median great-circle distance between neighbours along each axis of a 2-D grid of degrees.

    ``None`` for an axis of one cell.
    """
    lam, phi = np.deg2rad(lon), np.deg2rad(lat)
    steps = []
    for axis in (0, 1):
        if lon.shape[axis] < 2:
            steps.append(None)
            continue
        head = (slice(None, -1), slice(None)) if axis == 0 else (slice(None), slice(None, -1))
        tail = (slice(1, None), slice(None)) if axis == 0 else (slice(None), slice(1, None))
        a = np.sin(np.diff(phi, axis=axis) / 2) ** 2 + np.cos(phi[head]) * np.cos(phi[tail]) * np.sin(
            np.diff(lam, axis=axis) / 2) ** 2
        steps.append(float(np.median(2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(a, 0, 1))))))
    return tuple(steps)
