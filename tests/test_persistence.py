"""Frames that barely resemble their neighbours are infilled each alone by the shipped weights."""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import geonp  # noqa: F401  registers ds.np
from geonp.model import resolve_model
from geonp.persistence import change_ratio
from geonp.planning import plan_problem
from geonp.prepare import prepare


def _frames(independent: bool, frames=6, n=16, seed=0, drift=0.05):
    """Smooth fields, each frame new (independent) or the same pattern drifting by ``drift`` radians a frame."""
    rng = np.random.default_rng(seed)
    y, x = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    phases = rng.uniform(0, 2 * np.pi, (frames, 2)) if independent else np.cumsum(np.full((frames, 2), drift), 0)
    v = np.stack([np.sin(y / 3 + a) + np.cos(x / 3 + b) for a, b in phases])
    hide = rng.random(v.shape) < 0.5
    return xr.Dataset({"v": (("time", "lat", "lon"), np.where(hide, np.nan, v))},
                      coords={"time": pd.date_range("2020-01-01", periods=frames, freq="D"),
                              "lat": 50 + 0.1 * np.arange(n), "lon": -3 + 0.15 * np.arange(n)})


def _ratio(ds):
    d, layout, _ = prepare(ds, "v", crs=None, covariates=None, land="none")
    return change_ratio(plan_problem(d, layout, resolve_model("bsa-tnp"), "infill")[0])


def test_change_ratio_tells_new_frames_from_a_drifting_pattern():
    assert _ratio(_frames(independent=True)) > 2.0 > 1.0 > _ratio(_frames(independent=False))
    assert _ratio(_frames(independent=True).isel(time=[0])) == 0.0  # one frame: nothing to measure


@pytest.mark.parametrize("independent", [True, False])
def test_shipped_weights_infill_new_frames_each_alone(independent):
    """Independent daily frames (one ERA5 frame a day: 0.312 K with ±3 frames, 0.224 alone) take time_window=0."""
    ds = _frames(independent)
    default = ds.np.infill("v", land="none").v_mean.values
    alone = ds.np.infill("v", land="none", time_window=0).v_mean.values
    window = ds.np.infill("v", land="none", time_window=3).v_mean.values
    np.testing.assert_array_equal(default, alone if independent else window)
    assert not np.array_equal(alone, window)

