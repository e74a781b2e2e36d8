"""Frames that change moderately are infilled from one frame each side where that sees enough, else from ±3."""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from test_persistence import _ratio

import geonp  # noqa: F401  registers ds.np
from geonp.data import Window
from geonp.pretrained import FRAME_CHANGE_RATIO, FRAME_NEAR_RATIO, NEAR_WINDOW
from geonp.reach import NEAR_UNITS, near_entries


def _window(values: np.ndarray, n: int) -> Window:
    y, x = np.meshgrid(np.arange(n, dtype=float), np.arange(n, dtype=float), indexing="ij")
    xy = np.stack([y.ravel(), x.ravel()], 1)
    t = np.arange(len(values), dtype=float)
    return Window(values=values.reshape(len(values), -1), xy=xy, t=t, hours=t, lon=np.zeros(len(xy)))


def _groups(frames: int, size: int = 3) -> list[np.ndarray]:
    return [np.arange(g, min(frames, g + size)) for g in range(0, frames, size)]


def test_scattered_gaps_split_every_group_into_its_frames_with_the_near_window():
    n, frames = 10, 9
    values = np.where(np.random.default_rng(0).random((frames, n, n)) < 0.3, np.nan, 1.0)
    window = _window(values, n)
    entries, halves = near_entries(window, _groups(frames), np.arange(n * n), np.arange(frames), 3.0, 1.0)
    assert [e.tolist() for e in entries] == [[f] for f in range(frames)]
    np.testing.assert_array_equal(halves, np.ones(frames))


def test_only_the_blocks_own_frames_are_split_out():
    n, frames = 6, 9
    window = _window(np.ones((frames, n, n)), n)
    entries, halves = near_entries(window, _groups(frames), np.arange(n * n), np.arange(2, 7), 3.0, 1.0)
    assert [e.tolist() for e in entries] == [[f] for f in range(2, 7)]
    assert len(halves) == 5


def test_a_region_missing_for_hours_keeps_its_groups_at_the_wide_window():
    """A frame whose targets are seen from one frame of its near window only (an outage's first hour) is wide too."""
    n, frames = 12, 12
    values = np.ones((frames, n, n))
    values[4:8, :, : n // 2] = np.nan  # half the domain missing for frames 4..7
    window = _window(values, n)
    far = np.flatnonzero(window.xy[:, 1] < 2)  # targets more than NEAR_UNITS from the observed half
    assert n // 2 - 2 > NEAR_UNITS
    entries, halves = near_entries(window, _groups(frames), far, np.arange(frames), 3.0, 1.0)
    # frames 0..2 and 9..11 see the west in two frames within ±1; groups 3..5 and 6..8 hold frame 4 (seen in
    # frame 3 alone) and frame 7 (in frame 8 alone): they keep the wide window around their centre
    assert [e.tolist() for e in entries] == [[0], [1], [2], [3, 4, 5], [6, 7, 8], [9], [10], [11]]
    np.testing.assert_array_equal(halves, [1, 1, 1, 3, 3, 1, 1, 1])
    # targets next to the observed half see it within NEAR_UNITS in every frame
    near = np.flatnonzero(window.xy[:, 1] == n // 2 - 1)
    entries, _ = near_entries(window, _groups(frames), near, np.arange(frames), 3.0, 1.0)
    assert len(entries) == frames


def test_without_a_near_window_the_groups_are_kept():
    window = _window(np.ones((6, 4, 4)), 4)
    groups = _groups(6)
    assert near_entries(window, groups, np.arange(16), np.arange(6), 3.0, None) == (groups, 3.0)
    assert near_entries(window, groups, np.arange(16), np.arange(6), 1.0, 1.0) == (groups, 1.0)


def _drifting(frames=9, n=16, seed=0, drift=0.3, outage=None):
    """A pattern drifting by ``drift`` radians a frame, half hidden; ``outage``: frames whose west half is missing."""
    rng = np.random.default_rng(seed)
    y, x = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    phases = np.cumsum(np.full((frames, 2), drift), 0)
    v = np.stack([np.sin(y / 3 + a) + np.cos(x / 3 + b) for a, b in phases])
    hide = rng.random(v.shape) < 0.5
    if outage is not None:
        hide[outage, :, : n // 2] = True
    return xr.Dataset({"v": (("time", "lat", "lon"), np.where(hide, np.nan, v))},
                      coords={"time": pd.date_range("2020-01-01", periods=frames, freq="D"),
                              "lat": 50 + 0.1 * np.arange(n), "lon": -3 + 0.15 * np.arange(n)})


def test_moderately_changing_frames_take_one_frame_each_side():
    """Between FRAME_NEAR_RATIO and FRAME_CHANGE_RATIO (ERA5 2-hourly: 0.209 K with ±3, 0.181 with ±1)."""
    ds = _drifting()
    assert FRAME_NEAR_RATIO < _ratio(ds) < FRAME_CHANGE_RATIO
    default = ds.np.infill("v", land="none")
    near = ds.np.infill("v", land="none", time_window=NEAR_WINDOW)
    np.testing.assert_allclose(default.v_mean.values, near.v_mean.values, rtol=0, atol=1e-6)
    assert f'"near_window": {NEAR_WINDOW}' in default.attrs["geonp_settings"]
    assert '"near_window"' not in near.attrs["geonp_settings"]  # a time_window given is used as it is


def test_an_outage_is_infilled_from_the_wide_window():
    """The frames of an outage over half the domain are predicted as at ±3; the frames far from it as at ±1."""
    ds = _drifting(frames=12, outage=slice(4, 8))
    assert FRAME_NEAR_RATIO < _ratio(ds) < FRAME_CHANGE_RATIO
    default = ds.np.infill("v", land="none").v_mean.values
    wide = ds.np.infill("v", land="none", time_window=3).v_mean.values
    near = ds.np.infill("v", land="none", time_window=1).v_mean.values
    west = (slice(4, 8), slice(None), slice(0, 4))
    np.testing.assert_allclose(default[west], wide[west], rtol=0, atol=1e-6)
    assert np.abs(default[west] - near[west]).max() > 1e-3
    np.testing.assert_allclose(default[:2], near[:2], rtol=0, atol=1e-6)


@pytest.mark.parametrize("chunks", [{"time": 4}, {"time": 5, "lat": 8}])
def test_near_windows_chunked_equal_unchunked(chunks):
    ds = _drifting(frames=12, outage=slice(4, 8))
    whole = ds.np.infill("v", land="none")
    parts = ds.np.infill("v", land="none", chunks=chunks)
    np.testing.assert_allclose(parts.v_mean.values, whole.v_mean.values, rtol=0, atol=1e-5)
    np.testing.assert_allclose(parts.v_std.values, whole.v_std.values, rtol=1e-5, atol=1e-6)
