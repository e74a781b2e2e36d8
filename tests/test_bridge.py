"""Frames missing at every point of an infill of departures, bridged from the frames either side (geonp.bridge)."""

import warnings

import dask.array as da
import numpy as np
import pytest

import geonp
from geonp import bridge
from geonp.bridge import MAX_GAP, bridge_empty, frame_stats


def _ar1(n_t=3000, n_p=40, rho=0.6, seed=0):
    rng = np.random.default_rng(seed)
    scale = np.linspace(0.5, 3.0, n_p)
    x = np.zeros((n_t, n_p))
    for t in range(n_t):
        x[t] = (rho * x[t - 1] if t else 0.0) + np.sqrt(1 - rho**2) * rng.standard_normal(n_p)
    return x * scale, scale


def test_frame_stats_measure_persistence_spread_and_variogram(monkeypatch):
    y, scale = _ar1()
    y[[5, 6, 900]] = np.nan
    y[np.random.default_rng(1).random(y.shape) < 0.1] = np.nan
    stats = frame_stats(y)
    np.testing.assert_allclose(stats.rho[:4], [1.0, 0.6, 0.36, 0.216], atol=0.05)
    np.testing.assert_allclose(stats.variogram[:4], [0.0, 0.4, 0.64, 0.784], atol=0.05)  # 1 - rho^k
    np.testing.assert_allclose(stats.spread, scale, rtol=0.1)  # each point's own spread
    assert stats.rho.shape == stats.variogram.shape == (2 * MAX_GAP + 1,)
    # the variable itself, each point's mean taken out first: the same statistics as its departures
    centred = frame_stats(y + np.linspace(-50, 300, y.shape[1]), centre=True)
    for a, b in zip(centred, stats):
        np.testing.assert_allclose(a, b, rtol=0.02, atol=0.01)
    # streamed in blocks of frames (a long lazy record) or read whole: the same statistics
    monkeypatch.setattr(bridge, "_BLOCK_VALUES", 40 * 37)
    for streamed in (frame_stats(y), frame_stats(da.from_array(y, chunks=(100, 20)))):
        for a, b in zip(streamed, stats):
            np.testing.assert_allclose(a, b, rtol=1e-12)


def _record(n_t=200, n_p=12, seed=0):
    y, _ = _ar1(n_t, n_p, rho=0.8, seed=seed)
    mean = y + np.random.default_rng(seed + 1).normal(0, 0.1, y.shape)  # an infill's mean and std
    std = np.full(y.shape, 0.3)
    obs = np.where(np.random.default_rng(seed + 2).random(y.shape) < 0.7, y, np.nan)
    return obs, mean.astype(np.float32), std.astype(np.float32)


def _observed_near(obs, t, p):
    """The frames nearest ``t`` on each side (within MAX_GAP) where point ``p`` is observed."""
    before = [u for u in range(t - 1, max(t - MAX_GAP, 0) - 1, -1) if np.isfinite(obs[u, p])][:1]
    after = [u for u in range(t + 1, min(t + MAX_GAP, len(obs) - 1) + 1) if np.isfinite(obs[u, p])][:1]
    return before + after


def test_a_frame_missing_whole_gets_the_gaussian_conditional_given_the_frames_either_side():
    obs, mean, std = _record()
    obs[50] = np.nan  # missing whole; frames 49 and 51 partly observed
    obs[100:103] = np.nan  # a run of three
    mean[[50, 100, 101, 102]] = np.nan  # no guess of the network there (time_window=0): the bridge alone
    m, s = (np.asarray(a) for a in da.compute(*bridge_empty(da.from_array(mean), da.from_array(std), obs, 0)))
    keep = np.setdiff1d(np.arange(len(obs)), [50, 100, 101, 102])
    np.testing.assert_array_equal(m[keep], mean[keep])  # frames with data keep the network's prediction
    np.testing.assert_array_equal(s[keep], std[keep])
    st = frame_stats(obs)
    for t in (50, 100, 101):
        for p in range(obs.shape[1]):
            near = _observed_near(obs, t, p)  # each point's nearest observed frames (never the other predictions)
            v = obs[near, p]
            s2 = st.spread[p] ** 2
            c = s2 * st.rho[np.abs(np.array(near) - t)]
            S = s2 * st.rho[np.abs(np.subtract.outer(near, near))]
            w = np.linalg.solve(S, c)
            assert m[t, p] == pytest.approx(w @ v, rel=1e-5, abs=1e-5)
            assert s[t, p] == pytest.approx(np.sqrt(s2 - w @ c), rel=1e-5)
    truth = _ar1(200, 12, rho=0.8)[0]
    assert np.sqrt(np.mean((m[50] - truth[50]) ** 2)) < 0.7 * np.sqrt(np.mean(truth[50] ** 2))  # beats the cycle


def test_bridged_frames_do_not_depend_on_the_chunks():
    obs, mean, std = _record(seed=3)
    obs[[0, 7, 8, 40, 41, 119, 199]] = np.nan
    whole = da.compute(*bridge_empty(da.from_array(mean), da.from_array(std), obs, 0))
    for chunks in ((5, 4), (13, 5), (61, 12)):
        part = da.compute(*bridge_empty(da.from_array(mean, chunks=chunks), da.from_array(std, chunks=chunks),
                                        da.from_array(obs, chunks=(17, 3)), 0))
        np.testing.assert_array_equal(part[0], whole[0])
        np.testing.assert_array_equal(part[1], whole[1])


def test_frames_beyond_the_reach_get_the_prior_and_the_record_edges_one_side():
    obs, mean, std = _record(n_t=120, seed=4)
    gap = np.arange(30, 30 + 2 * MAX_GAP + 5)
    obs[gap] = np.nan
    obs[:2] = np.nan
    mean[gap], mean[:2] = np.nan, np.nan
    m, s = (np.asarray(a) for a in da.compute(*bridge_empty(da.from_array(mean), da.from_array(std), obs, 0)))
    spread = frame_stats(obs).spread
    middle = gap[MAX_GAP:-MAX_GAP]  # more than MAX_GAP frames from data on both sides
    np.testing.assert_array_equal(m[middle], 0.0)
    np.testing.assert_allclose(s[middle], np.broadcast_to(spread, s[middle].shape), rtol=1e-6)
    assert np.all(s[gap[0]] < s[gap[MAX_GAP - 1]])  # the std grows with the distance to the data
    assert np.isfinite(m[:2]).all() and np.all(s[0] > s[1])  # the record's first frames: from the later side only


def test_a_frame_missing_whole_in_a_grid_with_extra_space_dims_is_bridged_point_by_point():
    obs, mean, std = _record(n_t=60, n_p=12, seed=5)
    obs[20] = np.nan
    flat = da.compute(*bridge_empty(da.from_array(mean), da.from_array(std), obs, 0))
    grid = da.compute(*bridge_empty(da.from_array(mean.reshape(60, 3, 4), chunks=(10, 2, 4)),
                                    da.from_array(std.reshape(60, 3, 4), chunks=(10, 2, 4)), obs.reshape(60, 3, 4), 0))
    np.testing.assert_array_equal(grid[0].reshape(60, 12), flat[0])
    np.testing.assert_array_equal(grid[1].reshape(60, 12), flat[1])


def _kriging_by_hand(obs, t, p):
    """Ordinary kriging of frame ``t`` at point ``p`` from its nearest observed frames, with the measured variogram."""
    st = frame_stats(obs, centre=True)
    gamma = st.spread[p] ** 2 * st.variogram
    near = np.array(_observed_near(obs, t, p))
    k = len(near)
    A = np.ones((k + 1, k + 1))
    A[:k, :k] = gamma[np.abs(np.subtract.outer(near, near))]
    A[k, k] = 0.0
    w = np.linalg.solve(A, np.append(gamma[np.abs(near - t)], 1.0))[:k]
    var = 2 * w @ gamma[np.abs(near - t)] - w @ A[:k, :k] @ w
    return w @ obs[near, p], np.sqrt(var)


def test_the_variable_itself_is_kriged_along_time_where_the_infill_has_no_prediction():
    """fill="gaps": frames missing whole and points without a prediction, by ordinary kriging; the rest kept."""
    obs, mean, std = _record(seed=6)
    obs, mean = obs + 280.0, mean + 280.0  # a level the weights must not shrink towards 0
    obs[50] = np.nan  # missing whole, and no guess of the network there (time_window=0)
    mean[50] = np.nan
    obs[100:102] = np.nan
    mean[100:102] = np.nan  # and no prediction at all there (time_window=0)
    mean[150, :3] = np.nan  # three points the network left without one, in a frame with data
    m, s = (np.asarray(a) for a in da.compute(*bridge_empty(da.from_array(mean), da.from_array(std), obs, 0,
                                                           fill="gaps")))
    keep = np.ones(len(obs), bool)
    keep[[50, 100, 101, 150]] = False
    np.testing.assert_array_equal(m[keep], mean[keep])
    np.testing.assert_array_equal(m[150, 3:], mean[150, 3:])
    for t, points in ((50, range(12)), (100, range(12)), (101, range(12)), (150, range(3))):
        for p in points:
            want_m, want_s = _kriging_by_hand(obs, t, p)
            assert m[t, p] == pytest.approx(want_m, rel=1e-6)
            assert s[t, p] == pytest.approx(want_s, rel=1e-4)
    assert np.all(np.abs(m[[50, 100, 101]] - 280.0) < 10)  # the weights sum to one: no pull towards 0


@pytest.mark.parametrize("fill", ["frames", "gaps"])
def test_the_network_s_guess_at_a_frame_missing_whole_is_weighed_with_the_bridge_of_the_variable(fill):
    """Between sparse frames each point's own values lie frames away; the network reads every observation around.

    ERA5 hours missing whole between frames with 20 % of the cells observed: the bridge alone 0.886 K, the
    network 0.284, the two weighed by their precision 0.302 (docs/benchmarks.md).
    """
    obs, mean, std = _record(seed=8)
    obs[50] = np.nan
    alone = mean.copy()
    alone[50] = np.nan  # the bridge alone (no guess of the network there)
    mean[50], std[50] = np.linspace(-1, 1, 12), np.linspace(0.1, 2.0, 12)  # the network's guess and its std
    std[50, 0] = 0.0  # a std of 0 says nothing: the bridge alone there
    b_m, b_s = (np.asarray(a) for a in da.compute(*bridge_empty(da.from_array(alone), da.from_array(std), obs, 0,
                                                               fill=fill)))
    m, s = (np.asarray(a) for a in da.compute(*bridge_empty(da.from_array(mean), da.from_array(std), obs, 0,
                                                           fill=fill)))
    if fill == "frames":  # departures from each point's cycle: the bridge alone (the mix lost on Irish wind, Colorado)
        np.testing.assert_array_equal(m, b_m)
        np.testing.assert_array_equal(s, b_s)
        return
    wb, wn = 1 / b_s[50].astype(float) ** 2, 1 / std[50].astype(float) ** 2
    np.testing.assert_allclose(m[50, 1:], ((wb * b_m[50] + wn * mean[50]) / (wb + wn))[1:], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s[50, 1:], ((wb * b_s[50] + wn * std[50]) / (wb + wn))[1:], rtol=1e-5)
    assert m[50, 0] == b_m[50, 0] and s[50, 0] == b_s[50, 0]
    assert np.all((s[50] >= np.minimum(b_s[50], std[50]) - 1e-6) & (s[50] <= np.maximum(b_s[50], std[50]) + 1e-6))
    keep = np.arange(len(obs)) != 50
    np.testing.assert_array_equal(m[keep], mean[keep])  # frames with data keep the network's prediction


def test_gaps_beyond_the_reach_keep_the_network_or_stay_nan_and_warn_only_inside_the_domain():
    obs, mean, std = _record(n_t=60, seed=7)
    obs[5:5 + 2 * MAX_GAP + 3] = np.nan
    middle = 5 + MAX_GAP + 1  # more than MAX_GAP frames from data on both sides
    mean[middle, :6] = np.nan  # no prediction at six points; the others keep the network's
    with pytest.warns(geonp.NoContextWarning):
        m, s = da.compute(*bridge_empty(da.from_array(mean), da.from_array(std), obs, 0, fill="gaps"))
    assert np.isnan(m[middle, :6]).all() and np.isnan(s[middle, :6]).all()
    np.testing.assert_array_equal(m[middle, 6:], mean[middle, 6:])
    inside = np.arange(12) >= 6  # the six points are outside the domain: nothing to warn about
    with warnings.catch_warnings():
        warnings.simplefilter("error", geonp.NoContextWarning)
        da.compute(*bridge_empty(da.from_array(mean), da.from_array(std), obs, 0, fill="gaps", inside=inside))


def test_the_statistics_are_measured_only_when_a_block_has_something_to_bridge(monkeypatch):
    calls = []
    real = bridge.frame_stats
    monkeypatch.setattr(bridge, "frame_stats", lambda *a, **k: calls.append(1) or real(*a, **k))
    obs, mean, std = _record(seed=8)
    for fill in ("gaps", "frames"):
        da.compute(*bridge_empty(da.from_array(mean, chunks=(50, 12)), da.from_array(std, chunks=(50, 12)),
                                 da.from_array(obs, chunks=(50, 12)), 0, fill=fill))
    assert calls == []  # no frame missing whole, every point predicted: the input is not read again
    obs[120] = np.nan
    lazy = da.from_array(obs, chunks=(50, 12))
    whole = da.compute(*bridge_empty(da.from_array(mean), da.from_array(std), obs, 0, fill="gaps"))
    part = da.compute(*bridge_empty(da.from_array(mean, chunks=(7, 5)), da.from_array(std, chunks=(7, 5)), lazy, 0,
                                    fill="gaps"))
    assert len(calls) == 2  # once per input (memoised per process), by the blocks that bridge frame 120
    np.testing.assert_array_equal(part[0], whole[0])
    np.testing.assert_array_equal(part[1], whole[1])
    assert part[0].shape == mean.shape
