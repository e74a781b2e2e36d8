"""Climate-model calendars (cftime dates) work like datetime64 times."""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pytest
import xarray as xr

import geonp  # noqa: F401  registers ds.np
from geonp import timeaxis
from geonp.errors import CoordinateError, TimeAxisError

cftime = pytest.importorskip("cftime")


def noleap(times=8, freq="6h", seed=0, gaps=0.3):
    t = xr.date_range("2001-02-27", periods=times, freq=freq, calendar="noleap", use_cftime=True)
    rng = np.random.default_rng(seed)
    v = 280 + rng.standard_normal((times, 5, 6)).astype("float32")
    v[rng.random(v.shape) < gaps] = np.nan
    return xr.Dataset({"tas": (("time", "lat", "lon"), v, {"units": "K"})},
                      coords={"time": t, "lat": 40 + np.arange(5.0), "lon": np.arange(6.0)})


def test_hours_count_in_the_data_calendar():
    t = np.array([cftime.DatetimeNoLeap(2001, 2, 28, 18), cftime.DatetimeNoLeap(2001, 3, 1, 0)])
    assert timeaxis.is_time(t) and timeaxis.time_step_hours(t) == 6.0  # no 29 February in noleap
    d360 = np.array([cftime.Datetime360Day(2001, 2, 30), cftime.Datetime360Day(2001, 3, 1)])
    assert timeaxis.time_step_hours(d360) == 24.0  # 30 February exists in a 360-day calendar
    np.testing.assert_allclose(timeaxis.time_hours(t)[0] - timeaxis.time_hours(t)[1], -6.0)


def test_infill_and_forecast_on_a_noleap_calendar():
    ds = noleap()
    out = ds.np.infill("tas", model="te-pt-tnp")
    assert out.tas_filled.notnull().all() and isinstance(out.time.values[0], cftime.DatetimeNoLeap)
    fc = ds.fillna(280.0).np.forecast("tas", hours=24, model="te-pt-tnp", init_time=["2001-02-28T00:00"])
    assert fc.init_time.values[0] == cftime.DatetimeNoLeap(2001, 2, 28)
    assert fc.valid_time.values[0, 3] == cftime.DatetimeNoLeap(2001, 3, 1, 0)  # 28 Feb 00 h + 24 h
    with pytest.raises(TimeAxisError, match="is not a time step of the data"):
        ds.fillna(280.0).np.forecast("tas", hours=6, model="te-pt-tnp", init_time="2001-02-27T03:00")


def test_fit_sees_the_hour_covariate_and_zarr_round_trips(tmp_path):
    ds = noleap()
    assert ds.np.fit("tas", steps=1, progress=False, model="te-pt-tnp").normaliser.covariates == ("hour",)
    fc = ds.fillna(280.0).np.forecast("tas", hours=6, model="te-pt-tnp")
    geonp.to_zarr(fc, tmp_path / "fc.zarr")
    back = xr.open_zarr(tmp_path / "fc.zarr", decode_times=xr.coders.CFDatetimeCoder(use_cftime=True))
    assert back.valid_time.values[0, 0] == fc.valid_time.values[0, 0]


def test_unsorted_cftime_is_refused():
    ds = noleap()
    with pytest.raises(CoordinateError, match="non-monotonic"):
        ds.isel(time=[0, 2, 1, 3]).np.infill("tas", model="te-pt-tnp")
