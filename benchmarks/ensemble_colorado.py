"""Probe: the two shipped models averaged, on Colorado space only (the station target still not met).

    python benchmarks/ensemble_colorado.py      # ~6 min on 2 cores; results/probe-ensemble-colorado.json

Colorado space only (``realdata.py colorado``'s task: 20 months 1950..1990, 20 % of the observed
stations hidden, each month on its own) is where geonp's default stays behind the GP with
elevation in its kernel. Both shipped models run with the package defaults (calibrated on
held-out stations of the input); their predictions are then combined per station: the mean of
the two means, with the std of the equal mixture or the root mean of the two variances, and the
latter scaled by factors to show how far any rescaling of that std could go (the factor is chosen
on the scored stations themselves, so those rows are a bound, not a method).
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip  (before anything loads eccodes)

import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata_tasks as rt  # noqa: E402
from _common import machine, save_json  # noqa: E402

import geonp  # noqa: E402, F401  registers ds.np

MODELS = ("bsa-tnp", "te-pt-tnp")


def main() -> None:
    warnings.simplefilter("ignore")
    ds, masked, hidden, months = rt.colorado_masked("tmax")
    values = ds.tmax.values
    start, cpu = time.perf_counter(), time.process_time()
    preds = {}
    for model in MODELS:
        means, stds = [], []
        for i in months:
            p = masked.isel(time=slice(i, i + 1)).np.infill("tmax", model=model, time_window=0).isel(time=0)
            means.append(p.tmax_mean.values[hidden[i]])
            stds.append(p.tmax_std.values[hidden[i]])
        preds[model] = (means, stds)

    def score(means, stds) -> dict:
        rows = [rt.scores(values[i, hidden[i]], m, s) for i, m, s in zip(months, means, stds)]
        return {k: float(np.mean([r[k] for r in rows])) for k in ("rmse", "nll", "coverage")}

    (ma, sa), (mb, sb) = (preds[m] for m in MODELS)
    mean = [0.5 * (a + b) for a, b in zip(ma, mb)]
    mixture = [np.sqrt(0.5 * (s1**2 + a**2) + 0.5 * (s2**2 + b**2) - m**2)
               for a, b, s1, s2, m in zip(ma, mb, sa, sb, mean)]
    pooled = [np.sqrt(0.5 * (s1**2 + s2**2)) for s1, s2 in zip(sa, sb)]
    rows = {m: score(*preds[m]) for m in MODELS}
    rows["average, mixture std"] = score(mean, mixture)
    rows["average, root mean variance"] = score(mean, pooled)
    for k in (0.9, 0.95):
        label = f"average, root mean variance x {k} (chosen on the scored stations)"
        rows[label] = score(mean, [k * s for s in pooled])
    out = {"machine": machine(), "months": int(len(months)), "rows": rows,
           "wall_s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu}
    save_json("probe-ensemble-colorado", out)
    for label, r in rows.items():
        print(f"{label}: {r['rmse']:.3f} / {r['nll']:.3f} / {r['coverage']:.3f}")


if __name__ == "__main__":
    main()
