"""The units of a CRS's axes: coordinates in their own CF ``units`` brought into the CRS's (no torch here).

:func:`axis_scale` turns ``units="km"`` on a CRS in metres into a factor of 1000 (radians, grads,
feet and the spellings of CF/UDUNITS, PROJ and EPSG too); :func:`is_plain_lonlat` says whether a
geographic CRS's coordinates are longitude/latitude on the Earth as they stand.
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip  (before anything can load eccodes; see geonp/__init__.py)

import math
import re
from collections.abc import Hashable

import xarray as xr
from pyproj import CRS

from ..errors import CoordinateError, CRSError

__all__ = ["axis_scale", "is_plain_lonlat"]


def is_plain_lonlat(crs: CRS) -> bool:
    """Whether coordinates in ``crs`` are longitude/latitude on the Earth as they stand.

    True for an ordinary geographic CRS (WGS 84, ETRS89, ...: not derived, Greenwich meridian,
    degrees east and north, an Earth-sized ellipsoid). A rotated pole (CF ``rotated_latitude_longitude``,
    ``+proj=ob_tran``) is a *derived* geographic CRS: pyproj calls it geographic, yet its
    coordinates must be transformed to EPSG:4326 to be real positions; so must radians, grads or
    another prime meridian. False for projected CRSs.
    """
    if not crs.is_geographic or crs.is_derived or crs.to_json_dict().get("type") != "GeographicCRS":
        return False
    axes = [a for a in crs.axis_info if a.direction.lower() not in ("up", "down")]
    if len(axes) != 2 or {a.direction.lower() for a in axes} != {"east", "north"}:
        return False
    if any(not math.isclose(a.unit_conversion_factor, math.pi / 180.0, rel_tol=1e-9) for a in axes):
        return False
    meridian = crs.prime_meridian
    if meridian is not None and abs(meridian.longitude) > 1e-12:
        return False
    return crs.ellipsoid is None or 6.3e6 < crs.ellipsoid.semi_major_metre < 6.4e6


#: lengths in metres, by the spellings of CF/UDUNITS, PROJ and EPSG (lower case, ``_``/``-`` as spaces)
_LENGTHS = {
    **dict.fromkeys(("m", "metre", "meter"), 1.0),
    **dict.fromkeys(("km", "kilometre", "kilometer"), 1000.0),
    **dict.fromkeys(("dm", "decimetre", "decimeter"), 0.1),
    **dict.fromkeys(("cm", "centimetre", "centimeter"), 0.01),
    **dict.fromkeys(("mm", "millimetre", "millimeter"), 0.001),
    **dict.fromkeys(("ft", "foot", "feet", "international foot", "international feet", "ft intl", "foot intl"),
                    0.3048),
    **dict.fromkeys(("us survey foot", "us survey feet", "survey foot", "survey feet", "us ft", "ftus", "ft us",
                     "foot us", "us foot", "us feet"), 1200.0 / 3937.0),
    **dict.fromkeys(("yd", "yard"), 0.9144),
    **dict.fromkeys(("mi", "mile", "statute mile", "international mile"), 1609.344),
    **dict.fromkeys(("us survey mile", "us mi", "survey mile"), 1609.347218694437),
    **dict.fromkeys(("nmi", "nautical mile", "international nautical mile"), 1852.0),
}
#: angles in radians
_ANGLES = {
    **dict.fromkeys(("degree", "deg", "arc degree", "angular degree", "degree east", "degree north", "degree e",
                     "degree n", "degrees east", "degrees north", "degrees e", "degrees n"), math.pi / 180.0),
    **dict.fromkeys(("radian", "rad"), 1.0),
    **dict.fromkeys(("grad", "gon"), math.pi / 200.0),
}


def _unit(units: str) -> tuple[str, float] | None:
    """``("length", metres)`` or ``("angle", radians)`` of one unit, or ``None`` when it is not known."""
    key = re.sub(r"[\s_\-]+", " ", units.strip().lower())
    for k in (key, key[:-1] if key.endswith("s") and len(key) > 3 else key):  # plurals, but not "ms"
        if k in _LENGTHS:
            return "length", _LENGTHS[k]
        if k in _ANGLES:
            return "angle", _ANGLES[k]
    from pyproj.database import get_units_map

    for category, kind in (("linear", "length"), ("angular", "angle")):
        for name, unit in get_units_map(category=category).items():  # e.g. "Clarke's foot", "grad"
            if name.lower() in (units.strip().lower(), key):
                return kind, float(unit.conv_factor)
    return None


def axis_scale(coord: xr.DataArray, name: Hashable, crs: CRS) -> float:
    """The factor that brings ``coord``'s values, in its own CF ``units``, into the axis unit of ``crs``.

    No ``units`` attribute (or an empty one) means the CRS's own unit: 1. ``units="km"`` on a CRS in
    metres gives 1000, ``units="m"`` on one in US survey feet 3.28...

    Raises
    ------
    CoordinateError
        ``units`` is not a length or angle geonp knows.
    CRSError
        An angle on the axis of a projected CRS (x/y in degrees: longitude/latitude under another
        name), or a length on that of a geographic one.
    """
    units = coord.attrs.get("units")
    if units is None or not str(units).strip():
        return 1.0
    units = str(units)
    axes = [a for a in crs.axis_info if a.direction.lower() not in ("up", "down")]
    geographic = bool(crs.is_geographic)
    if axes:
        axis_name, to_si = axes[0].unit_name, float(axes[0].unit_conversion_factor)
    else:
        axis_name, to_si = ("degree", math.pi / 180.0) if geographic else ("metre", 1.0)
    expected, examples = ("an angle", "'degrees', 'radians'") if geographic else (
        "a length", "'m', 'km', 'ft', 'US survey foot'")
    found = _unit(units)
    if found is None:
        raise CoordinateError(
            f"coordinate {name!r} has units {units!r}, which geonp does not recognise; expected {expected} "
            f"({examples}) for the CRS {crs.name!r}, whose axes are in {axis_name}. Fix the attribute, e.g. "
            f"ds[{name!r}].attrs['units'] = {'degrees' if geographic else 'km'!r}, or drop it "
            f"(ds[{name!r}].attrs.pop('units')) if the values are in {axis_name}.")
    kind, si = found
    if (kind == "angle") != geographic:
        hint = (f"If {name!r} holds longitude or latitude, name it lon/lat (or set standard_name='longitude'/"
                "'latitude') or pass crs='EPSG:4326'" if not geographic else
                "If x/y are projected, pass their projected CRS with crs= (e.g. crs='EPSG:27700')")
        raise CRSError(
            f"coordinate {name!r} has units {units!r} ({'an angle' if kind == 'angle' else 'a length'}) but the "
            f"CRS {crs.name!r} is {'geographic' if geographic else 'projected'}, with axes in {axis_name}; "
            f"expected {expected} ({examples}). {hint}; otherwise fix the units attribute, e.g. "
            f"ds[{name!r}].attrs['units'] = {'degrees' if geographic else 'm'!r}.")
    return si / to_si
