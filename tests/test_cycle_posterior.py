"""Each point's annual cycle as a random effect: how far it may be from its true cycle (geonp.seasonal)."""

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import geonp  # noqa: F401  registers ds.np
from geonp import seasonal


def _stations(seed, n=30, years=3, offset_sd=2.0, persistence=0.8):
    """Daily stations: offsets and amplitudes of their own, weather shared by all that persists (AR(1) 0.8)."""
    rng = np.random.default_rng(seed)
    time = pd.date_range("2000-01-01", periods=int(365.25 * years), freq="D")
    lat, lon = 52 + rng.random(n) * 2, -9 + rng.random(n) * 3
    f = seasonal.year_fraction(time.values)
    offset, amp = rng.normal(0, offset_sd, n), 4 + rng.normal(0, 1.0, n)
    common = np.zeros(len(time))
    for t in range(1, len(time)):
        common[t] = persistence * common[t - 1] + 1.2 * np.sqrt(1 - persistence**2) / 0.6 * rng.standard_normal()
    v = 8 + offset + amp * np.cos(2 * np.pi * f)[:, None] + common[:, None] + rng.normal(0, 0.5, (len(time), n))
    ds = xr.Dataset({"w": (("time", "station"), v.astype("float32"))},
                    coords={"time": time, "lat": ("station", lat), "lon": ("station", lon)})
    return ds, v, offset


def test_the_covariance_measures_how_well_each_point_knows_its_cycle():
    ds, _, offset = _stations(0, n=60, offset_sd=2.0)
    y = ds.w.copy()
    y[:, 0] = np.nan  # never observed
    y[~((ds.time >= np.datetime64("2001-01-10")) & (ds.time < np.datetime64("2001-01-20"))).values, 1] = np.nan
    post = seasonal.cycle_posterior(y, "time")
    var0 = post.covariance.values[:, 0, 0]  # the variance of each point's mean
    # a point never observed: its mean is the pooled one, as uncertain as the points' offsets spread
    assert var0[0] == pytest.approx(np.var(offset), rel=0.5)
    assert var0[1] < var0[0]  # ten days of one winter tell something
    assert var0[1] > 10 * np.median(var0[2:])  # but far less than three years do
    assert np.median(np.sqrt(var0[2:])) < 0.5
    # lazy and chunked: the same posterior
    lazy = seasonal.cycle_posterior(y.chunk(time=200, station=16), "time")
    assert lazy.covariance.chunks is not None
    np.testing.assert_allclose(lazy.covariance.values, post.covariance.values, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(lazy.coefficients.values, post.coefficients.values, rtol=1e-6, atol=1e-9)
    # the variance of the cycle at each time is x' C x
    v = seasonal.cycle_variance(post.covariance, ds.time.values[:5], ("time",))
    x = seasonal.basis(ds.time.values[:5])
    np.testing.assert_allclose(v.transpose("time", "station").values,
                               np.einsum("tj,pjk,tk->tp", x, post.covariance.values, x), rtol=1e-12)


def test_a_point_with_a_few_weeks_of_one_season_is_shrunk_towards_the_pooled_cycle():
    """Ten consecutive days are worth far fewer than ten: the persistence of the departures inflates their noise."""
    errors = []
    for seed in range(12):
        ds, v, _ = _stations(seed)
        y = ds.w.copy()
        keep = ((ds.time >= np.datetime64("2001-01-10")) & (ds.time < np.datetime64("2001-01-20"))).values
        y[~keep, 1] = np.nan
        coef = seasonal.fit_cycle(y, "time")
        truth = seasonal.fit_cycle(ds.w, "time")
        errors.append(float(abs(coef[1, 0] - truth[1, 0])))
    assert np.mean(errors) < 1.25  # its mean's error: 1.03 (1.58 with the fixed ridge of one frame before)


def test_infill_intervals_cover_points_whose_cycle_is_barely_known():
    """A station never observed, one with ten January days: the std includes their cycle's (coverage 0-0.35 before)."""
    covered = {"never": [], "ten days": [], "a month": []}
    for seed in range(3):
        ds, v, _ = _stations(seed)
        g = ds.w.values.copy()
        t = ds.time.values
        g[:, 0] = np.nan
        keep = (t >= np.datetime64("2001-01-10")) & (t < np.datetime64("2001-01-20"))
        g[~keep, 1] = np.nan
        month = (t >= np.datetime64("2001-06-01")) & (t < np.datetime64("2001-07-01"))
        g[month, 2] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = ds.assign(w=(("time", "station"), g)).np.infill("w")
        m, s = out.w_mean.values, out.w_std.values
        for key, sel in (("never", (slice(None), 0)), ("ten days", (~keep, 1)), ("a month", (month, 2))):
            covered[key].append(np.mean(np.abs(m[sel] - v[sel]) <= 1.96 * s[sel]))
    assert np.mean(covered["never"]) >= 0.75 and np.mean(covered["ten days"]) >= 0.75
    assert 0.85 <= np.mean(covered["a month"]) <= 1.0


def test_a_point_beyond_the_network_inherits_the_pooled_fits_extrapolation():
    """Irish wind, Malin Head (the windiest station, at the network's edge) hidden whole: coverage 0.28 -> 0.37."""
    ds, _, _ = _stations(1, n=20)
    lat = ds.lat.values.copy()
    lat[0], lat[1] = 60.0, float(np.mean(lat[2:]))  # never observed: far beyond the network, and in its middle
    ds = ds.assign_coords(lat=("station", lat))
    y = ds.w.copy()
    y[:, :2] = np.nan
    points = seasonal.point_covariates(ds, ("station",), ("lon", "lat"))
    var0 = seasonal.cycle_posterior(y, "time", covariates=points).covariance.values[:, 0, 0]
    assert var0[0] > 2 * var0[1]  # leverage: extrapolating the pooled mean 6° north is far less certain


def test_well_observed_points_add_no_cycle_variance_their_neighbours_share():
    """Slow weather shared by every station, each observed 80 % of three years: the std stays near the error.

    A point's cycle error is its neighbours' too and cancels (the whole cycle variance: std 1.2 x RMSE,
    coverage 0.98; a 5-day global grid of slow waves: 3.3 x, coverage 1.000, a new-user report).
    """
    for seed in range(2):
        ds, v, _ = _stations(seed, persistence=0.98)
        g = ds.w.values.copy()
        hide = np.random.default_rng(seed).random(g.shape) < 0.2
        g[hide] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = ds.assign(w=(("time", "station"), g)).np.infill("w")
        e, s = (out.w_mean.values - v)[hide], out.w_std.values[hide]
        assert np.median(s) < 1.12 * np.sqrt(np.mean(e**2))
        assert 0.92 <= np.mean(np.abs(e) <= 1.96 * s) <= 0.975
