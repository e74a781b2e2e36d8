"""Inside an outage the infill reads far enough to see the missing place on both sides (geonp.reach.wide_entries)."""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from test_near_window import _groups, _window
from test_persistence import _ratio

import geonp  # noqa: F401  registers ds.np
from geonp.pretrained import FRAME_NEAR_RATIO, WIDE_WINDOWS
from geonp.reach import NEAR_UNITS, wide_entries


def _outage(frames=24, n=12, missing=slice(12, 18)):
    values = np.ones((frames, n, n))
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
    assert '"wide_window"' not in fixed.attrs["geonp_settings"]  # a time_window given is used as it is
    inside = np.zeros_like(hide)
    inside[12:19, :, :6] = True  # deep in the outage
    err = [np.sqrt(np.mean((out.v_mean.values - truth)[inside] ** 2)) for out in (default, fixed)]
    assert err[0] < 0.8 * err[1]
    # the frames away from the outage are predicted as before
    np.testing.assert_allclose(default.v_mean.values[:6], fixed.v_mean.values[:6], rtol=0, atol=1e-6)
    np.testing.assert_allclose(default.v_std.values[24:], fixed.v_std.values[24:], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("chunks", [{"time": 4}, {"time": 7, "lat": 8}])
def test_wide_windows_chunked_equal_unchunked(chunks):
    ds, _, _ = _slow()
    whole = ds.np.infill("v", land="none")
    parts = ds.np.infill("v", land="none", chunks=chunks)
    np.testing.assert_allclose(parts.v_mean.values, whole.v_mean.values, rtol=0, atol=1e-5)
    np.testing.assert_allclose(parts.v_std.values, whole.v_std.values, rtol=1e-5, atol=1e-6)
