"""Inputs new users give: a DEM infilled itself, boolean masks, elevation units, undecoded times, odd longitudes."""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import geonp  # noqa: F401  registers ds.np
from geonp.errors import ConfigError, CoordinateError, TimeAxisError
from geonp.geo import describe
from geonp.surface import G0, find_elevation, find_land


def hills(name="elevation", units="m", seed=0):
    """A gappy smooth DEM-like field on a 0.25° grid (half of the cells missing)."""
    lat = 50.0 + 0.25 * np.arange(14)
    lon = -6.0 + 0.25 * np.arange(16)
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    truth = 800 * np.exp(-((la - 51.5) ** 2 + (lo + 4) ** 2) / 2) + 100 * np.sin(lo * 2) ** 2
    keep = np.random.default_rng(seed).random(truth.shape) < 0.5
    da = xr.DataArray(np.where(keep, truth, np.nan).astype("float32"), dims=("latitude", "longitude"),
                      coords={"latitude": lat, "longitude": lon}, name=name, attrs={"units": units})
    return da, truth, keep


@pytest.mark.parametrize("name, units", [("elevation", "m"), ("z", "m**2 s**-2")])
def test_infill__a_variable_named_like_elevation_is_not_its_own_covariate(name, units):
    """Filling the gaps of a DEM called ``elevation``, or of geopotential ``z``, works and fills every gap."""
    da, truth, keep = hills(name, units)
    assert describe(da)[1].elevation is None
    out = da.np.infill(land="none", calibrate=False)
    mean = out[f"{name}_mean"].values
    assert np.isfinite(mean).all()
    rmse = float(np.sqrt(np.mean((mean - truth)[~keep] ** 2)))
    assert rmse < 0.5 * float(np.std(truth[~keep]))  # it did learn the field from its neighbours
    ref = da.rename("dem").np.infill(land="none", calibrate=False)  # the same values under a neutral name
    np.testing.assert_allclose(mean, ref.dem_mean.values, rtol=1e-6)


def test_describe__naming_the_variable_as_its_own_elevation_is_refused():
    da, _, _ = hills()
    with pytest.raises(CoordinateError, match="'elevation' is the variable being predicted"):
        describe(da, elevation="elevation")


def test_infill__a_boolean_land_sea_mask_equals_the_same_mask_as_numbers():
    da, _, _ = hills("t2m", "K")
    ds = (da / 100 + 280).to_dataset()
    land = xr.DataArray(np.broadcast_to(ds.longitude.values > -4.6, da.shape), dims=("latitude", "longitude"))
    results = {}
    for kind in ("bool", "int8", "float32"):
        masked = ds.assign_coords(lsm=land.astype(kind))
        assert describe(masked, "t2m")[1].land == "lsm"
        assert describe(masked, "t2m", land="lsm")[1].land == "lsm"
        np.testing.assert_array_equal(find_land(masked, describe(masked, "t2m")[1]),
                                      find_land(ds.assign_coords(lsm=land.astype("float64")),
                                                describe(masked, "t2m")[1]))
        results[kind] = masked.np.infill("t2m", calibrate=False, land="data").t2m_mean.values
    np.testing.assert_array_equal(results["bool"], results["int8"])
    np.testing.assert_array_equal(results["bool"], results["float32"])
    plain = ds.np.infill("t2m", calibrate=False, land="none").t2m_mean.values
    assert not np.array_equal(results["bool"], plain)  # the mask was used


def test_a_named_mask_of_text_names_its_dtype():
    da, _, _ = hills("t2m", "K")
    text = da.to_dataset().assign_coords(lsm=xr.full_like(da, "", dtype="<U4"))
    with pytest.raises(CoordinateError, match="dtype <U4; expected numeric or boolean"):
        describe(text, "t2m", land="lsm")


@pytest.mark.parametrize("units, factor", [
    ("m**2 s**-2", 1 / G0), ("m2 s-2", 1 / G0), ("m^2/s^2", 1 / G0), ("m2/s2", 1 / G0), ("m**2/s**2", 1 / G0),
    ("m2 s**-2", 1 / G0), ("m^2 s^-2", 1 / G0), ("J kg-1", 1 / G0), ("m", 1.0), ("metres above sea level", 1.0),
    ("", 1.0), ("km", 1000.0), ("ft", 0.3048), ("feet", 0.3048), ("foot", 0.3048), ("US survey foot", 1200 / 3937),
    ("masl", 1.0),
])
def test_find_elevation__converts_geopotential_km_and_feet_to_metres(units, factor):
    da, _, _ = hills("t2m", "K")
    elev = xr.DataArray(np.linspace(0.0, 4.0, da.size).reshape(da.shape), dims=da.dims, attrs={"units": units})
    ds, layout = describe(da.to_dataset().assign_coords(orography=elev))  # heights on Earth in every unit (≤ 4 km)
    assert layout.elevation == "orography"
    np.testing.assert_allclose(find_elevation(ds, layout), elev.values * factor)


@pytest.mark.parametrize("units", ["degrees_north", "degrees_east", "degree", "radian", "K", "degC", "m s-1"])
def test_describe__an_elevation_that_is_not_a_length_is_refused(units):
    da, _, _ = hills("t2m", "K")
    elev = xr.DataArray(np.ones(da.shape), dims=da.dims, attrs={"units": units})
    with pytest.raises(ConfigError, match=f"elevation 'height' has units '{units}'; expected a length"):
        describe(da.to_dataset().assign_coords(height=elev))


def test_infill__latitude_named_as_the_elevation_covariate_is_refused():
    """``geonp --covariates lat`` used latitude as elevation in metres; it is refused now."""
    da, _, _ = hills("t2m", "K")
    ds = da.to_dataset()
    ds.latitude.attrs["units"] = "degrees_north"
    with pytest.raises(ConfigError, match="elevation 'latitude' has units 'degrees_north'"):
        ds.np.infill("t2m", covariates="latitude", calibrate=False)


def frames(times=6, seed=1, keep=0.3):
    """A gappy smooth temperature field on hourly frames from 2019-03-01 (datetime time)."""
    lat = 50.0 + 0.25 * np.arange(10)
    lon = -6.0 + 0.25 * np.arange(12)
    k, la, lo = np.meshgrid(np.arange(times), lat, lon, indexing="ij")
    truth = 280 + np.sin(la * 1.3 + k / 5) + np.cos(lo * 1.1 - k / 7)
    observed = np.random.default_rng(seed).random(truth.shape) < keep
    return xr.DataArray(np.where(observed, truth, np.nan).astype("float32"), dims=("time", "latitude", "longitude"),
                        coords={"time": pd.date_range("2019-03-01", periods=times, freq="h"), "latitude": lat,
                                "longitude": lon}, name="t2m", attrs={"units": "K"})


def undecoded(da, units="hours since 2019-03-01"):
    """``da`` with its time as numbers and CF units, as opened with ``decode_times=False``."""
    return da.assign_coords(time=("time", np.arange(da.sizes["time"], dtype=float), {"units": units}))


def test_infill__numbers_with_cf_time_units_are_the_time_axis(tmp_path):
    da = frames()
    assert describe(undecoded(da))[1].time == "time"
    ref = da.np.infill(calibrate=False)
    out = undecoded(da).np.infill(calibrate=False)
    np.testing.assert_array_equal(out.time.values, da.time.values)
    np.testing.assert_array_equal(out.t2m_mean.values, ref.t2m_mean.values)
    da.to_netcdf(tmp_path / "t.nc")
    with xr.open_dataset(tmp_path / "t.nc", decode_times=False) as raw:
        assert not np.issubdtype(raw.time.dtype, np.datetime64)
        np.testing.assert_array_equal(raw.np.infill("t2m", calibrate=False).t2m_mean.values, ref.t2m_mean.values)


def test_forecast__numbers_with_cf_time_units_are_the_time_axis():
    da = frames(8, keep=1.0)
    ref = da.np.forecast(hours=2, calibrate=False)
    out = undecoded(da).np.forecast(hours=2, calibrate=False)
    np.testing.assert_array_equal(out.init_time.values, ref.init_time.values)
    np.testing.assert_array_equal(out.t2m_mean.values, ref.t2m_mean.values)


def test_numbers_with_time_units_that_cannot_be_decoded_are_refused():
    da = undecoded(frames(), units="hours since the start")
    with pytest.raises(TimeAxisError, match=r"'time' holds numbers \(float64\) with units 'hours since the start'"
                       r".*xr.decode_cf\(ds\)"):
        da.np.infill(calibrate=False)


def _csv(path, dates):
    rows = ["station,time,lat,lon,tmax"] + [f"a,{d},40.0,-105.0,{k}.5" for k, d in enumerate(dates)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_open_dataset__csv_dates_day_first(tmp_path):
    """``dayfirst=True`` reads 01/02/1990 as 1 February; dates that only read one way need no keyword."""
    months = pd.date_range("1990-01-01", periods=4, freq="MS").values
    ambiguous = _csv(tmp_path / "dm.csv", ["01/01/1990", "01/02/1990", "01/03/1990", "01/04/1990"])
    np.testing.assert_array_equal(geonp.open_dataset(ambiguous, dayfirst=True).time.values, months)
    with pytest.warns(UserWarning, match=r"dates like '01/02/1990' that read either way.*dayfirst=True"):
        month_first = geonp.open_dataset(ambiguous).time.values
    np.testing.assert_array_equal(month_first, pd.date_range("1990-01-01", periods=4, freq="D").values)
    clear = _csv(tmp_path / "clear.csv", ["01/02/1990", "13/02/1990", "25/02/1990"])  # 13, 25: days
    np.testing.assert_array_equal(geonp.open_dataset(clear).time.values,
                                  np.array(["1990-02-01", "1990-02-13", "1990-02-25"], dtype="datetime64[ns]"))
    us = _csv(tmp_path / "us.csv", ["02/01/1990", "02/13/1990"])  # 13: a day, so month first
    np.testing.assert_array_equal(geonp.open_dataset(us).time.values,
                                  np.array(["1990-02-01", "1990-02-13"], dtype="datetime64[ns]"))
