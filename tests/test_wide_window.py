"""Inside an outage the infill reads far enough to see the missing place on both sides (geonp.reach.wide_entries)."""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from test_near_window import _groups, _window
from test_persistence import _ratio

import geonp  # noqa: F401  registers ds.np
from geonp.pretrained import FRAME_NEAR_RATIO, SIDE_WINDOWS, WIDE_WINDOWS
from geonp.reach import NEAR_UNITS, one_sided_floors, wide_entries


def _outage(frames=24, n=12, missing=slice(12, 18), trend=0.0):
    values = np.ones((frames, n, n)) + trend * np.arange(frames)[:, None, None]
    values[missing, :, : n // 2] = np.nan  # the west half missing for some frames
    window = _window(values, n)
    west = np.flatnonzero(window.xy[:, 1] < 2)  # more than NEAR_UNITS from the observed east
    assert n // 2 - 2 > NEAR_UNITS
    return window, west


def test_groups_inside_an_outage_widen_to_the_least_window_that_sees_both_sides():
    window, west = _outage()
    groups = _groups(24)
    halves = wide_entries(window, groups, 3.0, west, 8.0)
    # groups 12..14 (centre 13) and 15..17 (centre 16) see the west at frame 11 and 18: 2 and 5 frames away
    np.testing.assert_array_equal(halves, [3, 3, 3, 3, 5, 5, 3, 3])
    np.testing.assert_array_equal(wide_entries(window, groups, 3.0, west, 4.0), np.full(8, 3.0))  # beyond reach
    np.testing.assert_array_equal(wide_entries(window, groups, 3.0, west, None), np.full(8, 3.0))
    # a window already wide enough, or single frames at ±1 with both sides seen, stay
    np.testing.assert_array_equal(wide_entries(window, groups, 6.0, west, 8.0), np.full(8, 6.0))


def test_a_place_missing_to_the_end_or_seen_nearby_keeps_its_window():
    window, west = _outage(missing=slice(15, 24))  # a late region: no later side to see
    np.testing.assert_array_equal(wide_entries(window, _groups(24), 3.0, west, 8.0), np.full(8, 3.0))
    window, _ = _outage()
    coast = np.flatnonzero(window.xy[:, 1] == 5)  # next to the observed east in every frame: not deep
    np.testing.assert_array_equal(wide_entries(window, _groups(24), 3.0, coast, 8.0), np.full(8, 3.0))


def _own(groups):
    return [[(int(f), k) for k, f in enumerate(g)] for g in groups]


def test_a_place_seen_on_one_side_only_gets_the_persistence_error_of_its_lag_as_its_least_std():
    n = 12
    window, west = _outage(n=n, missing=slice(15, 24), trend=0.1)  # values rise 0.1 a frame: change over k: 0.1 k
    groups = _groups(24)
    everywhere = np.arange(len(window.xy))
    floors = one_sided_floors(window, groups, 3.0, everywhere, _own(groups), 8.0)
    assert all(f is None for f in floors[:5])  # frames 0..14 see the west in their own frames
    # frames 15..23 are k frames after the last seen, 14: their floor is the change over k frames
    for i, lags in zip((5, 6, 7), ((1, 2, 3), (4, 5, 6), (7, 8, 9))):
        f = floors[i].reshape(3, -1)
        np.testing.assert_allclose(f[:, west], np.repeat(0.1 * np.array(lags)[:, None], len(west), 1), rtol=1e-9)
        deep = window.xy[:, 1] < n // 2 - NEAR_UNITS  # more than NEAR_UNITS from the observed east
        assert f[:, deep].all() and not f[:, ~deep].any()  # nearer the east, seen in every frame: no floor
    # only the block's own frames of the entry, in their order (its places)
    part = one_sided_floors(window, groups[5:6], 3.0, west, [[(0, 2), (1, 1)]], 8.0)[0].reshape(2, -1)
    np.testing.assert_allclose(part[:, 0], [0.3, 0.2], rtol=1e-9)
    # beyond wide_window of the entry, nothing is seen: no floor (the far floors stand alone)
    assert one_sided_floors(window, groups[7:], 3.0, west, _own(groups[7:]), 6.0) == [None]
    assert one_sided_floors(window, groups, 3.0, west, _own(groups), None) == [None] * 8


def test_an_outage_seen_on_both_sides_keeps_the_networks_std():
    window, west = _outage(trend=0.1)
    groups = _groups(24)
    halves = wide_entries(window, groups, 3.0, west, 8.0)
    assert one_sided_floors(window, groups, halves, west, _own(groups), 8.0) == [None] * 8
    # not widened (a wide_window too short to see both sides): one side, the nearer, sets the floor
    floors = one_sided_floors(window, groups, 3.0, west, _own(groups), 4.0)
    assert floors[4] is not None and floors[5] is not None
    np.testing.assert_allclose(floors[4].reshape(3, -1)[:, 0], [0.1, 0.2, 0.3], rtol=1e-9)  # after frame 11
    np.testing.assert_allclose(floors[5].reshape(3, -1)[:, 0], [0.3, 0.2, 0.1], rtol=1e-9)  # before frame 18


def _slow(frames=30, n=16, seed=0, outage=slice(12, 19)):
    """A pattern drifting slowly (frames alike: the model's own ±3), a fifth hidden, the west missing in ``outage``."""
    rng = np.random.default_rng(seed)
    y, x = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    v = np.stack([np.sin(y / 4 + 0.08 * k) + np.cos(x / 4 - 0.05 * k) + 0.02 * k for k in range(frames)])
    hide = rng.random(v.shape) < 0.2
    hide[outage, :, : n // 2] = True
    ds = xr.Dataset({"v": (("time", "lat", "lon"), np.where(hide, np.nan, v))},
                    coords={"time": pd.date_range("2020-01-01", periods=frames, freq="h"),
                            "lat": 50 + 0.1 * np.arange(n), "lon": -3 + 0.15 * np.arange(n)})
    return ds, v, hide


def test_an_outage_is_infilled_from_both_sides():
    ds, truth, hide = _slow()
    assert _ratio(ds) < FRAME_NEAR_RATIO  # no near window: every group at ±3 unless it widens
    default = ds.np.infill("v", land="none")
    fixed = ds.np.infill("v", land="none", time_window=3)
    assert f'"wide_window": {WIDE_WINDOWS["bsa-tnp"]}' in default.attrs["geonp_settings"]
    assert f'"side_window": {SIDE_WINDOWS["bsa-tnp"]}' in default.attrs["geonp_settings"]
    assert '"wide_window"' not in fixed.attrs["geonp_settings"]  # a time_window given is used as it is
    assert '"side_window"' not in fixed.attrs["geonp_settings"]
    inside = np.zeros_like(hide)
    inside[12:19, :, :6] = True  # deep in the outage
    err = [np.sqrt(np.mean((out.v_mean.values - truth)[inside] ** 2)) for out in (default, fixed)]
    assert err[0] < 0.8 * err[1]
    # the frames away from the outage are predicted as before
    np.testing.assert_allclose(default.v_mean.values[:6], fixed.v_mean.values[:6], rtol=0, atol=1e-6)
    np.testing.assert_allclose(default.v_std.values[24:], fixed.v_std.values[24:], rtol=1e-6, atol=1e-7)


def _late_region_std(monkeypatch, **kw):
    """The std deep in a region missing to the end of the record: by default, and with no one-sided floors."""
    ds, _, hide = _slow(outage=slice(22, 30))  # the west missing to the end of the record
    default = ds.np.infill("v", land="none", **kw)
    with monkeypatch.context() as m:
        m.setattr("geonp.pretrained.WIDE_WINDOWS", {})
        m.setattr("geonp.pretrained.SIDE_WINDOWS", {})
        before = ds.np.infill("v", land="none", **kw)
    np.testing.assert_array_equal(default.v_mean.values, before.v_mean.values)  # the means do not change
    np.testing.assert_allclose(default.v_std.values[:18], before.v_std.values[:18], rtol=1e-6)
    inside = np.zeros_like(hide)
    inside[24:30, :, :4] = True  # deep in the late region, its own frames and the frames before it unseen
    return default, [out.v_std.values[inside] for out in (default, before)]


@pytest.mark.parametrize("model", ["bsa-tnp", "te-pt-tnp"])
def test_a_late_region_gets_the_persistence_error_of_its_lag(monkeypatch, model):
    out, (std, before) = _late_region_std(monkeypatch, model=model)
    assert (std >= before - 1e-6).all()
    # at least the persistence error of their lag: the slow drift changes little in a few hours, so it rises
    # above the network's own std where the place was last seen longest ago
    hourly = [s.reshape(6, -1).mean(1) for s in (std, before)]
    assert hourly[0][-1] > 1.25 * hourly[1][-1] and std.mean() > 1.08 * before.mean()
    settings = out.attrs["geonp_settings"]
    assert f'"side_window": {SIDE_WINDOWS[model]}' in settings
    assert ('"wide_window": 8' in settings) == (model == "bsa-tnp")  # TE-PT-TNP keeps its window


@pytest.mark.parametrize(("chunks", "outage"), [({"time": 4}, slice(12, 19)), ({"time": 7, "lat": 8}, slice(12, 19)),
                                               ({"time": 5}, slice(22, 30))])
def test_wide_windows_chunked_equal_unchunked(chunks, outage):
    ds, _, _ = _slow(outage=outage)
    whole = ds.np.infill("v", land="none")
    parts = ds.np.infill("v", land="none", chunks=chunks)
    np.testing.assert_allclose(parts.v_mean.values, whole.v_mean.values, rtol=0, atol=1e-5)
    np.testing.assert_allclose(parts.v_std.values, whole.v_std.values, rtol=1e-5, atol=1e-6)
