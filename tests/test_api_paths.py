"""The xarray layer's less travelled paths: DataArray forecast/fit, laziness, schedulers, forecast errors.

Added after an audit of issue 3's contract against the tests (2026-11-26); the main contract is in
``test_api.py``.
"""


import dataclasses
import warnings

import numpy as np
import pytest
import xarray as xr
from test_api import field, stations

import geonp  # noqa: F401  registers ds.np
import geonp.inference
from geonp import geo
from geonp.errors import CoordinateError, ModelMismatchError, NoDataError, TimeAxisError


@pytest.fixture(scope="module")
def full():
    ds, _ = field()
    return ds.fillna(ds.t2m.mean())


def test_dataarray_forecast_and_fit_equal_the_dataset_ones(full):
    """``da.np.forecast`` / ``da.np.fit`` are the Dataset calls on the array's variable."""
    a = full.t2m.np.forecast(hours=1)
    b = full.np.forecast("t2m", hours=1)
    np.testing.assert_array_equal(a.t2m_mean.values, b.t2m_mean.values)
    model = full.t2m.np.fit(steps=0, progress=False, covariates=[])
    assert isinstance(model, geonp.Model) and model.variables == ("t2m",)


def test_lazy_results_run_no_model_before_compute(full, monkeypatch):
    """A chunked infill or forecast predicts nothing until it is computed."""
    calls = []
    real = geonp.inference.predict_tasks

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(geonp.inference, "predict_tasks", counted)
    ds, _ = field()
    lazy_infill = ds.np.infill("t2m", chunks={"time": 2})
    lazy_forecast = full.np.forecast("t2m", hours=1, init_time=full.time.values[1:], chunks={"init_time": 1},
                                     calibrate=False)
    assert calls == []
    assert lazy_infill.t2m_mean.chunks is not None and lazy_forecast.t2m_mean.chunks is not None
    lazy_infill.t2m_mean.compute()
    after_infill = len(calls)
    lazy_forecast.t2m_mean.compute()
    assert after_infill > 0 and len(calls) > after_infill


def test_threads_scheduler_equals_the_eager_result():
    """The threaded scheduler with two workers gives the eager result."""
    ds, _ = field()
    ref = ds.np.infill("t2m", halo=1000.0)
    lazy = ds.np.infill("t2m", chunks={"time": 1}, halo=1000.0)
    got = lazy.t2m_mean.compute(scheduler="threads", num_workers=2)
    np.testing.assert_allclose(got, ref.t2m_mean, atol=2e-4)


def test_reference_input_errors(full):
    """All-NaN input and a single time step are refused with what to do."""
    with pytest.raises(NoDataError, match="every value of 't2m' is missing"):
        (full * np.nan).np.forecast("t2m", hours=1)
    with pytest.raises(TimeAxisError, match="at least two time steps.*Pass the past frames too"):
        full.isel(time=[0]).np.forecast("t2m", hours=1)
    with pytest.raises(NoDataError, match="every value of 't2m' is missing in the 4 frame.*mask_and_scale=True"):
        (full * np.nan).np.fit("t2m", steps=1, progress=False)


def test_forecast_extra_dims_are_independent_problems(full):
    """Each ensemble member is forecast on its own, as infill does."""
    other = 560.0 - full
    both = xr.concat([full, other], dim="member")
    out = both.np.forecast("t2m", hours=1, calibrate=False)
    assert out.t2m_mean.dims == ("member", "init_time", "lead_time", "latitude", "longitude")
    alone = other.np.forecast("t2m", hours=1, calibrate=False)
    np.testing.assert_allclose(out.t2m_mean.isel(member=1).values, alone.t2m_mean.values, atol=2e-4)


def test_pressure_levels_chunked_one_at_a_time():
    """A pressure_level dim chunked level by level equals the eager infill."""
    a, _ = field(seed=1)
    levels = xr.concat([a, a - 20.0], dim="pressure_level").assign_coords(pressure_level=[850, 500])
    ref = levels.np.infill("t2m")
    lazy = levels.np.infill("t2m", chunks={"pressure_level": 1})
    assert lazy.t2m_mean.dims[0] == "pressure_level"
    np.testing.assert_allclose(lazy.t2m_mean.compute().values, ref.t2m_mean.values, atol=2e-4)


def test_forecast_model_mismatch(full):
    """A model fitted on another variable or CRS is refused for forecasts, as for infill."""
    model = full.np.fit("t2m", task="forecast", steps=0, progress=False, covariates=[])
    with pytest.raises(ModelMismatchError, match="trained on \\['t2m'\\] but was given 'tmin'"):
        full.assign(tmin=full.t2m - 10).np.forecast("tmin", hours=1, model=model)
    proj = xr.Dataset({"v": (("time", "y", "x"), full.t2m.values)},
                      coords={"time": full.time, "y": 5000.0 * np.arange(8), "x": 5000.0 * np.arange(10)})
    with pytest.raises(ModelMismatchError, match="trained on coordinates in 'WGS 84' but the data are in"):
        proj.np.forecast("v", hours=1, model=dataclasses.replace(model, variables=("v",)), crs="EPSG:3035")


def test_longitude_below_minus_180():
    """Longitudes below −180 are refused like those above 360."""
    ds = xr.Dataset({"v": (("latitude", "longitude"), np.zeros((3, 4)))},
                    coords={"latitude": [50.0, 51.0, 52.0], "longitude": [-200.0, -199.0, -198.0, -197.0]})
    with pytest.raises(CoordinateError, match="longitude.*expected degrees in \\[-180, 360\\]"):
        geo.describe(ds)


def test_shipped_te_pt_tnp_infills_from_one_frame_each_side():
    """The shipped TE-PT-TNP carries its own time window (±1 frame); BSA-TNP keeps the default ±3."""
    assert geonp.Model.pretrained("te-pt-tnp").settings["half_window"] == 1
    assert geonp.Model.pretrained("bsa-tnp").settings["half_window"] == 3
    ds, _ = field(times=6)
    default = ds.np.infill("t2m", model="te-pt-tnp")
    explicit = ds.np.infill("t2m", model="te-pt-tnp", time_window=1)
    np.testing.assert_array_equal(default.t2m_mean.values, explicit.t2m_mean.values)
    assert not np.array_equal(default.t2m_mean.values, ds.np.infill("t2m", model="te-pt-tnp", time_window=3).t2m_mean)


def test_te_pt_tnp_window_holds_for_calibration_and_fit_too():
    """The shipped model's ±1 frame is also what its calibration on the input and a fit of it use."""
    st = stations(times=6)
    default = st.np.infill("tmax", model="te-pt-tnp")  # station data: calibrated on the input by default
    explicit = st.np.infill("tmax", model="te-pt-tnp", time_window=1)
    assert default.attrs["geonp_calibrated"] == explicit.attrs["geonp_calibrated"] != ""
    np.testing.assert_array_equal(default.tmax_std.values, explicit.tmax_std.values)
    wide = st.np.infill("tmax", model="te-pt-tnp", time_window=3)
    assert not np.array_equal(default.tmax_std.values, wide.tmax_std.values)
    assert st.np.fit("tmax", model="te-pt-tnp", steps=0, progress=False).settings["half_window"] == 1
    assert st.np.fit("tmax", model="bsa-tnp", steps=0, progress=False).settings["half_window"] == 3


def test_resuming_a_write_tells_runs_with_other_options_or_input_apart(tmp_path):
    """The store fingerprint of a lazy result: equal for the same run, different for other options or input.

    A partial store is resumed only when its fingerprint matches (``geonp.io.zarr``): a new-user test
    interrupted a default run, reran it with ``--halo 1`` and got a store mixing the two.
    """
    from geonp.io.zarr import _in_memory_digest

    ds, _ = field()
    path = tmp_path / "in.zarr"
    ds.to_zarr(path)
    lazy = xr.open_zarr(path)

    def digest(data, **kw):
        return _in_memory_digest(data.np.infill("t2m", chunks={"time": 2}, **kw))

    same = digest(lazy)
    assert digest(xr.open_zarr(path)) == same
    assert digest(lazy, tile=2.0) != same and digest(lazy, land="none") != same and digest(lazy, time_window=0) != same
    assert digest(ds.chunk({"time": 2})) == digest(ds.chunk({"time": 2}))   # in memory: by the values
    assert digest((ds + 1.0).chunk({"time": 2})) != digest(ds.chunk({"time": 2}))


def test_forecast_on_a_time_dim_of_plain_numbers_says_they_are_not_dates(full):
    numbers = full.assign_coords(time=np.arange(full.sizes["time"]))
    with pytest.raises(TimeAxisError, match="'time' holds int64 values such as .*, not dates.*Assign datetimes"):
        numbers.np.forecast("t2m", hours=1)


def test_a_dem_passed_for_a_variable_named_elevation_is_its_covariate():
    # covariates=<DataArray> was stored as an 'elevation' coordinate, which replaced the variable itself
    lat, lon = np.linspace(45, 46, 12), np.linspace(7, 8, 14)
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    dem = xr.DataArray(1000 + 500 * np.sin(la * 3) * np.cos(lo * 2), dims=("lat", "lon"),
                       coords={"lat": lat, "lon": lon})
    v = dem.values + np.random.default_rng(0).normal(0, 5, dem.shape)
    v[np.random.default_rng(1).random(v.shape) < 0.3] = np.nan
    ds = xr.Dataset({"elevation": (("lat", "lon"), v, {"units": "m"})}, coords={"lat": lat, "lon": lon})
    out = ds.np.infill("elevation", covariates=dem)
    assert set(out.data_vars) == {"elevation_mean", "elevation_std", "elevation_filled"}
    assert np.abs(out.elevation_mean.values - dem.values)[np.isnan(v)].mean() < 20.0  # the DEM's own values, ±5 m noise


def test_forecast_from_a_frame_without_observations_warns(full):
    """The default init (the last step) with no data yet: a warning naming the last observed time."""
    late = full.copy()
    late["t2m"] = full.t2m.where(full.time < full.time[-2])
    with pytest.warns(geonp.ShortHistoryWarning, match=r"has no observed value.*The last observed time before "
                                                        r"2019-03-01T03:00:00\.0+ is 2019-03-01T01:00") as rec:
        out = late.np.forecast("t2m", hours=1, calibrate=False)
    assert rec[0].filename == __file__
    assert out.t2m_mean.notnull().any()
    with warnings.catch_warnings():
        warnings.simplefilter("error", geonp.ShortHistoryWarning)
        late.np.forecast("t2m", hours=1, calibrate=False, init_time=full.time.values[1])


def test_a_forecast_from_an_undelivered_frame_is_calibrated_for_its_lead_from_the_data(full):
    """Initial frame and the one before it missing: +1 h is a +3 h forecast from the last observed frame.

    It used to take +1 h's calibration (ERA5: coverage 0.44 at +1 h, 0.95 now; docs/benchmarks.md).
    """
    from geonp.model import resolve_model

    late = full.copy()
    late["t2m"] = full.t2m.where(full.time < full.time[-2])
    base = resolve_model("bsa-tnp")
    scales = (1.0, 10.0, 100.0, 1000.0)

    def std(model):
        with pytest.warns(geonp.ShortHistoryWarning, match="a calibrated std is that of the lead from the last observ"):
            return late.np.forecast("t2m", hours=2, model=model, calibrate=False).t2m_std.values

    plain = std(dataclasses.replace(base, normaliser=dataclasses.replace(base.normaliser, lead_std_scale=(1.0,) * 4)))
    scaled = std(dataclasses.replace(base, normaliser=dataclasses.replace(base.normaliser, lead_std_scale=scales)))
    np.testing.assert_allclose(scaled[0, 0] / plain[0, 0], 100.0, rtol=1e-5)  # lead 1 + 2 frames late: the third
    np.testing.assert_allclose(scaled[0, 1] / plain[0, 1], 1000.0, rtol=1e-5)
    assert geonp.timeaxis.warn_empty_init(full.t2m, "time", full.time.values, np.array([3])) == 0


def test_frame_age_counts_back_to_the_newest_observed_frame():
    from geonp.calibrate_input import MAX_CALIBRATED_LEAD, calibrated_leads
    from geonp.late import frame_age

    v = np.ones((6, 3))
    v[[1, 3, 4]] = np.nan
    v[0, 0] = np.nan  # a frame with some values is observed
    np.testing.assert_array_equal(frame_age(v, np.array([0, 1, 2, 4, 5])), [0, 1, 0, 2, 0])
    assert frame_age(np.full((3, 2), np.nan), np.array([2]))[0] == 0  # nothing before it: no forecast either
    # the calibration covers the leads asked for (6 at least), as far as the history leaves 24 initial times
    assert calibrated_leads(2, 600, 6) == 6 and calibrated_leads(30, 600, 6, 24) == 30
    assert calibrated_leads(100, 600, 6) == MAX_CALIBRATED_LEAD and calibrated_leads(30, 60, 6, 24) == 7


def test_point_ages_count_back_to_the_newest_observation_near_each_target():
    from geonp.late import point_ages

    xy = np.stack(np.meshgrid(np.arange(4.0), np.arange(6.0), indexing="ij"), -1).reshape(-1, 2)  # 4 x 6, unit spacing
    v = np.ones((5, len(xy)))
    north = xy[:, 1] >= 3  # columns 3..5 not yet delivered in the last two frames
    v[3:, north] = np.nan
    targets = np.concatenate([xy, [[1.5, 40.0]]])  # and a target far from every observation
    ages = point_ages(v, xy, np.array([4, 2]), targets, look_back=3)
    np.testing.assert_array_equal(ages[0, :-1], np.where(xy[:, 1] >= 4, 2, 0))  # column 3 lies 1 from column 2
    assert ages[0, -1] == 0 and (ages[1] == 0).all()  # nothing near it: the frame's own age; on time at frame 2
    tight = point_ages(v, xy, np.array([4]), xy, look_back=3, radius=0.5)[0]
    np.testing.assert_array_equal(tight, np.where(north, 2, 0))
    v[:, :] = np.nan
    v[1, 0] = 1.0
    np.testing.assert_array_equal(point_ages(v, xy, np.array([4]), xy[:2], look_back=3), [[3, 3]])
    np.testing.assert_array_equal(point_ages(v, xy, np.array([4]), xy[:2], look_back=2), [[3, 3]])  # too old: the
    # frame's own age, as before


def test_late_data_over_part_of_the_domain_are_calibrated_for_their_lead_from_the_data(full):
    """The north not yet delivered while the south is on time: its std is that of lead + 2 (it was lead's).

    ERA5 north of 56 N three frames late: coverage 0.72-0.80 there before (docs/benchmarks.md).
    """
    from geonp.model import resolve_model

    late = full.copy()
    late["t2m"] = full.t2m.where((full.time < full.time[-2]) | (full.latitude < 51.0))
    base = resolve_model("bsa-tnp")

    def std(scales):
        model = dataclasses.replace(base, normaliser=dataclasses.replace(base.normaliser, lead_std_scale=scales))
        return late.np.forecast("t2m", hours=1, model=model, calibrate=False).t2m_std.values[0, 0]

    ratio = std((1.0, 10.0, 100.0, 1000.0)) / std((1.0,) * 4)
    np.testing.assert_allclose(ratio[full.latitude.values < 51.0], 1.0, rtol=1e-5)  # on time: lead 1
    np.testing.assert_allclose(ratio[-1], 100.0, rtol=1e-5)  # the northern row, far from the data: lead 1 + 2


def test_region_age_is_the_oldest_newest_observation_of_a_point_seen_in_the_48_hours_before():
    from geonp.late import region_age

    v = xr.DataArray(np.ones((60, 3, 4)), dims=("time", "y", "x"))
    assert region_age(v, "time", np.array([59]), 1.0) == 0
    v[50:, 0, :] = np.nan  # a row ten frames late at the last initial time
    v[:, 2, 3] = np.nan  # a point never observed does not count
    v[:5, 1, 1] = np.nan
    v[6:, 1, 1] = np.nan  # nor one last seen more than 48 hours before
    assert region_age(v, "time", np.array([59]), 1.0) == 10
    assert region_age(v, "time", np.array([30, 59]), 1.0) == 25  # at frame 30 the point last seen at 5 counts
    assert region_age(v, "time", np.array([45]), 1.0) == 40
    assert region_age(v, "time", np.array([59]), 6.0) == 0  # 6-hourly: nothing within the 8 frames before
    assert region_age(v, "time", np.array([59]), 24.0 * 30) == 0  # monthly: a silent station is out, not late


def test_region_age__scattered_gaps_between_observed_neighbours_are_no_late_region():
    """Counted per point, 30 % random gaps looked 2-35 frames late and left the context unfilled (28th test)."""
    from geonp.late import region_age

    rng = np.random.default_rng(0)
    yy, xx = np.meshgrid(np.arange(20.0), np.arange(30.0), indexing="ij")
    positions = np.stack([xx.ravel() * 25, yy.ravel() * 25, np.zeros(600)], -1)  # km, a 25-km grid
    v = xr.DataArray(np.where(rng.random((60, 20, 30)) < 0.3, np.nan, 1.0), dims=("time", "y", "x"))
    assert region_age(v, "time", np.array([59]), 1.0) >= 3  # alone: some point missed its last hours
    assert region_age(v, "time", np.array([59]), 1.0, positions, ("y", "x")) == 0
    late = v.copy()
    late[52:, :6, :] = np.nan  # six rows not delivered for eight hours: a late region
    assert region_age(late, "time", np.array([59]), 1.0, positions, ("y", "x")) >= 8
    # the points in the order of space_dims: transposed data read the same
    assert region_age(late.transpose("x", "time", "y"), "time", np.array([59]), 1.0, positions, ("y", "x")) >= 8
    edge = v.copy()
    edge[52:, :, 29] = np.nan  # one column late: its neighbours on time stand for it (as point_ages counts)
    assert region_age(edge, "time", np.array([59]), 1.0, positions, ("y", "x")) == 0


def test_nearby_ages__cubes_give_the_all_pairs_answer():
    from geonp.late import _nearby_ages

    rng = np.random.default_rng(1)
    for dims, scale in ((3, 6371.0), (2, 50.0)):
        positions = rng.uniform(-scale, scale, (800, dims))
        positions[5] = np.nan  # off the Earth: neither a point nor a neighbour
        ages = rng.integers(-1, 6, 800)
        reach = scale / 8
        d2 = ((positions[:, None, :] - positions[None, :, :]) ** 2).sum(-1)
        expected = ages.copy()
        for i in np.flatnonzero(ages > 0):
            if i == 5:
                continue
            near = (d2[i] <= reach * reach) & (ages >= 0)
            expected[i] = ages[near].min()
        np.testing.assert_array_equal(_nearby_ages(ages, positions, reach), expected)


def test_a_region_late_by_more_than_twice_the_context_frames_is_forecast_from_its_newest_data():
    """ERA5 north of 56 N ten frames late: half its means were NaN, its coverage 0.44; now none, 0.97."""
    t = np.arange(40)
    lat, lon = 50 + 0.25 * np.arange(8), -3 + 0.25 * np.arange(10)
    v = (280 + np.sin(t / 6.0)[:, None, None] + 0.3 * np.cos(lat / 2)[None, :, None]
         + 0.2 * np.sin(lon)[None, None, :] + 0.05 * t[:, None, None] * (lat[None, :, None] - 50))
    ds = xr.Dataset({"t2m": (("time", "latitude", "longitude"), v.astype("float32"))},
                    coords={"time": np.datetime64("2019-03-01T00") + t.astype("timedelta64[h]"), "latitude": lat,
                            "longitude": lon})
    late = ds.copy(deep=True)
    late["t2m"] = ds.t2m.where((ds.time < ds.time[-10]) | (ds.latitude < 51.0))
    from geonp.model import resolve_model

    base = resolve_model("bsa-tnp")

    def forecast(scales):
        model = dataclasses.replace(base, normaliser=dataclasses.replace(base.normaliser, lead_std_scale=scales))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return late.np.forecast("t2m", hours=2, model=model, calibrate=False)

    out = forecast((1.0,) * 16)
    assert np.isfinite(out.t2m_mean.values).all() and np.isfinite(out.t2m_std.values).all()
    # the northern row, far from the on-time data, takes the std of its lead from its newest data, ten frames back
    ratio = forecast(tuple(2.0 ** np.arange(16))).t2m_std.values[0] / out.t2m_std.values[0]
    np.testing.assert_allclose(ratio[0, -1], 2.0**10, rtol=1e-5)  # lead 1: 1 + 10 frames
    np.testing.assert_allclose(ratio[1, -1], 2.0**11, rtol=1e-5)
    np.testing.assert_allclose(ratio[0, ds.latitude.values < 51.0], 1.0, rtol=1e-5)  # on time: lead 1


def test_a_forecast_left_uncalibrated_for_want_of_history_says_so():
    """Before, only geonp_calibrated='no' told (the std alone missed ERA5 errors by up to 2 x either way)."""
    full, _ = field(times=6, keep=1.0)
    with pytest.warns(geonp.UncalibratedWarning, match="left uncalibrated: the history before the first initial"):
        out = full.np.forecast("t2m", hours=2)
    assert out.attrs["geonp_calibrated"] == "no"
    with warnings.catch_warnings():
        warnings.simplefilter("error", geonp.UncalibratedWarning)
        full.np.forecast("t2m", hours=2, calibrate=False)  # asked for: no warning
        fitted = full.np.fit("t2m", task="forecast", steps=0, progress=False, covariates=[], calibration_tasks=4)
        full.np.forecast("t2m", hours=2, model=fitted)  # a fitted model carries its own calibration
