"""Each tile predicted once whatever the chunks, and written once; a global grid's polar tiles as caps and runs."""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from test_tiling import grid

import geonp  # noqa: F401  registers ds.np
import geonp.chunked
from geonp.poles import ring_axis


def _recording(monkeypatch, name):
    """Record the metadata of every block task of ``name`` (``infill_block`` or ``forecast_block``)."""
    calls, real = [], getattr(geonp.chunked, name)

    def block(payload, values, meta, *args):
        calls.append(meta)
        return real(payload, values, meta, *args)

    monkeypatch.setattr(geonp.chunked, name, block)
    return calls


def global_grid(step=10.0, times=1, seed=1):
    lat, lon = np.arange(-90.0, 90.0 + step / 2, step), np.arange(0.0, 360.0, step)
    la, lo = np.deg2rad(np.meshgrid(lat, lon, indexing="ij"))
    truth = np.stack([280.0 + 3.0 * np.cos(la) * np.cos(lo + k / 4) + 5.0 * np.sin(la) for k in range(times)])
    observed = np.where(np.random.default_rng(seed).random(truth.shape) < 0.6, truth, np.nan)
    coords = {"time": pd.date_range("2020-01-01", periods=times, freq="D"), "lat": lat, "lon": lon}
    return xr.Dataset({"tas": (("time", "lat", "lon"), observed, {"units": "K"})}, coords=coords)


def test_ring_axis__only_rows_that_are_whole_circles_of_latitude():
    lat, lon = np.meshgrid(np.arange(-80.0, 81.0, 20.0), np.arange(0.0, 360.0, 30.0), indexing="ij")
    assert ring_axis(lon, lat) == 1
    assert ring_axis(lon.T, lat.T) == 0  # stored (lon, lat)
    assert ring_axis(np.mod(lon + 180.0, 360.0) - 180.0, lat) == 1  # -180..180
    half = np.meshgrid(np.arange(-80.0, 81.0, 20.0), np.arange(0.0, 180.0, 30.0), indexing="ij")
    assert ring_axis(half[1], half[0]) is None  # half the globe: no ring
    assert ring_axis(lon, lat + 0.01 * lon) is None  # a curvilinear grid: latitude varies along the rows


def test_global_grid__each_polar_band_is_one_tile_whose_window_is_centred_on_the_pole(monkeypatch):
    """Near a pole every tile's window held the same rings of points; each band is now one cap, encoded once."""
    calls = _recording(monkeypatch, "infill_block")
    ds = global_grid(step=5.0)
    out = ds.np.infill("tas", land="none")
    caps = [m for m in calls if m["tile_shape"][1] == ds.sizes["lon"]]
    assert len(caps) == 2 and len(calls) > 10  # one cap per pole, the other tiles as they were
    for m in caps:
        xy = np.asarray(m["tgt_xy"]).reshape(*m["tile_shape"], 2)
        pole = 0 if np.allclose(xy[0], xy[0, 0]) else -1  # the cap's row at the pole (first or last)
        np.testing.assert_allclose(xy[pole], 0.0, atol=1e-6)  # the window's frame is centred on the pole
        assert len(m["ctx_xy"]) < 1.25 * max(len(c["ctx_xy"]) for c in calls if c is not m)
    for row in (0, -1):  # the pole's copies are one point
        assert np.ptp(out.tas_mean.values[0, row]) < 1e-4
    assert np.isfinite(out.tas_mean.values).all()


@pytest.mark.parametrize("chunks", [{"lat": 4, "lon": 5}, {"lon": 7}])
def test_global_grid__chunks_that_cut_the_caps_give_the_same_bits(monkeypatch, chunks):
    calls = _recording(monkeypatch, "infill_block")
    ds = global_grid(step=10.0, times=2)
    out = ds.np.infill("tas", land="none")
    n_tasks = len(calls)
    lazy = ds.np.infill("tas", land="none", chunks=chunks)
    assert len(lazy.tas_mean.data.chunks[2]) > 3
    lazy = lazy.compute()
    for name in ("tas_mean", "tas_std"):
        inner = slice(1, -1)  # the poles' copies are averaged chunk by chunk (geonp.poles): float rounding
        np.testing.assert_array_equal(lazy[name].values[:, inner], out[name].values[:, inner])
        np.testing.assert_allclose(lazy[name].values, out[name].values, atol=1e-4)
    assert len(calls) == 2 * n_tasks  # each tile once, however many chunks cut it


def test_regional_grid__each_tile_predicted_once_whatever_the_chunks(monkeypatch):
    calls = _recording(monkeypatch, "infill_block")
    ds = grid()
    out = ds.np.infill("t2m", tile=2.0, halo=1.0)
    n_tasks = len(calls)
    lazy = ds.np.infill("t2m", tile=2.0, halo=1.0, chunks={"latitude": 3, "longitude": 4}).compute()
    assert len(calls) == 2 * n_tasks and n_tasks > 4
    np.testing.assert_array_equal(lazy.t2m_mean.values, out.t2m_mean.values)
    np.testing.assert_array_equal(lazy.t2m_std.values, out.t2m_std.values)


def test_station_forecast__chunks_that_cut_tiles_give_the_same_bits(monkeypatch):
    """A station tile cut by chunks is forecast once, with its own stations' initial values (calibrated)."""
    calls = _recording(monkeypatch, "forecast_block")
    rng = np.random.default_rng(4)
    n, T = 40, 30
    lon, lat = rng.uniform(-8.0, -4.0, n), rng.uniform(51.0, 54.0, n)
    t = np.arange(T)[:, None]
    values = 10.0 + np.sin(lon / 2.0 + t / 5.0) + np.cos(lat + t / 7.0) + 0.05 * rng.standard_normal((T, n))
    coords = {"time": pd.date_range("2020-01-01", periods=T, freq="h"), "lon": ("station", lon),
              "lat": ("station", lat)}
    ds = xr.Dataset({"t": (("time", "station"), values, {"units": "degC"})}, coords=coords)
    kw = dict(hours=2, init_time=ds.time.values[-4:], tile=1.5)
    out = ds.np.forecast("t", **kw)
    n_tasks = len(calls)
    assert n_tasks > 1  # several tiles
    lazy = ds.np.forecast("t", chunks={"station": 7}, **kw)
    assert len(lazy.t_mean.data.chunks[-1]) == 6
    lazy = lazy.compute()
    np.testing.assert_array_equal(lazy.t_mean.values, out.t_mean.values)
    np.testing.assert_array_equal(lazy.t_std.values, out.t_std.values)
    assert len(calls) == 2 * n_tasks


def test_polar_caps__a_cap_then_runs_of_tiles_then_tiles_as_they_were():
    """On a 1° grid: one cap per pole, runs of tiles in the bands next to it, the rest untouched."""
    from types import SimpleNamespace

    from geonp.frames import EARTH_RADIUS_KM, centre_of
    from geonp.poles import CAP_GROWTH, polar_caps
    from geonp.tiling import axis_tiles

    lat, lon = np.meshgrid(np.arange(90.0, -90.5, -1.0), np.arange(0.0, 360.0, 1.0), indexing="ij")
    target = SimpleNamespace(is_grid=True, shape=lat.shape, lon=lon.ravel(), lat=lat.ravel())
    problem = SimpleNamespace(frame=None, target=target)
    rows, cols = np.meshgrid(axis_tiles(lat.shape[0], 8), axis_tiles(lat.shape[1], 8), indexing="ij")
    ids = np.stack([rows.ravel(), cols.ravel()], -1)
    la, lo = np.deg2rad(target.lat), np.deg2rad(target.lon)
    xyz = np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], -1)

    def window_points(idx):  # the rows and (circular) columns of the points within reach plus a 300 km halo
        lon0, lat0 = np.deg2rad(centre_of(target.lon[idx], target.lat[idx]))
        c = np.array([np.cos(lat0) * np.cos(lon0), np.cos(lat0) * np.sin(lon0), np.sin(lat0)])
        km = np.arccos(np.clip(xyz @ c, -1.0, 1.0)) * EARTH_RADIUS_KM
        r, k = np.unravel_index(np.flatnonzero(km <= km[idx].max() + 300.0), lat.shape)
        k = np.unique(k)
        gaps = np.diff(np.append(k, k[0] + lat.shape[1]))
        return len(np.unique(r)) * (lat.shape[1] - int(gaps.max()) + 1)

    merged = polar_caps(problem, ids, window_points)
    per_band = {r: len(np.unique(merged[ids[:, 0] == r, 1])) for r in np.unique(ids[:, 0])}
    n_cols, last = len(np.unique(ids[:, 1])), max(per_band)
    assert per_band[0] == per_band[last] == 1  # a cap about each pole
    assert 1 < per_band[1] < n_cols and per_band[1] == per_band[last - 1]  # runs next to them, the same both sides
    assert per_band[last // 2] == n_cols  # the equator as it was
    for r in (1, 2):
        band = np.flatnonzero(ids[:, 0] == r)
        one = max(window_points(band[ids[band, 1] == c]) for c in np.unique(ids[band, 1]))
        for g in np.unique(merged[band, 1]):
            assert window_points(band[merged[band, 1] == g]) <= CAP_GROWTH * one + 1e-9
    assert polar_caps(SimpleNamespace(frame=object(), target=target), ids, window_points) is ids  # projected


def test_to_zarr__a_prediction_chunk_larger_than_the_inputs_is_computed_once(monkeypatch, tmp_path):
    """``{var}_filled`` took the input's (smaller) chunks, so to_zarr wrote regions that each recomputed the chunk."""
    calls = _recording(monkeypatch, "infill_block")
    ds = grid(times=6)
    ds = ds.assign_coords(valid_time=("time", ds.time.values)).chunk({"time": 2})  # a coordinate on the input's chunks
    out = ds.np.infill("t2m", chunks={"time": 6})
    assert {name: out[name].chunks[0] for name in out.data_vars} == dict.fromkeys(out.data_vars, (6,))
    geonp.to_zarr(out, tmp_path / "o.zarr", progress=False)
    n = len(calls)
    eager = ds.compute().np.infill("t2m")
    assert n == len(calls) - n  # the same tiles, each predicted once
    back = xr.open_zarr(tmp_path / "o.zarr")
    np.testing.assert_allclose(back.t2m_filled, eager.t2m_filled, atol=1e-4)


def test_a_prediction_graph_is_a_few_layers_however_many_blocks():
    """A layer per task made dask's cull quadratic in the blocks (a 0.5° global frame: 118 s of graph, 27 s now)."""
    ds = grid(times=4).chunk({"time": 1})
    for chunks in ({"time": 1}, {"time": 1, "latitude": 3, "longitude": 4}):
        data = ds.np.infill("t2m", tile=2.0, halo=1.0, chunks=chunks).t2m_mean.data
        assert len(data.__dask_graph__().layers) <= 4 and data.npartitions >= 4
