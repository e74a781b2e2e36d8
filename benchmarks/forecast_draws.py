"""How much the default forecast depends on its calibration's random draw of history windows.

    python benchmarks/forecast_draws.py              # ~15 min wall on 2 cores; results/forecast-draws.json
    python benchmarks/forecast_draws.py --models te-pt-tnp --seeds 0 1 2
    python benchmarks/forecast_draws.py --doc        # the docs table from the saved results
    python benchmarks/forecast_draws.py --coverage-levels   # the std's coverage factor, three ways;
                                                            # results/forecast-coverage-levels.json

``ds.np.forecast(calibrate="auto")`` calibrates the shipped weights on the history before the first
initial time: 64 tasks drawn at random from it give, per lead, a blend of the network's mean with
persistence and the last step's trend, and the std (:func:`geonp.calibration.forecast_fields`).
This script draws that calibration with several seeds (the package always uses seed 0) on the ERA5
UK forecast benchmark (``realdata.py era5-forecast``: 24 inits 2019-03-25..30, leads +1..+6 h,
BSA-TNP, history 03-01..03-25; BSA-TNP and TE-PT-TNP), and scores each draw's fields twice: with the blend as least
squares fits it (``shrink=False``, the package before 2026-11-27) and shrunk towards the network by
cross-validation across the tasks (:func:`geonp.calibration.shrunk_mean_weights`, the package now).

The forecasts are not rerun per draw: a calibrated mean is ``P + w (N - P) + v T`` per lead and its
std ``sqrt((a σ)² + b²)``, so three forecasts with fixed fields (the network alone N with its raw
std σ; persistence P, ``w = 0``; N + T, ``v = 1``) give every draw's forecast exactly. Each draw's
held-out errors come from a forecast of the first init alone with ``calibrate=True`` (the
calibration does not depend on the inits that follow), with :func:`forecast_fields` recording its
inputs.
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

import geonp  # noqa: E402,F401  (registers ds.np)
import geonp.calibrate_input as ci  # noqa: E402
import geonp.calibration as cal  # noqa: E402

LEADS = len(T.ERA5_LEADS)


def _fixed(w: float, v: float) -> dict:
    """Calibration fields that leave the network's std as it is and blend with weights ``w``, ``v``."""
    return {"std_scale": 1.0, "infill_std_base": 1.0, "infill_std_extra": 0.0, "gap_distance": (),
            "gap_std_scale": (), "lead_std_scale": (1.0,) * LEADS, "lead_std_extra": (0.0,) * LEADS,
            "lead_mean_weight": (w,) * LEADS, "lead_trend_weight": (v,) * LEADS}


def components(ds, inits, model: str) -> dict:
    """Forecasts N (network, raw std), P (persistence: w = 0) and N + T (v = 1), ``[inits, leads, lat, lon]``."""
    real, out = ci.calibration_fields, {}
    try:
        for name, (w, v) in {"N": (1.0, 0.0), "P": (0.0, 0.0), "NT": (1.0, 1.0)}.items():
            fields = _fixed(w, v)
            ci.calibration_fields = lambda *a, _f=fields, **k: dict(_f)
            ci._DONE.clear()
            fc = ds.np.forecast("t2m", hours=LEADS, model=model, init_time=ds.time.values[inits], calibrate=True)
            out[name] = fc.t2m_mean.values.astype(np.float64)
            if name == "N":
                out["sigma"] = fc.t2m_std.values.astype(np.float64)
    finally:
        ci.calibration_fields = real
        ci._DONE.clear()
    return out


def draw(ds, first_init: int, seed: int, model: str) -> dict:
    """The inputs of :func:`geonp.calibration.forecast_fields` for the calibration drawn with ``seed``."""
    seen, real_fit, real_fields = {}, ci.fit_model, cal.forecast_fields

    def recording(*args, **kwargs):
        names = ("y", "mean", "std", "leads", "persistence", "trend", "groups", "max_lead")
        seen.update(dict(zip(names, args)), **kwargs)
        return real_fields(*args, **kwargs)

    ci.fit_model = lambda *a, **k: real_fit(*a, **{**k, "seed": seed})
    cal.forecast_fields = recording
    ci._DONE.clear()
    try:
        ds.np.forecast("t2m", hours=LEADS, model=model, init_time=ds.time.values[[first_init]], calibrate=True)
    finally:
        ci.fit_model, cal.forecast_fields = real_fit, real_fields
        ci._DONE.clear()
    return seen


def score(comp: dict, truth: np.ndarray, fields: dict) -> list[dict]:
    """Per lead, the benchmark's scores (mean over inits) of the forecast that ``fields`` give."""
    N, P, NT, sigma = comp["N"], comp["P"], comp["NT"], comp["sigma"]
    rows = []
    for k in range(LEADS):
        w, v = fields["lead_mean_weight"][k], fields["lead_trend_weight"][k]
        a, b = fields["lead_std_scale"][k], fields["lead_std_extra"][k]
        mean = P[:, k] + w * (N[:, k] - P[:, k]) + v * (NT[:, k] - N[:, k])
        std = np.sqrt((a * sigma[:, k]) ** 2 + b**2)
        per_init = [T.scores(truth[j, k].ravel(), mean[j].ravel(), std[j].ravel()) for j in range(len(mean))]
        rows.append({m: float(np.mean([r[m] for r in per_init])) for m in ("rmse", "nll", "coverage")})
    return rows


def run(model: str, seeds: list[int]) -> dict:
    """Score ``seeds`` draws of ``model``'s default forecast calibration, least squares and cross-validated."""
    da = T.load_era5()
    ds = da.to_dataset(name="t2m")
    inits = T.era5_forecast_inits()
    truth = np.stack([[da.values[i + lead] for lead in T.ERA5_LEADS] for i in inits]).astype(np.float64)
    start, cpu = time.time(), time.process_time()
    comp = components(ds, inits, model)
    network = {"lead_mean_weight": (1.0,) * LEADS, "lead_trend_weight": (0.0,) * LEADS,
               "lead_std_scale": (1.0,) * LEADS, "lead_std_extra": (0.0,) * LEADS}
    out = {"machine": machine(), "model": model, "inits": int(len(inits)), "network alone": score(comp, truth, network),
           "draws": {}}
    for seed in seeds:
        inputs = draw(ds, int(inits[0]), seed, model)
        row = {}
        for label, shrink in (("least squares", False), ("cross-validated", True)):
            fields = cal.forecast_fields(**{**inputs, "shrink": shrink})
            row[label] = {"scores": score(comp, truth, fields),
                          **{k: [float(x) for x in fields[k]] for k in ("lead_mean_weight", "lead_trend_weight")}}
        out["draws"][str(seed)] = row
        print(model, seed, {lab: [round(r["rmse"], 3) for r in x["scores"]] for lab, x in row.items()}, flush=True)
    out["wall_s"], out["cpu_s"] = time.time() - start, time.process_time() - cpu
    return out


#: the std's widening to the held-out errors' quantile (:func:`geonp.calibration.coverage_factor`), three ways
COVERAGE_VARIANTS = {
    "package (finite-sample level)": cal.coverage_factor,
    "plain 0.95 quantile": lambda z, level=0.95, groups=None: cal.coverage_factor(z, level, None),
    "no coverage factor": lambda z, level=0.95, groups=None: 1.0,
}


def coverage_levels(model: str, seeds: list[int]) -> dict:
    """Scores of each draw with the cross-validated blend and each of :data:`COVERAGE_VARIANTS`."""
    da = T.load_era5()
    ds = da.to_dataset(name="t2m")
    inits = T.era5_forecast_inits()
    truth = np.stack([[da.values[i + lead] for lead in T.ERA5_LEADS] for i in inits]).astype(np.float64)
    comp = components(ds, inits, model)
    out = {name: [] for name in COVERAGE_VARIANTS}
    real = cal.coverage_factor
    for seed in seeds:
        inputs = draw(ds, int(inits[0]), seed, model)
        for name, factor in COVERAGE_VARIANTS.items():
            cal.coverage_factor = factor
            try:
                out[name].append(score(comp, truth, cal.forecast_fields(**{**inputs, "shrink": True})))
            finally:
                cal.coverage_factor = real
        print(model, seed, {n: [round(r["coverage"], 3) for r in v[-1]] for n, v in out.items()}, flush=True)
    return out


def doc(results: dict) -> None:
    """The docs table: per model, the network alone and both blends over the draws."""
    lines = []
    for res in results.values():
        lines += _doc_rows(res)
    update_doc_section("forecast-draws", "\n".join(lines))


def _doc_rows(res: dict) -> list[str]:
    m = res["machine"]
    lines = [f"{res['model']}: run {m['date']} on {m.get('cpu', 'CPU')}, torch {m.get('torch', '?')}, "
             f"{res['inits']} inits; {len(res['draws'])} draws of the calibration (seeds "
             f"{', '.join(res['draws'])}; the package's is 0); {res['wall_s']:.0f} s wall, {res['cpu_s']:.0f} CPU-s.",
             "", "| blend | RMSE K, +1 … +6 h: mean over draws | worst draw | NLL +1 … +6 h (mean) | "
             "coverage (range over draws and leads) |", "|---|---|---|---|---|"]

    def fmt(v):
        return " / ".join(f"{x:.3f}" for x in v)
    net = res["network alone"]
    nll = " / ".join(f"{r['nll']:.2f}" for r in net)
    lines.append(f"| the network alone | {fmt([r['rmse'] for r in net])} | (no draw) | {nll} | "
                 f"{min(r['coverage'] for r in net):.3f}–{max(r['coverage'] for r in net):.3f} |")
    for label in ("least squares", "cross-validated"):
        s = np.array([[[r[k] for k in ("rmse", "nll", "coverage")] for r in d[label]["scores"]]
                      for d in res["draws"].values()])  # [draws, leads, 3]
        lines.append(f"| {label} | {fmt(s[:, :, 0].mean(0))} | {fmt(s[:, :, 0].max(0))} | "
                     f"{' / '.join(f'{x:.2f}' for x in s[:, :, 1].mean(0))} | "
                     f"{s[:, :, 2].min():.3f}–{s[:, :, 2].max():.3f} |")
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(8)), help="calibration draws")
    parser.add_argument("--models", nargs="+", default=["bsa-tnp", "te-pt-tnp"], choices=["bsa-tnp", "te-pt-tnp"])
    parser.add_argument("--doc", action="store_true", help="only rebuild the docs table from the saved results")
    parser.add_argument("--coverage-levels", action="store_true",
                        help="score the std's coverage factor three ways (results/forecast-coverage-levels.json)")
    args = parser.parse_args()
    if args.coverage_levels:
        save_json("forecast-coverage-levels", {"machine": machine(), **{m: coverage_levels(m, args.seeds)
                                                                       for m in args.models}})
        return
    saved = RESULTS / "forecast-draws.json"
    results = json.loads(saved.read_text()) if saved.exists() else {}
    if not args.doc:
        for model in args.models:  # one entry per model; a model not rerun keeps its saved entry
            results[model] = run(model, args.seeds)
            save_json("forecast-draws", results)
    doc(results)


if __name__ == "__main__":
    main()
