"""Targets far from every observation: the prior's std, or no prediction at all (geonp.inference._far_floors)."""

import pyproj  # noqa: F401  isort: skip

import warnings

import numpy as np
import pytest
import xarray as xr

import geonp  # noqa: F401  registers ds.np
from geonp.errors import FarFromDataWarning, NoContextWarning


def _field(n=48):
    lat = 50.0 + 0.1 * np.arange(n)
    lon = -3.0 + 0.15 * np.arange(n)
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    v = (283 + np.sin(la * 3.0) + np.cos(lo * 2.0)).astype("float32")
    return xr.Dataset({"t2m": (("latitude", "longitude"), v, {"units": "K"})},
                      coords={"latitude": lat, "longitude": lon})


def test_targets_on_another_continent_get_nan_and_a_warning():
    # they used to get a window of the 64 nearest points, however far, and a std of 0.15-0.2 K
    # thousands of km from data whose spread was 1.6 K
    ds = _field()
    far = xr.Dataset(coords={"lat": [20.0, 20.5], "lon": [-40.0, -39.5]})
    near = xr.Dataset(coords={"lat": [51.0, 51.5], "lon": [-2.0, -1.5]})
    with pytest.warns(NoContextWarning, match="targets far from all the data get none"):
        out = ds.np.infill("t2m", targets=far)
    assert np.isnan(out.t2m_mean.values).all() and np.isnan(out.t2m_std.values).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isfinite(ds.np.infill("t2m", targets=near).t2m_mean.values).all()


def test_targets_beyond_the_trained_distances_get_at_least_the_priors_std():
    # 8-10 spacing units south of a complete grid: the network's std hardly grew with the distance
    # (0.46-0.48 K against 0.42 at 6 units); it is now the spread of the window's data
    ds = _field()
    steps = np.array([1, 3, 6, 8, 9, 10])  # rows of 0.1 degrees (one spacing unit) south of the grid
    t = xr.Dataset(coords={"lat": ("station", 50.0 - 0.1 * steps), "lon": ("station", np.full(6, -1.0))})
    with pytest.warns(FarFromDataWarning, match="more than 7.5 spacing units"):
        out = ds.np.infill("t2m", targets=t, calibrate=False)
    std = out.t2m_std.values
    assert np.all(np.diff(std[:2]) > 0) and np.isfinite(std).all()
    assert std[3:].min() > 1.5 * std[:3].max()  # beyond 7.5 units: the prior's spread
    assert std[3:].min() > 0.5 * float(np.nanstd(ds.t2m.values))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds.np.infill("t2m", targets=t.isel(station=slice(0, 3)), calibrate=False)  # near: no warning
