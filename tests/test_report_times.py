"""Times that mix report offsets: said, with the points and the fix (geonp.report_times)."""

import pyproj  # noqa: F401  isort: skip

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import geonp
from geonp.report_times import warn_mixed_times
from geonp.timeaxis import freq_string


def _stations(offset_stations=(), times=48, n=12, seed=0):
    """Hourly stations; those in ``offset_stations`` report 20 minutes past the hour instead."""
    hourly = pd.date_range("2020-01-01", periods=times, freq="h")
    rng = np.random.default_rng(seed)
    ids = [f"S{i:02d}" for i in range(n)]
    rows = []
    for i, sid in enumerate(ids):
        t = hourly + (pd.Timedelta(minutes=20) if i in offset_stations else pd.Timedelta(0))
        rows.append(pd.Series(10 + np.sin(np.arange(times) / 5) + 0.1 * rng.standard_normal(times), index=t, name=sid))
    frame = pd.concat(rows, axis=1)
    ds = xr.Dataset({"t": (("time", "station"), frame.values)},
                    coords={"time": frame.index.values, "station": ids,
                            "lat": ("station", 50 + rng.random(n)), "lon": ("station", -3 + rng.random(n))})
    return ds


def test_stations_off_the_common_step_are_named_with_the_fix():
    ds = _stations(offset_stations=(3, 7))
    with pytest.warns(geonp.MixedTimesWarning, match=r"48 of the 96 times of 'time' lie off the 1 h step .* 2 points "
                                                     r"\(S03, S07\).*ds.resample\(time='1h'\).mean\(\)"):
        assert warn_mixed_times(ds.t, "time")
    with pytest.warns(geonp.MixedTimesWarning):  # an infill says so too (it ran silently, 2.5 x worse)
        ds.isel(time=slice(0, 24)).np.infill("t", calibrate=False)


def test_regular_times_and_frames_missing_between_them_are_not_mixed(monkeypatch):
    ds = _stations()
    with warnings.catch_warnings():
        warnings.simplefilter("error", geonp.MixedTimesWarning)
        assert not warn_mixed_times(ds.t, "time")
        assert not warn_mixed_times(ds.t.isel(time=[0, 1, 2, 5, 6, 9, 10, 11]), "time")  # irregular, on the hour
        monkeypatch.setattr("geonp.report_times.LAZY_VALUES", 100)  # a large lazy input is not read at call time
        assert not warn_mixed_times(_stations(offset_stations=(3,)).t.chunk({"time": 8}), "time")
    with pytest.warns(geonp.MixedTimesWarning):  # (in memory it is looked at)
        assert warn_mixed_times(_stations(offset_stations=(3,)).t, "time")


def test_the_hint_of_an_irregular_axis_is_a_frequency_pandas_reads_exactly():
    assert [freq_string(h) for h in (1 / 3, 1.0, 3.0, 24.0, 0.3333333)] == ["20min", "1h", "3h", "24h", "20min"]
    ds = _stations(offset_stations=(3,))
    with pytest.raises(geonp.TimeAxisError, match=r"resample\(time='20min'\).asfreq\(\), or, where some points "
                                                  r"report at other times than the rest \(a MixedTimesWarning"):
        with pytest.warns(geonp.MixedTimesWarning, match=r"resample\(time='1h'\).mean\(\)"):
            ds.np.forecast("t", hours=3)
    fixed = ds.resample(time="1h").mean()  # the fix it names: one frame an hour, every station in it
    assert fixed.sizes["time"] == 48 and int(fixed.t.isnull().sum()) == 0


def test_opening_a_station_csv_with_mixed_report_minutes_says_so(tmp_path):
    """open_dataset of such a CSV was silent; the warning came only at infill or forecast."""
    ds = _stations(offset_stations=(5,), times=6)
    frame = ds.t.to_dataframe().dropna().reset_index()
    frame["lat"], frame["lon"] = ds.lat.values[[int(s[1:]) for s in frame.station]], -3.0
    path = tmp_path / "st.csv"
    frame.to_csv(path, index=False)
    with pytest.warns(geonp.MixedTimesWarning, match=r"\(S05\)"):
        opened = geonp.open_dataset(path)
    assert opened.sizes["time"] == 12
