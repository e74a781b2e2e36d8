"""The bundled global land fraction (geonp.coastline) and the ``land=`` option that uses it."""

import pyproj  # isort: skip

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import geonp  # noqa: F401  registers ds.np
from geonp import coastline
from geonp.coastline import (
    TABLE_PATH,
    grid_land_fraction,
    land_fraction_at,
    land_fraction_smooth,
    station_land_fraction,
)
from geonp.errors import ConfigError, CoordinateError, ModelMismatchError, VariableNotFoundError
from geonp.geo import describe
from geonp.surface import COASTLINE, LAND_SMOOTH_CELLS, find_land
from geonp.trend import smooth_grid


def test_table_is_plain_arrays_read_without_pickle():
    with np.load(TABLE_PATH, allow_pickle=False) as z:
        assert z["land"].shape == (3600, 7200) and z["land"].dtype == np.uint8
        assert int(z["land"].max()) == int(z["points"]) == 36


def test_land_fraction_at__known_places_in_any_longitude_convention():
    lon = np.array([-40.0, 10.0, 200.0, -160.0, 370.0 - 360.0, -1.9])
    lat = np.array([30.0, 51.0, 0.0, 0.0, 51.0, 52.5])  # mid-Atlantic, Germany, Pacific twice, Germany, Birmingham
    np.testing.assert_array_equal(land_fraction_at(lon, lat), [0.0, 1.0, 0.0, 0.0, 1.0, 1.0])
    np.testing.assert_array_equal(land_fraction_at(np.array([350.0]), np.array([54.25])),
                                  land_fraction_at(np.array([-10.0]), np.array([54.25])))
    assert np.isfinite(land_fraction_at(np.array([0.0, 180.0]), np.array([90.0, -90.0]))).all()  # the poles


def _table_centres(lat_start: int, lon_start: int, ny: int, nx: int):
    with np.load(TABLE_PATH, allow_pickle=False) as z:
        lat0, lon0, dlat, dlon = (float(z[k]) for k in ("lat0", "lon0", "dlat", "dlon"))
    return lat0 + dlat * (lat_start + np.arange(ny)), lon0 + dlon * (lon_start + np.arange(nx))


def test_grid_land_fraction__a_coarse_cell_is_the_mean_of_its_fine_cells():
    """Around the Irish Sea: 0.25° cells centred on 5 × 5 blocks of table cells average exactly those."""
    lat, lon = _table_centres(700, 3500, 40, 60)  # 55.0 .. 53.0 N, 5.0 .. 2.0 W
    fine = grid_land_fraction(*np.meshgrid(lon, lat))
    np.testing.assert_array_equal(fine, land_fraction_at(*np.meshgrid(lon, lat)))  # one sample per 0.05° cell
    coarse = grid_land_fraction(*np.meshgrid(lon[2::5], lat[2::5]))
    want = fine.reshape(8, 5, 12, 5).mean((1, 3))
    np.testing.assert_allclose(coarse, want, atol=1e-6)
    assert coarse.min() == 0.0 and coarse.max() == 1.0 and ((coarse > 0.1) & (coarse < 0.9)).any()


def test_grid_land_fraction__across_the_dateline_descending_and_single_row():
    lat = np.arange(-15.0, -19.01, -0.25)  # Fiji, descending latitude
    lon360 = np.arange(176.0, 182.01, 0.25)
    lon180 = np.where(lon360 > 180, lon360 - 360, lon360)
    a = grid_land_fraction(*np.meshgrid(lon360, lat))
    b = grid_land_fraction(*np.meshgrid(lon180, lat))
    np.testing.assert_allclose(a, b)
    assert 0 < a.mean() < 0.5
    row = grid_land_fraction(*np.meshgrid(lon360, lat[8:9]))
    assert row.shape == (1, len(lon360)) and np.isfinite(row).all()


def test_grid_land_fraction__projected_cells_average_their_own_footprint():
    """25 km cells of EPSG:3035 over Denmark ≈ the mean of the 5 km cells inside them."""
    to_ll = pyproj.Transformer.from_crs(3035, 4326, always_xy=True)
    x5 = 4_200_000.0 + 5000.0 * np.arange(40)
    y5 = 3_600_000.0 + 5000.0 * np.arange(40)
    fine = grid_land_fraction(*to_ll.transform(*np.meshgrid(x5, y5)))
    coarse = grid_land_fraction(*to_ll.transform(*np.meshgrid(x5[2::5], y5[2::5])))
    assert np.abs(coarse - fine.reshape(8, 5, 8, 5).mean((1, 3))).mean() < 0.05
    assert 0.2 < coarse.mean() < 0.8  # land and sea both present


def coast(times=2, keep=0.5, seed=0):
    """A field 3 K warmer at sea over the real coast of south-west Britain (no mask in the data)."""
    lat = 50.0 + 0.25 * np.arange(16)
    lon = -6.0 + 0.25 * np.arange(20)
    lo, la = np.meshgrid(lon, lat)
    land = smooth_grid(grid_land_fraction(lo, la), LAND_SMOOTH_CELLS)
    rng = np.random.default_rng(seed)
    truth = np.stack([280 + 0.3 * np.sin(la * 1.7 + k / 4) + 3.0 * (1 - land) for k in range(times)])
    observed = np.where(rng.random(truth.shape) < keep, truth, np.nan)
    coords = {"time": pd.date_range("2019-03-01", periods=times, freq="h"), "latitude": lat, "longitude": lon}
    ds = xr.Dataset({"t2m": (("time", "latitude", "longitude"), observed.astype("float32"))}, coords=coords)
    return ds, truth


def test_land_option__auto_data_none_or_a_name():
    ds, _ = coast()
    assert describe(ds, "t2m", land="auto")[1].land == COASTLINE
    assert describe(ds, "t2m", land=True)[1].land == COASTLINE
    assert describe(ds, "t2m")[1].land is None  # describe's own default is the data's mask only
    with_lsm = ds.assign_coords(lsm=ds.t2m.isel(time=0, drop=True).notnull().astype(float))
    assert describe(with_lsm, "t2m", land="auto")[1].land == "lsm"  # the data's mask comes first
    for off in ("none", False, None):
        assert describe(with_lsm, "t2m", land=off)[1].land is None
    renamed = with_lsm.rename(lsm="my_mask")
    assert describe(renamed, "t2m", land="my_mask")[1].land == "my_mask"
    stations = xr.Dataset({"v": ("station", [1.0, np.nan, 3.0])},
                          coords={"lat": ("station", [50.0, 51.0, 52.0]), "lon": ("station", [-3.0, -2.0, -1.0])})
    assert describe(stations, "v", land="auto")[1].land == COASTLINE  # a disk around each station
    assert describe(stations, "v", land="data")[1].land is None


def test_land_option__bad_values_are_typed_errors():
    ds, _ = coast()
    with pytest.raises(VariableNotFoundError, match="land-sea mask 'lsm' is not a variable .* Expected one of them"):
        ds.np.infill("t2m", land="lsm")
    with pytest.raises(ConfigError, match=r"land=3 is not an option; expected one of \['auto', 'data', 'none'\]"):
        ds.np.infill("t2m", land=3)
    bad = ds.assign_coords(flag=("time", [0.0, 1.0]))
    with pytest.raises(CoordinateError, match="land-sea mask 'flag' has dims .*expected numeric or boolean values"):
        bad.np.infill("t2m", land="flag")


def test_find_land__bundled_fraction_is_smoothed_like_a_mask():
    ds, _ = coast()
    layout = describe(ds, "t2m", land="auto")[1]
    lo, la = np.meshgrid(ds.longitude.values, ds.latitude.values)
    got = find_land(ds, layout, lo.ravel(), la.ravel())
    np.testing.assert_allclose(got, smooth_grid(grid_land_fraction(lo, la), LAND_SMOOTH_CELLS).ravel())


def test_infill__auto_uses_the_coast_chunked_equals_unchunked_and_fitted_models_need_it(tmp_path):
    ds, truth = coast(times=3)
    gaps = ds.t2m.isnull().values
    auto = ds.np.infill("t2m", calibrate=False)
    plain = ds.np.infill("t2m", calibrate=False, land="none")

    def rmse(out):
        return float(np.sqrt(np.mean((out.t2m_mean.values[gaps] - truth[gaps]) ** 2)))

    assert rmse(auto) < rmse(plain)
    lazy = ds.np.infill("t2m", calibrate=False, halo=1000.0, chunks={"time": 1, "latitude": 8, "longitude": 10})
    full = ds.np.infill("t2m", calibrate=False, halo=1000.0)
    np.testing.assert_allclose(lazy.t2m_mean.compute(), full.t2m_mean, atol=2e-4)
    model = ds.np.fit("t2m", steps=0, progress=False)
    assert model.metadata["land_trend"]
    model.save(tmp_path / "m.geonp")
    with pytest.raises(ModelMismatchError, match="fitted with a land-sea mask"):
        ds.np.infill("t2m", model=tmp_path / "m.geonp", land="none")


def test_targets__a_named_mask_they_lack_falls_back_to_their_own_or_none():
    ds, _ = coast()
    with_mask = ds.assign_coords(my_mask=ds.t2m.isel(time=0, drop=True).notnull().astype(float))
    targets = xr.Dataset(coords={"latitude": ds.latitude[::2], "longitude": ds.longitude[::2]})
    out = with_mask.np.infill("t2m", targets=targets, land="my_mask", calibrate=False)
    assert np.isfinite(out.t2m_mean.values).all()
    from geonp.targets import describe_targets

    assert describe_targets(targets, land="my_mask")[1].land is None
    assert describe_targets(targets, land="auto")[1].land == COASTLINE


def test_station_land_fraction__the_share_of_land_in_a_disk():
    lon = np.array([10.0, -40.0, -8.25, -7.37])
    lat = np.array([51.0, 30.0, 51.8, 53.53])  # Germany, mid-Atlantic, Roches Point (a headland), Mullingar
    got = station_land_fraction(lon, lat)
    np.testing.assert_array_equal(got[:2], [1.0, 0.0])
    assert 0.2 < got[2] < 0.8 and got[3] == 1.0
    np.testing.assert_allclose(station_land_fraction(lon, lat, 0.0), land_fraction_smooth(lon, lat))
    wide = station_land_fraction(lon[2:3], lat[2:3], 50.0)
    assert wide != got[2] and 0.0 < wide[0] < 1.0


def test_station_land_fraction__moves_little_when_a_station_moves_a_little():
    # a coastal stretch scanned in steps of 0.0005 degrees (~35 m): with the cell of each sample the
    # fraction jumped (0.56 -> 0.62 for one step at a UK station: 0.2 K in its prediction)
    lon = -3.0 + np.arange(0, 0.2, 0.0005)
    f = station_land_fraction(lon, np.full_like(lon, 51.5))
    assert f.max() - f.min() > 0.2  # it does cross a coast
    assert np.abs(np.diff(f)).max() < 0.005
    # between cell centres the table is interpolated; at a centre it is the cell's value
    _, _, lat0, lon0, dlat, dlon = coastline._table()
    centre_lat, centre_lon = np.array([lat0 + 2830 * dlat]), np.array([lon0 + 3540 * dlon])
    np.testing.assert_allclose(land_fraction_smooth(centre_lon, centre_lat), land_fraction_at(centre_lon, centre_lat),
                               atol=1e-6)


def test_find_land__stations_get_the_disk_fraction_unsmoothed():
    lon, lat = np.array([-8.25, -7.37, -6.35]), np.array([51.8, 53.53, 52.28])
    stations = xr.Dataset({"v": ("station", [1.0, np.nan, 3.0])},
                          coords={"lat": ("station", lat), "lon": ("station", lon)})
    layout = describe(stations, "v", land="auto")[1]
    np.testing.assert_allclose(find_land(stations, layout, lon, lat), station_land_fraction(lon, lat))
