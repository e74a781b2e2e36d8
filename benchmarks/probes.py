"""Quick probes of two prediction settings on subsets of the real-data tasks (zero-shot, shipped weights).

* ``forecast-frames``: zero-shot BSA-TNP ERA5 forecasts (+1 … +6 h) from every third of the 24
  benchmark inits (``--inits eval``: all 24; ``--inits fit``: the 79 inits of the fit period, to
  choose a setting without the scored week), with ``context_frames`` past frames as context
  (default 2, 4 and 8). Question: do more past frames fix the zero-shot intervals (too narrow with 2)?
* ``te-local``: zero-shot TE-PT-TNP ERA5 infill (random and block masks, 7 of the 28 eval frames),
  on the whole grid and in small spatial chunks with a small halo, space only (``time_window=0``)
  and ±3 h. Question: does a local context help a model whose 16 pseudo-tokens summarise all of it?
* ``bsa-local``: the same for zero-shot BSA-TNP at the benchmark's time windows (random ±3 h, block
  ±1 h), chunks of 16 and 12 cells with halos of 4 and 6 model units, and ``geonp demo``'s field
  (seeds 0 and 1) with chunks of 16 cells and halo 3. Question: is a context window centred on each
  chunk better than the whole grid for a model pretrained on domains of at most ~15 spacing units?
* ``block-rings``: the ERA5 block task (all 28 eval frames, BSA-TNP zero-shot at ±1 h) scored ring by
  ring inside the 12 × 12 block (ring 1 = the cells next to the data, ring 6 = the central 2 × 2),
  beside the fitted Matérn GP and linear interpolation of the baseline table on the same frames.
  Question: where in the hole does BSA-TNP lose to the GP, and is it bias, shrinkage or noise?
* ``unit-scale``: zero-shot BSA-TNP with the space unit (the typical context spacing) multiplied by
  a factor, on the ERA5 block (7 frames, ±1 h; also space only), ERA5 random (7 frames, ±3 h),
  ``geonp demo`` (seeds 0 and 1), Colorado space only, and synthetic lattices with a hole (900
  cells with a hole of 12 %, and 2,000 cells with a hole of 5 %, half observed, exact GP beside;
  on the larger lattice also attention cut off beyond 8, 12 or 16 units). Question: the block's
  centre lies 4 units from the data and its grid spans 33 × 22 units, both beyond most pretraining
  tasks; does predicting in coarser units help, and is that general or the block's alone?

Run ``python benchmarks/probes.py forecast-frames`` (about 25 CPU-minutes) or
``python benchmarks/probes.py te-local`` (about 15 CPU-minutes) or ``python benchmarks/probes.py
bsa-local [--weights PATH]`` (about 15 CPU-minutes) or ``python benchmarks/probes.py block-rings``
(about 10 CPU-minutes) or ``python benchmarks/probes.py unit-scale`` (about 12 CPU-minutes). Results:
``benchmarks/results/probe-<name>.json``; the reading is in ``docs/benchmarks.md`` ("Probes"); ``--doc``
rebuilds the forecast table there from the saved results.
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path
from unittest import mock

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata_tasks as rt  # noqa: E402
from _common import RESULTS, machine, save_json, update_doc_section  # noqa: E402

import geonp  # noqa: E402, F401  registers ds.np


def _mean(rows: list[dict]) -> dict:
    return {k: float(np.mean([r[k] for r in rows])) for k in ("rmse", "nll", "coverage")}


#: forecast-frames: which inits (every third benchmark init, all 24, or the 79 of the fit period)
INITS = {"subset": lambda: rt.era5_forecast_inits()[::3], "eval": rt.era5_forecast_inits, "fit": rt.era5_fit_inits}


def forecast_frames(frames: list[int], which: str = "subset") -> list[dict]:
    """Zero-shot BSA-TNP forecasts per number of past frames, scored per lead (mean over inits)."""
    da = rt.load_era5()
    ds = da.to_dataset(name="t2m")
    inits = INITS[which]()
    truth = da.values
    out = []
    for cf in frames:
        c0 = time.process_time()
        fc = ds.np.forecast("t2m", hours=6, model="bsa-tnp", init_time=da.time.values[inits], context_frames=cf)
        mean, std = fc.t2m_mean.values, fc.t2m_std.values
        per_lead = []
        for k, lead in enumerate(rt.ERA5_LEADS):
            y = np.stack([truth[i + lead] for i in inits])
            per_lead.append(_mean([rt.scores(y[j].ravel(), mean[j, k].ravel(), std[j, k].ravel())
                                   for j in range(len(inits))]))
        out.append({"context_frames": cf, "inits": int(len(inits)), "which": which, "cpu_s": time.process_time() - c0,
                    "per_lead": per_lead})
        print(cf, [{k: round(v, 3) for k, v in p.items()} for p in per_lead], flush=True)
    return out


def _masked(da, kind: str) -> tuple[np.ndarray, dict]:
    """ERA5 values with every frame's hidden cells set to NaN, and each frame's scored mask."""
    vals, scored = da.values.copy(), {}
    for i in range(vals.shape[0]):
        hide, scored[i] = rt.era5_infill_mask(int(i), kind=kind)
        vals[i][hide] = np.nan
    return vals, scored


def local(model, windows: dict, tilings: list) -> list[dict]:
    """Zero-shot infill on the whole grid and in spatial chunks, per mask kind and time window.

    ``windows`` maps a mask kind to its time windows; ``tilings`` lists ``(chunk cells, halo)``
    pairs, ``(None, None)`` for the whole grid.
    """
    da = rt.load_era5()
    ev = rt.era5_eval_times(6)[::4]
    out = []
    for kind, tws in windows.items():
        vals, scored = _masked(da, kind)
        for tw in tws:
            for chunks, halo in tilings:
                kw = {} if chunks is None else {"chunks": {"latitude": chunks, "longitude": chunks}, "halo": halo}
                c0, rows = time.process_time(), []
                for i in ev:  # each eval frame with its own ±tw window: only the frames scored are predicted
                    ds = da.copy(data=vals).isel(time=slice(int(i) - tw, int(i) + tw + 1)).to_dataset(name="t2m")
                    pred = ds.np.infill("t2m", model=model, time_window=tw, **kw).isel(time=tw)
                    rows.append(rt.scores(da.values[i][scored[i]], pred.t2m_mean.values[scored[i]],
                                          pred.t2m_std.values[scored[i]]))
                res = {"kind": kind, "time_window": tw, "chunk_cells": chunks, "halo": halo, **_mean(rows),
                       "cpu_s": time.process_time() - c0}
                out.append(res)
                print({k: round(v, 3) if isinstance(v, float) else v for k, v in res.items()}, flush=True)
    return out


def te_local() -> list[dict]:
    """Zero-shot TE-PT-TNP infill on the whole grid and in small chunks (space only and ±3 h)."""
    return local("te-pt-tnp", {"random": (0, 3), "block": (0, 3)}, [(None, None), (6, 2.0), (8, 3.0)])


def bsa_local(weights: str) -> list[dict]:
    """Zero-shot BSA-TNP on the whole grid and in chunks: ERA5 at the benchmark's windows, and the demo."""
    from torch.distributions import Normal

    from geonp import demo
    from geonp.metrics import gaussian_scores

    tilings = [(None, None), (16, 4.0), (12, 6.0)]
    out = local(weights, {"random": (3,), "block": (1,)}, tilings)
    mid = demo.FRAMES // 2
    for chunks, halo in [(None, None), (16, 3.0)]:
        rows, c0 = [], time.process_time()
        for seed in (0, 1):
            draw = demo._draw(seed)
            ds, _ = demo._dataset(draw)
            kw = {} if chunks is None else {"chunks": {"x": chunks, "y": chunks}, "halo": halo}
            pred = ds.np.infill(demo.VAR, model=weights, **kw).isel(time=mid)
            gap = ~draw.observed[mid].numpy()
            mean = pred[f"{demo.VAR}_mean"].values.reshape(-1)[gap].astype(np.float64) - demo.BASE_K
            std = pred[f"{demo.VAR}_std"].values.reshape(-1)[gap].astype(np.float64)
            truth = draw.y[mid][torch.from_numpy(gap)]
            rows.append(gaussian_scores(Normal(torch.from_numpy(mean), torch.from_numpy(std)), truth))
        res = {"kind": "demo", "time_window": demo.FRAMES // 2, "chunk_cells": chunks, "halo": halo, **_mean(rows),
               "cpu_s": time.process_time() - c0}
        out.append(res)
        print({k: round(v, 3) if isinstance(v, float) else v for k, v in res.items()}, flush=True)
    return out


def _rings(scored: np.ndarray) -> np.ndarray:
    """Ring number of each scored cell: 1 next to the data, counting inwards (0 outside the block)."""
    rows, cols = np.nonzero(scored)
    r0, r1, c0, c1 = rows.min(), rows.max(), cols.min(), cols.max()
    ring = np.zeros(scored.shape, dtype=int)
    ring[rows, cols] = 1 + np.minimum(np.minimum(rows - r0, r1 - rows), np.minimum(cols - c0, c1 - cols))
    return ring


def block_rings(weights: str) -> list[dict]:
    """Ring-by-ring scores inside the ERA5 block: zero-shot BSA-TNP (±1 h), fitted GP, linear."""
    import baselines as bl

    da = rt.load_era5()
    frames = rt.era5_eval_times(6)
    vals, _ = _masked(da, "block")
    acc: dict = {}  # (method, ring) -> list of (truth, mean, std, context mean) arrays
    cpu = {}
    for i in frames:
        task = rt.era5_infill_task(int(i), "block")
        ring = _rings(task["scored"])[task["scored"]]
        base = float(np.mean(task["y_context"]))
        preds = {}
        c0 = time.process_time()
        ds = da.copy(data=vals).isel(time=slice(int(i) - 1, int(i) + 2)).to_dataset(name="t2m")
        pred = ds.np.infill("t2m", model=weights, time_window=1).isel(time=1)
        preds["bsa-tnp (zero-shot, ±1 h)"] = (pred.t2m_mean.values[task["scored"]], pred.t2m_std.values[task["scored"]])
        cpu["bsa-tnp (zero-shot, ±1 h)"] = cpu.get("bsa-tnp (zero-shot, ±1 h)", 0.0) + time.process_time() - c0
        for name, fn in (("GP Matérn 1.5 + white", bl.gp_fitted), ("linear", bl.griddata_linear)):
            c0 = time.process_time()
            preds[name] = fn(task["x_context"], task["y_context"], task["x_target"])
            cpu[name] = cpu.get(name, 0.0) + time.process_time() - c0
        for name, (mean, std) in preds.items():
            for r in np.unique(ring):
                sel = ring == r
                acc.setdefault((name, int(r)), []).append(
                    (task["y_target"][sel], np.asarray(mean)[sel], None if std is None else np.asarray(std)[sel], base))
        print(f"frame {int(i)} done", flush=True)
    out = []
    for (name, r), parts in sorted(acc.items()):
        y = np.concatenate([p[0] for p in parts])
        m = np.concatenate([p[1] for p in parts])
        anom_y = np.concatenate([p[0] - p[3] for p in parts])
        anom_m = np.concatenate([p[1] - p[3] for p in parts])
        row = {"method": name, "ring": r, "n": int(y.size), "rmse": float(np.sqrt(np.mean((m - y) ** 2))),
               "bias": float(np.mean(m - y)),
               "slope": float(np.sum(anom_m * anom_y) / np.sum(anom_y * anom_y)),  # prediction on truth
               "cpu_s": cpu[name]}
        if parts[0][2] is not None:
            s = np.concatenate([p[2] for p in parts])
            z = (y - m) / s
            row.update(nll=float(np.mean(0.5 * np.log(2 * np.pi * s * s) + 0.5 * z * z)),
                       coverage=float(np.mean(np.abs(z) < 1.959964)), z_std=float(np.std(z)))
        out.append(row)
        print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return out


@contextlib.contextmanager
def _unit_factor(factor: float):
    """Multiply the space unit that infill derives from the data (the context spacing) by ``factor``."""
    import geonp.chunked

    spacing = geonp.chunked.context_spacing_km
    with mock.patch.object(geonp.chunked, "context_spacing_km", lambda *a, **k: factor * spacing(*a, **k)):
        yield


def _era5_subset(kind: str, tw: int, factor: float) -> dict:
    with _unit_factor(factor):
        row = local("bsa-tnp", {kind: (tw,)}, [(None, None)])[0]
    return {k: row[k] for k in ("rmse", "nll", "coverage")}


def _demo_seeds(factor: float) -> dict:
    from geonp.demo import run_demo

    with _unit_factor(factor):
        return _mean([run_demo(seed=seed).scores["geonp bsa-tnp (zero-shot)"] for seed in (0, 1)])


def _colorado_space(factor: float) -> dict:
    import candidates

    with _unit_factor(factor):
        return candidates.colorado("bsa-tnp", 0)


GAP_BINS = (0.5, 1.0, 1.5, 2.0, 3.0, 8.0)


@contextlib.contextmanager
def _attention_window(radius: float | None):
    """Cut every space-biased attention off beyond ``radius`` units (a -30 logit penalty), or leave it."""
    from geonp.models.bias import RBFBias

    if radius is None:
        yield
        return
    fast = RBFBias.fast_bias

    def windowed(self, xq, xk):
        out = fast(self, xq, xk)
        if len(self.columns) != 2:  # the time bias
            return out
        far = (self.sqdist(xq, xk)[:, None] > radius**2).to(xq.dtype) * -30.0
        far = far.expand(xq.shape[0], self.num_heads, xq.shape[1], xk.shape[1])
        return far.contiguous() if out is None else out + far

    with mock.patch.object(RBFBias, "fast_bias", windowed):
        yield


def _synthetic_hole(cells: int, hole: float, variants: list[tuple[float, float | None]]) -> list[dict]:
    """RMSE by gap distance on lattices with a hole, per ``(factor, radius)`` variant.

    Each variant divides the coordinates by ``factor`` and, unless ``radius`` is None, cuts
    attention off beyond ``radius`` units.
    """
    from geonp.models import Batch
    from geonp.pretrained import load_pretrained
    from geonp.synthetic import SpaceTimeGP, gp_posterior

    net = load_pretrained("bsa-tnp").eval()
    sq = {v: [] for v in ["oracle", *variants]}
    gaps = []
    for ls in ((2.0, 4.0), (4.0, 8.0), (8.0, 16.0)):
        gen = SpaceTimeGP(mode="infill", hole_probability=1.0, noise_std_range=(0.01, 0.0101),
                          space_lengthscale_range=ls, num_locations=(cells, cells), observed_fraction=(0.5, 0.5),
                          window=(1, 1), hole_fraction=(hole, hole), time_lengthscale_range=(3.0, 30.0),
                          max_points=10_000, lattice_probability=1.0)
        g = torch.Generator().manual_seed(7)
        for _ in range(2):
            batch, params = gen.sample_with_params(4, g)
            yt = batch.yt[..., 0].double()
            sq["oracle"].append((gp_posterior(batch, params, noisy_targets=True).loc[..., 0] - yt).square().numpy())
            same = batch.xc[:, None, :, 2] == batch.xt[:, :, None, 2]
            dist = torch.cdist(batch.xt[..., :2].double(), batch.xc[..., :2].double()).masked_fill(~same, np.inf)
            gaps.append(dist.amin(-1).numpy())
            for f, radius in variants:
                scale = torch.tensor([1 / f, 1 / f, 1.0], dtype=batch.xc.dtype)
                with torch.no_grad(), _attention_window(radius):
                    pred = net(Batch(xc=batch.xc * scale, yc=batch.yc, xt=batch.xt * scale))
                sq[(f, radius)].append((pred.loc[..., 0].double() - yt).square().numpy())
    gap = np.concatenate([a.ravel() for a in gaps])
    edges = (0.0, *GAP_BINS)
    bins = [(gap >= lo) & (gap < hi) for lo, hi in zip(edges[:-1], edges[1:])]
    out = []
    for name, parts in sq.items():
        e = np.concatenate([a.ravel() for a in parts])
        factor, radius = ("oracle", None) if name == "oracle" else name
        out.append({"part": f"synthetic hole, {cells} cells", "factor": factor, "window": radius,
                    "rmse": float(np.sqrt(e.mean())),
                    "rmse_by_gap": [float(np.sqrt(e[b].mean())) if b.any() else None for b in bins],
                    "n_by_gap": [int(b.sum()) for b in bins]})
    return out


def unit_scale() -> list[dict]:
    """Zero-shot BSA-TNP with the space unit scaled, on the block, random, demo, Colorado and synthetic holes."""
    parts = [("ERA5 block ±1 h", lambda f: _era5_subset("block", 1, f), (1.0, 1.5, 2.0, 3.0)),
             ("ERA5 block, space only", lambda f: _era5_subset("block", 0, f), (1.0, 2.0)),
             ("ERA5 random ±3 h", lambda f: _era5_subset("random", 3, f), (1.0, 2.0)),
             ("geonp demo, seeds 0 and 1", _demo_seeds, (1.0, 1.5, 2.0)),
             ("Colorado, space only", _colorado_space, (1.0, 2.0))]
    out = []
    for name, run, factors in parts:
        for f in factors:
            c0 = time.process_time()
            row = {"part": name, "factor": f, **run(f), "cpu_s": time.process_time() - c0}
            out.append(row)
            print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    synthetic = [(900, 0.12, [(1.0, None), (1.5, None), (2.0, None)]),
                 (2000, 0.05, [(1.0, None), (1.5, None), (2.0, None), (1.0, 16.0), (1.0, 12.0), (1.0, 8.0)])]
    for cells, hole, variants in synthetic:
        for row in _synthetic_hole(cells, hole, variants):
            out.append(row)
            print(row, flush=True)
    return out


def forecast_table(data: dict) -> str:
    """Build the probe-forecast section of docs/benchmarks.md from its saved results."""
    m = data["machine"]
    lines = [f"Run {m['date']} on {m['cpu']} (one torch thread, {m['device']}), torch {m['torch']}; "
             f"{data['rows'][0]['inits']} inits. Regenerate: `python benchmarks/probes.py forecast-frames`.", "",
             "| past frames | " + " | ".join(f"+{k} h" for k in range(1, 7)) + " | CPU s |",
             "|---|" + "---|" * 7]
    for row in data["rows"]:
        cells = [f"{p['rmse']:.3f} / {p['nll']:.2f} / {p['coverage']:.2f}" for p in row["per_lead"]]
        lines.append(f"| {row['context_frames']} | " + " | ".join(cells) + f" | {row['cpu_s']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probe", choices=["forecast-frames", "te-local", "bsa-local", "block-rings",
                                                  "unit-scale"])
    parser.add_argument("--weights", default="bsa-tnp",
                        help="bsa-local, block-rings: a weights file instead of the shipped ones")
    parser.add_argument("--name", default=None, help="results name (default: the probe's)")
    parser.add_argument("--frames", type=int, nargs="+", default=[2, 4, 8], help="past frames (forecast-frames)")
    parser.add_argument("--inits", choices=sorted(INITS), default="subset",
                        help="forecast-frames: every third benchmark init (default), all 24, or the fit period's 79")
    parser.add_argument("--doc", action="store_true", help="only rebuild the docs table from saved results")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if not args.doc:
        if args.probe == "forecast-frames":
            rows = forecast_frames(args.frames, args.inits)
        else:
            rows = {"te-local": te_local, "bsa-local": lambda: bsa_local(args.weights),
                    "block-rings": lambda: block_rings(args.weights), "unit-scale": unit_scale}[args.probe]()
        name = args.name or (args.probe if args.inits == "subset" else f"{args.probe}-{args.inits}")
        save_json(f"probe-{name}", {"machine": machine(), "weights": args.weights, "rows": rows})
    if args.probe == "forecast-frames" and args.inits == "subset":
        saved = json.loads((RESULTS / "probe-forecast-frames.json").read_text())
        update_doc_section("probe-forecast", forecast_table(saved))


if __name__ == "__main__":
    main()
