"""TE-PT-TNP's infill time window: ±0, ±1 and ±3 frames of context on the real-data infill tasks.

The shipped TE-PT-TNP compresses its context into 16 pseudo-tokens, so more frames can cost more than
they give. This scores the shipped weights (the network alone, ``calibrate=False``) on the ERA5 random
and block tasks (``realdata.py era5-infill``'s frames and masks) and, with the default calibration, on
every Colorado month (``colorado_all.py``), at each time window. Its result set the shipped model's
``half_window`` (``geonp.pretrained.SETTINGS``).

Run ``python benchmarks/te_time_window.py``; results ``benchmarks/results/te-time-window.json``.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import pyproj  # noqa: E402,F401  isort: skip  (before anything loads eccodes)
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata as R  # noqa: E402
import realdata_tasks as T  # noqa: E402
from _common import machine, save_json  # noqa: E402
from colorado_all import run_geonp  # noqa: E402

WINDOWS = (0, 1, 3)


def main() -> None:
    out = {"machine": machine(), "model": "te-pt-tnp", "results": {}}
    da, frames = T.load_era5(), T.era5_eval_times(6)
    for kind in ("random", "block"):
        full = R._masked_era5(kind)
        for tw in WINDOWS:
            masked = full.isel(time=slice(int(frames[0]) - tw, int(frames[-1]) + tw + 1))
            pred = masked.np.infill("t2m", model="te-pt-tnp", time_window=tw, calibrate=False)
            out["results"][f"ERA5 {kind}, ±{tw} h"] = s = R.era5_infill_scores(da, pred, frames, kind)
            print(kind, tw, {k: round(s[k], 3) for k in ("rmse", "nll", "coverage")}, flush=True)
    data, masked, hidden, months = T.colorado_masked("tmax", n_months=None)
    for tw in WINDOWS:
        r = run_geonp(data.tmax.values, masked, hidden, months, "te-pt-tnp", tw)
        out["results"][f"Colorado every month, ±{tw} months"] = {k: v for k, v in r.items() if "per_task" not in k}
        print("colorado", tw, {k: round(r[k], 3) for k in ("rmse", "nll", "coverage")}, flush=True)
    save_json("te-time-window", out)


if __name__ == "__main__":
    main()
