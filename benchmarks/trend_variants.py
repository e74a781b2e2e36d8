"""Which static trend in elevation and position serves the Colorado stations best?

    python benchmarks/trend_variants.py                 # ~4 CPU-minutes; results/trend-variants.json
    python benchmarks/trend_variants.py --residual-gp   # ~2 CPU-minutes; results/trend-residual-gp.json

Each task of a station infill removes a least-squares trend fitted to its context (:mod:`geonp.trend`)
before the network sees the values, and adds it back at the targets. The package's trend is quadratic
in elevation and, from :data:`~geonp.trend.INTERACTION_TREND_POINTS` sites, varies linearly across
the task (columns ``X``, ``Y``, ``X·u``, ``Y·u``). This script swaps the trend's columns for
alternatives and scores the Colorado tmax task of ``realdata.py colorado`` (20 months, 20 % of the
observed stations hidden, space only) with the shipped BSA-TNP: the package default (calibrated on
the input) and the network alone. RMSE, NLL and 95 % coverage, averaged over the months.

``--residual-gp`` asks whether the stations share departures from the package's trend by
elevation: on the tasks of ``baselines.py`` it fits the trend, then a GP (scikit-learn, Matérn 1.5,
fitted hyperparameters) to the residuals on (x, y) and on (x, y, elevation) with per-dimension
lengthscales, and scores both (RMSE). If elevation adds nothing there, a network with an elevation
input (``pretrain.py --terrain``) has nothing more to find on this data.
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata_tasks as rt  # noqa: E402
from _common import machine, save_json  # noqa: E402

import geonp  # noqa: E402, F401  (the accessor)
import geonp.trend as trend  # noqa: E402

PACKAGE = trend.position_columns
#: name -> (the position columns as a function of X, Y, u; least distinct sites)
VARIANTS = {
    "elevation only (before 2026-11-26)": (PACKAGE, 10**9),
    "package: + X, Y, X·u, Y·u from 50 sites": (PACKAGE, 50),
    "the same from 30 sites": (PACKAGE, 30),
    "the same from 100 sites": (PACKAGE, 100),
    "X·u, Y·u without X, Y": (lambda X, Y, u: [X * u, Y * u], 50),
    "+ X², Y², X·Y": (lambda X, Y, u: [X, Y, X * u, Y * u, X * X, Y * Y, X * Y], 50),
    "+ X·u², Y·u²": (lambda X, Y, u: [X, Y, X * u, Y * u, X * u * u, Y * u * u], 50),
}


def use(variant: str) -> None:
    """Make :func:`geonp.trend.position_columns` build the columns of ``variant`` from its site count on."""
    trend.position_columns, trend.INTERACTION_TREND_POINTS = VARIANTS[variant]


def residual_gp() -> dict:
    """RMSE of the package's trend plus a fitted GP on its residuals, without and with elevation."""
    import baselines as bl

    sq = {"trend + GP on (x, y)": [], "trend + GP on (x, y, elevation)": []}
    for month in bl.T.colorado_months():
        t = bl.T.colorado_task(int(month))
        xc, xt, yc = t["x_context"], t["x_target"], t["y_context"]  # x in km
        ec, et = t["elev_context"], t["elev_target"]  # km
        basis = trend.static_basis(ec * 1000, None, xyc=xc)  # the package's trend (elevations in m)
        design_c = np.c_[np.ones(len(yc)), basis.columns(ec * 1000, None, xc)]
        coef = np.linalg.lstsq(design_c, yc, rcond=None)[0]
        r, base = yc - design_c @ coef, np.c_[np.ones(len(xt)), basis.columns(et * 1000, None, xt)] @ coef
        xy = bl.gp_fitted(xc, r, xt, "matern")[0]
        xye = bl.gp_fitted(np.c_[xc, ec], r, np.c_[xt, et], "matern", ard=True)[0]
        sq["trend + GP on (x, y)"].append((base + xy - t["y_target"]) ** 2)
        sq["trend + GP on (x, y, elevation)"].append((base + xye - t["y_target"]) ** 2)
    return {k: float(np.sqrt(np.mean(np.concatenate(v)))) for k, v in sq.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS), metavar="NAME")
    parser.add_argument("--residual-gp", action="store_true",
                        help="instead: the GP on the trend's residuals (sklearn; results/trend-residual-gp.json)")
    args = parser.parse_args()
    if args.residual_gp:  # a part of its own: results/trend-residual-gp.json
        rmse = residual_gp()
        print(rmse, flush=True)
        save_json("trend-residual-gp", {"machine": machine(), "rmse": rmse})
        return
    ds, masked, hidden, months = rt.colorado_masked("tmax")
    rows = []
    for variant in args.variants:
        use(variant)
        for calibrate in ("auto", False):
            row = {"variant": variant, "calibrate": calibrate,
                   **rt.colorado_space_only(ds, masked, hidden, months, model="bsa-tnp", calibrate=calibrate)}
            rows.append(row)
            rt.show(row)
    save_json("trend-variants", {"machine": machine(), "months": int(len(months)), "rows": rows})


if __name__ == "__main__":
    main()
