"""Infill std factors by temporal support: a place's own record on both sides, one side or neither of its gap."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from geonp.calibration import support_scales
from geonp.data import SamplerConfig, Task, TaskSampler, Window, temporal_support
from geonp.errors import ConfigError
from geonp.model import resolve_model
from geonp.normalise import Normaliser


def test_temporal_support_counts_the_sides_of_the_own_record():
    # place A observed at frames 0 and 2, B at frame 2, C at frame 3 (only)
    xc = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 2.0], [1.0, 0.5, 2.0], [2.0, 0.0, 3.0]])
    xt = np.array([[0.0, 0.0, 1.0],  # A between its records: both sides
                   [1.0, 0.5, 1.0],  # B before its record: one side
                   [1.0, 0.5, 3.0],  # B after it: one side
                   [5.0, 5.0, 1.0],  # a place never observed
                   [2.0, 0.0, 3.0]])  # C in the frame of its only record: that frame does not count
    task = Task(xc=xc, yc=np.zeros((4, 1)), xt=xt)
    np.testing.assert_array_equal(temporal_support(task), [2, 1, 1, 0, 0])
    # the context's order and a shift of every coordinate change nothing
    perm = np.random.default_rng(0).permutation(len(xc))
    shifted = Task(xc=xc[perm] + [1e3, -7.0, 50.0], yc=np.zeros((4, 1)), xt=xt + [1e3, -7.0, 50.0])
    np.testing.assert_array_equal(temporal_support(shifted), [2, 1, 1, 0, 0])
    assert temporal_support(Task(xc=xc[:0], yc=np.zeros((0, 1)), xt=xt)).tolist() == [0] * 5


def test_support_scales_make_each_support_unit_variance_after_the_gap_factors():
    rng = np.random.default_rng(1)
    n = 30000
    d = np.exp(rng.uniform(np.log(0.3), np.log(5.0), n))
    support = rng.integers(0, 3, n)
    true = np.array([2.0, 1.0, 0.5])[support] * (0.8 + 0.1 * d)  # grows with distance, differs by support
    z2 = (true * rng.standard_normal(n)) ** 2
    w = np.ones(n)
    fields = support_scales(d, z2, w, support)
    norm = Normaliser(**fields)
    assert len(norm.support_std_scale) == 3
    assert norm.support_std_scale[0] > norm.support_std_scale[1] > norm.support_std_scale[2]
    f = norm.std_factor(distance=d, support=support)
    for k in range(3):
        sel = support == k
        assert abs(np.mean(z2[sel] / f[sel] ** 2) - 1.0) < 0.06
    # without support the factors are the gap factors alone
    np.testing.assert_allclose(norm.std_factor(distance=d[:5]),
                               np.interp(np.log(d[:5]), np.log(fields["gap_distance"]), fields["gap_std_scale"]))
    # a support with too few points keeps factor 1; one support only: no factors
    few = support_scales(d, z2, w, np.where(support == 0, 0, 2)[:n] * (np.arange(n) > 50))
    assert few["support_std_scale"][1] == 1.0
    assert support_scales(d, (0.8 + 0.1 * d) ** 2 * rng.standard_normal(n) ** 2, w,
                          np.zeros(n, int))["support_std_scale"][1:] == (1.0, 1.0)
    assert support_scales(d[:50], z2[:50], w[:50], support[:50]) == {
        "gap_distance": (), "gap_std_scale": (), "support_std_scale": ()}


def test_support_std_scale_is_checked_and_round_trips():
    with pytest.raises(ConfigError, match=r"support_std_scale must hold 3 factors .* got \(1.0, 2.0\)"):
        Normaliser(support_std_scale=(1.0, 2.0))
    norm = Normaliser(gap_distance=(1.0,), gap_std_scale=(1.5,), support_std_scale=(2.0, 1.0, 0.5))
    assert Normaliser.from_dict(norm.to_dict()) == norm
    old = norm.to_dict()
    del old["support_std_scale"]  # saved before the field: no support factors
    assert Normaliser.from_dict(old).support_std_scale == ()
    np.testing.assert_allclose(norm.std_factor(distance=np.ones(3), support=np.array([0, 1, 2])), [3.0, 1.5, 0.75])


def test_calibration_tasks_can_hold_places_missing_from_the_whole_window():
    rng = np.random.default_rng(2)
    T, P = 7, 60
    values = rng.standard_normal((1, T, P))
    window = Window(values=np.zeros((T, 0)), xy=rng.uniform(0, 8, (P, 2)), t=np.arange(T, dtype=float),
                    hours=np.arange(T, dtype=float), lon=np.zeros(P))
    norm = Normaliser(time_unit_hours=1.0)

    def supports(vanish, thin=True):
        config = SamplerConfig(task="infill", max_context=1024, max_targets=64, half_window=3, keep_range=(0.7, 0.9),
                               hole_probability=0.0, vanish_probability=vanish, thin_other_frames=thin)
        sampler = TaskSampler(values, window, norm, config)
        task_rng = np.random.default_rng(0)
        tasks = [sampler.sample(task_rng) for _ in range(20)]
        return np.concatenate([temporal_support(t) for t in tasks]), tasks

    assert (supports(1.0)[0] == 0).all()
    kept = supports(0.0)[0]
    assert (kept > 0).mean() > 0.95 and (kept == 2).any() and (kept == 1).any()
    # as prediction: the other frames keep every observed point, so each target is seen on every side it has
    kept, tasks = supports(0.0, thin=False)
    for task in tasks:
        frames = np.unique(task.xc[:, 2])
        t = task.xt[0, 2]
        assert (task.xc[:, 2] != t).sum() == P * (len(frames) - (t in frames))
        want = int(frames.min() < t) + int(frames.max() > t)
        assert (temporal_support(task) == want).all()
    assert (supports(1.0, thin=False)[0] == 0).all()


def test_infill_scales_the_std_by_support():
    rng = np.random.default_rng(0)
    n, times = 40, 5
    lat, lon = 38 + 3 * rng.random(n), -108 + 5 * rng.random(n)
    v = np.stack([20 + np.sin(3 * lat) + np.cos(2 * lon) + k for k in range(times)]).astype("float32")
    v[:, 0] = np.nan  # never observed: support 0
    v[2, 1] = np.nan  # observed before and after: support 2
    v[0, 2] = np.nan  # observed after only: support 1
    ds = xr.Dataset({"tmax": (("time", "station"), v)},
                    coords={"time": pd.date_range("2000-01-01", periods=times, freq="MS"),
                            "station": [f"s{i}" for i in range(n)], "lat": ("station", lat),
                            "lon": ("station", lon)})
    base = resolve_model("bsa-tnp")
    flat = replace(base, normaliser=replace(base.normaliser, gap_distance=(0.1, 10.0), gap_std_scale=(1.0, 1.0)))
    by_support = replace(flat, normaliser=replace(flat.normaliser, support_std_scale=(3.0, 1.5, 0.5)))
    plain = ds.np.infill("tmax", model=flat, calibrate=False, time_window=3).tmax_std.values
    scaled = ds.np.infill("tmax", model=by_support, calibrate=False, time_window=3).tmax_std.values
    ratio = scaled / plain
    np.testing.assert_allclose(ratio[:, 0], 3.0, rtol=1e-5)
    np.testing.assert_allclose(ratio[2, 1], 0.5, rtol=1e-5)
    np.testing.assert_allclose(ratio[0, 2], 1.5, rtol=1e-5)
