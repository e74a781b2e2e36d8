"""Score candidate pretrained weights side by side, zero-shot, before shipping them.

    python benchmarks/candidates.py bsa-tnp /tmp/cand.pt --name cand-2026-11-23

Each candidate (a shipped model name or a weights file saved by ``scripts/pretrain.py --out``)
is scored with no training on subsets of the real-data benchmark (``realdata_tasks.py``) and on
a synthetic dense field with a hole, beside the exact GP:

* ``colorado``: all 20 months, space only; ``colorado3``: ±3 months of context (the hidden
  stations' other months are context, as in ``realdata.py``);
* ``random`` / ``block``: every 4th ERA5 eval frame (7 of 28), ±3 h / ±1 h of context;
* ``forecast``: every 3rd init (8 of 24), leads 1..6 h, 2 past frames;
* ``dense-hole``: ``SpaceTimeGP`` infill with 256 locations, half observed, noise std 0.01 and a
  hole of 9 % of the locations in every frame, at three space lengthscale ranges (32 tasks each).

Results go to ``benchmarks/results/candidates-<name>.json`` (no docs section: the reading is
written by hand in docs/benchmarks.md, since candidates are compared before a decision).
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata_tasks as rt  # noqa: E402
from _common import machine, save_json  # noqa: E402

import geonp  # noqa: E402, F401  registers the .np accessor
from geonp.checkpoint import load_model  # noqa: E402
from geonp.metrics import gaussian_scores  # noqa: E402
from geonp.pretrained import PRETRAINED, load_pretrained  # noqa: E402
from geonp.synthetic import SpaceTimeGP, gp_posterior  # noqa: E402

PARTS = ("colorado", "colorado3", "random", "block", "forecast", "dense-hole")
KEYS = ("rmse", "nll", "coverage")


def _mean(rows: list[dict]) -> dict:
    return {k: float(np.mean([r[k] for r in rows])) for k in KEYS}


def colorado(model, tw: int) -> dict:
    ds = rt.load_colorado()[["tmax"]]
    vals = ds.tmax.values
    months = rt.colorado_months()
    masked = vals.copy()
    for i in months:
        masked[i, rt.colorado_mask(int(i), np.isfinite(vals[i]))] = np.nan
    rows = []
    for i in months:
        h = rt.colorado_mask(int(i), np.isfinite(vals[i]))
        lo = max(0, i - tw)
        w = ds.isel(time=slice(lo, i + tw + 1)).copy()
        w["tmax"] = w.tmax.dims, masked[lo : i + tw + 1]
        p = w.np.infill("tmax", model=model, time_window=tw).isel(time=i - lo)
        rows.append(rt.scores(vals[i, h], p.tmax_mean.values[h], p.tmax_std.values[h]))
    return _mean(rows)


def era5_infill(model, kind: str, tw: int, **options) -> dict:
    """Zero-shot infill of every 4th ERA5 eval frame (``options``: more ``ds.np.infill`` arguments)."""
    da = rt.load_era5()
    rows = []
    for i in rt.era5_eval_times(6)[::4]:
        i = int(i)
        hid = np.stack([rt.era5_infill_mask(j, kind=kind)[0] for j in range(i - tw, i + tw + 1)])
        w = da.isel(time=slice(i - tw, i + tw + 1)).where(~hid).to_dataset(name="t2m")
        p = w.np.infill("t2m", model=model, time_window=tw, **options).isel(time=tw)
        _, scored = rt.era5_infill_mask(i, kind=kind)
        rows.append(rt.scores(da.values[i][scored], p.t2m_mean.values[scored], p.t2m_std.values[scored]))
    return _mean(rows)


def era5_forecast(model, **options) -> dict:
    """Zero-shot forecasts from every 3rd init, 2 past frames (``options``: more ``ds.np.forecast`` arguments)."""
    da = rt.load_era5()
    inits = rt.era5_forecast_inits()[::3]
    fc = da.to_dataset(name="t2m").np.forecast("t2m", hours=6, model=model, init_time=da.time.values[inits],
                                               context_frames=2, **options)
    out = {k: [] for k in KEYS}
    for k, lead in enumerate(rt.ERA5_LEADS):
        y = np.stack([da.values[i + lead] for i in inits])
        s = _mean([rt.scores(y[j].ravel(), fc.t2m_mean.values[j, k].ravel(), fc.t2m_std.values[j, k].ravel())
                   for j in range(len(inits))])
        for key in KEYS:
            out[key].append(s[key])
    return out


def dense_hole(net) -> dict:
    out = {}
    for ls in ((1.5, 2.5), (3.0, 5.0), (6.0, 10.0)):
        gen = SpaceTimeGP(mode="infill", hole_probability=1.0, noise_std_range=(0.01, 0.0101),
                          space_lengthscale_range=ls, num_locations=(256, 256), observed_fraction=(0.5, 0.5),
                          window=(1, 1), hole_fraction=(0.09, 0.09), time_lengthscale_range=(3.0, 30.0))
        g = torch.Generator().manual_seed(5)
        model_rows, oracle_rows = [], []
        for _ in range(4):
            batch, params = gen.sample_with_params(8, g)
            po = gp_posterior(batch, params, noisy_targets=True)
            oracle_rows.append(gaussian_scores(po, batch.yt.to(po.loc.dtype)))
            with torch.no_grad():
                model_rows.append(gaussian_scores(net(batch), batch.yt))
        out[f"{ls[0]}-{ls[1]}"] = {"model": _mean(model_rows), "oracle": _mean(oracle_rows)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("weights", nargs="+", help="shipped model names or weights files")
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    parser.add_argument("--name", default="latest", help="results file suffix")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    out = {"machine": machine(), "results": {}}
    for w in args.weights:
        net = load_pretrained(w) if w in PRETRAINED else load_model(w)  # either shipped architecture
        res, start = {}, time.process_time()
        if "colorado" in args.parts:
            res["colorado"] = colorado(w, 0)
        if "colorado3" in args.parts:
            res["colorado3"] = colorado(w, 3)
        if "random" in args.parts:
            res["random"] = era5_infill(w, "random", 3)
        if "block" in args.parts:
            res["block"] = era5_infill(w, "block", 1)
        if "forecast" in args.parts:
            res["forecast"] = era5_forecast(w)
        if "dense-hole" in args.parts:
            res["dense-hole"] = dense_hole(net.eval())
        res["cpu_s"] = time.process_time() - start
        out["results"][w] = res
        print(w, res, flush=True)
    save_json(f"candidates-{args.name}", out)


if __name__ == "__main__":
    main()
