"""A land–sea trend beside the elevation trend, for ERA5 infill (``geonp.surface``, ``geonp.trend``).

    python benchmarks/land_sea.py                        # none and the package's; block and random (~6 CPU-minutes)
    python benchmarks/land_sea.py --sigma -1 0 1 1.5 2   # the probe that chose one cell of smoothing
    python benchmarks/land_sea.py --sigma --gp --name land-sea-gp   # the GP baseline given the land fraction
    python benchmarks/land_sea.py --sigma --fit-cpu 300 --name land-sea-fit   # fitted with the mask

The ERA5 block's centre is the Irish Sea around the Isle of Man (54.25° N, 4.25° W), surrounded
by land; the shipped BSA-TNP carries the land's temperature into it (a cold bias of 0.6–0.8 K in
the block's centre, "Where in the ERA5 block" in docs/benchmarks.md). A land fraction per cell
(``global-land-mask``, a 1 km mask bundled in its wheel: ``pip install global-land-mask``),
averaged over a 5 × 5 sub-grid of each 0.25° cell and optionally smoothed by a Gaussian of
``sigma`` cells, entered each task in the probe through the elevation-trend path: it was
passed as ``covariates=`` in units where a land fraction of 1 reads as 1,000 m, so every task
fits its context on an intercept plus a linear and a quadratic term in the land fraction, removes
that trend and adds it back at the targets (``Normaliser.elevation_fit``). The package now does
the same from an ``lsm`` coordinate (``--sigma 99``), smoothing grids over one cell. Scored like
``realdata.py era5-infill`` on all 28 eval frames, zero-shot (the package default for grids).
Results: ``benchmarks/results/land-sea.json``; the reading is in docs/benchmarks.md ("A land–sea trend").
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import xarray as xr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata_tasks as rt  # noqa: E402
from _common import machine, save_json  # noqa: E402
from realdata import _masked_era5, era5_infill_scores  # noqa: E402

import geonp  # noqa: E402, F401  (the accessor)

#: ``--sigma`` value meaning "the package's land–sea trend" (an ``lsm`` coordinate)
PACKAGE = 99.0


def land_fraction(da: xr.DataArray, sigma: float = 0.0) -> xr.DataArray:
    """Land fraction of each cell of ``da``'s 0.25° lat/lon grid, smoothed by ``sigma`` cells."""
    from global_land_mask import globe
    from scipy.ndimage import gaussian_filter

    lat, lon = da.latitude.values, da.longitude.values
    lat2, lon2 = np.meshgrid(lat, np.where(lon > 180, lon - 360, lon), indexing="ij")
    offsets = np.linspace(-0.1, 0.1, 5)
    frac = np.mean([globe.is_land(lat2 + a, lon2 + b) for a in offsets for b in offsets], axis=0)
    if sigma > 0:
        frac = gaussian_filter(frac, sigma, mode="nearest")
    return xr.DataArray(frac, dims=("latitude", "longitude"), coords={"latitude": lat, "longitude": lon})


def gp_with_land(kind: str) -> dict:
    """The fitted GP baseline (Matérn 1.5 + white, ARD) on (x, y, land fraction smoothed over one cell)."""
    import baselines as bl

    from geonp.trend import smooth_grid

    da = rt.load_era5()
    land = smooth_grid(land_fraction(da).values, 1.0)
    rows, c0 = [], time.process_time()
    for i in rt.era5_eval_times(6):
        task = rt.era5_infill_task(int(i), kind)
        ctx, tgt = ~task["hidden"], task["scored"]
        xc = np.c_[task["x_context"], land[ctx]]
        xt = np.c_[task["x_target"], land[tgt]]
        mean, std = bl.gp_fitted(xc, task["y_context"], xt, ard=True)
        rows.append(rt.scores(task["y_target"], mean, std))
    out = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
    return {"kind": kind, "method": "GP Matérn 1.5 + white, ARD on (x, y, land fraction)", **out,
            "cpu_s": time.process_time() - c0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sigma", type=float, nargs="*", default=[-1.0, PACKAGE],
                        help="Gaussian smoothing of the land fraction in cells, through the elevation-trend path "
                             f"(-1: no land trend; {PACKAGE:g}: the package's land-sea trend from an lsm coordinate)")
    parser.add_argument("--kinds", nargs="+", default=["block", "random"], choices=["block", "random"])
    parser.add_argument("--gp", action="store_true", help="also score the GP baseline with the land fraction")
    parser.add_argument("--name", default="land-sea", help="results file name")
    parser.add_argument("--fit-cpu", type=float, default=0.0,
                        help="also fit BSA-TNP this many CPU-seconds on the masked fit period with the mask")
    args = parser.parse_args()
    da, ev = rt.load_era5(), rt.era5_eval_times(6)
    rows = []
    for kind in args.kinds:
        tw = 1 if kind == "block" else 3  # the real-data benchmark's windows
        masked = _masked_era5(kind).isel(time=slice(int(ev[0]) - tw, int(ev[-1]) + tw + 1))
        for sigma in args.sigma:
            data, options = masked, {"land": "none"}  # since land="auto": no bundled land fraction in the probe rows
            if sigma == PACKAGE:  # the package's own land-sea trend: an `lsm` coordinate, smoothed over one cell
                data, options = masked.assign_coords(lsm=land_fraction(da)), {}
            elif sigma >= 0:
                options["covariates"] = (1000.0 * land_fraction(da, sigma)).rename("elevation")
            w0, c0 = time.perf_counter(), time.process_time()
            pred = data.np.infill("t2m", model="bsa-tnp", time_window=tw, **options).compute()
            row = {"kind": kind, "time_window": tw, "sigma_cells": sigma, **era5_infill_scores(da, pred, ev, kind),
                   "wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0}
            rows.append(row)
            print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
        if args.fit_cpu > 0:  # fitted on the masked fit period with the mask, then scored with it
            data = _masked_era5(kind).assign_coords(lsm=land_fraction(da))
            w0, c0 = time.perf_counter(), time.process_time()
            model = data.sel(time=slice(None, rt.ERA5_FIT_END)).np.fit(
                "t2m", task="infill", max_cpu_time=float(args.fit_cpu), time_window=tw, progress=False, seed=0)
            window = data.isel(time=slice(int(ev[0]) - tw, int(ev[-1]) + tw + 1))
            pred = window.np.infill("t2m", model=model, time_window=tw).compute()
            rows.append({"kind": kind, "time_window": tw, "method": f"bsa-tnp fitted {args.fit_cpu:g} CPU-s with lsm",
                         "steps": model.metadata["steps"], **era5_infill_scores(da, pred, ev, kind),
                         "wall_s": time.perf_counter() - w0, "cpu_s": time.process_time() - c0})
            print({k: round(v, 3) if isinstance(v, float) else v for k, v in rows[-1].items()}, flush=True)
        if args.gp:
            rows.append(gp_with_land(kind))
            print({k: round(v, 3) if isinstance(v, float) else v for k, v in rows[-1].items()}, flush=True)
    save_json(args.name, {"machine": machine(), "rows": rows})


if __name__ == "__main__":
    main()
