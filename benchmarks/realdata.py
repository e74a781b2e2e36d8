"""geonp on the real-data benchmark (tasks in ``realdata_tasks.py``, baselines in ``baselines.py``).

Run one part at a time (each writes ``benchmarks/results/realdata-<part>.json``); ``--doc``
rebuilds the geonp section of ``docs/benchmarks.md`` from whatever results exist::

    python benchmarks/realdata.py era5-infill --kinds random --fit-cpu 300
    python benchmarks/realdata.py era5-infill --kinds block --time-window 1 --fit-cpu 300
    python benchmarks/realdata.py era5-forecast --fit-cpu 300
    python benchmarks/realdata.py colorado --fit-cpu 300 --train-windows 0 3
    python benchmarks/realdata.py era5-month
    python benchmarks/realdata.py scaling
    python benchmarks/realdata.py --doc

Fitted models train with a CPU-second budget (``max_cpu_time``) on data outside the scored
periods: ERA5 on 2019-03-01..21 (unmasked), Colorado on 1895..1949. Zero-shot rows use the
shipped weights with no training.
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import xarray as xr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata_tasks as rt  # noqa: E402
from _common import RESULTS, machine, peak_rss_mb, save_json, update_doc_section  # noqa: E402

import geonp  # noqa: E402, F401  registers the .np accessor

ZERO_SHOT = ("bsa-tnp", "te-pt-tnp")


def _clock():
    return time.perf_counter(), time.process_time()


def _since(start) -> dict:
    w, c = _clock()
    return {"wall_s": round(w - start[0], 2), "cpu_s": round(c - start[1], 2)}


def _mean_scores(rows: list[dict]) -> dict:
    keys = [k for k in rows[0] if k != "n"]
    return {k: float(np.mean([r[k] for r in rows])) for k in keys}


def _masked_era5(kind: str) -> xr.Dataset:
    da = rt.load_era5()
    hidden = np.stack([rt.era5_infill_mask(i, kind=kind)[0] for i in range(da.sizes["time"])])
    return da.where(~hidden).to_dataset(name="t2m")


def _fit(ds, var, task, cpu, **kw):
    start = _clock()
    budget = {"max_cpu_time": float(cpu)} if cpu > 0 else {}
    model = ds.np.fit(var, task=task, progress=False, seed=0, **budget, **kw)
    return model, {**_since(start), "steps": model.metadata["steps"], "covariates": list(model.normaliser.covariates)}


def era5_infill_scores(da: xr.DataArray, pred: xr.Dataset, frames, kind: str) -> dict:
    """Mean scores of ``pred`` (an infill of ``_masked_era5(kind)``) on the hidden cells of ``frames``."""
    rows = []
    for i in frames:
        _, scored = rt.era5_infill_mask(int(i), kind=kind)
        tt = da.time.values[i]
        rows.append(rt.scores(da.sel(time=tt).values[scored], pred.t2m_mean.sel(time=tt).values[scored],
                              pred.t2m_std.sel(time=tt).values[scored]))
    return _mean_scores(rows)


def era5_infill(args) -> dict:
    da = rt.load_era5()
    ev = rt.era5_eval_times(args.step_hours)
    out = {"machine": machine(), "eval_frames": int(len(ev)), "time_window": args.time_window, "fits": {},
           "results": {}}
    lo = int(ev[0]) - args.time_window
    for kind in args.kinds:
        full = _masked_era5(kind)
        fit_data = full.sel(time=slice(None, rt.ERA5_FIT_END))
        # (model, calibrate) per row: the network alone, and calibrated on held-out observed points of the input;
        # every row but "no land-sea trend" has the package default land="auto" (the bundled land fraction here)
        models = {f"{m} (zero-shot)": (m, False) for m in args.zero_shot}
        models.update({f"{m} (zero-shot, no land–sea trend)": (m, False) for m in args.zero_shot})
        models.update({f"{m} (calibrated on the input)": (m, True) for m in args.zero_shot})
        for m in args.zero_shot:  # steps=0: the shipped weights, std calibrated on held-out points of 03-01..21
            model, info = _fit(fit_data, "t2m", "infill", 0, steps=0, model=m, time_window=args.time_window)
            models[f"{m} (calibrated)"] = (model, False)
            out["fits"][f"{kind}/{m} (calibrated)"] = {**info, **model.metadata["calibration"]}
        if args.fit_cpu > 0:  # trained on the fit period masked the same way (its own gap pattern)
            trained, info = _fit(fit_data, "t2m", "infill", args.fit_cpu, time_window=args.time_window)
            out["fits"][f"{kind}/bsa-tnp (trained + calibrated)"] = {**info, **trained.metadata["calibration"]}
            models[f"bsa-tnp (trained on {kind} masks + calibrated)"] = (trained, False)
        masked = full.isel(time=slice(lo, int(ev[-1]) + args.time_window + 1))
        with_land = {}
        if args.land:  # the land fraction as ERA5's `lsm` would give it (benchmarks/land_sea.py's point samples)
            from land_sea import land_fraction

            with_land = masked.assign_coords(lsm=land_fraction(da))
            models.update({f"{m} (zero-shot, land–sea mask)": (m, False) for m in args.zero_shot})
        for label, (model, calibrate) in models.items():
            start = _clock()
            data = with_land if "land–sea mask" in label else masked
            land = "none" if "no land–sea trend" in label else "auto"
            pred = data.np.infill("t2m", model=model, time_window=args.time_window, calibrate=calibrate, land=land)
            res = {**era5_infill_scores(da, pred, ev, kind), **_since(start),
                   "frames_predicted": int(masked.sizes["time"])}
            out["results"][f"{kind}/{label}"] = res
            print(kind, label, {k: round(v, 3) for k, v in res.items()}, flush=True)
    return out


def era5_forecast(args) -> dict:
    da = rt.load_era5()
    ds = da.to_dataset(name="t2m")
    inits = rt.era5_forecast_inits()
    # (model, reference, calibrate) per row: the raw network with the shipped default reference ("auto" ->
    # diurnal here) and with the raw variable; the package default, which calibrates the shipped weights on the
    # history before the first init (03-01 .. 03-25T00 here)
    models = {f"{m} (zero-shot)": (m, None, False) for m in args.zero_shot}
    models.update({f"{m} (zero-shot, reference none)": (m, "none", False)
                   for m in args.no_reference if m in args.zero_shot})
    models.update({f"{m} (default: calibrated on the history before the first init)": (m, None, "auto")
                   for m in args.zero_shot})
    fits = {}
    train = ds.sel(time=slice(None, rt.ERA5_FIT_END))
    for m in args.zero_shot:
        model, info = _fit(train, "t2m", "forecast", 0, steps=0, model=m, context_frames=args.context_frames)
        models[f"{m} (calibrated)"] = (model, None, "auto")
        fits[f"{m} (calibrated)"] = {**info, **model.metadata["calibration"]}
    if args.fit_cpu > 0:
        model, info = _fit(train, "t2m", "forecast", args.fit_cpu, context_frames=args.context_frames)
        models["bsa-tnp (trained + calibrated)"] = (model, None, "auto")
        fits["bsa-tnp (trained + calibrated)"] = {**info, **model.metadata["calibration"]}
    out = {"machine": machine(), "inits": int(len(inits)), "context_frames": args.context_frames, "fits": fits,
           "results": {}}
    previous = RESULTS / "realdata-era5-forecast.json"
    if args.keep_zero_shot and previous.exists():  # zero-shot rows do not depend on fitting or calibration code
        old = json.loads(previous.read_text())
        for label in [k for k in models if "zero-shot" in k and k in old["results"]]:
            out["results"][label] = old["results"].pop(label)
            del models[label]
        out["zero_shot_rows_from"] = old["machine"]["date"]
    truth = da.values
    for label, (model, ref, calibrate) in models.items():
        start = _clock()
        fc = ds.np.forecast("t2m", hours=6, model=model, init_time=da.time.values[inits],
                            context_frames=args.context_frames, reference=ref, calibrate=calibrate)
        mean, std = fc.t2m_mean.values, fc.t2m_std.values
        per_lead = []
        for k, lead in enumerate(rt.ERA5_LEADS):  # scored as the baselines are: mean over inits, plus pooled
            y = np.stack([truth[i + lead] for i in inits])
            rows = [rt.scores(y[j].ravel(), mean[j, k].ravel(), std[j, k].ravel()) for j in range(len(inits))]
            pooled = rt.scores(y.ravel(), mean[:, k].ravel(), std[:, k].ravel())
            per_lead.append({**_mean_scores(rows), "rmse_pooled": pooled["rmse"]})
        res = {"per_lead": per_lead, "reference": fc.attrs.get("geonp_reference"),
               "calibrated": fc.attrs.get("geonp_calibrated"), **_since(start)}
        out["results"][label] = res
        print(label, [round(r["rmse"], 3) for r in per_lead], [round(r["nll"], 3) for r in per_lead], flush=True)
    return out


def colorado(args) -> dict:
    ds, masked, hidden, months = rt.colorado_masked("tmax")
    out = {"machine": machine(), "months": int(len(months)), "fits": {}, "results": {}}
    values = ds.tmax.values
    train = ds.sel(time=slice(None, "1949-12"))
    for tw in args.colorado_windows:
        # (model, calibrate) per row: the network alone; the package default, which calibrates shipped weights on
        # held-out stations of the input itself (each month's window)
        models = {f"{m} (zero-shot)": (m, False) for m in args.zero_shot}
        models.update({f"{m} (default: calibrated on the input)": (m, "auto") for m in args.zero_shot})
        for m in args.zero_shot:
            model, info = _fit(train, "tmax", "infill", 0, steps=0, model=m, time_window=tw)
            models[f"{m} (calibrated)"] = (model, "auto")
            out["fits"][f"{m} (calibrated), tw {tw}"] = {**info, **model.metadata["calibration"]}
        train_windows = args.train_windows if args.train_windows is not None else [min(args.colorado_windows)]
        if args.fit_cpu > 0 and tw in train_windows:
            model, info = _fit(train, "tmax", "infill", args.fit_cpu, time_window=tw)
            models["bsa-tnp (trained with elevation + calibrated)"] = (model, "auto")
            out["fits"][f"bsa-tnp (trained), tw {tw}"] = {**info, **model.metadata["calibration"]}
        if args.fit_cpu > 0 and tw == min(args.colorado_windows):
            # the same budget with elevation also in the attention bias (like the GP's elevation input)
            model, info = _fit(train, "tmax", "infill", args.fit_cpu, time_window=tw, elevation_bias=True)
            models["bsa-tnp (trained with elevation bias + calibrated)"] = (model, "auto")
            out["fits"][f"bsa-tnp (trained, elevation bias), tw {tw}"] = {**info, **model.metadata["calibration"]}
        # with a time window, the hidden stations' other months are context (as a user's gap of one month
        # would be); "hidden in every month" removes them from the whole window, like a station that is new
        for strict in ((False, True) if tw else (False,)):
            for label, (model, calibrate) in models.items():
                if strict and "trained" in label:
                    continue
                start = _clock()
                rows = []
                for i in months:
                    lo = max(0, i - tw)
                    window = masked.isel(time=slice(lo, i + tw + 1))
                    if strict:
                        window = window.copy(deep=True)
                        window["tmax"][:, hidden[i]] = np.nan
                    pred = window.np.infill("tmax", model=model, time_window=tw, calibrate=calibrate)
                    p = pred.sel(time=ds.time.values[i])
                    h = hidden[i]
                    rows.append(rt.scores(values[i, h], p.tmax_mean.values[h], p.tmax_std.values[h]))
                res = {**_mean_scores(rows), **_since(start)}
                key = f"{label}, {'space only' if tw == 0 else f'±{tw} months'}"
                key += ", hidden stations missing in every month" if strict else ""
                out["results"][key] = res
                print(key, {k: round(v, 3) for k, v in res.items()}, flush=True)
    return out


def era5_month(args) -> dict:
    masked = _masked_era5("random")
    n_targets = int(np.prod([masked.sizes[d] for d in ("time", "latitude", "longitude")]))
    out = {"machine": machine(), "targets": n_targets, "results": {}}
    for model in args.models:
        start = _clock()
        pred = masked.np.infill("t2m", model=model, time_window=args.time_window, chunks={"time": 24})
        pred = pred.compute()
        res = {**_since(start), "peak_rss_mb": round(peak_rss_mb(), 1), "time_window": args.time_window,
               "finite": bool(np.isfinite(pred.t2m_mean.values).all())}
        out["results"][model] = res
        print(model, res, flush=True)
    return out


_SCALING_CHILD = """
import pyproj, sys, time, resource
import numpy as np, dask.array as dsa, xarray as xr, pandas as pd
import geonp
ny, nx, nt, tile = (int(a) for a in sys.argv[1:5]); model = sys.argv[6]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # after the imports
lat = np.linspace(60, 60 - 0.25 * (ny - 1), ny); lon = np.linspace(-20, -20 + 0.25 * (nx - 1), nx)
def block(block_id=None, **_):
    t, i, j = block_id
    rng = np.random.default_rng(hash(block_id) % 2**32)
    y, x = np.meshgrid(np.arange(64) + 64 * i, np.arange(64) + 64 * j, indexing='ij')
    f = np.sin(y / 7.0)[None] + np.cos(x / 9.0)[None] + 0.1 * rng.standard_normal((4, 64, 64))
    return np.where(rng.random(f.shape) < 0.1, f, np.nan).astype('float32')
arr = dsa.map_blocks(block, chunks=((4,) * (nt // 4), (64,) * (ny // 64), (64,) * (nx // 64)), dtype='float32')
ds = xr.Dataset({'v': (('time', 'lat', 'lon'), arr)},
                coords={'time': pd.date_range('2020-01-01', periods=nt, freq='h'), 'lat': lat, 'lon': lon})
t0, c0 = time.perf_counter(), time.process_time()
chunks = {'time': 4, 'lat': tile, 'lon': tile}
out = ds.np.infill('v', model=model, time_window=1, chunks=chunks, halo=4.0)
geonp.to_zarr(out, sys.argv[5], progress=False)
print(time.perf_counter() - t0, time.process_time() - c0, base,
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


#: the scaling grids: (rows, columns, tile); 192 x 192 has 3 x 3 tiles of 64 (one interior), 576 x 640 has
#: 9 x 10 tiles, 10x the values; then the small grid with tiles of 32 and 128 cells
SCALING_GRIDS = ((192, 192, 64), (576, 640, 64), (192, 192, 32), (192, 192, 128))


def scaling(args) -> dict:
    """Peak memory of a lazy infill to Zarr against the grid size (same chunks) and the chunk size (same grid).

    Each run is a fresh process, and each row carries its own date: with ``--keep-rows``,
    ``--models te-pt-tnp`` reruns the fast model's rows and keeps the others.
    """
    import tempfile

    grids = [SCALING_GRIDS[i] for i in args.grids]
    results = {}
    for model in args.models:
        for ny, nx, tile in grids:
            with tempfile.TemporaryDirectory() as tmp:
                cmd = [sys.executable, "-c", _SCALING_CHILD, str(ny), str(nx), str(args.frames), str(tile),
                       f"{tmp}/o.zarr", model]
                wall, cpu, base, rss = map(float, subprocess.run(cmd, check=True, capture_output=True, text=True)
                                           .stdout.split()[-4:])
            key = f"{model} {ny}x{nx}x{args.frames} / {tile}"
            results[key] = {"model": model, "values": ny * nx * args.frames, "wall_s": round(wall, 1),
                            "cpu_s": round(cpu, 1), "import_rss_mb": round(base, 1), "peak_rss_mb": round(rss, 1),
                            "chunk": f"time 4 x {tile} x {tile}", "date": machine()["date"]}
            print(key, results[key], flush=True)
    return {"machine": machine(), "results": results}


def _keep_saved(out: dict, saved: dict | None) -> dict:
    """Add the saved rows and fits that this run did not redo, each marked with the date of its run."""
    if not saved:
        return out
    rerun = set(out.get("results", {}))
    kept = dict(saved.get("kept_rows", {}))
    for section in ("results", "fits"):  # the saved order, with this run's rows in place of theirs
        new, merged = out.get(section, {}), {}
        for key, row in saved.get(section, {}).items():
            merged[key] = new.get(key, row)
            if key not in new and section == "results":
                kept[key] = kept.get(key, saved["machine"]["date"])
        out[section] = {**merged, **new}
    out["kept_rows"] = {k: v for k, v in kept.items() if k not in rerun}
    return out


def _kept_note(part: dict, prefix: str = "") -> list[str]:
    """Return a line naming the rows that come from an earlier run (``--keep-rows``), if any."""
    kept = {k.removeprefix(prefix): d for k, d in part.get("kept_rows", {}).items() if k.startswith(prefix)}
    if not kept:
        return []
    by_date: dict[str, list[str]] = {}
    for label, date in kept.items():
        by_date.setdefault(date, []).append(label)
    runs = "; ".join(f"{', '.join(labels)} ({date})" for date, labels in by_date.items())
    return [f"- Rows from earlier runs: {runs}."]


def _load(part: str) -> dict | None:
    p = RESULTS / f"realdata-{part}.json"
    return json.loads(p.read_text()) if p.exists() else None


def _row(label: str, r: dict, cols=("rmse", "mae", "nll", "coverage", "crps")) -> str:
    cells = [f"{r[c]:.3f}" if c in r and r[c] is not None else "–" for c in cols]
    return (f"| {label} | " + " | ".join(cells)
            + f" | {r.get('wall_s', float('nan')):.0f} / {r.get('cpu_s', float('nan')):.0f} |")


def _infill_doc(inf: dict, kind: str) -> list[str]:
    m = inf["machine"]
    lines = [f"**ERA5 t2m infill, {kind}** ({inf['eval_frames']} eval frames; geonp uses ±{inf['time_window']} h of "
             f"neighbouring frames, each masked the same way; {m.get('date', '')}, {m.get('cpu', '')}; wall / CPU "
             "seconds cover predicting every frame the eval needs)", "",
             "| method | RMSE K | MAE | NLL | 95 % cov | CRPS | wall / CPU s |", "|---|---|---|---|---|---|---|"]
    for key, r in inf["results"].items():
        if key.startswith(kind + "/"):
            lines.append(_row("geonp " + key.split("/", 1)[1], r))
    lines.append("")
    for k, f in inf["fits"].items():
        lines.append(f"- fit of {k}: {f['steps']} training steps, {f['cpu_s']:.0f} CPU-s in all on the masked "
                     f"2019-03-01..21, std scale {f['std_scale']:.2f}{_gap_profile(f)}.")
    return lines + _kept_note(inf, kind + "/") + [""]


def _gap_profile(fit: dict) -> str:
    """Format the nugget and the per-gap-size std factors of a fit as text (empty when it has none)."""
    out = ""
    if "infill_std_extra" in fit:
        out += f"; std sqrt(({fit['infill_std_base']:.2f} σ)² + {fit['infill_std_extra']:.2f}²) before the factors"
    pairs = ", ".join(f"{s:.2f} at {d:.2f}" for d, s in zip(fit.get("gap_distance", []), fit.get("gap_std_scale", [])))
    out += f"; by gap distance (model units): {pairs}" if pairs else ""
    support = " / ".join(f"{s:.2f}" for s in fit.get("support_std_scale") or [])
    return out + (f"; then by temporal support (none / one side / both sides): {support}" if support else "")


def doc() -> None:
    lines = []
    for kind in ("random", "block"):
        inf = _load(f"era5-infill-{kind}")
        if inf:
            lines += _infill_doc(inf, kind)
    fc = _load("era5-forecast")
    if fc:
        lines += [f"**ERA5 t2m forecast** ({fc['inits']} inits, {fc['context_frames']} past frames as context; "
                  "RMSE K per lead, mean over inits as in the baseline table; the reference each row used)", "",
                  "| method | reference | +1 h | +2 h | +3 h | +4 h | +5 h | +6 h | wall / CPU s |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for label, r in fc["results"].items():
            pl = r["per_lead"]
            lines.append(f"| geonp {label} | {r.get('reference', '–')} | " + " | ".join(f"{x['rmse']:.3f}" for x in pl)
                         + f" | {r['wall_s']:.0f} / {r['cpu_s']:.0f} |")
        lines += ["", "NLL / 95 % coverage per lead (mean over inits):", "",
                  "| method | +1 h | +2 h | +3 h | +4 h | +5 h | +6 h |", "|---|---|---|---|---|---|---|"]
        for label, r in fc["results"].items():
            lines.append(f"| geonp {label} | " + " | ".join(f"{x['nll']:.2f} / {x['coverage']:.2f}"
                                                           for x in r["per_lead"]) + " |")
        lines.append("")
        for k, f in fc["fits"].items():
            scales = ", ".join(f"{x:.2f}" for x in f.get("lead_std_scale", []))
            weights = ", ".join(f"{x:.2f}" for x in f.get("lead_mean_weight", []))
            trend = ", ".join(f"{x:.2f}" for x in f.get("lead_trend_weight", []))
            extra = ", ".join(f"{x:.2f}" for x in f.get("lead_std_extra", []))
            lines.append(f"- fit of {k}: {f['steps']} training steps, {f['cpu_s']:.0f} CPU-s in all on 2019-03-01..21; "
                         f"per lead: std factor a {scales}, added std b {extra or '–'} K, weight w of the network's "
                         f"departure from persistence {weights or '–'}, trend weight v {trend or '–'}.")
        lines += _kept_note(fc) + [""]
    co = _load("colorado")
    if co:
        lines += [f"**Colorado monthly tmax** ({co['months']} months, 20 % of observed stations hidden)", "",
                  "| method | RMSE °C | MAE | NLL | 95 % cov | CRPS | wall / CPU s |", "|---|---|---|---|---|---|---|"]
        for label, r in co["results"].items():
            lines.append(_row("geonp " + label, r))
        lines.append("")
        for k, f in co["fits"].items():
            lines.append(f"- fit of {k}: {f['steps']} training steps, {f['cpu_s']:.0f} CPU-s in all on 1895..1949, "
                         f"std scale {f['std_scale']:.2f}{_gap_profile(f)}, covariates {f['covariates']}.")
        lines += _kept_note(co)
        lines.append("")
    mo = _load("era5-month")
    if mo:
        lines += [f"**Whole ERA5 month** ({mo['targets']:,} targets, 90 % hidden, chunks of 24 h, 2 dask threads; "
                  f"{mo['machine'].get('date', '')})", "",
                  "| model | wall s | CPU s | peak RSS MB |", "|---|---|---|---|"]
        for label, r in mo["results"].items():
            lines.append(f"| {label} (±{r['time_window']} h) | {r['wall_s']:.0f} | {r['cpu_s']:.0f} | "
                         f"{r['peak_rss_mb']:.0f} |")
        lines += [""] + _kept_note(mo) + [""]
    sc = _load("scaling")
    if sc:
        m = sc["machine"]
        lines += [f"**Memory vs data size and chunk size** (lazy synthetic grid, 10 % observed → Zarr, ±1 frame, "
                  f"halo 4 units, 2 dask threads, each run a fresh process; {m.get('cpu', '')})", "",
                  "| model | grid | chunk (frames × cells) | values | wall s | CPU s | RSS after imports MB | "
                  "peak RSS MB | run |", "|---|---|---|---|---|---|---|---|---|"]
        for label, r in sc["results"].items():
            chunk = r["chunk"].replace("time ", "")
            model = r.get("model", "bsa-tnp")
            grid = label.removeprefix(model + " ").split(" /")[0]
            lines.append(f"| {model} | {grid} | {chunk} | {r['values']:,} | {r['wall_s']:.0f} | {r['cpu_s']:.0f} | "
                         f"{r.get('import_rss_mb', float('nan')):.0f} | {r['peak_rss_mb']:.0f} | "
                         f"{r.get('date', m.get('date', ''))} |")
    update_doc_section("realdata-geonp", "\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("part", nargs="?",
                        choices=["era5-infill", "era5-forecast", "colorado", "era5-month", "scaling"])
    parser.add_argument("--fit-cpu", type=float, default=0.0,
                        help="CPU seconds of gradient training for the 'trained' rows (0: none)")
    parser.add_argument("--time-window", type=int, default=3, help="frames each side used as context (infill)")
    parser.add_argument("--context-frames", type=int, default=4,
                        help="past frames used as context (forecast; default 4, the package's)")
    parser.add_argument("--colorado-windows", type=int, nargs="+", default=[0, 3],
                        help="months each side used as context (colorado; one set of rows each)")
    parser.add_argument("--keep-zero-shot", action="store_true",
                        help="era5-forecast: reuse the saved zero-shot rows, rerun only fitted ones")
    parser.add_argument("--train-windows", type=int, nargs="+", default=None,
                        help="Colorado windows that get a trained row (default: the narrowest)")
    parser.add_argument("--no-reference", nargs="*", default=["te-pt-tnp"], metavar="MODEL",
                        help="era5-forecast: shipped models also run with reference='none' (a row each)")
    parser.add_argument("--step-hours", type=int, default=6, help="ERA5 infill eval frame spacing")
    parser.add_argument("--models", nargs="+", default=["bsa-tnp", "te-pt-tnp"],
                        help="era5-month and scaling: models")
    parser.add_argument("--zero-shot", nargs="+", default=list(ZERO_SHOT), choices=ZERO_SHOT, metavar="MODEL",
                        help="shipped models with zero-shot and calibrated rows (default both)")
    parser.add_argument("--keep-rows", action="store_true",
                        help="keep the saved rows this run does not redo (e.g. after --zero-shot te-pt-tnp), "
                             "marked with their run's date in the docs")
    parser.add_argument("--frames", type=int, default=4, help="frames of the scaling grids")
    parser.add_argument("--grids", type=int, nargs="+", default=list(range(len(SCALING_GRIDS))),
                        help="scaling: which of SCALING_GRIDS to run (indices; default all)")
    parser.add_argument("--kinds", nargs="+", default=["random", "block"], choices=["random", "block"],
                        help="ERA5 infill masks to run (each saved as realdata-era5-infill-<kind>.json)")
    parser.add_argument("--land", action="store_true",
                        help="era5-infill: also rows with a land-sea mask (needs global-land-mask, the bench extra)")
    parser.add_argument("--doc", action="store_true", help="rebuild the docs section from saved results")
    args = parser.parse_args()
    if args.part:
        fn = {"era5-infill": era5_infill, "era5-forecast": era5_forecast, "colorado": colorado,
              "era5-month": era5_month, "scaling": scaling}[args.part]
        result = fn(args)
        if args.part == "era5-infill":  # one file per kind: the docs read them separately
            for kind in args.kinds:
                part = {**result, "results": {k: v for k, v in result["results"].items() if k.startswith(kind + "/")},
                        "fits": {k: v for k, v in result["fits"].items() if k.startswith(kind + "/")}}
                if args.keep_rows:
                    part = _keep_saved(part, _load(f"era5-infill-{kind}"))
                save_json(f"realdata-era5-infill-{kind}", part)
        else:
            if args.keep_rows:
                result = _keep_saved(result, _load(args.part))
            save_json(f"realdata-{args.part}", result)
    if args.doc or args.part:
        doc()


if __name__ == "__main__":
    main()
