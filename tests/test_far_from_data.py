"""Targets far from every observation: the prior's std, or no prediction at all (geonp.reach.far_floors)."""

import pyproj  # noqa: F401  isort: skip

import warnings

import numpy as np
import pytest
import xarray as xr

import geonp  # noqa: F401  registers ds.np
from geonp.errors import FarFromDataWarning, NoContextWarning


def _field(n=48):
    lat = 50.0 + 0.1 * np.arange(n)
    lon = -3.0 + 0.15 * np.arange(n)
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    v = (283 + np.sin(la * 3.0) + np.cos(lo * 2.0)).astype("float32")
    return xr.Dataset({"t2m": (("latitude", "longitude"), v, {"units": "K"})},
                      coords={"latitude": lat, "longitude": lon})


def test_targets_on_another_continent_get_nan_and_a_warning():
    # they used to get a window of the 64 nearest points, however far, and a std of 0.15-0.2 K
    # thousands of km from data whose spread was 1.6 K
    ds = _field()
    far = xr.Dataset(coords={"lat": [20.0, 20.5], "lon": [-40.0, -39.5]})
    near = xr.Dataset(coords={"lat": [51.0, 51.5], "lon": [-2.0, -1.5]})
    with pytest.warns(NoContextWarning, match="targets far from all the data get none"):
        out = ds.np.infill("t2m", targets=far)
    assert np.isnan(out.t2m_mean.values).all() and np.isnan(out.t2m_std.values).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isfinite(ds.np.infill("t2m", targets=near).t2m_mean.values).all()


def test_targets_beyond_the_trained_distances_get_at_least_the_priors_std():
    # 8-10 spacing units south of a complete grid: the network's std hardly grew with the distance
    # (0.46-0.48 K against 0.42 at 6 units); it is now the spread of the window's data
    ds = _field()
    steps = np.array([1, 3, 6, 8, 9, 10])  # rows of 0.1 degrees (one spacing unit) south of the grid
    t = xr.Dataset(coords={"lat": ("station", 50.0 - 0.1 * steps), "lon": ("station", np.full(6, -1.0))})
    with pytest.warns(FarFromDataWarning, match="more than 7.5 spacing units"):
        out = ds.np.infill("t2m", targets=t, calibrate=False)
    std = out.t2m_std.values
    assert np.all(np.diff(std[:2]) > 0) and np.isfinite(std).all()
    assert std[3:].min() > 1.5 * std[:3].max()  # beyond 7.5 units: the prior's spread
    assert std[3:].min() > 0.5 * float(np.nanstd(ds.t2m.values))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds.np.infill("t2m", targets=t.isel(station=slice(0, 3)), calibrate=False)  # near: no warning


def _series(times=6, nlat=10, nlon=24, observed=8):
    """Hourly frames of a smooth field observed in their ``observed`` western columns only."""
    t = np.datetime64("2019-03-01T00") + np.arange(times) * np.timedelta64(1, "h")
    lat = 50.0 + 0.1 * np.arange(nlat)
    lon = -3.0 + 0.15 * np.arange(nlon)
    v = (283 + np.sin(lat[None, :, None] * 6.0 + np.arange(times)[:, None, None] / 10)
         + np.cos(lon[None, None, :] * 4.0)) * np.ones((times, 1, 1))
    v[:, :, observed:] = np.nan
    return xr.Dataset({"t2m": (("time", "latitude", "longitude"), v.astype("float32"), {"units": "K"})},
                      coords={"time": t, "latitude": lat, "longitude": lon})


def test_forecast_targets_far_from_the_context_get_at_least_its_spread(monkeypatch):
    # 14-16 columns (more than 7.5 spacing units) east of the data the network's std was 0.33 K, against a
    # spread of 0.79 K in the context it saw; infill warned and raised it, forecasts did not
    from geonp import inference, reach

    ds = _series()
    spreads = []  # each task's context spread (data units), as the blocks see it
    real = inference.forecast_tasks

    def recording(*args, **kwargs):
        tasks = real(*args, **kwargs)
        spreads.extend(t.scale for t in tasks if t is not None)
        return tasks

    monkeypatch.setattr(inference, "forecast_tasks", recording)
    kw = {"hours": 2, "calibrate": False, "reference": "none"}
    with pytest.warns(FarFromDataWarning, match="more than 7.5 spacing units .* of their context frames"):
        out = ds.np.forecast("t2m", **kw)
    monkeypatch.setattr(reach, "FAR_FROM_DATA_UNITS", np.inf)  # the guard off
    raw = ds.np.forecast("t2m", **kw)
    std, before = out.t2m_std.values, raw.t2m_std.values
    assert np.isfinite(std).all() and np.isfinite(out.t2m_mean.values).all()
    far = std[..., -3:]
    # raised to the spread of their task's context where the network's own is below it (their windows reach
    # the observed columns since session 43, so the network's own std there is wider than it was)
    raised = far > before[..., -3:]
    assert (far >= before[..., -3:]).all() and raised.mean() > 0.5
    assert np.isclose(far[raised].reshape(-1, 1), np.array(spreads)[None], rtol=1e-5).any(1).all()
    assert far.min() > 0.5 * float(ds.t2m.std())
    np.testing.assert_array_equal(std[..., :-3], before[..., :-3])  # near the data: unchanged
    np.testing.assert_array_equal(out.t2m_mean.values, raw.t2m_mean.values)
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FarFromDataWarning)  # (its never-observed columns warn as such)
        ds.isel(longitude=slice(0, 14)).np.forecast("t2m", **kw)  # all within a few units: no warning


def test_a_frame_missing_whole_between_observed_frames_is_not_far_from_the_data():
    """A frame missing whole is near the data: its places are observed an hour away.

    Its std was raised to the prior's (3.5 x its error on ERA5), with a FarFromDataWarning advising to
    predict nearer the data (a new-user report).
    """
    import pandas as pd

    ds = _field(24)
    frames = xr.concat([ds.t2m + 0.1 * k for k in range(5)], dim="time").assign_coords(
        time=pd.date_range("2020-01-01", periods=5, freq="h"))
    gappy = frames.to_dataset().copy(deep=True)
    gappy["t2m"][2] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error", FarFromDataWarning)
        warnings.simplefilter("error", RuntimeWarning)  # TE-PT-TNP's gap reach took a quantile between two inf
        out = gappy.np.infill("t2m", time_window=1)
        gappy.np.infill("t2m", model="te-pt-tnp")
    err = np.sqrt(np.mean((out.t2m_mean.values[2] - frames.values[2]) ** 2))
    spread = float(frames.isel(time=slice(1, 4)).std())
    std = float(out.t2m_std.values[2].mean())
    assert np.isfinite(std) and std < 0.5 * spread and err < std, (err, std, spread)


def test_the_blocks_of_a_prediction_warn_once_even_when_every_warning_is_shown():
    """A thirtieth new-user test: under ``simplefilter("always")`` each block repeated the FarFromDataWarning."""
    ds = _field()
    steps = np.array([8, 9, 10, 11])  # 8-11 spacing units south of the grid: far from the data
    t = xr.Dataset(coords={"lat": ("station", 50.0 - 0.1 * steps), "lon": ("station", np.linspace(-3, 3, 4))})

    def warned(**kw):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            ds.np.infill("t2m", targets=t, calibrate=False, tile=4, **kw).compute()
        return [w for w in rec if issubclass(w.category, FarFromDataWarning)]

    assert len(warned()) == 1
    assert len(warned(chunks={"station": 1})) == 1  # four blocks, each far from the data: one warning
    assert len(warned(chunks={"station": 1})) == 1  # a new call warns again
