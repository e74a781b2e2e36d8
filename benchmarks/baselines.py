"""Classical baselines of geonp's real-data benchmark (tasks defined in ``realdata_tasks.py``).

What a user would try before a neural process, on exactly the points geonp is scored on:

* ERA5 UK t2m infill (random 90 % hidden; centred 12 × 12 block + 50 % elsewhere), per frame, spatial
  only, on LAEA km: ordinary kriging (spherical, exponential; pykrige, kriging variance as std),
  scikit-learn GPs with fitted hyperparameters (Matérn 1.5 + white, RBF + white; optimiser started
  from lengthscales 0.1, 0.3, 1 × the input range, best marginal likelihood kept), scipy ``griddata``
  linear (nearest outside the hull) and nearest.
* ERA5 forecast +1..+6 h from 24 inits: persistence, linear extrapolation, diurnal persistence, each
  with a Gaussian std per lead = its RMS error over inits of the fit period (≤ ``ERA5_FIT_END``).
* Colorado monthly tmax (20 % of the observed stations hidden): ordinary kriging exponential,
  universal kriging with elevation as a specified drift, GP Matérn 1.5 / RBF on (x km, y km,
  elevation km) with per-dimension lengthscales, GP Matérn without elevation, inverse-distance
  weighting.

Every spatial baseline is a plain function ``f(x_context, y_context, x_target, ...) -> (mean, std)``
(``std`` is ``None`` for methods without an uncertainty), so the geonp runner can call them on the
tasks of ``realdata_tasks`` and compare point by point.

Run ``python benchmarks/baselines.py`` (one thread; ~30 min on the shared 2-core machine) or
``--quick`` for a smoke test on a few frames (prints only, writes nothing). Results:
``benchmarks/results/baselines.json`` and the ``realdata-baselines`` section of ``docs/benchmarks.md``.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import pyproj  # noqa: E402,F401  isort: skip  (before anything loads eccodes)
import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata_tasks as T  # noqa: E402

# ------------------------------------------------------------------------------ spatial baselines


def kriging_ordinary(x_context, y_context, x_target, variogram: str = "spherical"):
    """Ordinary kriging (pykrige, variogram fitted to the context), std = sqrt(kriging variance)."""
    from pykrige.ok import OrdinaryKriging

    xc, xt = np.asarray(x_context, float), np.asarray(x_target, float)
    ok = OrdinaryKriging(xc[:, 0], xc[:, 1], np.asarray(y_context, float), variogram_model=variogram,
                         verbose=False, enable_plotting=False)
    mean, var = ok.execute("points", xt[:, 0], xt[:, 1])
    return np.asarray(mean, float), np.sqrt(np.maximum(np.asarray(var, float), 1e-12))


def kriging_universal_drift(x_context, y_context, x_target, drift_context, drift_target,
                            variogram: str = "exponential"):
    """Universal kriging with one specified drift (e.g. elevation) known at context and targets."""
    from pykrige.uk import UniversalKriging

    xc, xt = np.asarray(x_context, float), np.asarray(x_target, float)
    uk = UniversalKriging(xc[:, 0], xc[:, 1], np.asarray(y_context, float), variogram_model=variogram,
                          drift_terms=["specified"], specified_drift=[np.asarray(drift_context, float)],
                          verbose=False, enable_plotting=False)
    mean, var = uk.execute("points", xt[:, 0], xt[:, 1],
                           specified_drift_arrays=[np.asarray(drift_target, float)])
    return np.asarray(mean, float), np.sqrt(np.maximum(np.asarray(var, float), 1e-12))


def gp_fitted(x_context, y_context, x_target, kernel: str = "matern", ard: bool = False,
              starts=(0.1, 0.3, 1.0), return_model: bool = False):
    """scikit-learn GP, amplitude × (Matérn 1.5 | RBF) + white noise, ``normalize_y=True``.

    The optimiser runs once from each lengthscale ``starts[i]`` × the range of the inputs (per
    dimension when ``ard``, else the largest range) and the fit with the best log marginal
    likelihood is kept: from a single start the RBF fit often ends in the "all noise" optimum.
    The std is the predictive of a new observation (white noise included).
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Matern, WhiteKernel

    xc, xt = np.asarray(x_context, float), np.asarray(x_target, float)
    yc = np.asarray(y_context, float)
    span = np.ptp(xc, axis=0)
    span = np.where(span > 0, span, 1.0)
    if not ard:
        span = np.array(span.max())
    best = None
    for f in starts:
        ls = f * span
        bounds = (1e-3 * float(np.min(span)), 1e2 * float(np.max(span)))
        base = (Matern(ls, bounds, nu=1.5) if kernel == "matern" else RBF(ls, bounds))
        k = ConstantKernel(1.0, (1e-3, 1e3)) * base + WhiteKernel(1e-2, (1e-8, 1e1))
        gp = GaussianProcessRegressor(k, normalize_y=True, n_restarts_optimizer=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            gp.fit(xc, yc)
        if best is None or gp.log_marginal_likelihood_value_ > best.log_marginal_likelihood_value_:
            best = gp
    mean, std = best.predict(xt, return_std=True)
    if return_model:
        return mean, std, best
    return mean, std


def griddata_linear(x_context, y_context, x_target):
    """Piecewise-linear interpolation on the Delaunay triangulation, nearest outside the hull."""
    from scipy.interpolate import griddata

    out = griddata(x_context, y_context, x_target, method="linear")
    bad = ~np.isfinite(out)
    if bad.any():
        out[bad] = griddata(x_context, y_context, np.asarray(x_target)[bad], method="nearest")
    return out, None


def nearest(x_context, y_context, x_target):
    """Value of the nearest context point."""
    from scipy.spatial import cKDTree

    _, i = cKDTree(x_context).query(x_target)
    return np.asarray(y_context, float)[i], None


def idw(x_context, y_context, x_target, power: float = 2.0):
    """Inverse-distance weighting over all context points (weights 1 / d^power)."""
    xc, xt = np.asarray(x_context, float), np.asarray(x_target, float)
    d = np.sqrt(((xt[:, None, :] - xc[None, :, :]) ** 2).sum(-1))
    w = 1.0 / np.maximum(d, 1e-9) ** power
    return (w @ np.asarray(y_context, float)) / w.sum(1), None


ERA5_INFILL_METHODS = {
    "GP Matérn 1.5 + white": lambda xc, yc, xt: gp_fitted(xc, yc, xt, "matern"),
    "GP RBF + white": lambda xc, yc, xt: gp_fitted(xc, yc, xt, "rbf"),
    "ordinary kriging, spherical": lambda xc, yc, xt: kriging_ordinary(xc, yc, xt, "spherical"),
    "ordinary kriging, exponential": lambda xc, yc, xt: kriging_ordinary(xc, yc, xt, "exponential"),
    "linear (nearest outside hull)": griddata_linear,
    "nearest": nearest,
}


def _with_elev(task, key):
    return np.column_stack([task[f"x_{key}"], task[f"elev_{key}"]])


COLORADO_METHODS = {
    "GP Matérn 1.5 on (x, y, elevation)": lambda t: gp_fitted(
        _with_elev(t, "context"), t["y_context"], _with_elev(t, "target"), "matern", ard=True),
    "GP RBF on (x, y, elevation)": lambda t: gp_fitted(
        _with_elev(t, "context"), t["y_context"], _with_elev(t, "target"), "rbf", ard=True),
    "universal kriging, elevation drift": lambda t: kriging_universal_drift(
        t["x_context"], t["y_context"], t["x_target"], t["elev_context"], t["elev_target"]),
    "ordinary kriging, exponential (no elevation)": lambda t: kriging_ordinary(
        t["x_context"], t["y_context"], t["x_target"], "exponential"),
    "GP Matérn 1.5 without elevation": lambda t: gp_fitted(
        t["x_context"], t["y_context"], t["x_target"], "matern"),
    "inverse-distance weighting": lambda t: idw(t["x_context"], t["y_context"], t["x_target"]),
}

# ------------------------------------------------------------------------------ forecast baselines


def forecast_persistence(field, init: int, lead: int):
    """The field at ``init`` (``field``: (time, ...) array on the full time axis)."""
    return field[init]


def forecast_linear(field, init: int, lead: int):
    """Linear extrapolation of the last hourly change: x[init] + lead · (x[init] − x[init−1])."""
    return field[init] + lead * (field[init] - field[init - 1])


def forecast_diurnal(field, init: int, lead: int):
    """Diurnal persistence: x[init] + (x[init+lead−24] − x[init−24]) (yesterday's change)."""
    return field[init] + (field[init + lead - 24] - field[init - 24])


FORECAST_METHODS = {
    "diurnal persistence": forecast_diurnal,
    "linear extrapolation": forecast_linear,
    "persistence": forecast_persistence,
}


def forecast_std(method, field, inits, leads=T.ERA5_LEADS) -> dict:
    """Per-lead Gaussian std of ``method``: its RMS error over all cells of the fit ``inits``."""
    return {L: float(np.sqrt(np.mean([(method(field, i, L) - field[i + L]) ** 2 for i in inits])))
            for L in leads}


# -------------------------------------------------------------------------------------- running


def _mean_scores(rows):
    keys = [k for k in rows[0] if k != "n"]
    out = {k: float(np.mean([r[k] for r in rows])) for k in keys}
    out["n_points"] = int(sum(r["n"] for r in rows))
    return out


def run_spatial(tasks, methods, call, log=print) -> dict:
    """Score every method on every task; means over tasks plus per-task scores and timings."""
    res = {}
    for name, fn in methods.items():
        rows, wall, cpu = [], 0.0, 0.0
        for task in tasks:
            w, c = time.perf_counter(), time.process_time()
            mean, std = call(fn, task)
            wall += time.perf_counter() - w
            cpu += time.process_time() - c
            rows.append(T.scores(task["y_target"], mean, std))
        res[name] = {**_mean_scores(rows), "wall_s": wall, "cpu_s": cpu,
                     "per_task_rmse": [r["rmse"] for r in rows],
                     **({"per_task_nll": [r["nll"] for r in rows]} if "nll" in rows[0] else {})}
        log(f"  {name}: RMSE {res[name]['rmse']:.3f}"
            + (f" NLL {res[name]['nll']:.3f} cov {res[name]['coverage']:.3f}" if "nll" in res[name] else "")
            + f"  ({wall:.1f} s wall, {cpu:.1f} s CPU)")
    return res


def run_era5_infill(kind, step_hours=6, n_frames=None, log=print):
    frames = T.era5_eval_times(step_hours)
    if n_frames:
        frames = frames[np.round(np.linspace(0, len(frames) - 1, n_frames)).astype(int)]
    tasks = [T.era5_infill_task(int(t), kind) for t in frames]
    log(f"ERA5 infill {kind}: {len(tasks)} frames, {len(tasks[0]['y_context'])} context, "
        f"{len(tasks[0]['y_target'])} scored")
    res = run_spatial(tasks, ERA5_INFILL_METHODS,
                      lambda fn, t: fn(t["x_context"], t["y_context"], t["x_target"]), log)
    meta = {"frames": [t["time"] for t in tasks],
            "n_context": float(np.mean([len(t["y_context"]) for t in tasks])),
            "n_target": float(np.mean([len(t["y_target"]) for t in tasks]))}
    return {"meta": meta, "methods": res}


def run_era5_forecast(n_inits=None, log=print):
    field = np.asarray(T.load_era5().values, dtype=np.float64)
    inits = T.era5_forecast_inits()
    if n_inits:
        inits = inits[:n_inits]
    fit_inits = T.era5_fit_inits()
    log(f"ERA5 forecast: {len(inits)} inits, std fitted on {len(fit_inits)} inits up to {T.ERA5_FIT_END}")
    res = {}
    for name, fn in FORECAST_METHODS.items():
        w, c = time.perf_counter(), time.process_time()
        sd = forecast_std(fn, field, fit_inits)
        per_lead = {}
        for L in T.ERA5_LEADS:
            rows = [T.scores(field[i + L], fn(field, i, L), sd[L]) for i in inits]
            pooled = T.scores(np.stack([field[i + L] for i in inits]),
                              np.stack([fn(field, i, L) for i in inits]))
            per_lead[L] = {**_mean_scores(rows), "rmse_pooled": pooled["rmse"], "std": sd[L]}
        res[name] = {"per_lead": per_lead, "wall_s": time.perf_counter() - w,
                     "cpu_s": time.process_time() - c}
        log(f"  {name}: RMSE " + " ".join(f"{per_lead[L]['rmse']:.3f}" for L in T.ERA5_LEADS))
    meta = {"inits": [str(T.load_era5().time.values[i])[:16] for i in inits],
            "fit_inits": [str(T.load_era5().time.values[i])[:16] for i in fit_inits[[0, -1]]],
            "n_fit_inits": int(len(fit_inits))}
    return {"meta": meta, "methods": res}


def run_colorado(n_months=None, log=print):
    months = T.colorado_months()
    if n_months:
        months = months[:n_months]
    tasks = [T.colorado_task(int(m)) for m in months]
    log(f"Colorado tmax: {len(tasks)} months, ~{np.mean([len(t['y_context']) for t in tasks]):.0f} context, "
        f"~{np.mean([len(t['y_target']) for t in tasks]):.0f} targets")
    res = run_spatial(tasks, COLORADO_METHODS, lambda fn, t: fn(t), log)
    meta = {"months": [t["time"] for t in tasks],
            "n_context": float(np.mean([len(t["y_context"]) for t in tasks])),
            "n_target": float(np.mean([len(t["y_target"]) for t in tasks]))}
    return {"meta": meta, "methods": res}


# -------------------------------------------------------------------------------------- markdown


def _f(v, d=3):
    return "–" if v is None else f"{v:.{d}f}"


def _spatial_table(res, unit):
    lines = [f"| method | RMSE {unit} | MAE | NLL | cov95 | CRPS | wall s | CPU s |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in sorted(res["methods"].items(), key=lambda kv: kv[1]["rmse"]):
        lines.append(f"| {name} | {_f(r['rmse'])} | {_f(r['mae'])} | {_f(r.get('nll'))} | "
                     f"{_f(r.get('coverage'))} | {_f(r.get('crps'))} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} |")
    return "\n".join(lines)


def markdown(results) -> str:
    m = results["machine"]
    out = [
        "Classical baselines on the real-data tasks of `benchmarks/realdata_tasks.py` (the tasks geonp "
        "is scored on; data in `../shared/data`). Run `python benchmarks/baselines.py` "
        f"({results['run_wall_s'] / 60:.0f} min on {m['cpu']}, {m['cores']} cores, one thread, "
        f"{m['date']}); results in `benchmarks/results/baselines.json`. Scores are means over frames "
        "(months); RMSE/MAE/CRPS in data units, NLL the mean Gaussian NLL per point; wall/CPU s are "
        "totals over all frames. NLL, coverage and CRPS only for methods with a predictive std.",
    ]
    if "era5_infill_random" in results:
        r = results["era5_infill_random"]
        out += ["", f"### ERA5 UK t2m infill, random 90 % hidden ({len(r['meta']['frames'])} frames, "
                f"{r['meta']['n_context']:.0f} context → {r['meta']['n_target']:.0f} scored)", "",
                _spatial_table(r, "K")]
    if "era5_infill_block" in results:
        r = results["era5_infill_block"]
        out += ["", f"### ERA5 infill, centred 12 × 12 block + 50 % elsewhere hidden, scored in the block "
                f"({len(r['meta']['frames'])} frames, {r['meta']['n_context']:.0f} context → "
                f"{r['meta']['n_target']:.0f} scored)", "", _spatial_table(r, "K")]
    if "era5_forecast" in results:
        r = results["era5_forecast"]
        leads = list(T.ERA5_LEADS)
        out += ["", f"### ERA5 forecast, {len(r['meta']['inits'])} inits every 6 h "
                f"{r['meta']['inits'][0]} .. {r['meta']['inits'][-1]}", "",
                "RMSE over the grid, mean over inits (K; the RMSE pooled over inits is in the JSON as "
                "`rmse_pooled`):", "",
                "| method | " + " | ".join(f"+{L} h" for L in leads) + " |",
                "|---|" + "---|" * len(leads)]
        for name, v in r["methods"].items():
            out.append(f"| {name} | " + " | ".join(_f(v["per_lead"][L]["rmse"]) for L in leads) + " |")
        out += ["", "NLL / 95 % coverage / CRPS, with a Gaussian std per lead = the method's RMS error on "
                f"{r['meta']['n_fit_inits']} inits of the fit period ({r['meta']['fit_inits'][0]} .. "
                f"{r['meta']['fit_inits'][1]}):", "",
                "| method | " + " | ".join(f"+{L} h" for L in leads) + " |",
                "|---|" + "---|" * len(leads)]
        for name, v in r["methods"].items():
            out.append(f"| {name} | " + " | ".join(
                f"{_f(v['per_lead'][L]['nll'], 2)} / {_f(v['per_lead'][L]['coverage'], 2)} / "
                f"{_f(v['per_lead'][L]['crps'], 2)}" for L in leads) + " |")
    if "colorado" in results:
        r = results["colorado"]
        out += ["", f"### Colorado monthly tmax, 20 % of the observed stations hidden "
                f"({len(r['meta']['months'])} months {r['meta']['months'][0]} .. {r['meta']['months'][-1]}, "
                f"~{r['meta']['n_context']:.0f} context → ~{r['meta']['n_target']:.0f} targets)", "",
                _spatial_table(r, "°C")]
    out += ["", NOTES]
    return "\n".join(out)


NOTES = """Against `../shared/docs/baselines.md` (measured earlier with scripts outside the project): the
forecast RMSEs agree to the third decimal. For infill that note scored only 4 of the 28 frames and
seeded each mask by the frame's position in the list (0..27) rather than by its time index; with
that protocol this code reproduces its random-mask GP Matérn (0.691), linear (0.738), nearest (0.899)
and exponential kriging (0.734) and its block GP RBF (0.676) and linear (0.989). Over all 28 frames
the block task is harder (the GPs ~0.87–0.88 K rather than ~0.68 K). pykrige's spherical variogram
fit is fragile: it depends on the lag binning (`nlags` 6, the default: 0.79 K on the note's 4 frames;
20: 0.72 K), which is why it trails the exponential model here but not in the note. The Colorado
figures are within 1–5 % of the note's, whose hidden-station draw (~172 context there, 170 here) this
code does not reproduce exactly; the ranking is the same."""


def _to_jsonable(o):
    if isinstance(o, dict):
        return {str(k): _to_jsonable(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_to_jsonable(v) for v in o]
    if isinstance(o, np.generic):
        return o.item()
    return o


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a few frames of each task; prints only")
    p.add_argument("--step-hours", type=int, default=6, help="ERA5 infill frame spacing (6: 28 frames)")
    p.add_argument("--parts", default="random,block,forecast,colorado",
                   help="comma list of random, block, forecast, colorado")
    args = p.parse_args(argv)
    parts = set(args.parts.split(","))
    t0 = time.perf_counter()
    results = {}
    if "random" in parts:
        results["era5_infill_random"] = run_era5_infill("random", args.step_hours, 2 if args.quick else None)
    if "block" in parts:
        results["era5_infill_block"] = run_era5_infill("block", args.step_hours, 2 if args.quick else None)
    if "forecast" in parts:
        results["era5_forecast"] = run_era5_forecast(4 if args.quick else None)
    if "colorado" in parts:
        results["colorado"] = run_colorado(3 if args.quick else None)
    results["run_wall_s"] = time.perf_counter() - t0
    from _common import machine, save_json, update_doc_section

    results["machine"] = machine()
    results["threads"] = os.environ.get("OMP_NUM_THREADS")
    md = markdown(results)
    print("\n" + md)
    if args.quick:
        print("\n(--quick: nothing written)")
        return results
    path = save_json("baselines", _to_jsonable(results))
    update_doc_section("realdata-baselines", "## Real-data classical baselines (`benchmarks/baselines.py`)\n\n" + md)
    print(f"\nwrote {path} and docs/benchmarks.md")
    return results


if __name__ == "__main__":
    main()
