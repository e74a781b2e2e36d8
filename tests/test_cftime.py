"""Climate-model calendars (cftime dates) work like datetime64 times; axes of calendar months count months."""

import pyproj  # noqa: F401  isort: skip

import datetime

import numpy as np
import pandas as pd
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
    with pytest.raises(TimeAxisError, match="'2001-02-29' is not a time of the data's 'noleap' calendar"):
        ds.fillna(280.0).np.forecast("tas", hours=6, model="te-pt-tnp", init_time="2001-02-29")


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


# ------------------------------------------------------------------------------------- calendar months


@pytest.mark.parametrize("start, freq, expected", [
    # month starts: the axis' own frames, then calendar months after its last time
    ("1990-01-01", "MS", [["1990-02-01", "1990-03-01", "1990-04-01"], ["1990-04-01", "1990-05-01", "1990-06-01"]]),
    # month ends stay month ends (28, 31, 30 days)
    ("1990-01-31", "ME", [["1990-02-28", "1990-03-31", "1990-04-30"], ["1990-04-30", "1990-05-31", "1990-06-30"]]),
    # mid-month labels keep their day
    ("1990-01-15", "MS", None),
])
def test_valid_times_of_a_monthly_axis_are_calendar_months(start, freq, expected):
    if expected is None:
        times = (np.array(xr.date_range("1990-01-01", periods=3, freq="MS").values)
                 + np.timedelta64(14, "D"))
        expected = [["1990-02-15", "1990-03-15", "1990-04-15"], ["1990-04-15", "1990-05-15", "1990-06-15"]]
    else:
        times = np.asarray(xr.date_range(start, periods=3, freq=freq).values)
    assert timeaxis.is_monthly(times)
    got = timeaxis.valid_times(times, np.array([0, 2]), np.arange(1, 4), timeaxis.time_step_hours(times))
    np.testing.assert_array_equal(got, np.array(expected, dtype="datetime64[ns]").astype(times.dtype))


def test_valid_times_of_monthly_cftime_and_of_hourly_axes():
    noleap_ends = np.asarray(xr.date_range("1990-01-31", periods=2, freq="ME", calendar="noleap", use_cftime=True))
    got = timeaxis.valid_times(noleap_ends, np.array([1]), np.arange(1, 3), timeaxis.time_step_hours(noleap_ends))
    assert list(got[0]) == [cftime.DatetimeNoLeap(1990, 3, 31), cftime.DatetimeNoLeap(1990, 4, 30)]
    d360 = np.asarray(xr.date_range("1990-11-16", periods=2, freq="30D", calendar="360_day", use_cftime=True))
    assert timeaxis.is_monthly(d360)  # 30-day months
    got = timeaxis.valid_times(d360, np.array([1]), np.arange(1, 3), 720.0)
    assert list(got[0]) == [cftime.Datetime360Day(1991, 1, 16), cftime.Datetime360Day(1991, 2, 16)]
    hourly = np.asarray(xr.date_range("1990-01-01", periods=3, freq="6h").values)
    assert not timeaxis.is_monthly(hourly)
    got = timeaxis.valid_times(hourly, np.array([2]), np.arange(1, 3), 6.0)
    np.testing.assert_array_equal(got[0], hourly[2] + np.array([6, 12], dtype="timedelta64[h]"))


def test_monthly_frames_are_one_model_time_unit_apart():
    """28- and 31-day months are one step each in model time, as leads count them."""
    from geonp import geo
    from geonp.chunked import build_problem
    from geonp.normalise import Normaliser

    t = xr.date_range("1990-01-01", periods=5, freq="MS")
    ds = xr.Dataset({"v": (("time", "station"), np.ones((5, 3)))},
                    coords={"time": t, "lat": ("station", [40.0, 41, 42]), "lon": ("station", [-105.0, -104, -103])})
    ds, layout = geo.describe(ds, "v")
    step = timeaxis.time_step_hours(t.values)
    problem = build_problem(ds, layout, Normaliser(time_unit_hours=step), observed_fraction=1.0)
    np.testing.assert_allclose(problem.t_units, np.arange(5))
    hourly = ds.assign_coords(time=xr.date_range("1990-01-01", periods=5, freq="2h"))
    problem = build_problem(*geo.describe(hourly, "v"), Normaliser(time_unit_hours=1.0), observed_fraction=1.0)
    np.testing.assert_allclose(problem.t_units, 2.0 * np.arange(5))


def test_monthly_station_forecast_labels_calendar_months():
    """Leads on monthly data are months: a forecast from January is valid on 1 February, 1 March, ..."""
    rng = np.random.default_rng(0)
    t = xr.date_range("1990-01-01", periods=24, freq="MS")
    n = 30
    season = 10 * np.sin(2 * np.pi * np.arange(24) / 12)[:, None]
    ds = xr.Dataset({"tmax": (("time", "station"), 15 + season + rng.standard_normal((24, n)), {"units": "degC"})},
                    coords={"time": t, "lat": ("station", rng.uniform(37, 41, n)),
                            "lon": ("station", rng.uniform(-109, -102, n))})
    fc = ds.np.forecast("tmax", steps=3, init_time=["1990-01-01", "1991-11-01"], calibrate=False)
    expected = np.array([["1990-02-01", "1990-03-01", "1990-04-01"], ["1991-12-01", "1992-01-01", "1992-02-01"]],
                        dtype="datetime64[ns]")
    np.testing.assert_array_equal(fc.valid_time.values, expected.astype(fc.valid_time.dtype))
    assert "calendar months" in fc.lead_time.attrs["comment"]
    same = ds.np.forecast("tmax", hours=3 * timeaxis.time_step_hours(t.values), init_time=["1990-01-01"],
                          calibrate=False)
    np.testing.assert_array_equal(same.tmax_mean.values[0], fc.tmax_mean.values[0])


@pytest.mark.parametrize("init", [np.datetime64("2003-02-28"), pd.Timestamp("2003-02-28"),
                                  datetime.datetime(2003, 2, 28), "2003-02-28T00:00:00", "2003-02-28 00:00:00",
                                  "2003-02-28T00:00:00.000", cftime.DatetimeGregorian(2003, 2, 28)])
def test_init_time_as_a_date_is_read_in_the_data_calendar(init):
    """A standard date names the same calendar day on a noleap axis (not the day its hours since 1970 fall on)."""
    days = np.asarray(xr.date_range("2001-01-01", periods=3 * 365, freq="D", calendar="noleap", use_cftime=True))
    (i,) = timeaxis.init_indices(days, init)
    assert days[i] == cftime.DatetimeNoLeap(2003, 2, 28)


def test_init_times_come_out_in_time_order():
    days = np.asarray(xr.date_range("2001-01-01", periods=30, freq="D", calendar="noleap", use_cftime=True))
    np.testing.assert_array_equal(timeaxis.init_indices(days, ["2001-01-20", "2001-01-10"]), [9, 19])
