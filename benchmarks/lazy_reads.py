"""Reads of a lazily opened Zarr store by a chunked infill written to Zarr.

One week of the ERA5 UK t2m GRIB (168 hourly frames, 90 % of the cells hidden at random) is
written to a Zarr store in 24-frame chunks, opened with ``xr.open_zarr`` and infilled with
``chunks={"time": 24}`` into another store; the store's data-chunk reads are counted (a wrapper
around ``zarr.storage.LocalStore.get``) with the wall and process-CPU seconds of the write. Each
run is a fresh process; ``--code`` runs older checkouts side by side (a ``git worktree`` of a
ref), each as ``label=path``; ``GEONP_DATA`` overrides the data folder::

    git worktree add /tmp/before <ref>
    python benchmarks/lazy_reads.py --code before=/tmp/before now=.

Results: ``benchmarks/results/lazy-reads.json``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine, save_json  # noqa: E402

GRIB = Path(os.environ.get("GEONP_DATA", ROOT.parent / "shared" / "data")) / "era5-2mt-2019-03-uk.grib"

_CHILD = """
import pyproj, collections, os, sys, time
import numpy as np, xarray as xr
from zarr.storage import LocalStore
import geonp
grib, tmp, model = sys.argv[1:4]
src, out = os.path.join(tmp, "in.zarr"), os.path.join(tmp, "out.zarr")
ds = geonp.open_dataset(grib).isel(time=slice(0, 168)).load()
ds["t2m"] = ds.t2m.where(np.random.default_rng(0).random(ds.t2m.shape) > 0.9)
ds.chunk({"time": 24}).to_zarr(src)
reads = collections.Counter()
get = LocalStore.get
async def counting_get(self, key, *args, **kwargs):
    if key.startswith("t2m/c"):
        reads[key] += 1
    return await get(self, key, *args, **kwargs)
LocalStore.get = counting_get
lazy = xr.open_zarr(src).np.infill("t2m", model=model, chunks={"time": 24})
reads.clear()
w, c = time.perf_counter(), time.process_time()
geonp.to_zarr(lazy, out, progress=False)
print(time.perf_counter() - w, time.process_time() - c, len(reads), sum(reads.values()), max(reads.values()))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["te-pt-tnp", "bsa-tnp"])
    parser.add_argument("--code", nargs="+", default=[f"now={ROOT}"], metavar="LABEL=PATH",
                        help="checkouts to run, each imported from PATH")
    args = parser.parse_args()
    if not GRIB.exists():
        sys.exit(f"lazy_reads: {GRIB} not found (the shared ERA5 data)")
    rows = []
    for model in args.models:
        for item in args.code:
            label, path = item.split("=", 1)
            env = {**os.environ, "PYTHONPATH": str(Path(path).resolve())}
            with tempfile.TemporaryDirectory() as tmp:
                out = subprocess.run([sys.executable, "-c", _CHILD, str(GRIB), tmp, model], env=env, cwd=tmp,
                                     check=True, capture_output=True, text=True).stdout.split()[-5:]
            wall, cpu, chunks, reads, most = float(out[0]), float(out[1]), int(out[2]), int(out[3]), int(out[4])
            row = {"model": model, "code": label, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                   "chunks": chunks, "reads": reads, "most_reads_of_a_chunk": most}
            rows.append(row)
            print(row, flush=True)
    save_json("lazy-reads", {"machine": machine(), "results": rows})


if __name__ == "__main__":
    main()
