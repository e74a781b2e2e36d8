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


def test_a_tile_deep_in_a_corner_hole_reaches_the_data_on_both_sides(monkeypatch):
    """The 64 nearest observations lay along one side of a corner hole: ERA5 4.4 K off 12 cells in (coverage 0.34)."""
    import geonp.tiling as tiling

    ds = grid(nlat=30, nlon=36, times=1, keep=0.35)  # sparse: a unit of about 1.7 cells
    values = ds.t2m.values.copy()
    values[:, :9, :11] = np.nan  # a corner never observed
    ds["t2m"] = (ds.t2m.dims, values, ds.t2m.attrs)
    windows, real = [], tiling.window

    def recorded(problem, tile_idx, *args, **kwargs):
        sel, meta = real(problem, tile_idx, *args, **kwargs)
        windows.append((tile_idx, sel))
        return sel, meta

    monkeypatch.setattr(tiling, "window", recorded)
    out = ds.np.infill("t2m", tile=4.0, halo=1.0, land="none")
    assert np.isfinite(out.t2m_mean.values).all()
    (rows, cols), = [sel for idx, sel in windows if 0 in idx]  # the tile of the corner cell
    seen = np.isfinite(values[0, rows, cols])
    assert seen.sum() > 100  # the nearest 256 observed within 7.5 units of its reach (132); the 64 nearest before (78)
    assert seen[:, :11 - cols.start].any() and seen[9 - rows.start:, :].any()  # below the hole and beside it
