"""A global grid's predictions do not depend on its longitude convention (0..360 or −180..180).

Tiles of gap filling are cut at fixed meridians (:func:`geonp.tiling.grid_tiles`), ``targets=`` on
global data are tiled on a lattice fixed on the sphere (:mod:`geonp.lattice`), and the bundled land
fraction is smoothed across the grid's ends (:func:`geonp.trend.smooth_grid`).
"""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import geonp  # noqa: F401  registers ds.np
from geonp import lattice
from geonp.chunked import Space
from geonp.frames import radius_km
from geonp.tiling import grid_tiles
from geonp.trend import smooth_grid


def _field(lat, lon):
    la, lo = np.deg2rad(np.meshgrid(lat, lon, indexing="ij"))
    return 285.0 - 25.0 * np.sin(la) ** 2 + 2.0 * np.cos(2 * lo) * np.cos(la) + np.sin(3 * la + lo)


@pytest.fixture(scope="module")
def globe():
    lat, lon = np.arange(87.5, -90.0, -5.0), np.arange(0.0, 360.0, 5.0)
    truth = np.stack([_field(lat, lon), _field(lat, lon) + 0.5])
    observed = np.where(np.random.default_rng(4).random(truth.shape) < 0.6, truth, np.nan)
    coords = {"time": pd.date_range("2000-01-01", periods=2), "lat": lat, "lon": lon}
    return xr.Dataset({"tas": (("time", "lat", "lon"), observed, {"units": "K"})}, coords=coords)


def _to_180(ds):
    return ds.assign_coords(lon=(ds.lon + 180.0) % 360.0 - 180.0).sortby("lon")


def _to_360(ds):
    return ds.assign_coords(lon=ds.lon % 360.0).sortby("lon")


def test_gap_filling_a_rolled_global_grid_gives_the_same_values(globe):
    """A grid stored from 0° or from −180° gives the same values.

    Before, the tiles started at the array's first meridian, and the land fraction's smoothing at its
    edge (answers up to 0.38 K apart on a 5° grid).
    """
    a = globe.np.infill("tas")  # the bundled land fraction, smoothed across 0°
    b = _to_360(_to_180(globe).np.infill("tas"))
    for name in ("tas_mean", "tas_std"):
        np.testing.assert_allclose(b[name].values, a[name].values, atol=2e-4)


def test_global_targets_in_either_convention_get_the_same_values(globe):
    """Targets asked for in either convention get the same values (they were tiled by their own grid)."""
    lat = np.arange(-88.75, 90.0, 2.5)
    east = xr.Dataset(coords={"lat": lat, "lon": np.arange(1.25, 360.0, 2.5)})
    a = globe.np.infill("tas", targets=east)
    b = _to_360(globe.np.infill("tas", targets=_to_180(east)))
    np.testing.assert_allclose(b.tas_mean.values, a.tas_mean.values, atol=2e-4)
    np.testing.assert_allclose(b.tas_std.values, a.tas_std.values, atol=2e-4)
    for lo, la in ((1.25, 41.25), (181.25, -1.25), (358.75, 88.75)):  # alone, and across the seam
        point = xr.Dataset(coords={"lat": ("p", [la]), "lon": ("p", [(lo + 180.0) % 360.0 - 180.0])})
        alone = globe.np.infill("tas", targets=point)
        np.testing.assert_allclose(alone.tas_mean.values[:, 0], a.tas_mean.sel(lat=la, lon=lo).values, atol=2e-4)
    truth = np.stack([_field(lat, east.lon.values), _field(lat, east.lon.values) + 0.5])
    assert np.sqrt(np.mean((a.tas_mean.values - truth) ** 2)) < 0.5


def _space(lon, lat):
    lo, la = np.meshgrid(lon, lat)
    return Space(("lat", "lon"), lo.shape, lo.ravel(), la.ravel(), None, None, None)


def test_grid_tiles__sectors_from_minus_180_with_0_and_180_as_edges():
    lat = np.arange(-80.0, 81.0, 10.0)
    east, west = np.arange(0.0, 360.0, 2.5), np.arange(-180.0, 180.0, 2.5)
    a = grid_tiles(_space(east, lat), (5, 9), periodic=True)[1]
    b = grid_tiles(_space(west, lat), (5, 9), periodic=True)[1]
    count = len(np.unique(a))
    assert count % 2 == 0 and np.bincount(a).max() <= 9
    np.testing.assert_array_equal(a[np.argsort(east % 360)], b[np.argsort(west % 360)])  # the same places
    assert np.all(np.diff(b) >= 0) and a[0] == count // 2 and a[-1] == count // 2 - 1  # 0° and 180° are edges
    centres = np.arange(-178.75, 180.0, 2.5)  # cell centres, from inside the first sector: sectors all the same
    c = grid_tiles(_space(centres, lat), (5, 9), periodic=True)[1]
    assert c[0] == 0 and c[-1] == count - 1 and np.all(np.diff(c) >= 0) and len(np.unique(c)) == count


def test_sphere_lattice__cells_hold_their_points_and_caps_sit_on_the_poles():
    side = 1200.0
    rng = np.random.default_rng(0)
    lon, lat = rng.uniform(-180.0, 360.0, 3000), np.degrees(np.arcsin(rng.uniform(-1.0, 1.0, 3000)))
    cells = lattice._sphere_cells(lon, lat, side)
    np.testing.assert_array_equal(cells, lattice._sphere_cells(np.mod(lon + 180.0, 360.0) - 180.0, lat, side))
    for key in np.unique(cells, axis=0):
        mine = (cells == key).all(1)
        centre, reach = lattice._sphere_cell(int(key[0]), int(key[1]), side)
        assert radius_km(lon[mine], lat[mine], (centre[0], centre[1])) <= reach + 1e-6
        assert reach < 1.0 * side  # about the half-diagonal of a cell of ``side``
    count = lattice._bands(side)[0]
    for band, pole in ((0, -90.0), (count - 1, 90.0)):
        assert set(cells[cells[:, 0] == band, 1].tolist()) == {0}
        assert lattice._sphere_cell(band, 0, side)[0][1] == pole


def test_smooth_grid__wraps_an_axis_that_closes_on_itself():
    values = np.zeros((3, 12))
    values[:, 0] = 1.0
    wrapped = smooth_grid(values, 1.0, wrap=1)
    assert wrapped[0, -1] == pytest.approx(wrapped[0, 1]) and wrapped.sum() == pytest.approx(values.sum())
    edge = smooth_grid(values, 1.0)
    assert edge[0, -1] == pytest.approx(0.0, abs=1e-12) and edge[0, 0] > wrapped[0, 0]


def test_a_global_grid_in_any_order_gives_the_same_values_in_its_own_order(globe):
    """Descending from 180°, rolled, north down, chunked: the same values, in the input's own order and chunks.

    Longitudes 180, 175, ..., -175 cut sector 0 between the first and the last columns: a raw ValueError,
    then tiles of their own (up to 0.33 K from the ascending grid; 0.72 K rolled by 37 columns, 28th test).
    """
    flipped = _to_180(globe).isel(lon=slice(None, None, -1))
    flipped = flipped.roll(lon=-int(np.flatnonzero(flipped.lon.values == -180.0)[0]), roll_coords=True)
    flipped = flipped.assign_coords(lon=np.where(flipped.lon == -180.0, 180.0, flipped.lon))
    assert flipped.lon.values[0] == 180.0 and np.all(np.diff(flipped.lon.values) < 0)
    ref = globe.np.infill("tas")
    for ds in (flipped, globe.roll(lon=37, roll_coords=True), globe.isel(lat=slice(None, None, -1)),
               flipped.chunk(lon=30)):
        out = ds.np.infill("tas")
        np.testing.assert_array_equal(out.lon.values, ds.lon.values)  # in the input's own order
        np.testing.assert_array_equal(out.lat.values, ds.lat.values)
        back = out.assign_coords(lon=out.lon % 360.0).sortby("lon").sortby("lat", ascending=False)
        for name in ("tas_mean", "tas_std", "tas_filled"):
            np.testing.assert_allclose(back[name].values, ref[name].values, atol=1e-4)
    assert out.tas_mean.chunks[2] == (30, 30, 12)  # the input's chunks
    fc = flipped.np.forecast("tas", steps=1, calibrate=False)  # a forecast too, in the input's order
    np.testing.assert_array_equal(fc.lon.values, flipped.lon.values)
    fc_ref = globe.np.forecast("tas", steps=1, calibrate=False)
    np.testing.assert_allclose(fc.tas_mean.sortby(fc.lon % 360.0).values, fc_ref.tas_mean.values, atol=1e-4)


def test_grid_tiles__sectors_whatever_column_the_array_starts_at_and_its_direction():
    lat, lon = np.arange(-80.0, 81.0, 10.0), np.arange(-180.0, 180.0, 2.5)
    ref = grid_tiles(_space(lon, lat), (5, 9), periodic=True)[1]
    for stored in (np.roll(lon, 37), lon[::-1], np.roll(lon[::-1], -1)):  # -1: from 180 (as -180) descending
        got = grid_tiles(_space(stored, lat), (5, 9), periodic=True)[1]
        np.testing.assert_array_equal(got[np.argsort(stored)], ref)  # each meridian in its own sector


def test_canonical_grid__a_global_grid_stored_anyhow_is_one_array():
    from geonp.geo import canonical_grid, describe

    lat, lon = np.arange(-60.0, 61.0, 30.0), np.arange(0.0, 360.0, 30.0)
    ds = xr.Dataset({"v": (("lat", "lon"), np.arange(60.0).reshape(5, 12))}, coords={"lat": lat, "lon": lon})
    ref = canonical_grid(_to_180(ds), describe(_to_180(ds), "v")[1])[0]
    np.testing.assert_array_equal(ref.lon.values, np.arange(-180.0, 180.0, 30.0))
    assert ref.lat.values[0] == 60.0  # north up
    for stored in (ds, ds.roll(lon=5, roll_coords=True), ds.isel(lon=slice(None, None, -1))):
        got, none = canonical_grid(stored, describe(stored, "v")[1], None)
        assert none is None and got.identical(ref)


@pytest.mark.slow
def test_a_calibrated_global_forecast_is_the_same_in_any_longitude_order():
    """Rolled or descending: a TypeError in the initial frame's window; from 0 against -180: 0.28 K (29th test)."""
    lat, lon = np.arange(-90.0, 90.1, 10.0), np.arange(-180.0, 180.0, 10.0)
    la, lo = np.deg2rad(np.meshgrid(lat, lon, indexing="ij"))
    rng = np.random.default_rng(0)
    k = np.arange(66)[:, None, None]
    v = 288 - 30 * np.sin(la) ** 2 + 4 * np.cos(2 * np.pi * k / 24 + lo) * np.cos(la) + 0.3 * rng.standard_normal(
        (66, *la.shape))
    ds = xr.Dataset({"tas": (("time", "lat", "lon"), v.astype("float32"))},
                    coords={"time": pd.date_range("2020-01-01", periods=66, freq="h"), "lat": lat, "lon": lon})
    ref = ds.np.forecast("tas", hours=2)
    assert ref.attrs["geonp_calibrated"].startswith("on the 66 frames")
    for stored in (_to_360(ds), ds.roll(lon=-13, roll_coords=True), ds.isel(lon=slice(None, None, -1))):
        out = stored.np.forecast("tas", hours=2)
        back = out.assign_coords(lon=(out.lon + 180.0) % 360.0 - 180.0).sortby("lon")
        for name in ("tas_mean", "tas_std"):
            np.testing.assert_allclose(back[name].values, ref[name].values, atol=1e-4)
