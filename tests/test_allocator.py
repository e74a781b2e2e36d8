"""geonp.allocator: freed tile-sized blocks are reused instead of page-faulted afresh."""

import os
import platform
import subprocess
import sys

import pytest

glibc_only = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only"
)

CYCLE = """
import resource, torch
import geonp.allocator as a
on = a.keep_freed_memory()
again = a.keep_freed_memory()
def cycle():  # page faults of allocating, touching and freeing one 64 MB tile
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t = torch.empty(1 << 24)
    t.fill_(1.0)
    del t
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
warm = [cycle() for _ in range(5)]  # aligned blocks need a little slack in the heap before it settles
print(on, again, max(cycle() for _ in range(3)))
"""


def _run(env_value: str | None) -> tuple[str, str, int]:
    env = {k: v for k, v in os.environ.items() if k != "GEONP_KEEP_FREED_MEMORY"}
    if env_value is not None:
        env["GEONP_KEEP_FREED_MEMORY"] = env_value
    out = subprocess.run([sys.executable, "-c", CYCLE], env=env, capture_output=True, text=True, check=True)
    on, again, faults = out.stdout.split()
    return on, again, int(faults)


@glibc_only
def test_keep_freed_memory__a_second_tile_reuses_the_first_tiles_pages():
    on, again, faults = _run(None)
    assert (on, again) == ("True", "True")
    assert faults < 2000  # 64 MB is 16,384 pages of 4 KB: once the heap has settled, reused, not faulted again


@glibc_only
def test_keep_freed_memory__env_zero_leaves_malloc_alone():
    on, again, faults = _run("0")
    assert (on, again) == ("False", "False")
    assert faults > 8000  # glibc maps a fresh block for every tile


RELEASE = """
import torch
import geonp.allocator as a
def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20
a.keep_freed_memory()  # freed blocks stay with the process: the case release_freed_memory undoes
t = torch.empty(1 << 24)
t.fill_(1.0)  # 64 MB touched
del t
kept = rss_mb()
released = a.release_freed_memory()
print(released, kept - rss_mb())
"""


@glibc_only
def test_release_freed_memory__hands_freed_heap_pages_back():
    out = subprocess.run([sys.executable, "-c", RELEASE], capture_output=True, text=True, check=True)
    released, drop_mb = out.stdout.split()
    assert released == "True"
    assert float(drop_mb) > 48  # most of the 64 MB block leaves the resident set


def test_every_chunked_block_releases_freed_memory(monkeypatch):
    import numpy as np
    import pandas as pd
    import xarray as xr

    import geonp  # noqa: F401  registers ds.np
    import geonp.inference as inference

    calls = []
    monkeypatch.setattr(inference, "release_freed_memory", lambda: calls.append(1) or True)
    rng = np.random.default_rng(0)
    values = np.where(rng.random((2, 6, 8)) < 0.5, rng.standard_normal((2, 6, 8)), np.nan).astype("float32")
    ds = xr.Dataset({"v": (("time", "lat", "lon"), values)}, coords={
        "time": pd.date_range("2020-01-01", periods=2, freq="h"), "lat": 50 + 0.25 * np.arange(6),
        "lon": 0.25 * np.arange(8)})
    # the default windows (one tile per block); scattered gaps would give TE-PT-TNP small ones, several per block
    out = ds.np.infill("v", model="te-pt-tnp", chunks={"time": 1, "lat": 3, "lon": 8}, tile=8.0, halo=3.0)
    assert out.v_mean.data.numblocks == (2, 2, 1)
    out.compute(scheduler="synchronous")
    assert len(calls) == 2  # one per prediction: the one tile, cut by two chunks, once per frame chunk
    fc = ds.np.forecast("v", hours=1, model="te-pt-tnp", chunks={"lat": 3, "lon": 8})
    before = len(calls)
    fc.compute(scheduler="synchronous")
    assert fc.v_mean.data.numblocks[-2:] == (2, 1)
    assert len(calls) - before == fc.v_mean.data.npartitions // 2  # the tile once for both of its chunks
