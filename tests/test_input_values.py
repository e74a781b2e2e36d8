"""Inputs users bring: missing values in other forms than NaN, variables that are not the field, odd options."""

import pyproj  # noqa: F401  isort: skip

import warnings

import dask.array as dsa
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import geonp  # noqa: F401  registers ds.np
from geonp import geo
from geonp.errors import VariableNotFoundError, VariableTypeError


def _field(frames=3, ny=12, nx=14, seed=0):
    rng = np.random.default_rng(seed)
    y, x = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
    v = np.stack([np.sin(y / 4) + np.cos(x / 5) + 0.05 * t for t in range(frames)]).astype("float32")
    hide = rng.random(v.shape) < 0.3
    coords = {"time": pd.date_range("2020-01-01", periods=frames, freq="h"),
              "lat": np.linspace(50, 53, ny), "lon": np.linspace(-5, -1, nx)}
    return v, hide, coords


def test_fill_values_declared_in_attributes_and_infinities_are_gaps():
    """Data opened undecoded keep their _FillValue/missing_value in attrs: those values, and ±inf, are gaps."""
    v, hide, coords = _field()
    sentinel = np.where(hide, -9999.0, v).astype("float32")
    sentinel[0, 0, 0], sentinel[1, 0, 1] = np.inf, -np.inf
    nan = np.where(hide, np.nan, v).astype("float32")
    nan[0, 0, 0] = nan[1, 0, 1] = np.nan
    dims = ("time", "lat", "lon")
    raw = xr.Dataset({"t": (dims, sentinel, {"_FillValue": -9999.0, "units": "K"})}, coords=coords)
    ref = xr.Dataset({"t": (dims, nan, {"units": "K"})}, coords=coords)
    ds, _ = geo.select_variable(raw, "t")
    assert np.array_equal(np.isnan(ds.t.values), np.isnan(nan)) and "_FillValue" not in ds.t.attrs
    got, want = raw.np.infill("t"), ref.np.infill("t")
    np.testing.assert_array_equal(got.t_filled.values, want.t_filled.values)
    assert np.isfinite(got.t_filled.values).all()
    lazy = raw.assign(t=raw.t.copy(data=dsa.from_array(sentinel, chunks=(1, 12, 14))))
    lazy.t.attrs = {"missing_value": -9999.0}
    masked, _ = geo.select_variable(lazy, "t")
    assert isinstance(masked.t.data, dsa.Array)  # nothing computed
    assert int(np.isnan(masked.t.values).sum()) == int(np.isnan(nan).sum())


def test_float_data_still_packed_are_refused():
    v, _, coords = _field()
    ds = xr.Dataset({"t": (("time", "lat", "lon"), v, {"scale_factor": 0.01, "add_offset": 273.15})}, coords=coords)
    with pytest.raises(VariableTypeError, match=r"\['add_offset', 'scale_factor'\].*still packed.*xr.decode_cf"):
        geo.select_variable(ds, None)


def test_only_the_field_is_a_candidate_for_var():
    v, _, coords = _field()
    dims = ("time", "lat", "lon")
    flags = xr.Dataset({"mask": (dims, v > 0)}, coords=coords)
    with pytest.raises(VariableNotFoundError, match=r"no numeric data variable to predict \(data variables: mask \(b"):
        geo.select_variable(flags, None)
    lat2d, lon2d = np.meshgrid(coords["lat"], coords["lon"], indexing="ij")
    # 2-D latitude/longitude held as data variables (as some curvilinear files do): not candidates
    ds = xr.Dataset({"t": (dims, v), "latitude": (("lat", "lon"), lat2d), "longitude": (("lat", "lon"), lon2d)},
                    coords=coords)
    assert sorted(ds.data_vars) == ["latitude", "longitude", "t"]
    assert geo.select_variable(ds, None)[1] == "t"


def test_chunk_sizes_must_be_whole_numbers():
    from geonp.errors import ConfigError

    v, _, coords = _field()
    ds = xr.Dataset({"t": (("time", "lat", "lon"), v.copy())}, coords=coords)
    ds["t"][0, 0, 0] = np.nan
    with pytest.raises(ConfigError, match=r"chunks\['time'\]=2.5; expected a positive whole number"):
        ds.np.infill("t", chunks={"time": 2.5})


def test_station_outputs_are_cf_discrete_sampling_geometries():
    rng = np.random.default_rng(3)
    n = 40
    v = np.where(rng.random((3, n)) < 0.2, np.nan, rng.standard_normal((3, n)))
    ds = xr.Dataset({"t": (("time", "station"), v)}, coords={
        "time": pd.date_range("2020-01-01", periods=3, freq="D"), "lat": ("station", rng.uniform(38, 41, n)),
        "lon": ("station", rng.uniform(-108, -103, n))})
    assert ds.np.infill("t").attrs["featureType"] == "timeSeries"
    assert ds.isel(time=0).np.infill("t").attrs["featureType"] == "point"
    named = ds.assign_coords(station=[f"S{i:02d}" for i in range(n)])  # the series' identifier (a new-user report)
    assert named.np.infill("t").station.attrs["cf_role"] == "timeseries_id"


def test_cli_names_targets_crs_in_its_error(tmp_path, capsys):
    from geonp.cli import main

    v, _, coords = _field()
    v[0, 0, 0] = np.nan
    path = tmp_path / "in.nc"
    xr.Dataset({"t": (("time", "lat", "lon"), v)}, coords=coords).to_netcdf(path)
    code = main(["infill", str(path), "--out", str(tmp_path / "o.zarr"), "--targets", str(path),
                 "--targets-crs", "foo"])
    err = capsys.readouterr().err
    assert code == 2 and "reference system --targets-crs foo" in err and "leave --targets-crs out" in err
    assert "--crs foo" not in err


@pytest.mark.parametrize("calibrate", [False, True])
def test_results_scale_with_the_values_however_small(calibrate):
    """A field in units that make it tiny (a trace gas mole fraction, 1e-9) is infilled as the same field in K.

    An absolute floor of 1e-6 on each task's scale made a field of spread 1e-9 infill 12 times worse than
    linear interpolation; the floor is now a thousandth of the data's own spread.
    """
    v, hide, coords = _field(frames=6)
    ds = xr.Dataset({"t": (("time", "lat", "lon"), np.where(hide, np.nan, v - 1.0))}, coords=coords)
    ref = ds.np.infill("t", calibrate=calibrate)
    for s in (1e-9, 1e6):
        got = (ds * s).np.infill("t", calibrate=calibrate)
        np.testing.assert_allclose(got.t_mean.values / s, ref.t_mean.values, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got.t_std.values / s, ref.t_std.values, rtol=1e-3)
    fc_ref = ds.np.forecast("t", hours=2, calibrate=False)
    fc = (ds * 1e-9).np.forecast("t", hours=2, calibrate=False)
    np.testing.assert_allclose(fc.t_mean.values / 1e-9, fc_ref.t_mean.values, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(fc.t_std.values / 1e-9, fc_ref.t_std.values, rtol=1e-3)


def test_time_zone_aware_times_are_read_as_utc():
    """datetime64[ns, tz] times (pd.to_datetime(..., utc=True) then to_xarray()) are UTC instants.

    They were a raw TypeError from dask (with ERA5's valid_time beside them) or a TimeAxisError saying
    they were not dates.
    """
    v, hide, coords = _field(frames=4)
    ds = xr.Dataset({"t": (("time", "lat", "lon"), np.where(hide, np.nan, v))}, coords=coords)
    ds = ds.assign_coords(valid_time=("time", coords["time"]))
    berlin = pd.DatetimeIndex(coords["time"]).tz_localize("UTC").tz_convert("Europe/Berlin")
    aware = ds.assign_coords(time=berlin, valid_time=("time", berlin))
    assert isinstance(aware.time.dtype, pd.DatetimeTZDtype)
    got, want = aware.np.infill("t"), ds.np.infill("t")
    np.testing.assert_array_equal(got.time.values, want.time.values)  # UTC, without a zone
    np.testing.assert_array_equal(got.t_mean.values, want.t_mean.values)
    fc = aware.np.forecast("t", hours=1)
    np.testing.assert_array_equal(fc.t_mean.values, ds.np.forecast("t", hours=1).t_mean.values)


def test_a_dataarray_named_by_a_number_is_named_by_its_string():
    v, hide, coords = _field()
    da = xr.DataArray(np.where(hide, np.nan, v), dims=("time", "lat", "lon"), coords=coords, name=5)
    assert list(da.np.infill().data_vars) == ["5_mean", "5_std", "5_filled"]


def test_a_few_observed_points_per_frame_warn_that_the_intervals_are_unreliable():
    """Two observed corners per frame covered 0.11 of the gaps (std 0.22 K, RMSE 2.24 K on ERA5): a warning."""
    from geonp.errors import SparseDataWarning

    v, _, coords = _field(frames=4)
    corners = np.full(v.shape, np.nan, dtype="float32")
    corners[:, 0, 0], corners[:, -1, -1] = v[:, 0, 0], v[:, -1, -1]
    ds = xr.Dataset({"t": (("time", "lat", "lon"), corners)}, coords=coords)
    with pytest.warns(SparseDataWarning, match=r"'t' has 2 observed points per frame on average \(fewer than 10\)"):
        ds.np.infill("t")
    with pytest.warns(SparseDataWarning, match="observed points per frame"):
        ds.np.forecast("t", hours=1)
    v, hide, coords = _field(frames=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SparseDataWarning)
        xr.Dataset({"t": (("time", "lat", "lon"), np.where(hide, np.nan, v))}, coords=coords).np.infill("t")


def test_a_small_station_network_is_warned_only_when_its_intervals_are_not_calibrated():
    """Twelve Irish wind stations were told their std was likely far too small; calibrated, they covered 0.955."""
    from test_api import stations

    from geonp.errors import SparseDataWarning

    st = stations(n=9, times=6)  # 7 observed stations per frame
    with warnings.catch_warnings():
        warnings.simplefilter("error", SparseDataWarning)
        out = st.np.infill("tmax")  # station data are calibrated by default
    assert out.attrs["geonp_calibrated"].startswith("on held-out")
    with pytest.warns(SparseDataWarning, match=r"'tmax' has 7 observed points per frame.*calibrate=True"):
        st.np.infill("tmax", calibrate=False)


def test_a_lazily_read_file_is_not_loaded_by_a_lazy_call_and_its_infinities_are_gaps(tmp_path):
    """xr.open_dataset(path).np.infill(chunks=...) read the whole variable when called (to look for ±inf)."""
    v, hide, coords = _field(frames=6)
    values = np.where(hide, np.nan, v).astype("float32")
    values[1, 2, 3], values[4, 0, 0] = np.inf, -np.inf
    path = tmp_path / "t.nc"
    xr.Dataset({"t": (("time", "lat", "lon"), values)}, coords=coords).to_netcdf(path)
    with xr.open_dataset(path) as lazy_file:
        lazy = lazy_file.np.infill("t", chunks={"time": 3, "lat": 6})
        assert not lazy_file.t.variable._in_memory  # nothing read until computed
        got = lazy.compute()
        with xr.open_dataset(path) as f:
            want = f.load().np.infill("t")  # in memory: ±inf masked when selected
    for name in ("t_mean", "t_std", "t_filled"):
        np.testing.assert_allclose(got[name].values, want[name].values, atol=2e-4)
    assert np.isfinite(got.t_filled.values).all()


def test_a_direction_warns_to_predict_its_components():
    """A wind direction around north was averaged on a line: means of -50 to 440 degrees, errors up to 180."""
    from geonp.errors import CircularVariableWarning

    v, hide, coords = _field()
    ds = xr.Dataset({"wd": (("time", "lat", "lon"), np.where(hide, np.nan, 10 * v % 360),
                            {"standard_name": "wind_from_direction", "units": "degree"})}, coords=coords)
    with pytest.warns(CircularVariableWarning, match="looks like a direction .*sin and cos"):
        ds.np.infill("wd")
    ds["wd"].attrs = {"units": "K"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", CircularVariableWarning)
        ds.np.infill("wd")


def test_a_variable_never_below_zero_gets_no_negative_mean():
    """Synthetic rain (mostly zeros) got negative gap means, down to -1.3 mm/h (a new-user report)."""
    rng = np.random.default_rng(4)
    lat, lon = np.linspace(50, 55, 16), np.linspace(-6, 0, 18)
    bumps = np.maximum(0.0, rng.standard_normal((3, 16, 18)).cumsum(1).cumsum(2) / 6 - 0.5) ** 2
    v = np.where(rng.random(bumps.shape) < 0.6, np.nan, bumps)
    ds = xr.Dataset({"rain": (("time", "lat", "lon"), v, {"units": "mm h-1"})}, coords={
        "time": pd.date_range("2020-01-01", periods=3, freq="h"), "lat": lat, "lon": lon})
    out = ds.np.infill("rain", calibrate=False)
    assert float(out.rain_mean.min()) >= 0.0 and float(out.rain_filled.min()) >= 0.0
    shifted = ds.assign(rain=ds.rain - 1.0)  # values below 0 too: the mean is left as the model gives it
    below = shifted.np.infill("rain", calibrate=False)
    chunked = ds.np.infill("rain", calibrate=False, chunks={"time": 1, "lat": 8, "lon": 9})
    np.testing.assert_allclose(chunked.rain_mean.values, out.rain_mean.values, atol=1e-5)
    one = ds.copy(deep=True)  # a single value below 0: the variable is left as the model gives it, chunked or not
    one["rain"][0, 0, 0] = -0.01
    a, b = (one.np.infill("rain", calibrate=False, **kw) for kw in ({}, {"chunks": {"time": 1, "lat": 8, "lon": 9}}))
    assert float(a.rain_mean.min()) < 0
    np.testing.assert_allclose(a.rain_mean.values, b.rain_mean.values, atol=1e-5)
    noise = ds.copy(deep=True)  # numerical noise below 0 (ERA5 tp has -1e-6 m) still counts as 0: no mean below 0
    noise["rain"][0, 0, 0] = -1e-5 * float(np.nanmax(v))
    assert float(noise.np.infill("rain", calibrate=False).rain_mean.min()) >= 0.0
    clipped = out.rain_mean.values == 0.0
    assert clipped.any() and (below.rain_mean.values[clipped] < -1.0).any()  # the model went below 0 there
    np.testing.assert_allclose(below.rain_mean.values[~clipped], out.rain_mean.values[~clipped] - 1.0, atol=1e-3)


@pytest.mark.parametrize("reference", [None, "none"])
def test_a_forecast_of_a_variable_never_below_zero_stays_at_or_above_zero(reference):
    """Synthetic rain (72 % zeros): 43 % of the diurnal forecast's means were negative (down to -2.3 mm)."""
    t = np.arange(60)
    lat, lon = 50 + 0.25 * np.arange(10), -3 + 0.25 * np.arange(12)
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    rain = np.maximum(np.stack([np.sin(la * 3 + k / 2) * np.cos(lo * 2 - k / 3) for k in t]) - 0.3, 0.0) * 5
    ds = xr.Dataset({"tp": (("time", "latitude", "longitude"), rain.astype("float32"), {"units": "mm"})}, coords={
        "time": pd.date_range("2020-01-01", periods=len(t), freq="h"), "latitude": lat, "longitude": lon})
    fc = ds.np.forecast("tp", hours=6, reference=reference, calibrate=False)
    assert fc.attrs["geonp_reference"] == (reference or "diurnal")
    assert float(fc.tp_mean.min()) >= 0.0 and fc.tp_mean.attrs["units"] == "mm"
    one = ds.copy(deep=True)  # a value below 0 in the history: the means are left as the model gives them
    one["tp"][0, 0, 0] = -0.01
    below = one.np.forecast("tp", hours=6, reference=reference, calibrate=False).tp_mean.values
    clipped = fc.tp_mean.values == 0.0
    assert (below < 0).any() and clipped.any()
    np.testing.assert_allclose(below[~clipped], fc.tp_mean.values[~clipped], atol=0.05)


def test_a_grid_whose_extreme_is_a_missing_value_marker_warns(tmp_path):
    """A NetCDF's land written as -999 without a _FillValue was read as data, silently (gap means -791.5 to 184 °C)."""
    lat, lon = 50 + 0.25 * np.arange(8), -3 + 0.25 * np.arange(10)
    v = np.where(np.random.default_rng(0).random((3, 8, 10)) < 0.7, 12.0, np.nan)
    v[:, :2, :2] = -999.0
    ds = xr.Dataset({"sst": (("time", "lat", "lon"), v, {"units": "degC"})}, coords={
        "time": pd.date_range("2020-01-01", periods=3, freq="D"), "lat": lat, "lon": lon})
    with pytest.warns(UserWarning, match=r"the smallest value of 'sst' is -999, a common missing-value marker.*"
                                         r"na_values=\[-999\]"):
        ds.np.infill("sst", calibrate=False)
    ds.to_netcdf(tmp_path / "sst.nc")
    opened = geonp.open_dataset(tmp_path / "sst.nc", na_values=[-999])
    assert np.isnan(opened.sst.values[:, :2, :2]).all() and opened.sst.attrs["units"] == "degC"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(opened.sst.np.infill(calibrate=False).sst_mean.min()) > 11.0


def test_quality_flags_and_land_masks_are_not_the_variable_to_predict():
    """With sst, a CF quality flag and a land-sea mask, the CLI suggested --var quality_flag (a new-user report)."""
    lat, lon = 50 + 0.25 * np.arange(6), -3 + 0.25 * np.arange(7)
    v = np.where(np.random.default_rng(1).random((2, 6, 7)) < 0.7, 12.0, np.nan)
    flag = xr.DataArray(np.zeros((2, 6, 7), "int8"), dims=("time", "lat", "lon"),
                        attrs={"flag_values": [0, 1], "flag_meanings": "good bad"})
    ds = xr.Dataset({"sst": (("time", "lat", "lon"), v), "quality_flag": flag,
                     "lsm": (("lat", "lon"), np.zeros((6, 7)))},
                    coords={"time": pd.date_range("2020-01-01", periods=2, freq="D"), "lat": lat, "lon": lon})
    assert geo.select_variable(ds, None)[1] == "sst"
    with pytest.raises(VariableNotFoundError, match=r"2 numeric data variables \['sst', 'sst2'\]"):
        geo.select_variable(ds.assign(sst2=ds.sst), None)
    assert geo.select_variable(ds, "quality_flag")[1] == "quality_flag"  # named: taken as asked


def test_frames_missing_whole_do_not_change_the_others_infill():
    """Missing days inserted as empty frames made the data look sparser in space: other days moved by 0.34 here."""
    lat, lon = 50 + 0.25 * np.arange(12), -6 + 0.25 * np.arange(14)
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    truth = np.stack([np.sin(la * 2 + k / 3) + np.cos(lo * 1.5) for k in range(6)]) + 10
    obs = np.where(np.random.default_rng(0).random(truth.shape) < 0.5, truth, np.nan)
    ds = xr.Dataset({"v": (("time", "lat", "lon"), obs)}, coords={
        "time": pd.date_range("2020-01-01", periods=6, freq="D"), "lat": lat, "lon": lon})
    a = ds.np.infill("v", time_window=1, frames_per_task=1, calibrate=False)
    longer = ds.reindex(time=pd.date_range("2020-01-01", periods=9, freq="D"))  # three empty days after
    b = longer.np.infill("v", time_window=1, frames_per_task=1, calibrate=False)
    np.testing.assert_array_equal(a.v_mean.values[:5], b.v_mean.values[:5])
    seen = np.isfinite(obs).any(0)  # the empty days: kriged along time from each point's last observation
    assert np.isfinite(b.v_mean.values[6:][:, seen]).all()  # (the others keep the network's guess, if any)


def test_a_marker_is_read_from_the_variable_not_its_departures():
    """Infilling departures from each point's cycle, the marker check looked at the departures (never -999)."""
    t = pd.date_range("2000-01-01", periods=30, freq="MS")
    v = np.where(np.random.default_rng(2).random((30, 5, 6)) < 0.7, 12.0, np.nan)
    v[:, 0, 0] = -999.0
    ds = xr.Dataset({"sst": (("time", "lat", "lon"), v)},
                    coords={"time": t, "lat": 50 + 0.25 * np.arange(5), "lon": -3 + 0.25 * np.arange(6)})
    with pytest.warns(UserWarning, match="the smallest value of 'sst' is -999"):
        out = ds.np.infill("sst", calibrate=False)
    assert out.attrs["geonp_reference"] == "seasonal"
