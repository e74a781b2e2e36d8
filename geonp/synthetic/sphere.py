"""Points on the unit sphere: lon/lat <-> unit vectors, great-circle distance, rotations.

Longitude and latitude are in degrees; great-circle distances are in degrees of arc.
Unit vectors use the usual Earth-centred frame: ``x`` through (0°E, 0°N), ``y`` through
(90°E, 0°N), ``z`` through the north pole.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ..errors import UnknownOptionError

__all__ = [
    "lonlat_to_unit",
    "unit_to_lonlat",
    "great_circle_distance",
    "euler_rotation_matrix",
    "rotate_lonlat",
    "ROTATIONS",
]

#: Named test rotations of the spherical GP benchmark (003 App. B): intrinsic "yxz" Euler angles in degrees.
ROTATIONS: dict[str, tuple[float, float, float]] = {
    "60-30-0": (-60.0, 30.0, 0.0),
    "60-30-20": (-60.0, 30.0, 20.0),
}


def lonlat_to_unit(lonlat: Tensor) -> Tensor:
    """Unit vectors of points given as ``(lon, lat)`` in degrees.

    Parameters
    ----------
    lonlat : Tensor
        ``[..., 2]`` longitude then latitude, degrees.

    Returns
    -------
    Tensor
        ``[..., 3]`` unit vectors ``(x, y, z)``.

    Examples
    --------
    >>> import torch
    >>> lonlat_to_unit(torch.tensor([[90.0, 0.0]], dtype=torch.float64)).round(decimals=6).abs()
    tensor([[0., 1., 0.]], dtype=torch.float64)
    """
    lon = torch.deg2rad(lonlat[..., 0])
    lat = torch.deg2rad(lonlat[..., 1])
    cos_lat = torch.cos(lat)
    return torch.stack([cos_lat * torch.cos(lon), cos_lat * torch.sin(lon), torch.sin(lat)], dim=-1)


def unit_to_lonlat(u: Tensor) -> Tensor:
    """``(lon, lat)`` in degrees of unit vectors; longitude wrapped to ``[-180, 180)``.

    Examples
    --------
    >>> import torch
    >>> unit_to_lonlat(torch.tensor([[0.0, -1.0, 0.0]], dtype=torch.float64))
    tensor([[-90.,   0.]], dtype=torch.float64)
    """
    lon = torch.rad2deg(torch.atan2(u[..., 1], u[..., 0]))
    lon = torch.remainder(lon + 180.0, 360.0) - 180.0
    lat = torch.rad2deg(torch.asin(u[..., 2].clamp(-1.0, 1.0)))
    return torch.stack([lon, lat], dim=-1)


def great_circle_distance(lonlat1: Tensor, lonlat2: Tensor) -> Tensor:
    """Pairwise great-circle distances in degrees of arc.

    The chord is computed from exact differences of 3-D unit vectors (no ``|a|² + |b|² - 2ab``
    cancellation) and the arc is ``2 asin(chord / 2)``, accurate for near and far points alike.

    Parameters
    ----------
    lonlat1 : Tensor
        ``[..., n, 2]`` (lon, lat) in degrees.
    lonlat2 : Tensor
        ``[..., m, 2]`` (lon, lat) in degrees.

    Returns
    -------
    Tensor
        ``[..., n, m]`` distances in degrees of arc, in ``[0, 180]``.

    Examples
    --------
    >>> import torch
    >>> a = torch.tensor([[0.0, 0.0]], dtype=torch.float64)
    >>> b = torch.tensor([[0.0, 90.0], [179.0, 0.0]], dtype=torch.float64)
    >>> great_circle_distance(a, b).round(decimals=9)
    tensor([[ 90., 179.]], dtype=torch.float64)
    """
    u1, u2 = lonlat_to_unit(lonlat1), lonlat_to_unit(lonlat2)
    chord = torch.cdist(u1, u2, compute_mode="donot_use_mm_for_euclid_dist")
    return torch.rad2deg(2.0 * torch.asin((0.5 * chord).clamp(0.0, 1.0)))


def _axis_rotation(axis: str, degrees: float) -> Tensor:
    a = math.radians(degrees)
    c, s = math.cos(a), math.sin(a)
    if axis == "x":
        rows = [[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]]
    elif axis == "y":
        rows = [[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]]
    else:
        rows = [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
    return torch.tensor(rows, dtype=torch.float64)


def euler_rotation_matrix(angles: tuple[float, float, float], order: str = "yxz") -> Tensor:
    """Rotation matrix of *intrinsic* Euler angles (degrees) about the axes in ``order``.

    Intrinsic means each rotation is about the already-rotated axes, so the matrix is
    ``R = R_{order[0]}(a0) @ R_{order[1]}(a1) @ R_{order[2]}(a2)``; it matches
    ``scipy.spatial.transform.Rotation.from_euler(order.upper(), angles, degrees=True)``.

    Examples
    --------
    >>> r = euler_rotation_matrix((-60.0, 30.0, 0.0))
    >>> torch.allclose(r @ r.T, torch.eye(3, dtype=torch.float64))
    True
    """
    order = order.lower()
    if len(order) != 3 or set(order) - set("xyz"):
        raise UnknownOptionError(
            f"Euler axis order {order!r} is not valid; expected three letters from 'x', 'y', 'z' such as 'yxz'."
        )
    r = torch.eye(3, dtype=torch.float64)
    for axis, angle in zip(order, angles):
        r = r @ _axis_rotation(axis, float(angle))
    return r


def rotate_lonlat(lonlat: Tensor, rotation: Tensor) -> Tensor:
    """Rotate points given as ``(lon, lat)`` degrees by a 3×3 rotation matrix.

    Parameters
    ----------
    lonlat : Tensor
        ``[..., 2]`` longitude then latitude, degrees.
    rotation : Tensor
        ``[3, 3]`` rotation matrix applied to the unit vectors (``u' = R u``).

    Returns
    -------
    Tensor
        ``[..., 2]`` rotated ``(lon, lat)`` in degrees, longitude in ``[-180, 180)``, dtype of ``lonlat``.

    Examples
    --------
    >>> import torch
    >>> r = euler_rotation_matrix((-60.0, 0.0, 0.0))
    >>> rotate_lonlat(torch.tensor([[0.0, 0.0]], dtype=torch.float64), r).round(decimals=6)
    tensor([[ 0., 60.]], dtype=torch.float64)
    """
    u = lonlat_to_unit(lonlat.to(torch.float64))
    rotated = u @ rotation.to(torch.float64).T
    return unit_to_lonlat(rotated).to(lonlat.dtype)
