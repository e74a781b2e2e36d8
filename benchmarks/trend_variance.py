"""A/B: the static trend's estimation variance added to the predictive std, or not.

    python benchmarks/trend_variance.py      # 24 min wall on shared cores; results/trend-variance.json
    python benchmarks/trend_variance.py --parts colorado --out trend-variance-colorado

geonp removes a least-squares trend in elevation and land fraction from each task's context and adds
it back at the targets (:mod:`geonp.trend`). Regression kriging's predictive variance also holds the
variance of that trend's estimate at the target (:func:`geonp.trend.fit_variance`), largest where a
target's elevation or land fraction lies outside the context's. This script scores the package with
it (``geonp.data.tasks.TREND_VARIANCE = True``) and without, side by side, on the tasks where a trend
is fitted: the Colorado stations (20 months of ``realdata.py colorado``; space only, ±3 months, and
±3 months with the hidden stations missing in every month) and ERA5 infill with the bundled land
fraction (``realdata.py era5-infill``'s 28 frames, random and block masks). RMSE is unchanged by
construction; NLL and coverage move.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import pyproj  # noqa: E402,F401  isort: skip  (before anything loads eccodes)
import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata as R  # noqa: E402
import realdata_tasks as T  # noqa: E402
from _common import machine, save_json  # noqa: E402

import geonp.data.tasks as tasks  # noqa: E402


def colorado_rows(model: str) -> dict:
    """Infill scores of the Colorado eval months.

    The default (calibrated on the input) space only and ±3 months, and the network alone with the
    hidden stations missing in every month.
    """
    ds, masked, hidden, months = T.colorado_masked("tmax")
    values, out = ds.tmax.values, {}
    out[f"Colorado {model}, space only"] = T.colorado_space_only(ds, masked, hidden, months, model=model)
    if model != "bsa-tnp":
        return out
    for strict, calibrate in ((False, "auto"), (True, "auto"), (True, False)):
        rows = []
        for i in months:
            window = masked.isel(time=slice(max(0, i - 3), i + 4))
            if strict:
                window = window.copy(deep=True)
                window["tmax"][:, hidden[i]] = np.nan
            p = window.np.infill("tmax", model=model, time_window=3, calibrate=calibrate).sel(time=ds.time.values[i])
            rows.append(T.scores(values[i, hidden[i]], p.tmax_mean.values[hidden[i]], p.tmax_std.values[hidden[i]]))
        key = f"Colorado {model}, ±3 months" + (", hidden stations missing in every month" if strict else "")
        key += "" if calibrate else ", the network alone"
        out[key] = {k: float(np.mean([r[k] for r in rows])) for k in ("rmse", "nll", "coverage")}
    return out


def era5_rows() -> dict:
    """BSA-TNP zero-shot infill of ERA5 with the bundled land fraction (the package default), both masks."""
    da, ev, out = T.load_era5(), T.era5_eval_times(6), {}
    for kind in ("random", "block"):
        masked = R._masked_era5(kind).isel(time=slice(int(ev[0]) - 3, int(ev[-1]) + 4))
        pred = masked.np.infill("t2m", model="bsa-tnp", time_window=3, calibrate=False)
        scores = R.era5_infill_scores(da, pred, ev, kind)
        out[f"ERA5 {kind}, bsa-tnp zero-shot"] = {k: scores[k] for k in ("rmse", "nll", "coverage")}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["colorado", "era5"], choices=["colorado", "era5"])
    parser.add_argument("--out", default="trend-variance", help="results file name (benchmarks/results/<out>.json)")
    args = parser.parse_args()
    results = {}
    for on in (False, True):
        tasks.TREND_VARIANCE = on
        rows = {}
        if "colorado" in args.parts:
            rows.update(colorado_rows("bsa-tnp"))
            rows.update(colorado_rows("te-pt-tnp"))
        if "era5" in args.parts:
            rows.update(era5_rows())
        for name, row in rows.items():
            T.show({"trend variance": on, "task": name, **row})
        results["with" if on else "without"] = rows
    save_json(args.out, {"machine": machine(), "parts": args.parts, "results": results})


if __name__ == "__main__":
    main()
