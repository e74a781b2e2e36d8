"""Colorado tmax, every month: 20 % of the observed stations hidden in each month at once, one infill.

The station task of issue 3 ("hide 20 % of the observed stations each month, infill") on every month of
1950-01 .. 1990-12 with at least 100 observed stations (492 months), instead of the 20 evenly spaced
months of ``realdata.py colorado``. All months are masked together, so a month's ±3 months of context
have their own hidden stations missing too (harder than the 20-month protocol, where only the scored
month was masked), and geonp infills the whole record in one call, as a user would. The baselines fit
each month on its own context (as in ``baselines.py``). Scores are means over months of each month's
scores on its hidden stations.

Run ``python benchmarks/colorado_all.py`` (results ``benchmarks/results/colorado-all.json`` and the
"Colorado, every month" section of ``docs/benchmarks.md``).
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import pyproj  # noqa: E402,F401  isort: skip  (before anything loads eccodes)
import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata_tasks as T  # noqa: E402
from _common import machine, save_json, update_doc_section  # noqa: E402
from baselines import COLORADO_METHODS, _mean_scores, run_spatial  # noqa: E402

import geonp  # noqa: E402,F401  registers ds.np

BASELINES = ["GP Matérn 1.5 on (x, y, elevation)", "universal kriging, elevation drift"]


def run_geonp(values, masked, hidden, months, model: str, time_window: int) -> dict:
    """Infill the whole masked record once (default options) and score every month's hidden stations.

    The hidden stations are scored against ``values`` (the unmasked tmax).
    """
    lo, hi = max(0, int(months.min()) - time_window), int(months.max()) + time_window + 1
    w, c = time.perf_counter(), time.process_time()
    pred = masked.isel(time=slice(lo, hi)).np.infill("tmax", model=model, time_window=time_window).compute()
    wall, cpu = time.perf_counter() - w, time.process_time() - c
    mean, std = pred.tmax_mean.values, pred.tmax_std.values
    rows = [T.scores(values[i, hidden[i]], mean[i - lo, hidden[i]], std[i - lo, hidden[i]]) for i in months]
    return {**_mean_scores(rows), "wall_s": wall, "cpu_s": cpu, "per_task_rmse": [r["rmse"] for r in rows],
            "per_task_nll": [r["nll"] for r in rows]}


def markdown(data: dict) -> str:
    info = data["machine"]
    lines = [
        f"Run {info['date']} on {info['cpu']} ({info['cores']} cores; {info['device']}), torch {info['torch']}. "
        f"Regenerate: `python benchmarks/colorado_all.py`. {data['months']} months "
        f"({data['first']} .. {data['last']}), ~{data['n_context']:.0f} context and ~{data['n_target']:.0f} hidden "
        "stations a month; geonp with its defaults (calibrated on held-out stations of the input), the whole "
        "record in one call. Means over months; wall and CPU seconds for all months.",
        "",
        "| method | RMSE °C | MAE | NLL | cov95 | CRPS | months won (RMSE) vs the GP | wall s | CPU s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    gp = np.asarray(data["results"][BASELINES[0]]["per_task_rmse"])
    for name, r in sorted(data["results"].items(), key=lambda kv: kv[1]["rmse"]):
        won = "–" if name == BASELINES[0] else f"{int((np.asarray(r['per_task_rmse']) < gp).sum())} / {gp.size}"
        lines.append(f"| {name} | {r['rmse']:.3f} | {r['mae']:.3f} | {r['nll']:.3f} | {r['coverage']:.3f} | "
                     f"{r['crps']:.3f} | {won} | {r['wall_s']:.0f} | {r['cpu_s']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["bsa-tnp", "te-pt-tnp"])
    parser.add_argument("--time-windows", nargs="+", type=int, default=[3, 0],
                        help="months of context either side (0: space only)")
    parser.add_argument("--months", type=int, default=None, help="evenly spaced months only (default: all)")
    args = parser.parse_args()
    data, masked, hidden, months = T.colorado_masked("tmax", n_months=args.months)
    tasks = [T.colorado_task(int(m)) for m in months]
    out = {"machine": machine(), "months": int(len(months)), "first": tasks[0]["time"], "last": tasks[-1]["time"],
           "n_context": float(np.mean([len(t["y_context"]) for t in tasks])),
           "n_target": float(np.mean([len(t["y_target"]) for t in tasks])), "results": {}}
    for model in args.models:
        for tw in args.time_windows:
            key = f"geonp {model} (default), {'each month alone' if tw == 0 else f'±{tw} months'}"
            out["results"][key] = run_geonp(data.tmax.values, masked, hidden, months, model, tw)
            r = out["results"][key]
            print(key, {k: round(r[k], 3) for k in ("rmse", "nll", "coverage", "wall_s")}, flush=True)
    out["results"].update(run_spatial(tasks, {k: COLORADO_METHODS[k] for k in BASELINES}, lambda fn, t: fn(t)))
    save_json("colorado-all", out)
    update_doc_section("colorado-all", markdown(out))


if __name__ == "__main__":
    main()
