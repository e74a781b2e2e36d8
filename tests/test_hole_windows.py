"""A tile inside a hole that is never observed reaches the hole's edge (geonp.tiling.window, Space.seen)."""

import pyproj  # noqa: F401  isort: skip

import warnings

import numpy as np
import pytest
from test_tiling import grid

import geonp  # noqa: F401  registers ds.np
from geonp.errors import NoContextWarning
from geonp.geo import describe
from geonp.planning import observed_stats


@pytest.fixture(scope="module")
def holed():
    ds = grid(nlat=24, nlon=30, times=3, keep=1.0)
    values = ds.t2m.values.copy()
    values[:, 6:18, 8:20] = np.nan  # the same 12 x 12 cells missing in every frame
    ds["t2m"] = (ds.t2m.dims, values, ds.t2m.attrs)
    return ds


def test_observed_stats_mark_the_points_never_observed(holed):
    seen = observed_stats(holed, describe(holed, "t2m")[1]).seen
    expected = np.ones((24, 30), dtype=bool)
    expected[6:18, 8:20] = False
    np.testing.assert_array_equal(seen, expected.ravel())


def test_the_middle_of_a_hole_never_observed_is_predicted(holed):
    """Small tiles (2 units, halo 1) in the hole held no observation: NaN and a NoContextWarning before."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoContextWarning)
        out = holed.np.infill("t2m", tile=2.0, halo=1.0, land="none")
    hole = out.t2m_mean.values[:, 6:18, 8:20]
    assert np.isfinite(hole).all() and np.isfinite(out.t2m_std.values).all()
    truth = grid(nlat=24, nlon=30, times=3, keep=1.0).t2m.values[:, 6:18, 8:20]
    assert np.sqrt(np.mean((hole - truth) ** 2)) < 1.0  # the field's spread is about 1.4
    chunked = holed.chunk({"latitude": 7, "longitude": 9}).np.infill("t2m", tile=2.0, halo=1.0, land="none")
    np.testing.assert_allclose(chunked.t2m_mean.values, out.t2m_mean.values, atol=2e-4)
