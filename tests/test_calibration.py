"""Calibration helpers (gap-matched weights, per-gap-size std factors) and the per-task elevation trend."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from geonp.calibration import (
    beats_pooled,
    coverage_factor,
    gap_distances,
    gap_scales,
    match_weights,
    std_fit,
    window_context,
)
from geonp.data import Task, gap_to_context, nearest_distance
from geonp.data.tasks import make_task
from geonp.errors import ConfigError
from geonp.normalise import Normaliser


def grid_xy(n=20):
    g = np.stack(np.meshgrid(np.arange(n, dtype=float), np.arange(n, dtype=float), indexing="ij"), -1)
    return g.reshape(-1, 2)


def test_gap_distances_see_the_size_of_the_gaps():
    xy = grid_xy()
    values = np.ones((1, 3, len(xy)))
    block = (np.abs(xy[:, 0] - 10) <= 3) & (np.abs(xy[:, 1] - 10) <= 3)  # a 7 x 7 hole
    values[:, :, block] = np.nan
    d = gap_distances(values, xy, np.random.default_rng(0))
    assert len(d) == 3 * 49
    assert d.min() == 1.0 and d.max() == 4.0  # the centre of the hole is 4 cells from the nearest data
    scattered = np.ones((1, 3, len(xy)))
    scattered[:, :, ::7] = np.nan
    assert gap_distances(scattered, xy, np.random.default_rng(0)).max() == 1.0
    assert len(gap_distances(np.ones((1, 2, len(xy))), xy, np.random.default_rng(0))) == 0  # no gaps


def test_gap_distances_cost_is_bounded_by_the_region():
    xy = grid_xy(100)
    values = np.ones((1, 1, len(xy)))
    values[0, 0, ::3] = np.nan
    d = gap_distances(values, xy, np.random.default_rng(1), region=500)
    assert 0 < len(d) <= 500 and d.max() == 1.0


def test_match_weights_reproduce_the_wanted_histogram():
    rng = np.random.default_rng(0)
    have = np.exp(rng.uniform(np.log(0.1), np.log(10), 20000))
    wanted = np.exp(rng.normal(np.log(3.0), 0.3, 5000))
    w = match_weights(have, wanted)
    assert np.average(np.log(have), weights=w) == pytest.approx(np.log(3.0), abs=0.05)
    assert (w[have < 0.5] == 0).all()  # distances the gaps never show count for nothing
    np.testing.assert_array_equal(match_weights(have, np.zeros(0)), np.ones(len(have)))



def test_nearest_distance_matches_brute_force():
    rng = np.random.default_rng(2)
    pts, others = rng.uniform(0, 50, (3000, 2)), rng.uniform(0, 50, (700, 2))
    brute = np.sqrt(((pts[:, None] - others[None]) ** 2).sum(-1)).min(1)
    np.testing.assert_allclose(nearest_distance(pts, others, chunk=256), brute, rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(nearest_distance(pts, others), brute, rtol=1e-6, atol=1e-5)  # default: by pairs
    assert np.isinf(nearest_distance(pts[:3], np.zeros((0, 2)))).all()


def test_gap_to_context_only_counts_the_targets_own_frame():
    xc = np.array([[0.0, 0.0, 0.0], [5.0, 0.0, 1.0]])
    xt = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 1.0], [1.0, 0.0, 2.0]])
    task = Task(xc=xc, yc=np.zeros((2, 1)), xt=xt)
    np.testing.assert_allclose(gap_to_context(task), [1.0, 4.0, np.inf])


def test_gap_scales_follow_the_error_growth_with_distance():
    rng = np.random.default_rng(3)
    d = np.exp(rng.uniform(np.log(0.2), np.log(8.0), 30000))
    true_scale = 0.5 + 0.25 * d  # the network's std is too small far from the data, too large near it
    z2 = (true_scale * rng.standard_normal(len(d))) ** 2
    centres, scales = gap_scales(d, z2, np.ones(len(d)))
    assert len(centres) == 6 and np.all(np.diff(centres) > 0)
    np.testing.assert_allclose(scales, 0.5 + 0.25 * np.asarray(centres), rtol=0.1)
    norm = Normaliser(gap_distance=centres, gap_std_scale=scales)
    f = norm.std_factor(distance=np.array([0.01, centres[2], 100.0, np.inf]))
    np.testing.assert_allclose(f, [scales[0], scales[2], scales[-1], scales[-1]])
    # weights decide where the bins lie: only the distances the data's gaps show
    near_only = gap_scales(d, z2, (d < 1.0).astype(float))[0]
    assert max(near_only) < 1.0
    assert gap_scales(d[:50], z2[:50], np.ones(50)) == ((), ())
    assert len(gap_scales(d[:400], z2[:400], np.ones(400))[0]) == 2  # small bins join their neighbours
    with pytest.raises(ConfigError, match="positive increasing distances"):
        Normaliser(gap_distance=(1.0, 0.5), gap_std_scale=(1.0, 1.0))


def test_elevation_trend_is_quadratic_from_thirty_points():
    rng = np.random.default_rng(4)
    e = rng.uniform(1000, 3500, 60)
    u = (e - e.mean()) / 1000
    y = 20 - 6.5 * u + 1.5 * u**2
    norm = Normaliser()
    basis, coef = fit = norm.elevation_fit(y, e)
    assert basis.e0 == pytest.approx(e.mean()) and basis.l0 is None
    np.testing.assert_allclose(coef, [-6.5, 1.5], atol=1e-9)
    np.testing.assert_allclose(norm.elevation_offset(fit, e), y - 20, atol=1e-9)
    assert len(norm.elevation_fit(y[:20], e[:20])[1]) == 1  # 10..29 points: a lapse rate only
    assert norm.elevation_fit(y[:9], e[:9]) is None
    assert norm.elevation_fit(y, np.full(60, 1500.0)) is None
    assert norm.elevation_fit(y, np.where(np.arange(60) == 3, np.nan, e)) is None
    assert Normaliser(elevation_trend=False).elevation_fit(y, e) is None


def test_elevation_trend_varies_across_the_task_from_fifty_sites():
    """With positions and 50+ sites, a lapse rate that changes across the region is fitted exactly.

    It is evaluated at new points; fewer sites (or no positions) keep one lapse rate for the whole task.
    """
    rng = np.random.default_rng(5)
    xy = rng.uniform(-5, 5, (80, 2)) + 100.0  # far from the origin: centred inside the basis
    e = rng.uniform(1000, 3500, 80)
    u = (e - e.mean()) / 1000

    def field(xy, u):
        X = xy[:, 0] - 100.0
        return 20 - (6.5 + 0.4 * X) * u + 0.3 * (xy[:, 1] - 100.0)

    y = field(xy, u)
    norm = Normaliser()
    basis, coef = fit = norm.elevation_fit(y, e, None, xy)
    assert basis.xy0 is not None and basis.size == 11
    xy2, e2 = rng.uniform(-5, 5, (10, 2)) + 100.0, rng.uniform(1000, 3500, 10)
    got = norm.elevation_offset(fit, e2, None, xy2) - norm.elevation_offset(fit, e, None, xy).mean()
    want = field(xy2, (e2 - e.mean()) / 1000) - y.mean()
    np.testing.assert_allclose(got, want, atol=1e-8)
    assert norm.elevation_fit(y[:49], e[:49], None, xy[:49])[0].xy0 is None  # 49 sites: one lapse rate
    assert norm.elevation_fit(y, e)[0].xy0 is None  # no positions
    with pytest.raises(ValueError, match="needs the points' positions"):
        basis.columns(e, None)
    # through make_task: the network sees no residual, the targets get the trend back
    task = make_task(norm, xy, y, None, e, xy2, None, e2)  # space only: positions are the whole x
    np.testing.assert_allclose(task.yc, 0.0, atol=1e-6)
    np.testing.assert_allclose(task.offset + task.shift, field(xy2, (e2 - e.mean()) / 1000), atol=1e-8)


def _seasonal_frames(rng, n_frames=5, n=60, jumps=(0.0, 6.0, 11.0, 14.0, 12.0)):
    """Stations on ``n_frames`` monthly frames: a mean per frame, a lapse rate and a small anomaly."""
    e = rng.uniform(1000, 3500, n)
    u = (e - e.mean()) / 1000
    anomaly = 0.5 * rng.standard_normal(n)  # persists from frame to frame, like a station's exposure
    y = np.concatenate([jumps[f] - 6.5 * u + 1.5 * u**2 + anomaly for f in range(n_frames)])
    return y, np.repeat(np.arange(n_frames, dtype=float), n), np.tile(e, n_frames), anomaly, e


def test_frame_offsets__recover_frame_means_and_lapse_rate():
    """Jumps between frames larger than the spread inside a frame: each frame's mean and the trend go."""
    rng = np.random.default_rng(6)
    y, t, e, anomaly, e1 = _seasonal_frames(rng)
    norm = Normaliser()
    off_c, off_t, _ = norm.frame_offsets(y, t, e, np.full(7, 3.0), e1[:7])
    resid = y - off_c
    u = (e1 - e1.mean()) / 1000
    a = np.linalg.lstsq(np.c_[np.ones_like(u), u, u**2], anomaly, rcond=None)[0]  # the part the fit absorbs
    np.testing.assert_allclose(resid, np.tile(anomaly - a[0] - a[1] * u - a[2] * u**2, 5), atol=1e-9)
    ut = u[:7]
    np.testing.assert_allclose(off_t, 14.0 + a[0] + (a[1] - 6.5) * ut + (a[2] + 1.5) * ut**2, atol=1e-9)
    task = make_task(norm, np.c_[np.zeros((len(y), 2)), t], y, None, e, np.c_[np.zeros((7, 2)), np.full(7, 3.0)],
                     None, e1[:7])
    assert abs(task.shift) < 1e-9 and task.scale == pytest.approx(np.std(resid))
    np.testing.assert_allclose(task.to_data(np.zeros(7), np.ones(7))[0], off_t)


def test_frame_offsets__a_lapse_rate_per_frame():
    """A lapse rate that changes from frame to frame (with the season) is fitted per frame.

    That is when every frame has 10 points spread in elevation; with a sparser or flat frame the
    frames share one.
    """
    rng = np.random.default_rng(8)
    n, rates, jumps = 40, (-4.0, -5.0, -6.5, -8.0), (0.0, 6.0, 11.0, 14.0)
    e = rng.uniform(1000, 3500, n)
    u = (e - e.mean()) / 1000
    y = np.concatenate([jumps[f] + rates[f] * u for f in range(4)])
    t, ee = np.repeat(np.arange(4.0), n), np.tile(e, 4)
    norm = Normaliser()
    off_c, off_t, _ = norm.frame_offsets(y, t, ee, np.full(5, 3.0), e[:5])
    np.testing.assert_allclose(off_c, y, atol=1e-9)
    np.testing.assert_allclose(off_t, 14.0 - 8.0 * u[:5], atol=1e-9)
    keep = (t != 0.0) | (np.arange(len(t)) < 9)  # 9 points on frame 0: one lapse rate for all
    off_c, _, _ = norm.frame_offsets(y[keep], t[keep], ee[keep], np.full(5, 3.0), e[:5])
    assert np.abs(y[keep] - off_c).max() > 0.1
    flat, yf = ee.copy(), y.copy()
    flat[t == 0.0] = 2000.0 + 0.5 * rng.standard_normal(n)  # frame 0 within a metre: no lapse rate of its own
    yf[t == 0.0] = 0.1 * rng.standard_normal(n)
    _, off_t, _ = norm.frame_offsets(yf, t, flat, np.zeros(5), e[:5])  # targets on frame 0, 1000-3500 m
    assert np.abs(off_t).max() < 20.0  # the shared lapse rate, not one fitted to noise over a metre


def test_frame_offsets__only_where_they_apply():
    """No frame means: one frame, small jumps, targets off the context frames or on several, sparse, off."""
    rng = np.random.default_rng(7)
    y, t, e, _, e1 = _seasonal_frames(rng)
    norm, tt = Normaliser(), np.full(4, 2.0)
    assert norm.frame_offsets(y, t, e, tt, e1[:4]) is not None
    assert norm.frame_offsets(y[:60], t[:60], e[:60], np.zeros(4), e1[:4]) is None  # one frame
    small, *_ = _seasonal_frames(np.random.default_rng(7), jumps=(0.0, 0.1, 0.2, 0.1, 0.0))
    assert norm.frame_offsets(small, t, e, tt, e1[:4]) is None  # the model's time kernel handles these
    assert norm.frame_offsets(y, t, e, np.full(4, 9.0), e1[:4]) is None  # a forecast: no context on that frame
    assert norm.frame_offsets(y, t, e, np.array([2.0, 2.0, 9.0, 2.0]), e1[:4]) is None  # one target off them
    keep = (t != 2.0) | (np.arange(len(t)) % 60 < 4)  # 4 points left on the target frame
    assert norm.frame_offsets(y[keep], t[keep], e[keep], tt, e1[:4]) is None
    assert Normaliser(frame_means=False).frame_offsets(y, t, e, tt, e1[:4]) is None
    off_c, off_t, _ = norm.frame_offsets(y, t, None, tt, None)  # without elevations: the frame means only
    np.testing.assert_allclose(off_t, np.full(4, y[t == 2.0].mean()))


def test_frame_offsets__targets_on_several_frames_get_their_own_frame_means():
    """Targets of one task on two frames (frame groups): each gets what it would get alone."""
    y, t, e, _, e1 = _seasonal_frames(np.random.default_rng(7))
    norm, tt = Normaliser(), np.array([1.0, 2.0, 2.0, 1.0])
    off_c, off_t, _ = norm.frame_offsets(y, t, e, tt, e1[:4])
    for f in (1.0, 2.0):
        alone_c, alone_t, _ = norm.frame_offsets(y, t, e, np.full(4, f), e1[:4])
        np.testing.assert_allclose(off_c, alone_c)
        np.testing.assert_allclose(off_t[tt == f], alone_t[tt == f])


def test_frame_means__saved_models_without_the_field_keep_the_old_standardisation():
    """A normaliser saved before the option reads back with it off; new ones round-trip it."""
    d = Normaliser().to_dict()
    assert d["frame_means"] is True and Normaliser.from_dict(d).frame_means is True
    del d["frame_means"]
    assert Normaliser.from_dict(d).frame_means is False


def test_std_fit_recovers_the_variance_model():
    rng = np.random.default_rng(5)
    sigma = rng.uniform(0.2, 2.0, 40000)
    err = np.sqrt((1.5 * sigma) ** 2 + 0.6**2) * rng.standard_normal(len(sigma))
    a, b = std_fit(err, sigma, steps=101)
    assert a == pytest.approx(1.5, rel=0.05) and b == pytest.approx(0.6, rel=0.15)
    # a std that says nothing about the errors: the fit is a constant std
    a, b = std_fit(0.7 * rng.standard_normal(len(sigma)), sigma)
    assert a < 0.1 and b == pytest.approx(0.7, rel=0.05)
    # a std that is exactly right
    a, b = std_fit(sigma * rng.standard_normal(len(sigma)), sigma)
    assert a == pytest.approx(1.0, rel=0.05) and b < 0.2
    assert std_fit(np.zeros(0), np.zeros(0)) == (1.0, 0.0)


def test_std_fit_weights_equal_repeated_points():
    """Integer weights give the fit of the points repeated that many times; zero weights drop points."""
    rng = np.random.default_rng(8)
    sigma = rng.uniform(0.2, 2.0, 300)
    err = np.sqrt((1.2 * sigma) ** 2 + 0.4**2) * rng.standard_normal(300)
    w = rng.integers(0, 4, 300)
    assert std_fit(err, sigma, weights=w) == pytest.approx(std_fit(np.repeat(err, w), np.repeat(sigma, w)), rel=1e-9)


def test_infill_std_adds_the_nugget_and_keeps_missing():
    """The calibration's nugget is added in quadrature; defaults (models saved before it) change nothing."""
    std = np.array([1.0, 0.1, np.nan], dtype=np.float32)
    got = Normaliser(infill_std_base=2.0, infill_std_extra=0.5).infill_std(std)
    np.testing.assert_allclose(got[:2], np.sqrt((2.0 * std[:2]) ** 2 + 0.25), rtol=1e-6)
    assert np.isnan(got[2]) and got.dtype == np.float32
    assert Normaliser().infill_std(std) is std
    d = Normaliser(infill_std_extra=0.3).to_dict()
    assert Normaliser.from_dict(d).infill_std_extra == 0.3
    del d["infill_std_extra"], d["infill_std_base"]
    assert Normaliser.from_dict(d).infill_std(std) is std


def test_coverage_factor_widens_heavy_tails_to_the_nominal_coverage():
    rng = np.random.default_rng(0)
    laplace = rng.laplace(size=200_000)
    z = laplace / laplace.std()  # unit variance: what a maximum-likelihood Gaussian std gives
    assert np.mean(np.abs(z) < 1.96) < 0.94
    c = coverage_factor(z)
    assert c > 1.03
    assert np.mean(np.abs(z) < 1.96 * c) == pytest.approx(0.95, abs=1e-3)
    assert coverage_factor(rng.standard_normal(200_000)) == pytest.approx(1.0, abs=0.01)
    assert coverage_factor(0.5 * rng.standard_normal(1000)) == 1.0  # never narrows
    assert coverage_factor(np.array([np.nan])) == 1.0
    # split conformal's finite-sample level: 19 groups -> ceil(20 * 0.95) / 19 = 1, the largest |z|
    z = np.linspace(-3.0, 3.0, 1001)
    assert coverage_factor(z, groups=19) == pytest.approx(3.0 / 1.959964, rel=1e-5)
    assert coverage_factor(z, groups=99) > coverage_factor(z) > 1.0  # 0.96 quantile beyond the 0.95 one


def test_window_context_matches_the_prediction_window():
    # a window reaches tile / sqrt(2) + halo units from its centre: pi r^2 observed points per frame
    r = 8 / np.sqrt(2) + 3
    assert window_context({"tile": 8.0, "halo": 3.0}, frames=2) == round(np.pi * r * r * 2)
    assert window_context({"tile": 8.0, "halo": 3.0}, frames=7, keep=0.5) == round(np.pi * r * r * 3.5)
    assert window_context({"tile": 1000.0, "halo": 3.0}, frames=7) == 4096  # capped
    assert window_context({"tile": 0.1, "halo": 0.0}, frames=1) == 32  # never below a usable task
    # a fitted model keeps its unit: on data observed at twice its spacing a window holds a quarter of the points
    assert window_context({"tile": 8.0, "halo": 3.0}, frames=2, spacing=2.0) == round(np.pi * r * r * 2 / 4)


def test_observed_spacing_is_one_in_the_data_own_unit_and_grows_with_the_gaps():
    """A fitted model's unit is its training data's spacing: sparser data hold fewer points per unit area."""
    from test_tiling import grid

    from geonp import geo
    from geonp.chunked import build_problem

    ds = grid(nlat=12, nlon=16, times=2)
    layout = geo.describe(ds, "t2m")[1]
    own = build_problem(ds, layout, Normaliser(), observed_fraction=0.25)  # the shipped weights' unit
    assert own.observed_spacing(0.25) == pytest.approx(1.0)
    fitted = build_problem(ds, layout, Normaliser(space_unit_km=own.unit_km / 2), observed_fraction=0.25)
    assert fitted.observed_spacing(0.25) == pytest.approx(2.0)  # the fit data were observed every cell
    assert fitted.observed_spacing(1.0) == pytest.approx(1.0)


# ------------------------------------------------------------------------ what a calibration reads


def _layout(ds, var):
    from geonp import geo

    return geo.describe(ds, var)[1]


def test_calibration_sample__small_data_are_read_whole_and_long_histories_from_the_end():
    from geonp.calibrate_input import calibration_sample

    t = pd.date_range("2020-01-01", periods=100, freq="h")
    ds = xr.Dataset({"v": (("time", "lat", "lon"), np.zeros((100, 4, 5)))},
                    coords={"time": t, "lat": [50.0, 50.5, 51.0, 51.5], "lon": [0.0, 0.5, 1.0, 1.5, 2.0]})
    layout = _layout(ds, "v")
    assert calibration_sample(ds, layout, 10) == {"time": slice(0, 100)}
    # 20 values per frame, a budget of 400: the last 20 frames (more than the 10 needed)
    assert calibration_sample(ds, layout, 10, max_values=400) == {"time": slice(80, 100)}
    assert calibration_sample(ds, layout, 30, max_values=400) == {"time": slice(70, 100)}


def test_calibration_sample__large_grids_are_cropped_to_their_centre():
    from geonp.calibrate_input import calibration_sample

    t = pd.date_range("2020-01-01", periods=50, freq="h")
    ds = xr.Dataset({"v": (("time", "lat", "lon"), np.zeros((50, 100, 120), dtype=np.float32))},
                    coords={"time": t, "lat": np.linspace(60, 35.25, 100), "lon": np.linspace(-10, 19.75, 120)})
    index = calibration_sample(ds, _layout(ds, "v"), 40, max_values=40 * 1600)
    assert index == {"time": slice(10, 50), "lat": slice(30, 70), "lon": slice(40, 80)}  # 40 x 40 cells
    assert ds.isel(index).v.size == 40 * 1600


def test_calibration_sample__stations_keep_the_nearest_to_the_centre():
    from geonp.calibrate_input import calibration_sample

    rng = np.random.default_rng(0)
    n = 3000
    lon, lat = rng.uniform(-110, -100, n), rng.uniform(35, 42, n)
    ds = xr.Dataset({"tmax": (("time", "station"), np.zeros((12, n)))},
                    coords={"time": pd.date_range("2000-01-01", periods=12, freq="MS"),
                            "lon": ("station", lon), "lat": ("station", lat)})
    index = calibration_sample(ds, _layout(ds, "tmax"), 12, max_values=12 * 1024)
    kept = index["station"]
    assert index["time"] == slice(0, 12) and len(kept) == 1024 and len(set(kept.tolist())) == 1024
    x = (lon - np.median(lon)) * np.cos(np.deg2rad(np.median(lat)))
    d = np.hypot(x, lat - np.median(lat))
    assert d[kept].max() <= np.sort(d)[1023] + 1e-9  # the 1,024 nearest
    assert np.all(np.diff(lat[kept]) >= 0)  # in the order of their positions, whatever the input's
    perm = rng.permutation(n)
    again = calibration_sample(ds.isel(station=perm), _layout(ds, "tmax"), 12, max_values=12 * 1024)["station"]
    np.testing.assert_array_equal(perm[again], kept)


# ------------------------------------------------------------------------ targets deep inside a hole


def _hole_task(radius: float, frames=(0.0,)):
    xy = grid_xy(20)
    near = np.abs(xy - 9.5).max(1) < radius  # a square hole in the middle of a unit lattice
    xc = np.concatenate([np.c_[xy[~near], np.full((~near).sum(), t)] for t in frames])
    xt = np.c_[xy[near], np.zeros(near.sum())]
    return Task(xc=xc, yc=np.zeros((len(xc), 1)), xt=xt)


def test_coarsen_far__leaves_tasks_within_reach_and_forecasts_alone():
    from geonp.data import coarsen_far

    near = _hole_task(2.0)  # every target within 2 units of the context
    assert coarsen_far(near) is near
    forecast = _hole_task(5.0, frames=(-1.0,))  # no context in the targets' frame
    assert coarsen_far(forecast) is forecast


def test_coarsen_far__puts_the_farthest_target_at_the_reach_and_keeps_the_shape():
    from geonp.data.tasks import FAR_GAP_UNITS, coarsen_far

    task = _hole_task(5.0)
    gap = gap_to_context(task)
    out = coarsen_far(task)
    np.testing.assert_allclose(gap_to_context(out).max(), FAR_GAP_UNITS)
    np.testing.assert_allclose(gap_to_context(out) * gap.max() / FAR_GAP_UNITS, gap)  # one factor for all
    np.testing.assert_array_equal(out.xt[:, 2], task.xt[:, 2])  # time untouched
    assert out.yc is task.yc
    capped = coarsen_far(task, reach=0.5, max_factor=2.0)
    np.testing.assert_allclose(gap_to_context(capped), gap / 2.0)


def test_calibration_fields__nothing_to_calibrate_on():
    """calibrate=True says there is nothing to calibrate on; "auto" falls back to the shipped weights ({})."""
    from geonp import geo
    from geonp.calibrate_input import calibration_fields
    from geonp.errors import NoDataError

    t = pd.date_range("2020-01-01", periods=3, freq="h")
    ds = xr.Dataset({"v": (("time", "lat", "lon"), np.full((3, 4, 5), np.nan))},
                    coords={"time": t, "lat": [50.0, 50.5, 51.0, 51.5], "lon": [0.0, 0.5, 1.0, 1.5, 2.0]})
    layout = geo.describe(ds, "v")[1]
    assert calibration_fields("te-pt-tnp", ds, layout, "infill", auto=True) == {}
    with pytest.raises(NoDataError, match=r"calibrate=True found nothing to calibrate on .*Pass calibrate=False"):
        calibration_fields("te-pt-tnp", ds, layout, "infill")


def test_calibration__a_reversed_grid_axis_calibrates_alike():
    """The calibration draws by array position: grids are put north up, x increasing, first."""
    from geonp.geo import canonical_flips, describe

    rng = np.random.default_rng(3)
    lat, lon = np.arange(50.0, 56.0, 0.25), np.arange(-4.0, 3.0, 0.25)
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    frames = [280 + np.sin(la + 0.3 * t) + np.cos(0.7 * lo - 0.2 * t) for t in range(3)]
    values = np.where(rng.random((3, *la.shape)) < 0.6, np.stack(frames), np.nan)
    ds = xr.Dataset({"t2m": (("time", "lat", "lon"), values, {"units": "K"})},
                    coords={"time": pd.date_range("2020-01-01", periods=3, freq="h"), "lat": lat, "lon": lon})
    prepared, layout = describe(ds, "t2m")
    assert canonical_flips(prepared, layout) == {"lat": slice(None, None, -1)}
    assert canonical_flips(*describe(ds.isel(lat=slice(None, None, -1)), "t2m")) == {}
    across = ds.assign_coords(lon=(np.arange(175.0, 182.0, 0.25) + 180.0) % 360.0 - 180.0)  # 175 .. -178.25
    assert "lon" not in canonical_flips(*describe(across, "t2m"))  # increasing across the dateline
    assert canonical_flips(*describe(across.isel(lon=slice(None, None, -1)), "t2m")) == {
        "lat": slice(None, None, -1), "lon": slice(None, None, -1)}
    out = ds.np.infill("t2m", calibrate=True, land="none")
    flipped = ds.isel(lat=slice(None, None, -1), lon=slice(None, None, -1)).np.infill("t2m", calibrate=True,
                                                                                       land="none")
    flipped = flipped.isel(lat=slice(None, None, -1), lon=slice(None, None, -1))
    np.testing.assert_allclose(flipped.t2m_mean.values, out.t2m_mean.values, atol=2e-4)
    np.testing.assert_allclose(flipped.t2m_std.values, out.t2m_std.values, rtol=1e-3, atol=2e-4)


def _places_with_shared_errors(n_places, repeats, scale_of, rng):
    """Points of ``n_places`` places, each held out ``repeats`` times with one error (as a station on many tasks)."""
    place = np.repeat(np.arange(n_places), repeats)
    d = np.repeat(np.exp(rng.uniform(np.log(0.3), np.log(5.0), n_places)), repeats)
    error = np.repeat(rng.standard_normal(n_places), repeats) * scale_of(d)
    return d, error**2, place


def test_beats_pooled__keeps_real_differences_and_drops_those_of_a_few_places():
    rng = np.random.default_rng(5)
    # a real growth with distance over 3000 places: the bins predict held-out places better
    d, z2, place = _places_with_shared_errors(3000, 4, lambda d: 0.5 + 0.25 * d, rng)
    labels = np.digitize(d, [1.0, 2.0])
    assert beats_pooled(labels, z2, np.ones(len(d)), place)
    # no difference, 170 places each seen 12 times: bins fitted to them are noise
    kept = 0
    for seed in range(20):
        d, z2, place = _places_with_shared_errors(170, 12, lambda d: np.ones_like(d), np.random.default_rng(seed))
        kept += beats_pooled(np.digitize(d, [0.7, 1.2, 2.0, 3.0]), z2, np.ones(len(d)), place, seed=seed)
    assert kept <= 4
    # one label, or fewer places than folds: nothing to choose
    assert not beats_pooled(np.zeros(100, int), rng.random(100), np.ones(100), np.arange(100))
    assert not beats_pooled(np.arange(100) % 2, rng.random(100), np.ones(100), np.arange(100) % 3)
    # points labelled -1 keep factor 1 and do not count
    assert not beats_pooled(np.full(100, -1), rng.random(100), np.ones(100), np.arange(100))


def test_gap_scales__with_places_one_bin_unless_the_bins_earn_it():
    rng = np.random.default_rng(6)
    d, z2, place = _places_with_shared_errors(170, 12, lambda d: np.ones_like(d), rng)
    w = np.ones(len(d))
    assert len(gap_scales(d, z2, w)[0]) > 1  # without places: bins of 100 points each
    centres, scales = gap_scales(d, z2, w, groups=place)
    assert len(centres) == 1 and scales[0] == pytest.approx(np.sqrt(np.mean(z2)))
    d, z2, place = _places_with_shared_errors(3000, 4, lambda d: 0.5 + 0.25 * d, rng)
    centres, scales = gap_scales(d, z2, np.ones(len(d)), groups=place)
    assert len(centres) == 6
    np.testing.assert_allclose(scales, 0.5 + 0.25 * np.asarray(centres), rtol=0.15)


def test_a_fit_on_gap_free_data_calibrates_for_sparser_fields(monkeypatch):
    """A model fitted on complete fields gave too narrow intervals on gappy ones (a new-user report).

    ERA5, 50 % hidden: coverage 0.91, now 0.98. Without gaps every frame of a task is thinned, down to 5 %.
    """
    from test_api import field

    import geonp  # noqa: F401  registers ds.np
    import geonp.calibration as cal

    seen = []

    class Spy(cal.TaskSampler):
        def __init__(self, values, window, norm, config, raw=None):
            seen.append(config)
            super().__init__(values, window, norm, config=config, raw=raw)

    monkeypatch.setattr(cal, "TaskSampler", Spy)
    ds, _ = field()
    complete = ds.fillna(ds.t2m.mean())
    complete.np.fit("t2m", steps=0, progress=False, calibration_tasks=4)
    assert seen[-1].keep_range == cal.GAP_FREE_KEEP == (0.05, 0.95) and seen[-1].thin_other_frames
    ds.np.fit("t2m", steps=0, progress=False, calibration_tasks=4)  # gaps: the held-out share prediction sees
    assert seen[-1].keep_range == (0.7, 0.95) and not seen[-1].thin_other_frames


def test_a_fitted_model_recalibrated_on_sparser_data_draws_tasks_the_size_of_its_windows(monkeypatch):
    """Its unit stays the training data's spacing, so a window holds fewer points (it held 5 windows' worth)."""
    from test_tiling import grid

    import geonp.calibration as calibration

    full = grid(nlat=12, nlon=16, times=3, keep=1.0).rename(t2m="v")
    fitted = full.np.fit("v", steps=1, progress=False, covariates=[], calibration_tasks=2)
    seen = []
    real = calibration.TaskSampler

    def spy(values, window, norm, config, **kw):
        seen.append((config.max_context, float(np.isfinite(values).mean())))
        return real(values, window, norm, config=config, **kw)

    monkeypatch.setattr(calibration, "TaskSampler", spy)
    sparse = grid(nlat=12, nlon=16, times=3, keep=0.25, seed=1).rename(t2m="v")
    sparse.np.fit("v", model=fitted, steps=0, progress=False, calibration_tasks=2)
    full.np.fit("v", model=fitted, steps=0, progress=False, calibration_tasks=2)
    (on_sparse, f), (on_full, _) = seen
    frames = 2 * fitted.settings["half_window"] + 1
    spacing = 1 / np.sqrt(f)  # in the model's unit, the fit data's spacing
    kept_sparse = (np.mean((0.7, 0.95)) + frames - 1) / frames
    assert on_sparse == window_context(fitted.settings, frames, kept_sparse, spacing=spacing)
    assert on_full == window_context(fitted.settings, frames, np.mean(calibration.GAP_FREE_KEEP))
    assert on_sparse < 0.3 * window_context(fitted.settings, frames, kept_sparse)  # before: regions 4 x too big


def test_per_lead_stds_never_fall_below_an_earlier_lead_s():
    """Irish wind, each lead fitted alone: mean std 4.64 / 4.23 / 5.29 knots at +1 / +2 / +3 d, +2 d covered 0.914."""
    from geonp.std_fits import growing_with_lead

    rng = np.random.default_rng(0)
    leads = np.repeat([1, 2, 3], 400)
    std = rng.uniform(0.5, 1.5, leads.size)
    fits = [(2.0, 0.5), (1.0, 0.2), (3.0, 0.0)]
    out = growing_with_lead(fits, std, leads)

    def rms(k, a, b):
        return np.sqrt(np.mean((a * std[leads == k]) ** 2 + b * b))

    assert out[0] == fits[0] and out[2] == fits[2]  # growing already: kept
    assert rms(2, *out[1]) == pytest.approx(rms(1, *fits[0]))  # raised to the earlier lead's
    assert out[1][0] / fits[1][0] == pytest.approx(out[1][1] / fits[1][1])  # both parts by one factor
    assert growing_with_lead([(1.0, 0.0), (0.5, 0.0)], std, np.ones_like(leads)) == [(1.0, 0.0), (0.5, 0.0)]  # no +2
