"""A lazily opened store is read once per compute, however many blocks' windows share a chunk."""

import pyproj  # noqa: F401  isort: skip

import collections

import dask
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from zarr.storage import LocalStore

import geonp  # noqa: F401  registers ds.np


@pytest.fixture
def counted_store(tmp_path, monkeypatch):
    """A 6-frame Zarr store in 3 × 2 × 2 chunks and a counter of the reads of each of its data chunks."""
    rng = np.random.default_rng(0)
    y, x = np.meshgrid(np.arange(12), np.arange(14), indexing="ij")
    v = np.stack([np.sin(y / 4) + np.cos(x / 5) + 0.05 * t for t in range(6)]).astype("float32")
    v[rng.random(v.shape) < 0.3] = np.nan
    coords = {"time": pd.date_range("2020-01-01", periods=6, freq="h"),
              "lat": np.linspace(50, 53, 12), "lon": np.linspace(-5, -1, 14)}
    path = tmp_path / "t.zarr"
    ds = xr.Dataset({"t": (("time", "lat", "lon"), v)}, coords=coords)
    ds.chunk({"time": 2, "lat": 6, "lon": 7}).to_zarr(path)
    reads = collections.Counter()
    get = LocalStore.get

    async def counting_get(self, key, *args, **kwargs):
        if key.startswith("t/c"):
            reads[key] += 1
        return await get(self, key, *args, **kwargs)

    monkeypatch.setattr(LocalStore, "get", counting_get)
    return path, reads


def test_infill_reads_each_chunk_once_per_compute(counted_store):
    """Each block handed its window to dask.delayed as a dask array: one chunk was read 63 times."""
    path, reads = counted_store
    with xr.open_zarr(path) as ds:
        lazy = ds.np.infill("t", chunks={"time": 2, "lat": 4, "lon": 5}, time_window=1)
        reads.clear()
        mean, std = dask.compute(lazy.t_mean, lazy.t_std)
        assert len(reads) == 12 and set(reads.values()) == {1}, reads
        with xr.open_zarr(path) as f:
            want = f.load().np.infill("t", time_window=1)
    np.testing.assert_allclose(mean.values, want.t_mean.values, atol=2e-4)
    np.testing.assert_allclose(std.values, want.t_std.values, atol=2e-4)


def test_forecast_reads_each_chunk_once_per_compute(counted_store):
    """The last initial time's context is read once: frames 2-5 (time chunks 1 and 2), and as far back again.

    A region without data in those frames takes the context_frames newest frames it has (frames back to 0).
    """
    path, reads = counted_store
    with xr.open_zarr(path) as ds:
        lazy = ds.np.forecast("t", hours=1, chunks={"init_time": 1, "lat": 4, "lon": 5})
        reads.clear()
        dask.compute(lazy.t_mean, lazy.t_std)
    assert sorted(reads) == [f"t/c/{t}/{i}/{j}" for t in (0, 1, 2) for i in (0, 1) for j in (0, 1)], reads
    assert set(reads.values()) == {1}, reads
