"""Forecasts on daily and monthly steps: the annual cycle as the reference, and the damped blend."""

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import geonp
from geonp import reference, seasonal
from geonp.calibration import forecast_fields, lag_regression, mean_weights, shrunk_mean_weights
from geonp.errors import ConfigError, TimeAxisError


def _cycle(frac, a0, amp, shift=0.3):
    return a0 + amp * np.cos(2 * np.pi * (frac - shift)) + 0.2 * amp * np.sin(4 * np.pi * frac)


def monthly_stations(n=16, years=8, seed=0, phi=0.5):
    """Monthly station record: a cycle whose mean falls with elevation, plus AR(1) anomalies shared in space."""
    rng = np.random.default_rng(seed)
    time = pd.date_range("1980-01-01", periods=12 * years, freq="MS")
    frac = seasonal.year_fraction(time.values)
    elev = rng.uniform(1000, 3000, n)
    lon, lat = rng.uniform(-108, -104, n), rng.uniform(37, 41, n)
    base = 30.0 - 0.006 * elev
    anom = np.zeros(len(time))
    for t in range(1, len(time)):
        anom[t] = phi * anom[t - 1] + rng.normal(0, 1.5)
    values = _cycle(frac[:, None], base[None, :], 10.0) + anom[:, None] + 0.3 * rng.standard_normal((len(time), n))
    ds = xr.Dataset({"tmax": (("time", "station"), values.astype(np.float32), {"units": "degC"})},
                    coords={"time": time, "station": [f"s{i}" for i in range(n)], "lon": ("station", lon),
                            "lat": ("station", lat), "elevation": ("station", elev)})
    return ds, base


def test_year_fraction_and_basis_in_any_calendar():
    times = np.array(["2001-01-01T00", "2001-07-02T12", "2004-12-31T00"], dtype="datetime64[ns]")
    np.testing.assert_allclose(seasonal.year_fraction(times), [0.0, 182.5 / 365, 365 / 366])
    noleap = xr.date_range("2001-01-01", periods=3, freq="MS", calendar="noleap", use_cftime=True).values
    np.testing.assert_allclose(seasonal.year_fraction(noleap), [0.0, 31 / 365, 59 / 365])
    b = seasonal.basis(times[:1], harmonics=2)
    np.testing.assert_allclose(b, [[1.0, 1.0, 1.0, 0.0, 0.0]], atol=1e-12)
    assert seasonal.span_years(pd.date_range("2000-01-01", periods=25, freq="MS").values) == pytest.approx(2.0)
    assert seasonal.span_years(times[:1]) == 0.0


def test_fit_cycle_recovers_each_points_cycle_and_is_lazy_on_dask():
    ds, base = monthly_stations(seed=1, phi=0.0)
    clean = xr.DataArray(_cycle(seasonal.year_fraction(ds.time.values)[:, None], base[None, :], 10.0),
                         dims=("time", "station"), coords={"time": ds.time})
    gappy = clean.where(np.random.default_rng(2).random(clean.shape) > 0.4)
    coef = seasonal.fit_cycle(gappy, "time")
    assert coef.dims == ("station", "harmonic") and coef.sizes["harmonic"] == 2 * seasonal.HARMONICS + 1
    fitted = seasonal.cycle_at(coef, ds.time.values, ("time",)).transpose("time", "station")
    # each point's own ~58 observed months outweigh the pooled cycle it is shrunk towards
    np.testing.assert_allclose(fitted.values, clean.values, atol=0.25)
    assert np.sqrt(np.mean((fitted.values - clean.values) ** 2)) < 0.1
    lazy = seasonal.fit_cycle(gappy.chunk(time=20, station=5), "time")
    assert lazy.chunks is not None  # nothing computed yet
    np.testing.assert_allclose(lazy.values, coef.values, atol=1e-9)  # chunked == unchunked


def test_a_point_without_history_gets_the_cycle_its_covariates_suggest():
    ds, base = monthly_stations(seed=3, phi=0.0)
    y = ds.tmax.copy()
    y[:, 0] = np.nan  # a station that starts after the history
    points = seasonal.point_covariates(ds, ("station",), ("lon", "lat", "elevation", None))
    assert points.dims == ("station", "covariate") and points.sizes["covariate"] == 3
    with_prior = seasonal.fit_cycle(y, "time", covariates=points)
    without = seasonal.fit_cycle(y, "time")
    # its mean follows the lapse rate of the others (0.006 per m) instead of the domain's mean
    assert abs(float(with_prior[0, 0]) - base[0]) < 0.3
    assert abs(base[0] - base[1:].mean()) > 3.0  # a station far from the network's mean height
    assert abs(float(without[0, 0]) - base[1:].mean()) < 0.5  # without covariates: the domain's mean
    # the other stations barely move (their ridge pulls towards another prior)
    np.testing.assert_allclose(with_prior[1:, 0], without[1:, 0], atol=0.1)


def test_auto_reference_is_seasonal_on_daily_and_longer_steps_with_two_years():
    assert reference.resolve("auto", 24.0, first_init=800, history_years=2.2) == ("seasonal", 0)
    assert reference.resolve("auto", 730.5, first_init=40, history_years=3.0) == ("seasonal", 0)
    assert reference.resolve("auto", 24.0, first_init=300, history_years=0.9) == ("none", 0)
    assert reference.resolve("auto", 1.0, first_init=30, context_frames=4, history_years=5.0) == ("diurnal", 24)
    assert reference.resolve("seasonal", 1.0, history_years=1.5) == ("seasonal", 0)
    with pytest.raises(TimeAxisError, match="reference='seasonal' needs a year of history.*0.50 years.*"
                                            "reference='none'"):
        reference.resolve("seasonal", 730.5, history_years=0.5)


def test_lag_regression_is_the_histories_damped_persistence():
    rng = np.random.default_rng(5)
    T, phi = 20000, 0.6
    a = np.zeros(T)
    for t in range(1, T):
        a[t] = phi * a[t - 1] + rng.standard_normal()
    values = np.stack([a, np.full(T, np.nan)], 1)[None]  # an unobserved point is skipped
    c = lag_regression(values, np.arange(T, dtype=float), 3)
    np.testing.assert_allclose(c, [phi, phi**2, phi**3], atol=0.03)
    # pairs across a gap in the kept frames are not pairs
    t = np.concatenate([np.arange(10), np.arange(100, 110)]).astype(float)
    v = np.concatenate([np.ones(10), -np.ones(10)])[None, :, None]
    assert lag_regression(v, t, 1) == (1.0,)
    assert lag_regression(np.full((1, 5, 1), np.nan), np.arange(5.0), 2) == (0.0, 0.0)


def _two_lead_tasks(seed, tasks=40, per=50):
    """Groups and leads (1 and 2) of ``tasks`` calibration tasks, and persistence, noise and a signal per point."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(tasks), per)
    leads = np.tile(np.repeat([1, 2], per // 2), tasks)
    return rng, groups, leads, *rng.standard_normal((3, tasks * per))


def test_damped_blend_keeps_its_damping_and_fits_the_network_given_it():
    rng, groups, leads, p, noise, signal = _two_lead_tasks(6)
    damping = (0.5, 0.25)
    y = np.where(leads == 1, 0.5, 0.25) * p + 0.4 * signal + 0.1 * noise
    net = p + signal  # the network's departure from persistence carries the signal
    blend = mean_weights(y, net, p, leads, 2, damping=damping)
    assert blend.c == damping
    np.testing.assert_allclose(blend.w, [0.4, 0.4], atol=0.02)
    useless = mean_weights(y, p + rng.standard_normal(len(p)), p, leads, 2, damping=damping)
    np.testing.assert_allclose(useless.w, [0.0, 0.0], atol=0.03)  # a network that adds nothing is left out
    shrunk = shrunk_mean_weights(y, p + rng.standard_normal(len(p)), p, leads, 2, groups=groups, damping=damping)
    assert all(0.0 <= w <= 0.05 for w in shrunk.w) and shrunk.c == damping  # shrinks towards damped persistence
    # where persistence is missing the network's mean stands in for it, damped like persistence
    p_missing = p.copy()
    p_missing[:5] = np.nan
    fields = forecast_fields(y, net, np.ones_like(y), leads, p_missing, np.zeros_like(y), groups, 2,
                             damping=damping)
    assert fields["lead_damping"] == damping and len(fields["lead_mean_weight"]) == 2
    plain = forecast_fields(y, net, np.ones_like(y), leads, p, np.zeros_like(y), groups, 2)
    assert plain["lead_damping"] == ()


def test_a_nan_damping_leaves_its_lead_undamped_and_diurnal_damps_every_lead():
    """A NaN damping leaves its lead undamped; diurnal forecasts damp every lead, as seasonal ones do."""
    from geonp.blend import forecast_damping as _damping

    rng, groups, leads, p, noise, signal = _two_lead_tasks(7)
    y = p + 0.4 * signal + 0.1 * noise
    net = p + signal
    for fit in (mean_weights(y, net, p, leads, 2, damping=(np.nan, 0.5)),
                shrunk_mean_weights(y, net, p, leads, 2, groups=groups, damping=(np.nan, 0.5))):
        assert fit.c == (1.0, 0.5) and all(type(w) is float for w in fit.w)
        np.testing.assert_allclose(fit.w, 0.4, atol=0.03)  # the network's signal, given c
    # lead 1 exactly as without damping
    assert mean_weights(y, net, p, leads, 2, damping=(np.nan, 0.5)).w[0] == mean_weights(y, net, p, leads, 2).w[0]
    y2 = np.where(leads == 2, 0.5 * p, p) + 0.4 * signal + 0.1 * noise  # persistence damped at lead 2 only
    fit = mean_weights(y2, net, p, leads, 2, damping=(np.nan, 0.5))
    pred = np.where(leads == 2, 0.5 * p + fit.w[1] * signal, p + fit.w[0] * signal)
    assert np.sqrt(np.mean((y2 - pred) ** 2)) < 0.11
    values = rng.standard_normal((1, 200, 3))
    t = np.arange(200.0)
    assert _damping(values, t, "none", 12) is None
    # before 2026-11-29 the first six leads stayed undamped: the ERA5 default lost 4 % RMSE at +6 h
    assert _damping(values, t, "diurnal", 6) == lag_regression(values, t, 6)
    assert _damping(values, t, "diurnal", 8) == lag_regression(values, t, 8)
    assert _damping(values, t, "seasonal", 3) == lag_regression(values, t, 3)


def test_forecast_of_monthly_stations_departs_from_the_cycle_and_beats_persistence():
    ds, _ = monthly_stations(n=12, years=7, seed=7, phi=0.3)
    inits = ds.time.values[-13:-1]
    with warnings.catch_warnings():
        warnings.simplefilter("error", geonp.UnvalidatedStepWarning)  # validated now: no warning
        out = ds.np.forecast("tmax", steps=1, init_time=inits)
    assert out.attrs["geonp_reference"] == "seasonal"
    truth = ds.tmax.sel(time=out.valid_time.isel(lead_time=0).values).values
    err = out.tmax_mean.isel(lead_time=0).values - truth
    persist = ds.tmax.sel(time=inits).values - truth
    assert np.sqrt(np.mean(err**2)) < 0.5 * np.sqrt(np.mean(persist**2))
    assert np.isfinite(out.tmax_std.values).all()
    # beyond the data: the cycle of the valid time is added back (no observation needed there); the
    # network alone on departures is worse than the cycle: warned
    with pytest.warns(geonp.UnvalidatedStepWarning, match="uncalibrated.*worse than the cycle itself"):
        ahead = ds.np.forecast("tmax", steps=3, calibrate=False)
    assert np.isfinite(ahead.tmax_mean.values).all()
    assert pd.Timestamp(ahead.valid_time.values[0, -1]) == pd.Timestamp(ds.time.values[-1]) + pd.DateOffset(months=3)
    # too short a history for the cycle: the variable itself, with the warning
    with pytest.warns(geonp.UnvalidatedStepWarning, match="monthly steps"):
        short = ds.isel(time=slice(0, 18)).np.forecast("tmax", steps=1, calibrate=False)
    assert short.attrs["geonp_reference"] == "none"


def test_fit_a_forecast_model_on_monthly_data_keeps_the_seasonal_reference(tmp_path):
    ds, _ = monthly_stations(n=10, years=6, seed=8)
    model = ds.np.fit("tmax", task="forecast", steps=0, progress=False, calibration_tasks=8)
    assert model.settings["reference"] == "seasonal"
    assert len(model.normaliser.lead_damping) > 0
    loaded = geonp.load_model(model.save(tmp_path / "monthly.geonp"))
    assert loaded.normaliser.lead_damping == model.normaliser.lead_damping
    out = ds.np.forecast("tmax", steps=2, model=loaded)
    assert out.attrs["geonp_reference"] == "seasonal" and np.isfinite(out.tmax_mean.values).all()


def test_seasonal_forecast_chunked_equals_unchunked_and_stays_lazy():
    ds, _ = monthly_stations(n=12, years=5, seed=9)
    inits = ds.time.values[-4:-1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", geonp.UnvalidatedStepWarning)  # the network alone: warned, tested above
        plain = ds.np.forecast("tmax", steps=2, init_time=inits, calibrate=False)
        lazy = ds.chunk({"time": 12, "station": 5}).np.forecast("tmax", steps=2, init_time=inits, calibrate=False)
    assert lazy.tmax_mean.chunks is not None and lazy.attrs["geonp_reference"] == "seasonal"
    np.testing.assert_allclose(lazy.tmax_mean.values, plain.tmax_mean.values, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(lazy.tmax_std.values, plain.tmax_std.values, rtol=1e-5, atol=1e-5)


def test_seasonal_forecast_with_an_ensemble_dim_and_a_short_history_calibrates():
    ds, _ = monthly_stations(n=10, years=3, seed=10)
    members = xr.concat([ds, ds + 0.5], dim="member")  # extra dims are separate problems
    with warnings.catch_warnings():
        warnings.simplefilter("error", geonp.UnvalidatedStepWarning)
        # 26 months of history: fewer than the 24 initial times hourly forecasts need, calibrated all the same
        out = members.np.forecast("tmax", steps=2, init_time=ds.time.values[25])
    assert out.attrs["geonp_reference"] == "seasonal" and out.attrs["geonp_calibrated"] != "no"
    assert out.tmax_mean.dims[0] == "member" and np.isfinite(out.tmax_mean.values).all()
    # the members differ by a constant: so do their forecasts (each member its own cycle)
    diff = (out.tmax_mean.sel(member=1) - out.tmax_mean.sel(member=0)).values
    np.testing.assert_allclose(diff, 0.5, atol=0.05)


def test_diurnal_reference_on_monthly_data_points_to_the_seasonal_one():
    with pytest.raises(TimeAxisError, match="not a sub-daily step.*Pass reference='seasonal'.*or reference='none'"):
        reference.resolve("diurnal", 730.5, history_years=5.0)


def test_the_cycle_of_a_lazy_history_is_read_once_for_every_region_written(tmp_path):
    import dask.array

    reads = []

    def counted(block):
        reads.append(block.shape)
        return block

    ds, _ = monthly_stations(n=12, years=6, seed=11)
    lazy = ds.chunk({"time": 12, "station": 4})
    lazy["tmax"] = lazy.tmax.copy(data=lazy.tmax.data.map_blocks(counted, dtype=np.float32))
    n_chunks = lazy.tmax.data.npartitions
    coef = seasonal.cached_cycle(lazy.tmax, "time")
    assert isinstance(coef.data, dask.array.Array)
    np.testing.assert_allclose(coef.values, seasonal.fit_cycle(ds.tmax, "time").values, atol=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", geonp.UnvalidatedStepWarning)
        out = lazy.np.forecast("tmax", steps=2, init_time=ds.time.values[-6:-2], calibrate=False, chunks={"station": 4})
    reads.clear()
    geonp.to_zarr(out, tmp_path / "fc.zarr", progress=False)
    # the history once for the cycle (memoised per process), the blocks' own windows for the rest; summing the
    # cycle inside every region's graph read it once per region (3 regions here, dozens on real grids)
    assert len([r for r in reads if r[0] > 0]) <= 2 * n_chunks
    back = xr.open_zarr(tmp_path / "fc.zarr")
    np.testing.assert_allclose(back.tmax_mean.values, out.tmax_mean.values, rtol=1e-6)


def test_cli_forecast_of_a_monthly_station_file_is_seasonal(tmp_path, capsys):
    from geonp.cli import main

    ds, _ = monthly_stations(n=10, years=4, seed=12)
    path = tmp_path / "monthly.nc"
    ds.to_netcdf(path)
    out = tmp_path / "fc.zarr"
    assert main(["forecast", str(path), "--var", "tmax", "--steps", "3", "--out", str(out), "--quiet"]) == 0
    fc = xr.open_zarr(out)
    assert fc.attrs["geonp_reference"] == "seasonal" and fc.attrs["geonp_calibrated"] != "no"
    assert pd.Timestamp(fc.valid_time.values[0, -1]) == pd.Timestamp(ds.time.values[-1]) + pd.DateOffset(months=3)
    assert np.isfinite(fc.tmax_mean.values).all()
    # the diurnal reference on monthly steps: one error line, pointing to the seasonal one in CLI syntax
    assert main(["forecast", str(path), "--var", "tmax", "--steps", "1", "--reference", "diurnal",
                 "--out", str(tmp_path / "no.zarr")]) != 0
    err = capsys.readouterr().err
    assert "Pass --reference seasonal" in err and not (tmp_path / "no.zarr").exists()


# ------------------------------------------------------------------------------------------------- infill


def _stations_with_offsets(years=3, seed=0, gap_station=2):
    """Daily stations, each with its own mean offset and annual cycle (not its neighbours'), one month missing."""
    rng = np.random.default_rng(seed)
    time = pd.date_range("2000-01-01", periods=int(365.25 * years), freq="D")
    n = 14
    lat, lon = 52 + rng.random(n) * 2, -9 + rng.random(n) * 3
    offset = rng.normal(0, 2.0, n)
    f = np.asarray(geonp.seasonal.year_fraction(time.values))
    common = np.cumsum(rng.normal(0, 0.6, len(time)))  # weather shared by every station
    common -= np.convolve(common, np.ones(61) / 61, mode="same")
    v = 8 + offset + 4 * np.cos(2 * np.pi * f)[:, None] + common[:, None] + rng.normal(0, 0.4, (len(time), n))
    gappy = v.copy()
    month = (time >= "2001-02-01") & (time < "2001-03-01")
    gappy[month, gap_station] = np.nan
    ds = xr.Dataset({"w": (("time", "station"), gappy.astype("float32"), {"units": "m s-1"})},
                    coords={"time": time, "lat": ("station", lat), "lon": ("station", lon)})
    return ds, v, month, gap_station


def test_a_long_record_is_infilled_as_departures_from_each_points_cycle():
    """A station missing for a month: its own mean comes from its other years (Irish wind: 2.905 -> 2.443 knots)."""
    ds, truth, month, s = _stations_with_offsets()
    auto = ds.np.infill("w", calibrate=False)
    plain = ds.np.infill("w", reference="none", calibrate=False)
    assert auto.attrs["geonp_reference"] == "seasonal" and plain.attrs["geonp_reference"] == "none"
    err = {k: np.sqrt(np.mean((o.w_mean.values[month, s] - truth[month, s]) ** 2)) for k, o in
           (("auto", auto), ("plain", plain))}
    assert err["auto"] < 0.6 * err["plain"], err
    observed = np.isfinite(ds.w.values)
    np.testing.assert_array_equal(auto.w_filled.values[observed], ds.w.values[observed])
    assert auto.w_mean.attrs["units"] == "m s-1"
    chunked = ds.np.infill("w", calibrate=False, chunks={"time": 200})
    np.testing.assert_allclose(chunked.w_mean.values, auto.w_mean.values, atol=1e-4)
    short = ds.isel(time=slice(0, 500)).np.infill("w", calibrate=False)  # under two years: the variable itself
    assert short.attrs["geonp_reference"] == "none"


def test_departures_keep_a_variable_never_below_zero_at_or_above_zero():
    ds, *_ = _stations_with_offsets(seed=1)
    low = ds.assign(w=(ds.w - ds.w.mean() + 0.5).clip(min=0.0))  # about half the values at 0
    out = low.np.infill("w", calibrate=False)
    assert out.attrs["geonp_reference"] == "seasonal" and float(out.w_mean.min()) >= 0.0


def test_infill_reference_rules():
    from geonp.departures import infill_reference

    long, short = pd.date_range("2000-01-01", periods=800, freq="D").values, pd.date_range(
        "2000-01-01", periods=400, freq="D").values
    assert infill_reference("auto", long, False) == "seasonal" and infill_reference("auto", short, False) == "none"
    assert infill_reference("seasonal", short, False) == "seasonal" and infill_reference("none", long, False) == "none"
    assert infill_reference("auto", long, True) == "none" and infill_reference("auto", None, False) == "none"
    with pytest.raises(ConfigError, match="'diurnal' is a forecast's reference; infill takes 'auto', 'seasonal'"):
        infill_reference("diurnal", long, False)
    with pytest.raises(ConfigError, match=r"reference='annual'; infill takes 'auto', 'seasonal' .* or 'none'"):
        infill_reference("annual", long, False)
    with pytest.raises(TimeAxisError, match="no time axis"):
        infill_reference("seasonal", None, False)
    two = pd.date_range("2000-01-01", periods=24, freq="MS").values  # two calendar years of months, 730 days
    assert infill_reference("auto", two, False) == "seasonal" and infill_reference("auto", two[:23], False) == "none"
    assert infill_reference("auto", pd.date_range("2001-01-01", periods=730, freq="D").values, False) == "seasonal"
    assert infill_reference("seasonal", two[:12], False) == "seasonal"
    with pytest.raises(ConfigError, match="targets= do not have"):
        infill_reference("seasonal", long, True)
    with pytest.raises(TimeAxisError, match="needs a year of data"):
        infill_reference("seasonal", short[:100], False)


def test_a_model_fitted_on_departures_infills_a_short_record_as_it_is():
    ds, *_ = _stations_with_offsets(seed=2)
    model = ds.np.fit("w", steps=0, progress=False, covariates=[])
    assert model.settings["reference"] == "seasonal"
    assert ds.np.infill("w", model=model).attrs["geonp_reference"] == "seasonal"
    assert ds.isel(time=slice(300, 700)).np.infill("w", model=model).attrs["geonp_reference"] == "none"


def test_a_day_missing_whole_is_bridged_from_the_days_either_side_when_departures_are_infilled():
    """A day missing whole: NaN with each frame alone (time_window=0), then the cycle; now the days either side.

    Beside the cycle alone (the climatology), the departures of the days before and after, shrunk by
    how the departures persist (geonp.bridge), whatever the time window.
    """
    ds, truth, *_ = _stations_with_offsets(seed=3)
    days = [100, 130, 160, 250, 300, 350, 450, 500, 600, 700, 200, 201, 202]  # ten days and a run of three
    ds["w"][days] = np.nan
    climatology = seasonal.cycle_at(seasonal.fit_cycle(ds.w, "time"), ds.time.values, ("time",)).values.T
    with warnings.catch_warnings():
        warnings.simplefilter("error", geonp.NoContextWarning)  # nothing is left NaN: no warning says so
        out = ds.np.infill("w", time_window=0, calibrate=False)
    mean, std = out.w_mean.values[days], out.w_std.values[days]
    assert np.isfinite(mean).all() and np.isfinite(std).all()
    err = mean - truth[days]
    assert np.sqrt(np.mean(err**2)) < 0.6 * np.sqrt(np.mean((climatology[days] - truth[days]) ** 2))
    assert 0.85 <= np.mean(np.abs(err) <= 1.96 * std) <= 0.99
    windowed = ds.np.infill("w", calibrate=False)
    np.testing.assert_allclose(windowed.w_mean.values[days], mean, atol=1e-5)
    lazy = ds.chunk({"time": 50}).np.infill("w", time_window=0, calibrate=False).compute()
    np.testing.assert_allclose(lazy.w_mean.values, out.w_mean.values, atol=1e-5)
    with warnings.catch_warnings():  # the variable itself: its days missing whole are kriged along time
        warnings.simplefilter("error", geonp.NoContextWarning)
        plain = ds.np.infill("w", time_window=0, calibrate=False, reference="none")
    plain_err = plain.w_mean.values[days] - truth[days]
    assert np.isfinite(plain_err).all() and np.sqrt(np.mean(plain_err**2)) > np.sqrt(np.mean(err**2))


def test_a_grid_of_departures_is_calibrated_by_default():
    """Departures from each cell's cycle are smoother than the weights' priors: alone their intervals were narrow."""
    t = pd.date_range("2000-01-01", periods=30, freq="MS")
    lat, lon = 50 + 0.5 * np.arange(6), -5 + 0.5 * np.arange(7)
    rng = np.random.default_rng(0)
    v = 10 + 5 * np.cos(2 * np.pi * seasonal.year_fraction(t.values))[:, None, None] + rng.normal(0, 1, (30, 6, 7))
    ds = xr.Dataset({"v": (("time", "lat", "lon"), np.where(rng.random(v.shape) < 0.7, v, np.nan))},
                    coords={"time": t, "lat": lat, "lon": lon})
    out = ds.np.infill("v")
    assert out.attrs["geonp_reference"] == "seasonal" and out.attrs["geonp_calibrated"].startswith("on held-out")
    short = ds.isel(time=slice(0, 12))  # too short for a cycle: the variable itself, its noise from cell to cell
    assert short.np.infill("v").attrs["geonp_calibrated"].startswith("on held-out")  # calibrates it (a rough grid)
    calm = short.assign(v=short.v.where(short.v.isnull(), 10.0 + 0.1 * short.lat + 0.05 * short.lon))
    assert calm.np.infill("v").attrs["geonp_calibrated"] == "no"  # a smooth short grid: the network alone
