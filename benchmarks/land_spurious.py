"""What ``land="auto"`` costs where a field has no land–sea contrast.

    python benchmarks/land_spurious.py            # ~6 CPU-minutes; results/land-spurious.json

Grids without a mask get the bundled land fraction since 2026-11-25 (``geonp.coastline``), and
each infill task then fits a land–sea trend. On ERA5 t2m that helps (docs/benchmarks.md).
This asks what it costs on a field that does not follow the coast: stationary space-time GP
draws (Matérn 5/2 in space with lengthscales of 100, 250 and 500 km, squared exponential in
time with 6 h, 2 K amplitude, 0.05 K noise) on the ERA5 UK grid (0.25°, 58–50° N, 10° W–2° E,
where land and sea alternate), masked like the real-data benchmark (90 % random, or the centred
12 × 12 block plus half of the rest) and infilled zero-shot with ``land="auto"`` and
``land="none"``. Scored at two frames per draw; two draws per lengthscale.

    python benchmarks/land_spurious.py --no-guard --name land-spurious-unguarded

fits the land trend in every task, as the package did before its contrast test
(:func:`geonp.trend.covariate_contrast`), and

    python benchmarks/land_spurious.py --shares --name land-contrast

gives the test's statistic on whole frames of ERA5 t2m (needs ../shared/data) and of the draws.
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata_tasks as rt  # noqa: E402
from _common import machine, save_json  # noqa: E402

import geonp  # noqa: E402, F401  (the accessor)

LAT = np.linspace(58.0, 50.0, 33)
LON = np.linspace(-10.0, 2.0, 49)
FRAMES = 14
EVAL = (3, 10)  # frames scored; each has its whole time window inside the 14 frames
TIME_LS_H, AMPLITUDE, NOISE, MEAN = 6.0, 2.0, 0.05, 280.0


def draw(ls_km: float, seed: int) -> np.ndarray:
    """One space-time GP draw ``[FRAMES, 33, 49]`` (Kronecker product of space and time Cholesky factors)."""
    lo, la = np.meshgrid(LON, LAT)
    xy = np.stack([(lo + 4.0) * 111.2 * np.cos(np.deg2rad(54.0)), (la - 54.0) * 111.2], -1).reshape(-1, 2)
    r = np.sqrt(5.0) * np.linalg.norm(xy[:, None] - xy[None], axis=-1) / ls_km
    ks = (1 + r + r**2 / 3) * np.exp(-r)
    t = np.arange(FRAMES, dtype=float)
    kt = np.exp(-0.5 * ((t[:, None] - t[None]) / TIME_LS_H) ** 2)
    ls_ = np.linalg.cholesky(ks + 1e-6 * np.eye(len(ks)))
    lt = np.linalg.cholesky(kt + 1e-6 * np.eye(FRAMES))
    z = np.random.default_rng(seed).standard_normal((FRAMES, len(ks)))
    field = MEAN + AMPLITUDE * (lt @ z @ ls_.T)
    field = field + NOISE * np.random.default_rng(seed + 1).standard_normal(field.shape)
    return field.reshape(FRAMES, *lo.shape)


def contrast_shares(seeds) -> dict:
    """``geonp.trend.covariate_contrast`` on whole frames: the 28 ERA5 eval frames and the GP draws, both masks."""
    from geonp.coastline import grid_land_fraction
    from geonp.surface import LAND_SMOOTH_CELLS
    from geonp.trend import covariate_contrast, smooth_grid

    lo, la = np.meshgrid(LON, LAT)
    land = smooth_grid(grid_land_fraction(lo, la), LAND_SMOOTH_CELLS)
    xy = 4.0 * np.stack([(lo + 4.0) * np.cos(np.deg2rad(54.0)), la - 54.0], -1)  # ~cells
    out = {}
    da = rt.load_era5()
    for kind in ("random", "block"):
        shares = []
        for i in rt.era5_eval_times(6):
            ok = ~rt.era5_infill_mask(int(i), kind=kind)[0]
            shares.append(covariate_contrast(xy[ok], None, da.values[i][ok], land[ok]))
        out[f"era5 {kind}"] = shares
        for ls_km in (100.0, 250.0, 500.0):
            shares = []
            for seed in seeds:
                field = draw(ls_km, seed)
                for i in EVAL:
                    ok = ~rt.era5_infill_mask(600 + 20 * seed + i, kind=kind)[0]
                    shares.append(covariate_contrast(xy[ok], None, field[i][ok], land[ok]))
            out[f"gp {ls_km:g} km {kind}"] = shares
    for key, v in out.items():
        print(key, f"median {np.median(v):.3f}, range {min(v):.3f}..{max(v):.3f}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengthscales", type=float, nargs="+", default=[100.0, 250.0, 500.0], metavar="KM")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--name", default="land-spurious")
    parser.add_argument("--no-guard", action="store_true",
                        help="fit the land trend in every task (skip geonp.trend.covariate_contrast's test)")
    parser.add_argument("--shares", action="store_true",
                        help="only the covariate_contrast shares of whole frames (ERA5 eval frames and the GP draws)")
    args = parser.parse_args()
    if args.shares:
        save_json(args.name, {"machine": machine(), "covariate_contrast": contrast_shares(args.seeds)})
        return
    if args.no_guard:
        import geonp.data.tasks

        geonp.data.tasks.LAND_CONTRAST_R2 = -1.0
    rows = []
    times = pd.date_range("2019-03-25", periods=FRAMES, freq="h")
    for ls_km in args.lengthscales:
        for seed in args.seeds:
            truth = draw(ls_km, seed)
            for kind, tw in (("random", 3), ("block", 1)):  # the real-data benchmark's windows
                masks = [rt.era5_infill_mask(600 + 20 * seed + i, kind=kind) for i in range(FRAMES)]
                hidden = np.stack([m[0] for m in masks])
                ds = xr.Dataset({"t2m": (("time", "latitude", "longitude"),
                                         np.where(hidden, np.nan, truth).astype("float32"), {"units": "K"})},
                                coords={"time": times, "latitude": LAT, "longitude": LON})
                for land in ("none", "auto"):
                    w0, c0 = time.perf_counter(), time.process_time()
                    pred = ds.np.infill("t2m", time_window=tw, land=land)
                    y = np.concatenate([truth[i][masks[i][1]] for i in EVAL])
                    mu = np.concatenate([pred.t2m_mean.values[i][masks[i][1]] for i in EVAL])
                    sd = np.concatenate([pred.t2m_std.values[i][masks[i][1]] for i in EVAL])
                    rows.append({"lengthscale_km": ls_km, "seed": seed, "kind": kind, "land": land,
                                 **rt.scores(y, mu, sd), "wall_s": time.perf_counter() - w0,
                                 "cpu_s": time.process_time() - c0})
                    print({k: round(v, 3) if isinstance(v, float) else v for k, v in rows[-1].items()}, flush=True)
    summary = {}
    for kind in ("random", "block"):
        for ls_km in args.lengthscales:
            pick = {land: [r for r in rows if r["kind"] == kind and r["lengthscale_km"] == ls_km and r["land"] == land]
                    for land in ("none", "auto")}
            summary[f"{kind} {ls_km:g} km"] = {
                land: {m: float(np.mean([r[m] for r in rs])) for m in ("rmse", "nll", "coverage")}
                for land, rs in pick.items()}
    for key, s in summary.items():
        print(key, {land: {m: round(v, 3) for m, v in d.items()} for land, d in s.items()})
    save_json(args.name, {"machine": machine(), "rows": rows, "summary": summary})


if __name__ == "__main__":
    main()
