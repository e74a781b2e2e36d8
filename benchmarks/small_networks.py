"""Small station networks: whether calibrating the shipped weights on the input pays below 100 values.

    python benchmarks/small_networks.py      # ~2 CPU-minutes; results/small-networks.json

``calibrate="auto"`` calibrates station infill on held-out observed values of the input itself
(:mod:`geonp.calibrate_input`) from :data:`~geonp.calibrate_input.AUTO_CALIBRATION_POINTS`
observed values. This draws networks of ``n`` stations at random from the Colorado stations
observed in each of the 20 eval months of ``realdata.py colorado`` (1950–1990), hides a fifth of
them (at least one), infills that month alone with BSA-TNP zero-shot, with and without the
calibration, and scores the hidden stations: RMSE, NLL (mean and median over months) and 95 %
coverage, pooled over the months, and the median of the months' NLL. The same networks and
hidden stations for both rows of a size.
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

import geonp  # noqa: E402, F401  (the accessor)


def network(data, month: int, n: int, rng: np.random.Generator):
    """One month of ``n`` stations drawn from those observed, a fifth of them hidden: ``(masked, truth, hidden)``."""
    frame = data.isel(time=[month])
    observed = np.flatnonzero(np.isfinite(frame.tmax.values[0]))
    pick = np.sort(rng.choice(observed, n, replace=False))
    sub = frame.isel(station=pick)
    truth = sub.tmax.values[0].astype(np.float64)
    hidden = np.zeros(n, dtype=bool)
    hidden[rng.choice(n, max(1, n // 5), replace=False)] = True
    values = sub.tmax.values.copy()
    values[0, hidden] = np.nan
    masked = sub.copy()
    masked["tmax"] = sub.tmax.dims, values, sub.tmax.attrs
    return masked, truth, hidden


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 6, 8, 12, 16, 25, 50, 100], metavar="N")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    data = rt.load_colorado()[["tmax"]]
    months = rt.colorado_months("tmax")
    rows = []
    for n in args.sizes:
        rng = np.random.default_rng([args.seed, n])
        nets = [network(data, int(i), n, rng) for i in months]
        for calibrate in (False, True):
            start, cpu = time.perf_counter(), time.process_time()
            truths, means, stds, month_nll = [], [], [], []
            for masked, truth, hidden in nets:
                out = masked.np.infill("tmax", calibrate=calibrate)
                truths.append(truth[hidden])
                means.append(out.tmax_mean.values[0][hidden])
                stds.append(out.tmax_std.values[0][hidden])
                month_nll.append(rt.scores(truths[-1], means[-1], stds[-1])["nll"])
            pooled = rt.scores(np.concatenate(truths), np.concatenate(means), np.concatenate(stds))
            row = {"stations": n, "observed": n - max(1, n // 5), "calibrate": calibrate, "months": len(nets),
                   "scored": pooled["n"], **{k: pooled[k] for k in ("rmse", "nll", "coverage", "crps")},
                   "median_month_nll": float(np.median(month_nll)),
                   "wall_s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu}
            rows.append(row)
            rt.show(row)
    save_json("small-networks", {"machine": machine(), "rows": rows})


if __name__ == "__main__":
    main()
