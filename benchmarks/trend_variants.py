"""Which static trend in elevation and position serves the Colorado stations best.

    python benchmarks/trend_variants.py                 # ~8 CPU-minutes; results/trend-variants.json
    python benchmarks/trend_variants.py --shrunk        # ~7 CPU-minutes; results/trend-shrunk.json
    python benchmarks/trend_variants.py --residual-gp   # ~8 min wall; results/trend-residual-gp.json

Each task of a station infill removes a trend fitted to its context (:mod:`geonp.trend`) before the
network sees the values, and adds it back at the targets. The package's trend is quadratic in
elevation and, from :data:`~geonp.trend.INTERACTION_TREND_POINTS` sites, varies across the task
(:func:`geonp.trend.position_columns`), its position columns shrunk by a ridge chosen by
leave-one-out (:func:`geonp.ridge.fit_trend`). This script swaps the trend's columns and fit for
alternatives and scores the Colorado tmax task of ``realdata.py colorado`` (20 months, 20 % of the
observed stations hidden, space only) with the shipped BSA-TNP: the package default (calibrated on
the input) and the network alone. RMSE, NLL and 95 % coverage, averaged over the months.

``--shrunk`` scores both shipped models with the default calibration, the trend of 2026-11-26
against the ridge and the new columns, and the calibration's infill mean weight
(:func:`geonp.calibration.infill_mean_weight`) on and off.

``--residual-gp`` asks where the GP's lead on these stations comes from: on the tasks of
``baselines.py`` it fits a trend (none, linear in elevation, or the package's), then a GP
(scikit-learn, Matérn 1.5, fitted hyperparameters) to the residuals on (x, y) and on (x, y,
elevation) with per-dimension lengthscales, and scores each pair (RMSE, NLL, coverage). If elevation
adds nothing after the package's trend, a network with an elevation input (``pretrain.py
--terrain``) has nothing more to find there; if it adds after a simpler trend, the GP's lead is in
estimating the smooth surface in all three inputs at once.
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
import geonp.calibration as calibration  # noqa: E402
import geonp.ridge as ridge  # noqa: E402
import geonp.trend as trend  # noqa: E402

PACKAGE = trend.position_columns
LINEAR = lambda X, Y, u, u2: [X, Y, X * u, Y * u]  # noqa: E731  (the trend of 2026-11-26)
LEAST_SQUARES, RIDGE = (0.0,), ridge.RIDGE_GRID
#: name -> (the position columns as a function of X, Y, u, u²; least distinct sites; ridge strengths tried)
VARIANTS = {
    "elevation only (before 2026-11-26)": (LINEAR, 10**9, LEAST_SQUARES),
    "+ X, Y, X·u, Y·u from 50 sites (2026-11-26 .. 11-27)": (LINEAR, 50, LEAST_SQUARES),
    "the same from 30 sites": (LINEAR, 30, LEAST_SQUARES),
    "the same from 100 sites": (LINEAR, 100, LEAST_SQUARES),
    "X·u, Y·u without X, Y": (lambda X, Y, u, u2: [X * u, Y * u], 50, LEAST_SQUARES),
    "+ X², Y², X·Y": (lambda X, Y, u, u2: [X, Y, X * u, Y * u, X * X, Y * Y, X * Y], 50, LEAST_SQUARES),
    "+ X·u², Y·u²": (lambda X, Y, u, u2: [X, Y, X * u, Y * u, X * u * u, Y * u * u], 50, LEAST_SQUARES),
    "X, Y, X·u, Y·u, ridge": (LINEAR, 50, RIDGE),
    "package columns (+ X², Y², X·Y, X·u², Y·u²), least squares": (PACKAGE, 50, LEAST_SQUARES),
    "package: those columns, ridge (2026-11-27)": (PACKAGE, 50, RIDGE),
}
#: the rows of ``--shrunk`` (results/trend-shrunk.json): (variant, infill mean weight fitted)
SHRUNK_ROWS = (("+ X, Y, X·u, Y·u from 50 sites (2026-11-26 .. 11-27)", False), ("X, Y, X·u, Y·u, ridge", False),
               ("package columns (+ X², Y², X·Y, X·u², Y·u²), least squares", False),
               ("package: those columns, ridge (2026-11-27)", False),
               ("package: those columns, ridge (2026-11-27)", True))
_MEAN_WEIGHT = calibration.infill_mean_weight


def use(variant: str, mean_weight: bool = True) -> None:
    """Make :mod:`geonp.trend` build and fit the trend of ``variant``, with or without the infill mean weight."""
    trend.position_columns, trend.INTERACTION_TREND_POINTS, ridge.RIDGE_GRID = VARIANTS[variant]
    calibration.infill_mean_weight = _MEAN_WEIGHT if mean_weight else (lambda *a, **k: 1.0)


def _trend_columns(kind: str, ec: np.ndarray, xyc: np.ndarray):
    """Return the design columns (after the intercept) of trend ``kind`` as a function of elevations and positions.

    The trend is the one fitted to a context with elevations ``ec`` (m) and positions ``xyc`` (km).
    """
    if kind == "no trend":
        return lambda e, xy: np.zeros((len(e), 0))
    if kind == "linear in elevation":
        return lambda e, xy: (np.asarray(e)[:, None] - ec.mean()) / 1000.0
    use("+ X, Y, X·u, Y·u from 50 sites (2026-11-26 .. 11-27)" if kind == "the trend of 2026-11-26"
        else "package: those columns, ridge (2026-11-27)")
    basis = trend.static_basis(ec, None, xyc=xyc)
    return lambda e, xy: basis.columns(e, None, xy)


#: trends of :func:`residual_gp`
RESIDUAL_TRENDS = ("no trend", "linear in elevation", "the trend of 2026-11-26", "the package's trend")


def residual_gp() -> dict:
    """Score a fitted GP on the residuals of each trend of :data:`RESIDUAL_TRENDS`, on (x, y) and (x, y, elevation).

    Returns ``{"<trend> + GP on <inputs>": {"rmse", "nll", "coverage"}}``, means over the months of
    ``baselines.py`` (the GP's predictive std of a new observation; the trend's own estimation
    variance is not added, as it is not in the package).
    """
    import baselines as bl

    rows: dict[str, list] = {}
    for month in bl.T.colorado_months():
        t = bl.T.colorado_task(int(month))
        xc, xt, yc = t["x_context"], t["x_target"], t["y_context"]  # x in km
        ec, et = t["elev_context"] * 1000, t["elev_target"] * 1000  # m
        for name in RESIDUAL_TRENDS:
            cols = _trend_columns(name, ec, xc)
            design_c = np.c_[np.ones(len(yc)), cols(ec, xc)]
            shrunk = name in RESIDUAL_TRENDS[2:]
            penalised = np.r_[False, trend.static_basis(ec, None, xyc=xc).penalised] if shrunk else None
            coef = trend.fit_trend(design_c, yc, penalised)[0]  # least squares unless the trend has a ridge
            r, base = yc - design_c @ coef, np.c_[np.ones(len(xt)), cols(et, xt)] @ coef
            fits = {"(x, y)": bl.gp_fitted(xc, r, xt, "matern"),
                    "(x, y, elevation)": bl.gp_fitted(np.c_[xc, ec / 1000], r, np.c_[xt, et / 1000], "matern",
                                                      ard=True)}
            for inputs, (mean, std) in fits.items():
                rows.setdefault(f"{name} + GP on {inputs}", []).append(rt.scores(t["y_target"], base + mean, std))
    return {k: {m: float(np.mean([r[m] for r in v])) for m in ("rmse", "nll", "coverage")} for k, v in rows.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS), metavar="NAME")
    parser.add_argument("--shrunk", action="store_true",
                        help="instead: the ridge trend and the infill mean weight, both models, default calibration "
                             "(results/trend-shrunk.json)")
    parser.add_argument("--residual-gp", action="store_true",
                        help="instead: the GP on the trend's residuals (sklearn; results/trend-residual-gp.json)")
    args = parser.parse_args()
    if args.residual_gp:  # a part of its own: results/trend-residual-gp.json
        scores = residual_gp()
        for name, row in scores.items():
            rt.show({"method": name, **row})
        save_json("trend-residual-gp", {"machine": machine(), "scores": scores})
        return
    ds, masked, hidden, months = rt.colorado_masked("tmax")
    rows = []
    if args.shrunk:
        for model in ("bsa-tnp", "te-pt-tnp"):
            for variant, weight in SHRUNK_ROWS:
                use(variant, weight)
                row = {"model": model, "variant": variant, "mean weight": weight,
                       **rt.colorado_space_only(ds, masked, hidden, months, model=model, calibrate="auto")}
                rows.append(row)
                rt.show(row)
        save_json("trend-shrunk", {"machine": machine(), "months": int(len(months)), "rows": rows})
        return
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
