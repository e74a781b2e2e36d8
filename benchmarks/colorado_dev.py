"""Colorado tmax, space only, on development months: geonp's default per month against the GP.

The 20 months of ``realdata.py colorado`` are the benchmark's; changes to the calibration were
chosen on other months. Here: every 8th of the 492 months of 1950..1990 with at least 100 observed
stations (``--offset`` picks which of the 8), leaving out the 20 benchmark months; in each, 20 % of
the observed stations hidden (the same mask as the benchmark's), each month infilled on its own
(``time_window=0``, default options: the shipped weights calibrated on the month's own held-out
stations), as ``realdata.py colorado``'s space-only rows. The GP (Matérn 1.5 on x, y, elevation)
is read from ``results/colorado-all.json``, whose space-only task for a month is the same.

Run ``python benchmarks/colorado_dev.py`` (results ``benchmarks/results/colorado-dev.json`` and the
"colorado-dev" block of ``docs/benchmarks.md``).
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import pyproj  # noqa: E402,F401  isort: skip  (before anything loads eccodes)
import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata_tasks as T  # noqa: E402
from _common import RESULTS, machine, save_json, update_doc_section  # noqa: E402

import geonp  # noqa: E402,F401  registers ds.np

GP = "GP Matérn 1.5 on (x, y, elevation)"


def dev_months(offset: int = 0, step: int = 8) -> list[int]:
    """Every ``step``-th month (from ``offset``) of the full Colorado protocol, less the benchmark's 20."""
    bench = set(T.colorado_months("tmax").tolist())
    return [int(m) for m in T.colorado_months("tmax", None)[offset::step] if int(m) not in bench]


def run(models, offset: int) -> dict:
    ds, masked, hidden, _ = T.colorado_masked("tmax", None)
    values = ds.tmax.values
    months = dev_months(offset)
    every = [int(m) for m in T.colorado_months("tmax", None)]
    gp = json.loads((RESULTS / "colorado-all.json").read_text())["results"][GP]
    out = {"machine": machine(), "offset": offset, "months": months, "results": {
        GP: {"per_task_nll": [gp["per_task_nll"][every.index(m)] for m in months],
             "per_task_rmse": [gp["per_task_rmse"][every.index(m)] for m in months]}}}
    for model in models:
        w, c = time.perf_counter(), time.process_time()
        rows = []
        for i in months:
            pred = masked.isel(time=slice(i, i + 1)).np.infill("tmax", model=model, time_window=0).isel(time=0)
            h = hidden[i]
            rows.append(T.scores(values[i, h], pred.tmax_mean.values[h], pred.tmax_std.values[h]))
        out["results"][f"geonp {model} (default), space only"] = {
            "per_task_nll": [r["nll"] for r in rows], "per_task_rmse": [r["rmse"] for r in rows],
            "coverage": float(np.mean([r["coverage"] for r in rows])),
            "wall_s": time.perf_counter() - w, "cpu_s": time.process_time() - c}
        print(model, "done", flush=True)
    return out


def markdown(data: dict) -> str:
    info, gp = data["machine"], np.asarray(data["results"][GP]["per_task_nll"])
    lines = [f"Run {info['date']} on {info['cpu']} ({info['cores']} cores; {info['device']}), torch {info['torch']}. "
             f"Regenerate: `python benchmarks/colorado_dev.py`. {len(data['months'])} development months "
             f"(offset {data['offset']}); means over months, the NLL difference with its standard error over months.",
             "", "| method | RMSE °C | NLL | NLL − GP | coverage | wall / CPU s |", "|---|---|---|---|---|---|"]
    for name, r in data["results"].items():
        nll = np.asarray(r["per_task_nll"])
        diff = "–" if name == GP else f"{np.mean(nll - gp):+.4f} ± {np.std(nll - gp) / np.sqrt(nll.size):.4f}"
        cov = f"{r['coverage']:.3f}" if "coverage" in r else "–"
        cost = f"{r['wall_s']:.0f} / {r['cpu_s']:.0f}" if "wall_s" in r else "–"
        lines.append(f"| {name} | {np.mean(r['per_task_rmse']):.3f} | {nll.mean():.4f} | {diff} | {cov} | {cost} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["bsa-tnp", "te-pt-tnp"])
    parser.add_argument("--offset", type=int, default=0, help="which of every 8 months (0..7)")
    parser.add_argument("--doc", action="store_true", help="rebuild the docs block from the saved results")
    args = parser.parse_args()
    if not args.doc:
        save_json("colorado-dev", run(args.models, args.offset))
    update_doc_section("colorado-dev", markdown(json.loads((RESULTS / "colorado-dev.json").read_text())))


if __name__ == "__main__":
    main()
