"""Forecasts on monthly and daily steps: geonp against persistence and climatology.

    python benchmarks/coarse_forecast.py              # ~10 min wall on 2 cores; results/coarse-forecast.json
    python benchmarks/coarse_forecast.py --data colorado-tmax --models bsa-tnp
    python benchmarks/coarse_forecast.py --doc        # the docs table from the saved results
    python benchmarks/coarse_forecast.py --fit 300s --models bsa-tnp --data colorado-tmax ireland-wind
        # models fitted on the history instead; results/coarse-forecast-fitted.json

The shipped weights are pretrained and benchmarked on hourly fields; a user with a monthly station
record or a daily one forecasts it with the same ``ds.np.forecast``. Two records of the shared data:

* ``colorado-tmax``, ``colorado-tmin``: monthly means at 376 Colorado stations (62 % missing); an
  initial time every month 1980-01 .. 1990-09 (129), leads +1 .. +3 months, history 1895 .. 1979.
* ``ireland-wind``: daily mean wind speed at 12 Irish stations; an initial time every day
  1976-01-01 .. 1978-12-28 (1,093), leads +1 .. +3 days, history 1961 .. 1975.

Baselines, each fitted on the history before the first initial time only (as geonp's forecast is):
persistence; the annual cycle of each station (:func:`geonp.seasonal.fit_cycle`, the reference
``reference="seasonal"`` uses); anomaly persistence (the cycle plus the departure at the initial
time); damped anomaly persistence (the departure times its lag correlation over the history, per
lead: the best linear forecast from one station's own past). Their std per lead is their RMS error
over the history's last 10 years. geonp rows: the default (``reference="auto"``, seasonal on these
steps, and ``calibrate="auto"``), the network alone (``calibrate=False``) and ``reference="none"``
(the default before 2026-11-27). Scores over every station observed at the valid time and at the
initial time (where every method has a value).
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
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402
from scipy.stats import norm  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, machine, save_json, update_doc_section  # noqa: E402

import geonp  # noqa: E402,F401  (registers ds.np)
from geonp import seasonal  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
LEADS = 3
SETS = {
    "colorado-tmax": ("colorado_monthly_met_1895_1997.nc", "tmax", "1980-01-01", "1990-09-01", "°C", "months"),
    "colorado-tmin": ("colorado_monthly_met_1895_1997.nc", "tmin", "1980-01-01", "1990-09-01", "°C", "months"),
    "ireland-wind": ("ireland_wind_1961_1978.nc", "wind_speed", "1976-01-01", "1978-12-28", "knots", "days"),
}


def load(name: str) -> tuple[xr.Dataset, np.ndarray]:
    """The record (up to the last valid time) and the indices of its initial times."""
    path, var, first, last, _, _ = SETS[name]
    ds = xr.open_dataset(DATA / path)[[var]].load()
    t = ds.time.values
    inits = np.arange(np.searchsorted(t, np.datetime64(first)), np.searchsorted(t, np.datetime64(last)) + 1)
    return ds.isel(time=slice(0, inits[-1] + LEADS + 1)), inits


def baselines(ds: xr.Dataset, var: str, inits: np.ndarray) -> dict:
    """``{method: (mean [inits, leads, stations], std [leads])}`` of the classical forecasts."""
    y = ds[var].values.astype(np.float64)
    first = int(inits[0])
    points = seasonal.point_covariates(ds, ("station",), ("lon", "lat", "elevation"))
    cycle = seasonal.fit_cycle(ds[var].isel(time=slice(0, first + 1)), "time", covariates=points)
    clim = seasonal.cycle_at(cycle, ds.time.values, ("time",)).transpose("time", "station").values
    anom = y - clim
    rho = []
    for L in range(1, LEADS + 1):
        a0, a1 = anom[: first + 1 - L], anom[L: first + 1]
        ok = np.isfinite(a0) & np.isfinite(a1)
        rho.append(float((a0[ok] * a1[ok]).sum() / (a0[ok] ** 2).sum()))
    frames_per_year = 12 if SETS_UNIT[var] == "months" else 365

    def build(fn, at):
        return np.stack([np.stack([fn(i, L) for L in range(1, LEADS + 1)]) for i in at])

    methods = {
        "persistence": lambda i, L: y[i],
        "annual cycle": lambda i, L: clim[i + L],
        "anomaly persistence": lambda i, L: clim[i + L] + anom[i],
        "damped anomaly persistence": lambda i, L: clim[i + L] + rho[L - 1] * anom[i],
    }
    past = np.arange(max(1, first - 10 * frames_per_year), first - LEADS + 1)  # the history's last 10 years
    truth_past = np.stack([y[past + L] for L in range(1, LEADS + 1)], 1)
    out = {}
    for name, fn in methods.items():
        err = build(fn, past) - truth_past
        std = np.sqrt(np.nanmean(err ** 2, axis=(0, 2)))
        out[name] = (build(fn, inits), std)
    out["_rho"] = rho
    return out


SETS_UNIT = {v[1]: v[5] for v in SETS.values()}


def scores(mean: np.ndarray, std: np.ndarray, truth: np.ndarray) -> list[dict]:
    """Per lead: RMSE, MAE, Gaussian NLL, 95 % coverage and CRPS over the observed valid values."""
    rows = []
    for k in range(LEADS):
        m, s, t = mean[:, k], np.broadcast_to(std[k] if np.ndim(std) == 1 else std[:, k], mean[:, k].shape), truth[:, k]
        ok = np.isfinite(m) & np.isfinite(t) & np.isfinite(s) & (s > 0)
        e, s = m[ok] - t[ok], s[ok]
        z = e / s
        crps = s * (z * (2 * norm.cdf(z) - 1) + 2 * norm.pdf(z) - 1 / np.sqrt(np.pi))
        rows.append({"rmse": float(np.sqrt(np.mean(e ** 2))), "mae": float(np.mean(np.abs(e))),
                     "nll": float(np.mean(0.5 * np.log(2 * np.pi * s ** 2) + 0.5 * z ** 2)),
                     "coverage": float(np.mean(np.abs(z) < 1.959964)), "crps": float(np.mean(crps)),
                     "n": int(ok.sum())})
    return rows


def run_geonp(ds: xr.Dataset, var: str, inits: np.ndarray, model: str, **options) -> tuple:
    """Forecast with geonp at ``inits``: mean and std ``[inits, leads, stations]``, wall and CPU seconds, warnings."""
    w0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = ds.np.forecast(var, steps=LEADS, init_time=ds.time.values[inits], model=model, **options).compute()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    names = sorted({w.category.__name__ for w in caught if w.category.__module__.startswith("geonp")})
    order = ("init_time", "lead_time", "station")
    return (out[f"{var}_mean"].transpose(*order).values, out[f"{var}_std"].transpose(*order).values, wall, cpu,
            names, out.attrs.get("geonp_reference"))


def run_fitted(name: str, models: list[str], budget: str, log=print) -> dict:
    """Models fitted on the history before the first initial time (``ds.np.fit(task="forecast")``), then forecast."""
    _, var, *_ = SETS[name]
    ds, inits = load(name)
    y = ds[var].values.astype(np.float64)
    truth = np.stack([y[inits + L] for L in range(1, LEADS + 1)], 1)
    truth[~np.isfinite(y[inits])[:, None, :].repeat(LEADS, 1)] = np.nan
    res = {"inits": [str(ds.time.values[inits[0]])[:10], str(ds.time.values[inits[-1]])[:10], int(len(inits))],
           "methods": {}}
    for model in models:
        w0, c0 = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = ds.isel(time=slice(0, int(inits[0]) + 1)).np.fit(var, model=model, task="forecast",
                                                                      max_time=budget, progress=False, seed=0)
        fit_wall, fit_cpu = time.perf_counter() - w0, time.process_time() - c0
        mean, std, wall, cpu, warned, ref = run_geonp(ds, var, inits, fitted)
        key = f"geonp {model} fitted {budget}"
        res["methods"][key] = {"leads": scores(mean, std, truth), "wall_s": wall, "cpu_s": cpu, "warnings": warned,
                               "reference": ref, "fit_wall_s": fit_wall, "fit_cpu_s": fit_cpu,
                               "steps": fitted.metadata.get("steps"),
                               "mean_weight": list(fitted.normaliser.lead_mean_weight[:LEADS]),
                               "damping": list(fitted.normaliser.lead_damping[:LEADS])}
        log(name, key, [round(r["rmse"], 3) for r in res["methods"][key]["leads"]],
            f"NLL {[round(r['nll'], 2) for r in res['methods'][key]['leads']]}",
            f"{fitted.metadata.get('steps')} steps")
    return res


def run(name: str, models: list[str], log=print) -> dict:
    _, var, *_ = SETS[name]
    ds, inits = load(name)
    y = ds[var].values.astype(np.float64)
    truth = np.stack([y[inits + L] for L in range(1, LEADS + 1)], 1)
    truth[~np.isfinite(y[inits])[:, None, :].repeat(LEADS, 1)] = np.nan  # scored where every method has a value
    res = {"inits": [str(ds.time.values[inits[0]])[:10], str(ds.time.values[inits[-1]])[:10], int(len(inits))],
           "methods": {}}
    base = baselines(ds, var, inits)
    res["rho"] = base.pop("_rho")
    for method, (mean, std) in base.items():
        res["methods"][method] = {"leads": scores(mean, std, truth)}
        log(name, method, [round(r["rmse"], 3) for r in res["methods"][method]["leads"]])
    for model in models:
        for label, opts in (("default", {}), ("network alone", {"calibrate": False}),
                            ("reference='none'", {"reference": "none"})):
            mean, std, wall, cpu, warned, ref = run_geonp(ds, var, inits, model, **opts)
            key = f"geonp {model} {label}"
            res["methods"][key] = {"leads": scores(mean, std, truth), "wall_s": wall, "cpu_s": cpu,
                                   "warnings": warned, "reference": ref}
            log(name, key, [round(r["rmse"], 3) for r in res["methods"][key]["leads"]],
                f"NLL {[round(r['nll'], 2) for r in res['methods'][key]['leads']]}",
                f"cov {[round(r['coverage'], 3) for r in res['methods'][key]['leads']]}", f"{wall:.0f} s", warned)
    return res


def markdown(results: dict) -> str:
    m = results["machine"]
    lines = [f"Run {results['date']} on {m.get('cpu', '?')}, torch {m.get('torch', '?')}; "
             f"{results['wall_s']:.0f} s wall in all."]
    for name, res in results["sets"].items():
        unit, step = SETS[name][4], SETS[name][5]
        rho = f"; lag correlations of the history's departures {', '.join(f'{r:.2f}' for r in res['rho'])}" \
            if "rho" in res else ""
        lines += ["", f"**{name}** ({res['inits'][2]} initial times {res['inits'][0]} .. {res['inits'][1]}, "
                      f"leads +1 .. +{LEADS} {step}{rho})", "",
                  f"| method | RMSE {unit}, +1 / +2 / +3 | NLL | 95 % coverage | CRPS | wall s |",
                  "|---|---|---|---|---|---|"]
        for method, r in res["methods"].items():
            def join(key, d=3, leads=r["leads"]):
                return " / ".join(f"{x[key]:.{d}f}" for x in leads)
            wall = f"{r['wall_s']:.0f}" if "wall_s" in r else ""
            if "fit_cpu_s" in r:
                wall += f" (+ fit: {r['steps']} steps, {r['fit_cpu_s']:.0f} CPU-s)"
            lines.append(f"| {method} | {join('rmse')} | {join('nll', 2)} | {join('coverage')} | {join('crps')} | "
                         f"{wall} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", nargs="+", choices=sorted(SETS), default=list(SETS))
    ap.add_argument("--models", nargs="+", default=["bsa-tnp", "te-pt-tnp"])
    ap.add_argument("--fit", metavar="BUDGET", help="fit each model on the history for this long (e.g. 300s) "
                    "instead of the shipped-weights rows; saved apart")
    ap.add_argument("--doc", action="store_true", help="only rewrite the docs table from the saved results")
    args = ap.parse_args(argv)
    name = "coarse-forecast" if args.fit is None else "coarse-forecast-fitted"
    if not args.doc:
        t0 = time.perf_counter()
        sets = {d: run(d, args.models) if args.fit is None else run_fitted(d, args.models, args.fit)
                for d in args.data}
        results = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(), "sets": sets,
                   "wall_s": time.perf_counter() - t0}
        save_json(name, results)
    results = json.loads((RESULTS / f"{name}.json").read_text())
    update_doc_section(name, markdown(results))


if __name__ == "__main__":
    main()
