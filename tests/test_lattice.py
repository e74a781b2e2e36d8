"""A target's prediction does not depend on the other targets asked for (geonp.lattice, geonp.reach)."""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pytest
import xarray as xr
from test_api import stations

import geonp  # noqa: F401  registers ds.np
from geonp import lattice
from geonp.data.tasks import FAR_GAP_MAX_FACTOR, FAR_GAP_UNITS
from geonp.reach import target_factors


@pytest.fixture(scope="module")
def network():
    return stations(n=60, times=2)[["tmax"]]  # no elevation: the targets need none


def _grid(n_lat=9, n_lon=11):
    return xr.Dataset(coords={"lat": np.linspace(38.2, 40.8, n_lat), "lon": np.linspace(-107.8, -103.2, n_lon)})


def test_a_point_alone_in_a_list_or_in_a_grid_gets_one_prediction(network):
    grid = network.np.infill("tmax", targets=_grid())
    la, lo = np.meshgrid(grid.lat.values, grid.lon.values, indexing="ij")
    points = xr.Dataset(coords={"lat": ("p", la.ravel()), "lon": ("p", lo.ravel())})
    listed = network.np.infill("tmax", targets=points)
    np.testing.assert_allclose(listed.tmax_mean.values, grid.tmax_mean.values.reshape(2, -1), atol=1e-5)
    for k in (0, 17, 50):  # before: up to 1.1 °C apart on Colorado stations
        alone = network.np.infill("tmax", targets=points.isel(p=[k]))
        np.testing.assert_allclose(alone.tmax_mean.values[:, 0], listed.tmax_mean.values[:, k], atol=1e-5)
        np.testing.assert_allclose(alone.tmax_std.values[:, 0], listed.tmax_std.values[:, k], atol=1e-5)
    clipped = network.np.infill("tmax", targets=_grid().isel(lat=slice(2, 6), lon=slice(3, 9)))
    np.testing.assert_allclose(clipped.tmax_mean.values, grid.tmax_mean.values[:, 2:6, 3:9], atol=1e-5)
    perm = np.random.default_rng(0).permutation(points.sizes["p"])
    again = network.np.infill("tmax", targets=points.isel(p=perm)).tmax_mean.transpose("time", "p")
    np.testing.assert_allclose(again.values, listed.tmax_mean.isel(p=perm).values, atol=1e-5)


def test_a_far_target_does_not_coarsen_its_neighbours(network):
    near = xr.Dataset(coords={"lat": ("p", [39.5]), "lon": ("p", [-105.5])})
    both = xr.Dataset(coords={"lat": ("p", [39.5, 43.0]), "lon": ("p", [-105.5, -105.5])})  # 220 km off the network
    a, b = network.np.infill("tmax", targets=near), network.np.infill("tmax", targets=both)
    np.testing.assert_allclose(a.tmax_mean.values[:, 0], b.tmax_mean.values[:, 0], atol=1e-5)
    np.testing.assert_allclose(a.tmax_std.values[:, 0], b.tmax_std.values[:, 0], atol=1e-5)


def test_target_factors_follow_each_target_distance():
    f = target_factors(np.array([0.0, FAR_GAP_UNITS, 1.5 * FAR_GAP_UNITS, 2 * FAR_GAP_UNITS, 100.0, np.inf, np.nan]))
    assert f[0] == f[1] == 1.0 and f[-1] == 1.0  # within reach (or unknown): as it is
    assert f[2] == pytest.approx(2 ** 0.75) and f[3] == pytest.approx(2.0)  # rounded up, 4 steps per doubling
    assert f[4] == f[5] == FAR_GAP_MAX_FACTOR


def test_lattice_cells_are_fixed_in_the_frame_and_cut_into_runs(network, monkeypatch):
    from geonp import geo
    from geonp.chunked import build_problem
    from geonp.normalise import Normaliser

    grid = _grid(30, 40)
    layout = geo.describe(network, "tmax")[1]
    target = (grid, geo.describe(grid.assign(v=(("lat", "lon"), np.zeros((30, 40)))), "v")[1])
    problem = build_problem(network, layout, Normaliser(), observed_fraction=1.0, targets=target)
    assert lattice.applies(problem)
    ids = lattice.lattice_ids(problem, 8.0)
    side = 8.0 * problem.unit_km
    np.testing.assert_array_equal(ids[:, :2], np.floor(problem.target.km / side))
    assert (ids[:, 2] == 0).all()
    monkeypatch.setattr(lattice, "MAX_TILE_POINTS", 10)
    runs = lattice.lattice_ids(problem, 8.0)
    for key in np.unique(runs[:, :2], axis=0):
        mine = np.flatnonzero((runs[:, :2] == key).all(1))
        assert np.bincount(runs[mine, 2]).max() <= 10 and np.all(np.diff(runs[mine, 2]) >= 0)
    centre, radius = lattice.cell(runs[0], problem, 8.0)
    assert np.all(np.abs(problem.target.km[0] - centre) <= side / 2) and radius == pytest.approx(side / np.sqrt(2))
