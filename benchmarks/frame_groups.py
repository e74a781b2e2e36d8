"""Probe: infill several consecutive frames from one shared context (a next step, not in the package).

    python benchmarks/frame_groups.py --groups 1 2 3 --part subset   # ~1 CPU-minute
    python benchmarks/frame_groups.py --groups 1 4 --part month      # ~8 CPU-minutes

BSA-TNP's cost is dominated by the context stream (O(context²)), and consecutive target frames
of an infill share most of their ±``time_window`` context frames. This patches
``geonp.inference.predict_tasks`` so that each run of ``k`` consecutive frame tasks becomes one
task: the union of their contexts (duplicates dropped, values re-standardised by the union's mean
and spread, a simplification of the package's own standardisation), and all their targets.
``subset``: the candidates' ERA5 random subset (``candidates.py``). ``month``: the whole ERA5
month at the default ±3 h, scored on the 28 benchmark frames. Results:
``benchmarks/results/frame-groups-<part>.json``; the reading is in docs/benchmarks.md ("Frame groups").
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip

import argparse
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata_tasks as rt  # noqa: E402
from _common import machine, save_json  # noqa: E402
from candidates import era5_infill  # noqa: E402
from realdata import _masked_era5  # noqa: E402

import geonp.inference as inference  # noqa: E402
from geonp.data.tasks import Task  # noqa: E402

_predict = inference.predict_tasks


def _merge(tasks: list[Task]) -> Task:
    xc = np.concatenate([t.xc for t in tasks])
    yc = np.concatenate([t.yc * t.scale + t.shift for t in tasks])
    _, keep = np.unique(np.round(xc, 6), axis=0, return_index=True)
    xc, yc = xc[keep], yc[keep]
    shift, scale = float(yc.mean()), float(yc.std() + 1e-6)
    return Task(xc=xc, yc=(yc - shift) / scale, xt=np.concatenate([t.xt for t in tasks]), shift=shift, scale=scale)


def grouped(k: int):
    """Return a ``predict_tasks`` that predicts each run of ``k`` tasks as one merged task."""

    def predict(net, tasks, **kw):
        runs = [tasks[i:i + k] for i in range(0, len(tasks), k)]
        merged = [_merge(r) if len(r) > 1 else r[0] for r in runs]
        out = []
        for run, (mean, std) in zip(runs, _predict(net, merged, **kw)):
            lo = 0  # answers are in data units
            for t in run:
                out.append((mean[lo:lo + t.num_targets], std[lo:lo + t.num_targets]))
                lo += t.num_targets
        return out

    return predict


def _month() -> dict:
    masked, da = _masked_era5("random"), rt.load_era5()
    pred = masked.np.infill("t2m", model="bsa-tnp", time_window=3, chunks={"time": 24}).compute()
    rows = []
    for i in rt.era5_eval_times(6):
        _, scored = rt.era5_infill_mask(int(i), kind="random")
        rows.append(rt.scores(da.values[i][scored], pred.t2m_mean.values[i][scored], pred.t2m_std.values[i][scored]))
    return {key: float(np.mean([r[key] for r in rows])) for key in ("rmse", "nll", "coverage")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--part", choices=["subset", "month"], default="subset")
    args = parser.parse_args()
    rows = []
    for k in args.groups:
        w0, c0 = time.perf_counter(), time.process_time()
        with mock.patch.object(inference, "predict_tasks", grouped(k)):
            res = _month() if args.part == "month" else era5_infill("bsa-tnp", "random", 3, calibrate=False,
                                                                      chunks={"time": 8})
        row = {"frames_per_task": k, "part": args.part, "rmse": res["rmse"], "nll": res["nll"],
               "coverage": res["coverage"], "wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0}
        rows.append(row)
        print({key: round(v, 3) if isinstance(v, float) else v for key, v in row.items()}, flush=True)
    save_json(f"frame-groups-{args.part}", {"machine": machine(), "rows": rows})


if __name__ == "__main__":
    main()
