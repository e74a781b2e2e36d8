"""Forecasting departures from a reference (diurnal), and the per-lead calibration of the mean."""

import pyproj  # noqa: F401  isort: skip

import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import geonp  # noqa: F401  registers ds.np
from geonp import reference
from geonp.calibrate_input import AUTO_CALIBRATION_MIN_INITS, calibration_inits
from geonp.calibration import mean_weights, shrunk_mean_weights
from geonp.errors import ConfigError, MissingReferenceWarning, ModelMismatchError, TimeAxisError
from geonp.model import resolve_model


def hourly(times=40, nlat=6, nlon=7, seed=0, freq="h"):
    """Make a field with a daily cycle plus a slowly moving anomaly, fully observed."""
    rng = np.random.default_rng(seed)
    t = pd.date_range("2019-03-01", periods=times, freq=freq)
    lat = 52.0 + 0.25 * np.arange(nlat)
    lon = -2.0 + 0.25 * np.arange(nlon)
    hours = np.arange(times)[:, None, None]
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    v = (280 + 4 * np.sin(2 * np.pi * hours / 24) + np.sin(la * 2 + hours / 20) + np.cos(lo * 1.5)
         + 0.05 * rng.standard_normal((times, nlat, nlon)))
    attrs = {"units": "K", "standard_name": "air_temperature"}
    return xr.Dataset({"t2m": (("time", "latitude", "longitude"), v.astype("float32"), attrs)},
                      coords={"time": t, "latitude": lat, "longitude": lon})


@pytest.fixture(scope="module")
def data():
    return hourly()


def test_resolve_picks_diurnal_only_where_it_can_work():
    assert reference.resolve("auto", 1.0, first_init=30, context_frames=4) == ("diurnal", 24)
    assert reference.resolve("auto", 3.0, first_init=30, context_frames=4) == ("diurnal", 8)
    assert reference.resolve("auto", 24.0, first_init=30) == ("none", 0)  # daily data: no daily cycle
    assert reference.resolve("auto", 5.0, first_init=30) == ("none", 0)  # 5 h does not divide a day
    assert reference.resolve("auto", 1.0, first_init=10, context_frames=4) == ("none", 0)  # too little history
    assert reference.resolve("None", 1.0, first_init=30) == ("none", 0)
    with pytest.raises(TimeAxisError, match="time step \\(24 h\\) is not a sub-daily step"):
        reference.resolve("diurnal", 24.0)
    with pytest.raises(TimeAxisError, match="it needs 27 \\(one day plus 3 context frames\\)"):
        reference.resolve("diurnal", 1.0, first_init=20, context_frames=4)
    with pytest.raises(TimeAxisError, match="at least 48"):
        reference.resolve("diurnal", 1.0, n_frames=30)
    with pytest.raises(ConfigError, match="reference='weekly'; expected one of"):
        reference.resolve("weekly", 1.0)


def test_diurnal_forecast_is_the_departure_forecast_plus_yesterday(data):
    fc = data.np.forecast("t2m", hours=3, model="te-pt-tnp", context_frames=2, calibrate=False)
    assert fc.attrs["geonp_reference"] == "diurnal"
    depart = reference.departure(data, "t2m", "time", 24).isel(time=slice(24, None))  # the defined departures
    raw = depart.np.forecast("t2m", hours=3, model="te-pt-tnp", context_frames=2, reference="none", calibrate=False)
    assert raw.attrs["geonp_reference"] == "none"
    yesterday = data.t2m.isel(time=[len(data.time) - 24 + k for k in (0, 1, 2)]).values
    np.testing.assert_allclose(fc.t2m_mean.values[0], raw.t2m_mean.values[0] + yesterday, rtol=1e-6)
    np.testing.assert_array_equal(fc.t2m_std.values, raw.t2m_std.values)
    assert fc.t2m_mean.attrs["units"] == "K"


def test_diurnal_chunked_equals_unchunked_and_stays_lazy(data):
    inits = data.time.values[[30, 33, 36]]
    a = data.np.forecast("t2m", hours=2, model="te-pt-tnp", init_time=inits, context_frames=2)
    b = data.chunk({"time": 8}).np.forecast("t2m", hours=2, model="te-pt-tnp", init_time=inits, context_frames=2,
                                            chunks={"init_time": 2, "latitude": 3, "longitude": 4})
    assert b.t2m_mean.chunks is not None
    np.testing.assert_allclose(b.t2m_mean.values, a.t2m_mean.values, rtol=1e-5, atol=1e-4)


def test_diurnal_errors_name_the_problem(data):
    with pytest.raises(TimeAxisError, match="reference='diurnal' cannot be used: .*it needs 27"):
        data.np.forecast("t2m", hours=1, init_time=data.time.values[20], reference="diurnal")
    with pytest.raises(ConfigError, match="reference='yesterday'"):
        data.np.forecast("t2m", hours=1, reference="yesterday")
    daily = hourly(times=10, freq="D")
    assert daily.np.forecast("t2m", hours=24, model="te-pt-tnp").attrs["geonp_reference"] == "none"
    with pytest.raises(TimeAxisError, match="not a sub-daily step"):
        daily.np.forecast("t2m", hours=24, reference="diurnal")


def test_fitted_forecast_model_keeps_its_reference(data, tmp_path):
    model = hourly(times=60).np.fit("t2m", model="te-pt-tnp", task="forecast", steps=1, progress=False,
                                    covariates=[], calibration_tasks=4, context_frames=2)
    assert model.settings["reference"] == "diurnal"
    loaded = geonp.load_model(model.save(tmp_path / "fc.geonp"))
    assert loaded.settings["reference"] == "diurnal"
    assert data.np.forecast("t2m", hours=1, model=loaded).attrs["geonp_reference"] == "diurnal"
    with pytest.raises(ModelMismatchError, match="fitted to forecast with reference='diurnal', not 'none'"):
        data.np.forecast("t2m", hours=1, model=loaded, reference="none")
    plain = data.np.fit("t2m", model="te-pt-tnp", task="forecast", steps=0, progress=False, covariates=[],
                        calibration_tasks=4, reference="none", context_frames=2)
    assert plain.settings["reference"] == "none"
    assert data.np.forecast("t2m", hours=1, model=plain).attrs["geonp_reference"] == "none"


def test_mean_weights_are_the_least_squares_blend():
    rng = np.random.default_rng(0)
    n = 4000
    leads = np.repeat([1, 2], n // 2)
    p = rng.standard_normal(n)
    d = rng.standard_normal(n)
    w_true = np.where(leads == 1, 0.3, 0.8)
    y = p + w_true * d + 0.01 * rng.standard_normal(n)
    p_missing = p.copy()
    p_missing[:10] = np.nan  # points without a persistence value are left out
    w, v, c = mean_weights(y, p + d, p_missing, leads, max_lead=3)
    np.testing.assert_allclose(w[:2], [0.3, 0.8], atol=0.01)
    assert w[2] == 1.0 and v == (0.0, 0.0, 0.0)  # no points at lead 3; no trend given
    assert c == (1.0, 1.0, 1.0)  # persistence's weight is 1 without damping


def test_mean_weights_fit_the_trend_jointly():
    rng = np.random.default_rng(1)
    n = 6000
    leads = np.repeat([1, 2, 3], n // 3)
    p, d = rng.standard_normal(n), rng.standard_normal(n)
    f = 0.5 * d + rng.standard_normal(n)  # correlated with the network's departure
    w_true, v_true = np.array([0.2, 0.6, 2.0])[leads - 1], np.array([0.9, 0.4, 0.3])[leads - 1]
    y = p + w_true * d + v_true * f + 0.01 * rng.standard_normal(n)
    w, v, _ = mean_weights(y, p + d, p, leads, max_lead=3, trend=f)
    np.testing.assert_allclose(w[:2], [0.2, 0.6], atol=0.01)
    np.testing.assert_allclose(v[:2], [0.9, 0.4], atol=0.01)
    assert w[2] == 1.5  # clipped, and the trend weight refitted given the clipped w
    np.testing.assert_allclose(v[2], 0.3 + 0.5 * 0.5 / 1.25, atol=0.02)


def test_shrunk_mean_weights__keep_a_blend_every_task_agrees_on():
    rng = np.random.default_rng(2)
    tasks, per = 32, 60
    groups = np.repeat(np.arange(tasks), per)
    leads = np.tile(np.repeat([1, 2], per // 2), tasks)
    p, d, f = rng.standard_normal((3, tasks * per))
    y = p + np.where(leads == 1, 0.3, 0.8) * d + 0.5 * f + 0.05 * rng.standard_normal(tasks * per)
    plain = mean_weights(y, p + d, p, leads, max_lead=2, trend=f)
    shrunk = shrunk_mean_weights(y, p + d, p, leads, max_lead=2, trend=f, groups=groups)
    np.testing.assert_allclose(shrunk, plain, atol=1e-12)  # λ = 1: the least-squares blend as it is
    np.testing.assert_allclose(shrunk[0], [0.3, 0.8], atol=0.02)


def test_shrunk_mean_weights__shrink_a_blend_that_only_fits_its_own_tasks():
    # the network is right; each task's trend predictor and its errors have one random offset each,
    # so the least-squares trend weight follows the few tasks drawn and does not predict other tasks
    tasks, per = 12, 100
    groups = np.repeat(np.arange(tasks), per)
    leads = np.ones(tasks * per, dtype=int)
    spurious, kept = [], []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        p, d = rng.standard_normal((2, tasks * per))
        f = rng.standard_normal(tasks)[groups] + 0.1 * rng.standard_normal(tasks * per)
        y = p + d + rng.standard_normal(tasks)[groups] + 0.1 * rng.standard_normal(tasks * per)
        (w_ls,), (v_ls,), _ = mean_weights(y, p + d, p, leads, max_lead=1, trend=f)
        (w,), (v,), _ = shrunk_mean_weights(y, p + d, p, leads, max_lead=1, trend=f, groups=groups)
        assert abs(v) <= abs(v_ls) + 1e-12 and abs(w - 1.0) <= abs(w_ls - 1.0) + 1e-12  # only ever towards (1, 0)
        spurious.append(abs(v_ls))
        kept.append(abs(v))
    assert np.mean(spurious) > 0.15  # the draws do fit a trend that is not there
    assert np.mean(kept) < 0.7 * np.mean(spurious) and sum(k == 0.0 for k in kept) >= 5


def test_shrunk_mean_weights__one_task_cannot_be_cross_validated():
    rng = np.random.default_rng(4)
    p, d, f = rng.standard_normal((3, 100))
    leads = np.ones(100, dtype=int)
    y = p + 0.5 * d + 0.3 * f
    assert shrunk_mean_weights(y, p + d, p, leads, 1, f, groups=np.zeros(100)) == mean_weights(y, p + d, p, leads, 1, f)


def test_trend_term_is_the_last_change_less_the_references(data):
    y = data.t2m.values.astype(np.float64)
    inits, leads = np.array([0, 30, 35]), np.array([1, 2, 3])
    plain = reference.trend(data, "t2m", "time", inits, leads, 0).transpose("init_time", "lead_time", ...).values
    assert np.all(plain[0] == 0)  # no step before the first frame
    for k in range(3):
        np.testing.assert_allclose(plain[1:, k], y[inits[1:]] - y[inits[1:] - 1], rtol=1e-5)
    diurnal = reference.trend(data, "t2m", "time", inits[1:], leads, 24).transpose("init_time", "lead_time", ...)
    for a, i in enumerate(inits[1:]):
        for b, h in enumerate(leads):
            r = y[i + h - 24] - y[i + h - 25]
            np.testing.assert_allclose(diurnal.values[a, b], y[i] - y[i - 1] - r, rtol=1e-4, atol=1e-5)
    with pytest.raises(TimeAxisError, match="a day into the data"):
        reference.trend(data, "t2m", "time", np.array([20]), leads, 24)


def test_trend_weights_turn_the_forecast_into_linear_extrapolation(data):
    base = resolve_model("te-pt-tnp")
    norm = replace(base.normaliser, lead_mean_weight=(0.0, 0.0), lead_trend_weight=(1.0, 2.0))
    model = replace(base, normaliser=norm, settings={**base.settings, "reference": "none", "context_frames": 2})
    fc = data.np.forecast("t2m", hours=2, model=model)
    y = data.t2m.values
    for h in (1, 2):
        np.testing.assert_allclose(fc.t2m_mean.values[0, h - 1], y[-1] + h * (y[-1] - y[-2]), rtol=1e-6)
    lazy = data.chunk({"time": 8}).np.forecast("t2m", hours=2, model=model, chunks={"latitude": 3})
    np.testing.assert_allclose(lazy.t2m_mean.values, fc.t2m_mean.values, rtol=1e-6)


def test_calibrated_mean_blends_towards_the_initial_frame(data):
    base = resolve_model("te-pt-tnp")
    kept = replace(base, normaliser=replace(base.normaliser, lead_mean_weight=(0.0,) * 6), settings={
        **base.settings, "reference": "none", "context_frames": 2})
    fc = data.np.forecast("t2m", hours=2, model=kept)
    last = data.t2m.isel(time=-1).values
    np.testing.assert_allclose(fc.t2m_mean.values[0, 0], last, rtol=1e-6)
    np.testing.assert_allclose(fc.t2m_mean.values[0, 1], last, rtol=1e-6)
    half = replace(kept, normaliser=replace(base.normaliser, lead_mean_weight=(0.5,)))
    net = data.np.forecast("t2m", hours=2, model=replace(kept, normaliser=base.normaliser))
    blended = data.np.forecast("t2m", hours=2, model=half)
    np.testing.assert_allclose(blended.t2m_mean.values, 0.5 * (net.t2m_mean.values + last), rtol=1e-6)


def test_forecast_calibration_fits_a_weight_per_lead(data, tmp_path):
    model = data.np.fit("t2m", model="te-pt-tnp", task="forecast", steps=0, progress=False, covariates=[],
                        calibration_tasks=8, context_frames=2, reference="none")
    w, v = model.normaliser.lead_mean_weight, model.normaliser.lead_trend_weight
    assert len(w) == 6 and all(0.0 <= x <= 1.5 for x in w)
    assert len(v) == 6 and all(-0.5 <= x <= 1.5 for x in v)
    loaded = geonp.load_model(model.save(tmp_path / "c.geonp")).normaliser
    assert loaded.lead_mean_weight == w and loaded.lead_trend_weight == v


def test_sampler_trend_uses_the_raw_series_behind_the_departures():
    from geonp.data import SamplerConfig, TaskSampler, Window
    from geonp.normalise import Normaliser

    rng = np.random.default_rng(3)
    T, P, lag = 60, 9, 24
    raw = rng.standard_normal((1, T, P)).cumsum(1)
    dep = raw - np.concatenate([np.full((1, lag, P), np.nan), raw[:, :-lag]], 1)
    window = Window(values=np.zeros((T, 0)), xy=rng.uniform(0, 3, (P, 2)), t=np.arange(T, dtype=float),
                    hours=np.arange(T, dtype=float), lon=np.zeros(P))
    config = SamplerConfig(task="forecast", max_context=256, max_targets=16, context_frames=2, max_lead=3)
    sampler = TaskSampler(dep, window, Normaliser(time_unit_hours=1.0), config, raw=raw)
    checked = 0
    for seed in range(40):
        task = sampler.sample(np.random.default_rng(seed))
        t0 = int(round(task.xc[:, 2].max()))
        if t0 < lag + 1:
            continue
        for j in range(task.num_targets):
            v = int(round(task.xt[j, 2]))
            p = int(np.flatnonzero(np.all(np.isclose(window.xy, task.xt[j, :2]), 1))[0])
            want = raw[0, t0, p] - raw[0, t0 - 1, p] - (raw[0, v - lag, p] - raw[0, v - lag - 1, p])
            np.testing.assert_allclose(task.trend[j], want, rtol=1e-9, atol=1e-9)
            checked += 1
    assert checked > 50
    with pytest.raises(ConfigError, match="expected the shape of values"):
        TaskSampler(dep, window, Normaliser(time_unit_hours=1.0), config, raw=raw[:, :10])


def test_infill_holes_persist_through_the_time_window():
    """A sampled hole is missing from every frame of the window, as real gaps (clouds, outages) are."""
    from geonp.data import SamplerConfig, TaskSampler, Window
    from geonp.normalise import Normaliser

    g = np.stack(np.meshgrid(np.arange(16.0), np.arange(16.0), indexing="ij"), -1).reshape(-1, 2)
    T = 5
    window = Window(values=np.zeros((T, 0)), xy=g, t=np.arange(T, dtype=float), hours=np.arange(T, dtype=float),
                    lon=np.zeros(len(g)))
    values = np.random.default_rng(0).standard_normal((1, T, len(g)))
    config = SamplerConfig(task="infill", max_context=4096, max_targets=4096, half_window=2,
                           keep_range=(0.999, 1.0), hole_probability=1.0)
    sampler = TaskSampler(values, window, Normaliser(time_unit_hours=1.0), config)
    for seed in range(10):
        task = sampler.sample(np.random.default_rng(seed))
        assert task.num_targets > 1
        seen = {tuple(p) for p in task.xc[:, :2]}
        # every target but (at most) a few dropped by the keep fraction lies in the hole of all frames
        assert sum(tuple(p) in seen for p in task.xt[:, :2]) <= 0.05 * len(g) + 1


def test_trend_term_with_the_diurnal_reference_and_an_extra_dim():
    d = hourly(times=60)
    ens = xr.concat([d, d + 1.0], dim="member").transpose("member", "time", ...)
    base = resolve_model("te-pt-tnp")
    norm = replace(base.normaliser, lead_mean_weight=(0.0, 0.0), lead_trend_weight=(1.0, 2.0))
    model = replace(base, normaliser=norm, settings={**base.settings, "reference": "auto", "context_frames": 2})
    fc = ens.np.forecast("t2m", hours=2, model=model, init_time=ens.time.values[[40, 50]])
    assert fc.attrs["geonp_reference"] == "diurnal"
    assert fc.t2m_mean.dims == ("member", "init_time", "lead_time", "latitude", "longitude")
    y = ens.t2m.values.astype(np.float64)
    for a, i in enumerate((40, 50)):
        for h in (1, 2):  # diurnal persistence plus h times the trend term
            want = (y[:, i] + y[:, i + h - 24] - y[:, i - 24]
                    + h * ((y[:, i] - y[:, i - 1]) - (y[:, i + h - 24] - y[:, i + h - 25])))
            np.testing.assert_allclose(fc.t2m_mean.values[:, a, h - 1], want, atol=1e-4)


def test_forecast_calibrate_uses_only_the_history_before_the_first_init():
    d = hourly(times=72)
    init = d.time.values[60]
    calibrated = d.np.forecast("t2m", hours=2, model="te-pt-tnp", init_time=init, calibrate=True)
    # the same as fitting with steps=0 on the frames up to the init, then forecasting
    fitted = d.isel(time=slice(0, 61)).np.fit("t2m", model="te-pt-tnp", task="forecast", steps=0, progress=False,
                                             covariates=[])
    # with the space unit left to the data being predicted, as for the shipped weights
    by_hand = d.np.forecast("t2m", hours=2, init_time=init,
                            model=replace(fitted, normaliser=replace(fitted.normaliser, space_unit_km=None)))
    np.testing.assert_allclose(calibrated.t2m_mean.values, by_hand.t2m_mean.values, rtol=1e-6)
    np.testing.assert_allclose(calibrated.t2m_std.values, by_hand.t2m_std.values, rtol=1e-6)
    # what comes after the init is never read: changing it changes nothing
    later = d.copy(deep=True)
    later["t2m"][dict(time=slice(61, None))] = 0.0
    again = later.np.forecast("t2m", hours=2, model="te-pt-tnp", init_time=init, calibrate=True)
    np.testing.assert_allclose(again.t2m_mean.values[..., :], calibrated.t2m_mean.values, rtol=1e-6)
    raw = d.np.forecast("t2m", hours=2, model="te-pt-tnp", init_time=init, calibrate=False)
    assert not np.allclose(calibrated.t2m_mean.values, raw.t2m_mean.values)
    with pytest.raises(ConfigError, match="calibrated already"):
        d.np.forecast("t2m", hours=2, model=fitted, init_time=init, calibrate=True)
    # the default, "auto", calibrates shipped weights when the history is long enough ...
    assert calibration_inits(61, 4, lag=24) == 28 >= AUTO_CALIBRATION_MIN_INITS
    auto = d.np.forecast("t2m", hours=2, model="te-pt-tnp", init_time=init)
    np.testing.assert_allclose(auto.t2m_mean.values, calibrated.t2m_mean.values, rtol=1e-6)
    assert auto.attrs["geonp_calibrated"] == "on the 61 frames up to the first initial time"
    assert raw.attrs["geonp_calibrated"] == "no"
    # ... never a fitted model (it was calibrated when fitted) ...
    assert d.np.forecast("t2m", hours=2, model=fitted, init_time=init).attrs["geonp_calibrated"] == "when fitted"
    # ... and not on a short history: 40 frames leave 7 initial times with a day's lag, 4 frames and 6 leads
    # (41 leave 8, enough: 24 were asked before session 45, and a forecast from 53 hours went uncalibrated)
    with pytest.warns(geonp.UncalibratedWarning, match="fewer than 8 initial times"):
        short = d.np.forecast("t2m", hours=2, model="te-pt-tnp", init_time=d.time.values[39])
    assert calibration_inits(40, 4, lag=24) == 7 < AUTO_CALIBRATION_MIN_INITS == calibration_inits(41, 4, lag=24)
    assert short.attrs["geonp_calibrated"] == "no"
    np.testing.assert_allclose(short.t2m_mean.values, d.np.forecast(
        "t2m", hours=2, model="te-pt-tnp", init_time=d.time.values[39], calibrate=False).t2m_mean.values)
    assert d.np.forecast("t2m", hours=2, model="te-pt-tnp",
                         init_time=d.time.values[40]).attrs["geonp_calibrated"].startswith("on the 41 frames")
    for bad in ("yes", None, 1.0):
        with pytest.raises(ConfigError, match=r"calibrate=.*; expected True, False or 'auto'"):
            d.np.forecast("t2m", hours=2, model="te-pt-tnp", init_time=init, calibrate=bad)
        with pytest.raises(ConfigError, match=r"calibrate=.*; expected True, False or 'auto'"):
            d.np.infill("t2m", model="te-pt-tnp", calibrate=bad)


def test_forecast_calibration_reads_only_the_latest_history(monkeypatch):
    """A calibration reads the latest frames of the history that its budget allows.

    With a budget of 33 frames it reads frames 28..60: frames 0..3 (which only enter departures
    before frame 28) change nothing, while the whole history would see them.
    """
    import geonp.calibrate_input

    d = hourly(times=72)
    init = d.time.values[60]
    changed = d.copy(deep=True)
    changed["t2m"][dict(time=slice(0, 4))] += 5.0
    whole = [x.np.forecast("t2m", hours=2, model="te-pt-tnp", init_time=init).t2m_mean.values for x in (d, changed)]
    assert not np.allclose(*whole)
    monkeypatch.setattr(geonp.calibrate_input, "CALIBRATION_VALUES", 33 * d.t2m[0].size)
    latest = [x.np.forecast("t2m", hours=2, model="te-pt-tnp", init_time=init).t2m_mean.values for x in (d, changed)]
    np.testing.assert_allclose(*latest, rtol=1e-6)


def test_calibration_waits_for_compute_and_runs_once(monkeypatch):
    """A calibrated lazy result computes nothing when it is built; the calibration runs once, at compute."""
    import geonp.calibrate_input
    from geonp.memo import ProcessMemo

    calls = []
    real = geonp.calibrate_input.calibration_fields
    monkeypatch.setattr(geonp.calibrate_input, "calibration_fields", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(geonp.calibrate_input, "_DONE", ProcessMemo())  # none remembered from other tests
    d = hourly(times=72)
    init = d.time.values[[60, 62]]
    lazy = d.chunk({"time": 12}).np.forecast("t2m", hours=2, model="te-pt-tnp", init_time=init,
                                             chunks={"init_time": 1, "latitude": 3})
    assert calls == [] and lazy.t2m_mean.chunks is not None
    assert lazy.attrs["geonp_calibrated"] == "on the 61 frames up to the first initial time"
    got = lazy.compute()
    assert calls == [1]
    # computed again, part by part (as geonp.to_zarr writes regions): the calibration is not rerun
    for part in (lazy.t2m_mean.isel(init_time=0), lazy.t2m_std.isel(init_time=1)):
        part.compute()
    assert calls == [1]
    eager = d.np.forecast("t2m", hours=2, model="te-pt-tnp", init_time=init)
    np.testing.assert_allclose(got.t2m_mean.values, eager.t2m_mean.values, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got.t2m_std.values, eager.t2m_std.values, rtol=1e-5)


def test_forecast_calibrate_true_without_history_is_a_typed_error():
    """calibrate=True with nothing before the first initial time fails with NoDataError, lazily or not."""
    from geonp.errors import NoDataError

    d = hourly(times=8)
    with pytest.raises(NoDataError, match="calibrate=True found nothing to calibrate on"):
        d.np.forecast("t2m", hours=1, model="te-pt-tnp", init_time=d.time.values[0], calibrate=True,
                      context_frames=1)
    lazy = d.chunk({"time": 4}).np.forecast("t2m", hours=1, model="te-pt-tnp", init_time=d.time.values[0],
                                            calibrate=True, context_frames=1)
    with pytest.raises(NoDataError, match="pass later initial times"):
        lazy.compute()
    # "auto" does not try: 1 frame of history holds no initial time to calibrate on
    auto = d.np.forecast("t2m", hours=1, model="te-pt-tnp", init_time=d.time.values[0], context_frames=1)
    assert auto.attrs["geonp_calibrated"] == "no"


def test_no_std_where_the_diurnal_reference_leaves_the_mean_nan(data, monkeypatch):
    """Where y(valid - 24 h) is missing the mean is NaN, and so is the std (it was finite); lazily too.

    The stand-ins' path: a history with gaps is infilled first (geonp.reference_fill), switched off here.
    """
    import dask.array

    import geonp.chunked
    from geonp import reference_fill

    gappy = data.copy(deep=True)
    init = len(data.time) - 1
    # the references of leads 1 and 2 at six cells, and 3 frames either side (none of the context): nothing
    # near enough to interpolate them (lead 2 has one value 3 frames after), and no day before them
    gappy.t2m[init - 26:init - 19, :2, :3] = np.nan
    kw = {"hours": 2, "model": "te-pt-tnp", "context_frames": 2, "calibrate": False, "reference": "diurnal"}
    filled = gappy.np.forecast("t2m", **kw)  # infilled: a forecast everywhere
    assert np.isfinite(filled.t2m_mean.values).all() and np.isfinite(filled.t2m_std.values).all()
    monkeypatch.setattr(reference_fill, "MIN_MISSING", 1.1)
    with pytest.warns(MissingReferenceWarning, match=r"14.3% of the values y\(valid - 24 h\) .* NaN there"):
        fc = gappy.np.forecast("t2m", **kw)
    assert fc.attrs["geonp_reference"] == "diurnal"
    nan = np.isnan(fc.t2m_mean.values)
    assert nan.sum() == 12 and nan[0, :, :2, :3].all()
    np.testing.assert_array_equal(np.isnan(fc.t2m_std.values), nan)
    assert np.all(fc.t2m_std.values[~nan] > 0)
    assert fc.t2m_std.dtype == np.float32 and fc.t2m_std.attrs["units"] == "K"
    blocks = []
    real = geonp.chunked.forecast_block
    monkeypatch.setattr(geonp.chunked, "forecast_block", lambda *a, **k: blocks.append(1) or real(*a, **k))
    with pytest.warns(MissingReferenceWarning):
        lazy = gappy.chunk({"time": 8}).np.forecast("t2m", chunks={"latitude": 3}, **kw)
    assert isinstance(lazy.t2m_std.data, dask.array.Array) and blocks == []  # nothing computed yet
    np.testing.assert_allclose(lazy.t2m_std.values, fc.t2m_std.values, rtol=1e-5)  # NaN in the same places
    assert blocks


def test_auto_forecasts_the_variable_itself_where_the_diurnal_reference_is_mostly_missing(data, monkeypatch):
    """Half the cells missing at random left half of every diurnal forecast NaN, silently (a new-user report).

    Since a gappy history is infilled (geonp.reference_fill) its reference is whole and kept; the choice
    holds for the stand-ins alone (the fill switched off).
    """
    import warnings

    from geonp import reference_fill

    gappy = data.where(np.random.default_rng(1).random(data.t2m.shape) > 0.8)  # (at half, most are interpolated)
    kw = {"hours": 2, "model": "te-pt-tnp", "context_frames": 2, "calibrate": False}
    fc = gappy.np.forecast("t2m", **kw)
    assert fc.attrs["geonp_reference"] == "diurnal" and np.isfinite(fc.t2m_mean.values).all()
    monkeypatch.setattr(reference_fill, "MIN_MISSING", 1.1)
    with pytest.warns(MissingReferenceWarning, match=r"of the values .* reference='auto' forecasts the variable"):
        fc = gappy.np.forecast("t2m", **kw)
    assert fc.attrs["geonp_reference"] == "none" and np.isfinite(fc.t2m_mean.values).all()
    one = data.copy(deep=True)
    one.t2m[len(data.time) - 27:len(data.time) - 20, 0, 0] = np.nan  # 2 of the 84 values added back: kept, and said
    with pytest.warns(MissingReferenceWarning, match=r"2.4% .* NaN there"):
        assert one.np.forecast("t2m", **kw).attrs["geonp_reference"] == "diurnal"
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingReferenceWarning)
        assert data.np.forecast("t2m", **kw).attrs["geonp_reference"] == "diurnal"


def test_a_late_forecast_takes_its_context_from_the_newest_observed_frames(data):
    """Three frames late with 2 context frames: every value was NaN; with 4 and 3 late, the std collapsed."""
    kw = dict(hours=2, model="te-pt-tnp", context_frames=2, calibrate=False)
    late = data.copy(deep=True)
    late["t2m"][dict(time=slice(28, 31))] = np.nan
    with pytest.warns(geonp.ShortHistoryWarning, match="starts from the newest observed frames before it"):
        fc = late.np.forecast("t2m", init_time=data.time.values[30], **kw)
    on_time = data.np.forecast("t2m", init_time=data.time.values[27], hours=5, model="te-pt-tnp", context_frames=2,
                               calibrate=False)  # the same context: frames 26 and 27
    assert np.isfinite(fc.t2m_mean.values).all()
    np.testing.assert_allclose(fc.t2m_mean.values[0], on_time.t2m_mean.values[0, 3:], rtol=1e-5)
    np.testing.assert_allclose(fc.t2m_std.values[0], on_time.t2m_std.values[0, 3:], rtol=1e-4)


def test_leads_beyond_a_day_add_the_forecast_of_a_day_earlier(data):
    """--hours 25 used to drop the diurnal reference for every lead (ERA5, 48 leads: RMSE 2.49 K, now 1.45).

    Lead 25 is the departure forecast plus the forecast of lead 1 (its std adds in quadrature), and
    nothing after the initial time is read.
    """
    kw = dict(hours=26, model="te-pt-tnp", context_frames=2, calibrate=False)
    init = data.time.values[30]
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingReferenceWarning)
        fc = data.np.forecast("t2m", init_time=init, **kw)
    assert fc.attrs["geonp_reference"] == "diurnal" and np.isfinite(fc.t2m_mean.values).all()
    depart = reference.departure(data, "t2m", "time", 24).isel(time=slice(24, None))  # the defined departures
    raw = depart.np.forecast("t2m", init_time=init, reference="none", **kw)
    m, s, dm, ds_ = (v.values[0] for v in (fc.t2m_mean, fc.t2m_std, raw.t2m_mean, raw.t2m_std))
    np.testing.assert_allclose(m[:24], dm[:24] + data.t2m.values[7:31], rtol=1e-6)
    np.testing.assert_allclose(m[24:], dm[24:] + m[:2], rtol=1e-6)
    np.testing.assert_allclose(s[24:], np.hypot(ds_[24:], s[:2]), rtol=1e-6)
    later = data.copy(deep=True)
    later["t2m"][dict(time=slice(31, None))] = 0.0
    np.testing.assert_array_equal(later.np.forecast("t2m", init_time=init, **kw).t2m_mean.values, fc.t2m_mean.values)
    # nor whether it is missing, or there at all (the observed share after the init set the space unit: a
    # new-user report, 0.45 K at +1 h)
    later["t2m"][dict(time=slice(31, None))] = np.nan
    for other in (later, data.isel(time=slice(None, 31))):
        again = other.np.forecast("t2m", init_time=init, **kw)
        np.testing.assert_array_equal(again.t2m_mean.values, fc.t2m_mean.values)
        np.testing.assert_array_equal(again.t2m_std.values, fc.t2m_std.values)



def test_a_late_region_takes_the_same_hour_a_day_earlier_as_its_reference():
    """A region three hours late at leads near a day: NaN (or, above 5 % of the values, reference='none' everywhere).

    y(valid - 24 h) missing, the same hour of the day before stands in, the std widened by a day's change.
    """
    from geonp.reference import FALLBACK_DAYS, reference_values

    data = hourly(times=64)
    late = data.copy(deep=True)
    # the references of leads 1 and 2 from frame 63 (frames 40, 41), in 12 of the 42 cells, missing with 3 frames
    # either side: too far to interpolate them
    late.t2m[37:45, :3, :4] = np.nan
    kw = {"hours": 2, "model": "te-pt-tnp", "context_frames": 2, "calibrate": False}
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingReferenceWarning)  # nothing is missing once the day before stands in
        fc = late.np.forecast("t2m", **kw)
    assert fc.attrs["geonp_reference"] == "diurnal" and np.isfinite(fc.t2m_mean.values).all()
    # the same hour a day earlier, with a day's change as its extra variance; the cells on time: their own
    idx = xr.DataArray([40, 41], dims="lead")
    ref, extra = reference_values(late.t2m, "time", idx, 24, xr.DataArray([63, 63], dims="lead"))
    np.testing.assert_array_equal(ref.values[:, :3, :4], data.t2m.values[16:18, :3, :4])
    assert (extra.values[:, :3, :4] == 1).all() and (extra.values[:, 3:] == 0).all()
    on_time = data.np.forecast("t2m", **kw)
    assert (fc.t2m_std.values[0, :, :3, :4] > on_time.t2m_std.values[0, :, :3, :4]).all()  # widened
    # the values and the days they come from; none further back than FALLBACK_DAYS
    y = xr.DataArray(np.array([1.0, 2.0, np.nan, np.nan, np.nan, np.nan, np.nan]), dims="time")
    ref, days = reference_values(y, "time", xr.DataArray(np.array([3, 4, 5, 6]), dims="i"), 2)
    assert FALLBACK_DAYS == 2
    np.testing.assert_array_equal(ref.values, [2.0, 1.0, 2.0, np.nan])  # frame 6: 4 and 2 are missing too
    np.testing.assert_array_equal(days.values[:3], [1, 2, 2])


def test_a_missing_reference_is_interpolated_from_its_points_values_around_it():
    """Hourly stations with 15 % missing at random: the day before stood in, 2.17 K off (a new-user report)."""
    from geonp.reference import reference_values

    y = xr.DataArray(np.array([1.0, 2.0, np.nan, np.nan, 8.0, np.nan, 3.0, np.nan, np.nan, np.nan, np.nan]),
                     dims="time")
    idx = xr.DataArray(np.array([2, 3, 5, 7, 7]), dims="i")
    latest = xr.DataArray(np.array([10, 10, 10, 10, 7]), dims="i")
    ref, extra = reference_values(y, "time", idx, 4, latest)
    # frame 2: 1 and 2 frames from 2.0 and 8.0; frame 5: between 8 and 3; frame 7: the frame before only
    np.testing.assert_allclose(ref.values, [4.0, 6.0, 5.5, 3.0, 3.0])
    np.testing.assert_allclose(extra.values, [2 / 3 / 4, 2 / 3 / 4, 0.5 / 4, 0.25, 0.25], rtol=1e-6)
    # nothing after the initial time is read: frame 7 from initial time 7 has no later side
    y2 = y.copy()
    y2[8] = 5.0
    ref2, _ = reference_values(y2, "time", idx, 4, latest)
    assert ref2.values[3] == 4.0 and ref2.values[4] == 3.0


def test_a_departure_takes_its_missing_earlier_value_from_the_points_values_around_it():
    """A gap of one value removed two departures (its own, and the one a day later): now only its own."""
    from geonp.reference import departure, short_gaps_filled

    v = np.arange(12.0)[:, None] * np.array([1.0, 2.0])
    v[3, 0] = v[7:9, 1] = np.nan
    y = xr.DataArray(v, dims=("time", "p"))
    filled = short_gaps_filled(y, "time")
    np.testing.assert_allclose(filled.values, np.arange(12.0)[:, None] * np.array([1.0, 2.0]))  # linear: exact
    lazy = short_gaps_filled(y.chunk({"time": 5}), "time")
    np.testing.assert_array_equal(lazy.values, filled.values)
    d = departure(xr.Dataset({"v": y}), "v", "time", 5)["v"].values
    np.testing.assert_allclose(d[8, 0], 5.0)  # frame 3 interpolated
    assert np.isnan(d[3, 0]) and np.isnan(d[7:9, 1]).all()  # the gaps' own departures stay missing
    np.testing.assert_allclose(d[12 - 1, 1], 10.0)  # frames 7-8 interpolated for frame 11
    v2 = np.arange(12.0)[:, None] * np.array([1.0, 2.0])
    v2[4:12, 0] = np.nan  # no value after: the frame before stands in only one frame on
    g = short_gaps_filled(xr.DataArray(v2, dims=("time", "p")), "time").values[:, 0]
    assert g[4] == 3.0 and np.isnan(g[5:]).all()


def test_a_tiny_missing_share_is_not_printed_as_zero():
    """One NaN among many thousand values read "0.0% of the values ... are missing" (a new-user report)."""
    from geonp.reference import _share

    assert [_share(s) for s in (0.0, 0.0001, 0.0005, 0.071)] == ["0.0%", "<0.1%", "0.1%", "7.1%"]
