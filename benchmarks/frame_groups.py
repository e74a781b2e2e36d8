"""Frame groups: infill ``k`` consecutive frames as one task from one shared context.

    python benchmarks/frame_groups.py --groups 1 3 5 --part week       # ~6 CPU-minutes
    python benchmarks/frame_groups.py --groups 1 3 --part month        # ~8 CPU-minutes
    python benchmarks/frame_groups.py --groups 1 3 --part colorado     # ~2 CPU-minutes

BSA-TNP's cost is dominated by the context stream (O(context²)), and consecutive infill frames
share most of their ±``time_window`` context. ``frames_per_task=k`` predicts the frames
``g·k … g·k + k − 1`` as one task whose context is every frame within ``time_window`` of the
group's centre (:func:`geonp.data.frame_groups`). ``week``: the ERA5 eval week (random and
block masks, ±3 h), scored on all 168 frames, so every position in a group counts.
``month``: the whole ERA5 month at the default ±3 h (time and score). ``colorado``: the Colorado
benchmark at ±3 months, package defaults (the target month is the first frame of its group).
Results: ``benchmarks/results/frame-groups-<part>.json``; the reading is in docs/benchmarks.md
("Frame groups").
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata_tasks as rt  # noqa: E402
from _common import machine, save_json  # noqa: E402
from realdata import _masked_era5  # noqa: E402
from realdata import era5_infill_scores as _scores  # noqa: E402

import geonp  # noqa: E402, F401  (the accessor)

TW = 3


def _week(k: int) -> dict:
    da, ev = rt.load_era5(), rt.era5_eval_times(1)
    out = {}
    for kind in ("random", "block"):
        masked = _masked_era5(kind).isel(time=slice(int(ev[0]) - TW, int(ev[-1]) + TW + 1))
        pred = masked.np.infill("t2m", model="bsa-tnp", time_window=TW, frames_per_task=k).compute()
        out[kind] = _scores(da, pred, ev, kind)
    return out


def _month(k: int) -> dict:
    da = rt.load_era5()
    masked = _masked_era5("random")
    w0, c0 = time.perf_counter(), time.process_time()
    pred = masked.np.infill("t2m", model="bsa-tnp", time_window=TW, chunks={"time": 24}, frames_per_task=k).compute()
    timing = {"month_wall_s": time.perf_counter() - w0, "month_cpu_s": time.process_time() - c0}
    return {"random (28 eval frames)": _scores(da, pred, rt.era5_eval_times(6), "random"),
            "random (168 frames)": _scores(da, pred, rt.era5_eval_times(1), "random"), **timing}


def _colorado(k: int) -> dict:
    ds = rt.load_colorado()[["tmax"]]
    values = ds.tmax.values
    masked = values.copy()
    hidden = {}
    for i in rt.colorado_months():
        hidden[i] = rt.colorado_mask(int(i), np.isfinite(values[i]))
        masked[i, hidden[i]] = np.nan
    mds = ds.copy()
    mds["tmax"] = ds.tmax.dims, masked
    rows = []
    for i in rt.colorado_months():
        window = mds.isel(time=slice(max(0, i - TW), i + TW + 1))
        p = window.np.infill("tmax", model="bsa-tnp", time_window=TW, frames_per_task=k).sel(time=ds.time.values[i])
        h = hidden[i]
        rows.append(rt.scores(values[i, h], p.tmax_mean.values[h], p.tmax_std.values[h]))
    return {"colorado": {key: float(np.mean([r[key] for r in rows])) for key in ("rmse", "nll", "coverage")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, nargs="+", default=[1, 3, 5])
    parser.add_argument("--part", choices=["week", "month", "colorado"], default="week")
    args = parser.parse_args()
    run = {"week": _week, "month": _month, "colorado": _colorado}[args.part]
    rows = []
    for k in args.groups:
        w0, c0 = time.perf_counter(), time.process_time()
        row = {"frames_per_task": k, **run(k), "wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0}
        rows.append(row)
        print(row, flush=True)
    save_json(f"frame-groups-{args.part}", {"machine": machine(), "rows": rows})


if __name__ == "__main__":
    main()
