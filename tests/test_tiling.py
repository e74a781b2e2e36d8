"""Tiles laid out over the whole grid: predictions independent of chunks and of axis order."""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import geonp  # noqa: F401  registers ds.np
from geonp.errors import ConfigError
from geonp.tiling import MIN_WINDOW_POINTS, axis_tiles


@pytest.mark.parametrize("n", [1, 2, 5, 6, 7, 16, 33, 49, 50, 129])
@pytest.mark.parametrize("size", [1, 2, 3, 4, 10, 16, 128])
def test_axis_tiles__equal_symmetric_contiguous_and_at_most_size_cells(n, size):
    ids = axis_tiles(n, size)
    assert len(ids) == n and ids[0] == 0 and set(np.diff(ids).tolist()) <= {0, 1}  # contiguous, in order
    counts = np.bincount(ids)
    np.testing.assert_array_equal(counts, counts[::-1])  # the same lattice read from either end
    assert counts.max() <= size and counts.max() - counts.min() <= 1  # no sliver at an edge
    assert len(counts) <= -(-n // size) + 1


def grid(nlat=20, nlon=26, times=2, keep=0.35, seed=3):
    lat = 50.0 + 0.25 * np.arange(nlat)
    lon = -6.0 + 0.25 * np.arange(nlon)
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    truth = np.stack([np.sin(la * 2.0 + k / 3) + np.cos(lo * 1.5) for k in range(times)]) + 280.0
    observed = np.where(np.random.default_rng(seed).random(truth.shape) < keep, truth, np.nan).astype("float32")
    coords = {"time": pd.date_range("2019-03-01", periods=times, freq="h"), "latitude": lat, "longitude": lon}
    return xr.Dataset({"t2m": (("time", "latitude", "longitude"), observed, {"units": "K"})}, coords=coords)


@pytest.fixture(scope="module")
def tiled():
    ds = grid()
    return ds, ds.np.infill("t2m", tile=2.0, halo=1.0)  # several tiles per axis, narrow halos


def test_infill__does_not_depend_on_the_order_the_axes_are_stored_in(tiled):
    ds, out = tiled
    for dim in ("latitude", "longitude"):
        flipped = ds.isel({dim: slice(None, None, -1)}).np.infill("t2m", tile=2.0, halo=1.0)
        assert (flipped[dim].values == ds[dim].values[::-1]).all()  # the input's order is kept
        back = flipped.isel({dim: slice(None, None, -1)})
        np.testing.assert_allclose(back.t2m_mean, out.t2m_mean, atol=2e-4)
        np.testing.assert_allclose(back.t2m_std, out.t2m_std, atol=2e-4)


@pytest.mark.parametrize("chunks", [{"latitude": 7, "longitude": 11}, {"latitude": 3}, {"time": 1, "longitude": 26}])
def test_infill__chunks_that_cut_tiles_give_the_same_numbers(tiled, chunks):
    ds, out = tiled
    lazy = ds.np.infill("t2m", tile=2.0, halo=1.0, chunks=chunks)
    assert lazy.t2m_mean.chunks is not None
    np.testing.assert_allclose(lazy.t2m_mean.compute(), out.t2m_mean, atol=2e-4)
    np.testing.assert_allclose(lazy.t2m_std.compute(), out.t2m_std, atol=2e-4)


def test_default_blocks_are_the_tiles_symmetric_about_the_middle(tiled):
    ds, _ = tiled
    chunks = ds.np.infill("t2m", tile=2.0, halo=1.0, chunks={"time": 1}).t2m_mean.data.chunks
    for c in chunks[1:]:
        assert len(c) > 2 and c == c[::-1]


def test_station_windows_at_the_edge_of_a_network_hold_enough_stations():
    # a corner tile holding one or two stations used to be infilled from a window of a handful,
    # too few for the elevation trend: 2.85 °C off on this network, 1.43 with tile=4
    rng = np.random.default_rng(5)
    n = 120
    lat, lon = 38 + 3 * rng.random(n), -108 + 5 * rng.random(n)
    elev = 1200 + 2500 * rng.random(n)
    v = (35 - 0.0065 * elev + 0.3 * np.sin(lat * 2)).astype("float32")
    hidden = np.zeros(n, bool)
    hidden[::4] = True
    st = xr.Dataset({"tmax": (("station",), np.where(hidden, np.nan, v))},
                    coords={"station": np.arange(n), "lat": ("station", lat), "lon": ("station", lon),
                            "elevation": ("station", elev)})
    assert MIN_WINDOW_POINTS < n
    for tile in (2.0, 4.0, 8.0):
        out = st.np.infill("tmax", tile=tile)
        assert np.abs(out.tmax_mean.values[hidden] - v[hidden]).max() < 1.0, tile
        shuffled = st.isel(station=rng.permutation(n)).np.infill("tmax", tile=tile).sortby("station")
        np.testing.assert_allclose(shuffled.tmax_mean, out.tmax_mean, atol=2e-4)
        np.testing.assert_allclose(shuffled.tmax_std, out.tmax_std, atol=2e-4)


def test_station_order_changes_neither_mean_nor_std_over_several_frames():
    # a station's copies on the frames of a time window tie in distance; the trend variance's
    # neighbours took whichever came first, and the std moved by up to 11 % with the station order
    rng = np.random.default_rng(8)
    n, times = 90, 3
    lat, lon = 38 + 3 * rng.random(n), -108 + 5 * rng.random(n)
    v = (20 + 8 * np.arange(times)[:, None] + np.sin(lat * 2) + 0.5 * rng.normal(size=(times, n))).astype("float32")
    v[rng.random(v.shape) < 0.2] = np.nan
    st = xr.Dataset({"tmax": (("time", "station"), v)},
                    coords={"time": pd.date_range("1990-01-01", periods=times, freq="MS"), "station": np.arange(n),
                            "lat": ("station", lat), "lon": ("station", lon)})
    out = st.np.infill("tmax", calibrate=False)
    shuffled = st.isel(station=rng.permutation(n)).np.infill("tmax", calibrate=False).sortby("station")
    np.testing.assert_allclose(shuffled.tmax_mean, out.tmax_mean, atol=2e-4)
    np.testing.assert_allclose(shuffled.tmax_std, out.tmax_std, atol=2e-4)


def test_targets__chunks_that_cut_a_tile_deep_in_a_hole_give_the_same_numbers():
    # a tile whose targets lie far from every observation is predicted in coarser units
    # (geonp.data.coarsen_far); with targets= the decision used to be each chunk's own, so chunks
    # that cut such a tile predicted its two parts in different units
    rng = np.random.default_rng(2)
    n = 150
    lat, lon = 50.0 + 1.5 * rng.random(n), -6.0 + 2.5 * rng.random(n)  # the south-west corner only
    v = (285 + np.sin(lat * 2.0) + np.cos(lon * 1.5)).astype("float32")
    st = xr.Dataset({"t2m": (("station",), v, {"units": "K"})},
                    coords={"station": np.arange(n), "lat": ("station", lat), "lon": ("station", lon)})
    targets = xr.Dataset(coords={"lat": 50.0 + 0.25 * np.arange(24), "lon": -6.0 + 0.25 * np.arange(30)})
    whole = st.np.infill("t2m", targets=targets, tile=2.0, halo=1.0)
    with pytest.raises(ConfigError, match=r"chunks has dim 'station'; expected some of \['lat', 'lon'\]"):
        st.np.infill("t2m", targets=targets, chunks={"station": 10})  # the output has the targets' dims
    for chunks in ({"lat": 5, "lon": 7}, {"lat": 13}):
        part = st.np.infill("t2m", targets=targets, tile=2.0, halo=1.0, chunks=chunks)
        np.testing.assert_allclose(part.t2m_mean.compute(), whole.t2m_mean, atol=2e-4)
        np.testing.assert_allclose(part.t2m_std.compute(), whole.t2m_std, atol=2e-4)


def test_span__a_window_at_the_edge_of_a_global_axis_wraps():
    from geonp.tiling import _span

    np.testing.assert_array_equal(_span(np.array([0, 1, 2, 70, 71]), 72, periodic=True), [70, 71, 0, 1, 2])
    assert _span(np.array([0, 1, 2, 70, 71]), 72, periodic=False) == slice(0, 72)  # a regional axis does not wrap
    assert _span(np.array([5, 6, 7]), 72, periodic=True) == slice(5, 8)
    assert _span(np.arange(72), 72, periodic=True) == slice(0, 72)  # a polar window takes every column
    assert _span(np.array([], dtype=int), 72, periodic=True) == slice(0, 0)


def test_global_grid__windows_at_the_edge_of_the_array_wrap_round(monkeypatch):
    """On a global grid a window at the array's first or last columns takes the columns across the wrap.

    It took every column between them (the whole circle of its latitudes: 2.4 × the points of an
    interior window), so the edge longitudes were predicted from windows all round the globe and
    the longitude convention (0..360 or −180..180) moved a hole at the edge by 1.2 K.
    """
    import geonp.chunked

    sizes, real = [], geonp.chunked.tile_plan

    def recording(problem, *args, **kwargs):
        plan = real(problem, *args, **kwargs)
        sizes.extend(len(meta["ctx_lon"]) for _, meta, _, _ in plan.tiles.values())
        return plan

    monkeypatch.setattr(geonp.chunked, "tile_plan", recording)
    lat, lon = np.arange(-42.5, 45.0, 5.0), np.arange(0.0, 360.0, 5.0)  # no polar rows
    la, lo = np.deg2rad(np.meshgrid(lat, lon, indexing="ij"))
    truth = 280.0 + 3.0 * np.cos(la) * np.cos(lo) + np.sin(la)
    observed = np.where(np.random.default_rng(0).random(truth.shape) < 0.3, truth, np.nan)
    ds = xr.Dataset({"tas": (("lat", "lon"), observed, {"units": "K"})}, coords={"lat": lat, "lon": lon})
    out = ds.np.infill("tas", land="none")
    assert len(sizes) >= 3 and max(sizes) <= 1.5 * np.median(sizes)
    assert np.isfinite(out.tas_mean.values).all()


def test_global_grid__the_copies_of_a_pole_get_one_prediction():
    """A row at ±90° is one point per pole: its copies were predicted by different tiles (0.14 K apart)."""
    lat, lon = np.arange(-90.0, 91.0, 10.0), np.arange(0.0, 360.0, 10.0)
    la, lo = np.deg2rad(np.meshgrid(lat, lon, indexing="ij"))
    truth = 280.0 + 3.0 * np.cos(la) * np.cos(lo) + 5.0 * np.sin(la)
    rng = np.random.default_rng(1)
    observed = np.where((rng.random(truth.shape) < 0.5) & (np.abs(la) < np.deg2rad(65)), truth, np.nan)
    ds = xr.Dataset({"tas": (("lat", "lon"), observed, {"units": "K"})}, coords={"lat": lat, "lon": lon})
    out = ds.np.infill("tas", land="none")
    for row in (0, -1):  # the south and the north pole
        for name in ("tas_mean", "tas_std"):
            values = out[name].values[row]
            assert np.isfinite(values).all() and np.ptp(values) < 1e-4, name
    assert np.ptp(out.tas_mean.values[1]) > 0.1  # the rows next to the poles are not merged
    assert out.tas_mean.attrs["long_name"].endswith("(predictive mean)")
    lazy = ds.chunk({"lon": 12, "lat": 5}).np.infill("tas", land="none")
    blocks = lazy.tas_mean.data.blocks
    assert lazy.tas_mean.data.chunks == ((5, 5, 5, 4), (12, 12, 12))  # the input's chunks, poles merged or not

    def graph_size(block):
        from dask.optimization import cull

        return len(cull(dict(block.__dask_graph__()), block.__dask_keys__())[0])

    # a block away from the poles does not wait for them; one in a pole's band waits for the whole row
    assert graph_size(blocks[1, 0]) < graph_size(blocks[0, 0])
    np.testing.assert_allclose(lazy.tas_mean.values, out.tas_mean.values, atol=2e-4)
    np.testing.assert_allclose(lazy.tas_filled.values[0], out.tas_mean.values[0], atol=2e-4)
    flipped = ds.isel(lat=slice(None, None, -1)).np.infill("tas", land="none")  # descending latitude
    np.testing.assert_allclose(flipped.tas_mean.values[::-1], out.tas_mean.values, atol=2e-4)
