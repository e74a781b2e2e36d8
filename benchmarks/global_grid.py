"""Infill of a global longitude–latitude grid: time and error, the same values as a regional grid beside it.

A synthetic daily field on a global grid with rows at the poles (a latitude gradient, travelling
waves, smooth anomalies made of random plane waves in 3-D and 0.3 K noise), 30 % of the cells
hidden at random, infilled by ``ds.np.infill`` with the shipped BSA-TNP. Each run is a fresh
process with one torch thread and dask's synchronous scheduler; ``--code`` runs older checkouts
side by side (a ``git worktree`` of a ref), each as ``label=path``, interleaved ``--repeats``
times. ``regional`` puts the same values on a 0.25° grid in mid-latitudes (no wrap, no poles), the
speed a global grid should match::

    git worktree add /tmp/before <ref>
    python benchmarks/global_grid.py --code before=/tmp/before now=.

Results (wall and process-CPU seconds, RMSE and 95 % coverage overall and by latitude band):
``benchmarks/results/global-grid.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine, save_json  # noqa: E402

_CHILD = """
import pyproj, json, sys, time, warnings
import numpy as np, pandas as pd, xarray as xr, dask, torch
import geonp
warnings.simplefilter("ignore")
torch.set_num_threads(1)
dask.config.set(scheduler="synchronous")
step, frames, layout = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
lat, lon = np.arange(90.0, -90.0 - step / 2, -step), np.arange(0.0, 360.0, step)
rng = np.random.default_rng(0)
la, lo = np.deg2rad(np.meshgrid(lat, lon, indexing="ij"))
xyz = np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], -1)
waves = rng.normal(size=(12, 3)) * rng.uniform(1.0, 6.0, (12, 1))
phase, speed = rng.uniform(0, 2 * np.pi, 12), rng.normal(0, 0.3, 12)
truth = np.stack([288.0 - 30.0 * np.sin(la) ** 2 + 2.0 * np.cos(3 * lo - 0.4 * d) * np.cos(la)
                  + np.cos(xyz @ waves.T + phase + speed * d).sum(-1) / 2.0
                  + 0.3 * rng.standard_normal(la.shape) for d in range(frames)]).astype("float32")
hide = rng.random(truth.shape) < 0.3
coords = {"time": pd.date_range("2001-01-01", periods=frames, freq="D"), "lat": lat, "lon": lon}
if layout == "regional":
    coords.update(lat=60.0 - 0.25 * np.arange(len(lat)), lon=-10.0 + 0.25 * np.arange(len(lon)))
ds = xr.Dataset({"tas": (("time", "lat", "lon"), np.where(hide, np.nan, truth), {"units": "K"})}, coords=coords)
w, c = time.perf_counter(), time.process_time()
out = ds.np.infill("tas").compute()
wall, cpu = time.perf_counter() - w, time.process_time() - c
err = out.tas_mean.values - truth
z = np.abs(err) / out.tas_std.values
band = np.broadcast_to(np.abs(lat)[None, :, None], truth.shape)
row = {"wall_s": wall, "cpu_s": cpu, "rmse": float(np.sqrt(np.mean(err[hide] ** 2))),
       "coverage": float(np.mean(z[hide] < 1.96))}
for lo_, hi_ in ((0, 30), (30, 60), (60, 91)):
    k = hide & (band >= lo_) & (band < hi_)
    row[f"rmse_{lo_}_{hi_}"] = float(np.sqrt(np.mean(err[k] ** 2)))
print(json.dumps(row))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grids", nargs="+", default=["5:12", "2:2"], metavar="STEP:FRAMES",
                        help="grid step in degrees and number of daily frames")
    parser.add_argument("--layouts", nargs="+", default=["global", "regional"])
    parser.add_argument("--code", nargs="+", default=[f"now={ROOT}"], metavar="LABEL=PATH",
                        help="checkouts to run, each imported from PATH")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    rows = []
    for grid in args.grids:
        step, frames = grid.split(":")
        for layout in args.layouts:
            for rep in range(args.repeats):
                for item in args.code:
                    if layout == "regional" and item != args.code[-1]:
                        continue  # the regional reference, with the newest code only
                    label, path = item.split("=", 1)
                    env = {**os.environ, "PYTHONPATH": str(Path(path).resolve()), "OMP_NUM_THREADS": "1"}
                    out = subprocess.run([sys.executable, "-c", _CHILD, step, frames, layout], env=env,
                                         cwd="/tmp", check=True, capture_output=True, text=True).stdout
                    row = {"grid_deg": float(step), "frames": int(frames), "layout": layout, "code": label,
                           "repeat": rep, **{k: round(v, 4) for k, v in json.loads(out.splitlines()[-1]).items()}}
                    rows.append(row)
                    print(row, flush=True)
    save_json("global-grid", {"machine": machine(), "results": rows})


if __name__ == "__main__":
    main()
