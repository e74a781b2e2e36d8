"""Predictions at ``targets=``: accuracy, and whether a point's value depends on the other targets asked for.

Two tasks on the shared data (``GEONP_DATA`` or ``../shared/data``), each run in a fresh process per
checkout (``--code label=path``, e.g. a ``git worktree`` of an older ref) so that old and new code are
scored side by side on the same draws:

* **Colorado** monthly tmax 1985–1990: 20 % of the stations held out (three draws) and predicted as
  ``targets=`` (with their elevations) from the others; RMSE, NLL and 95 % coverage.
* **ERA5** t2m, 12 hours: every other cell as data (30 % of it hidden), the cells between as a
  target grid; RMSE and coverage.
* **Consistency**: Colorado July 1990 on a 25-km UTM grid of targets; the largest difference between
  each point's value in the grid and (a) the same points as a list, (b) the first point alone, (c)
  the first 50 points alone.

::

    git worktree add /tmp/before <ref>
    python benchmarks/targets.py --code before=/tmp/before now=.

Results: ``benchmarks/results/targets.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine, save_json  # noqa: E402

_CHILD = """
import pyproj, json, sys, time, warnings
import numpy as np, xarray as xr
sys.path.insert(0, sys.argv[1])
import geonp
import realdata_tasks as rt
warnings.simplefilter("ignore")
out = {}
st = geonp.open_dataset(str(rt.data_dir() / "colorado_monthly_met_1895_1997.nc")).sel(time=slice("1985-01", "1990-12"))
rng = np.random.default_rng(0)
n = st.sizes["station"]
scores = []
start = time.process_time()
for rep in range(3):
    held = rng.permutation(n)[: n // 5]
    src = st.isel(station=np.setdiff1d(np.arange(n), held))
    tg = xr.Dataset(coords={"lat": ("p", st.lat.values[held]), "lon": ("p", st.lon.values[held]),
                            "elevation": ("p", st.elevation.values[held])})
    res = src[["tmax"]].np.infill("tmax", targets=tg)
    y = st.tmax.isel(station=held).transpose("time", "station").values
    m, s = (res[v].transpose("time", "p").values for v in ("tmax_mean", "tmax_std"))
    ok = np.isfinite(y) & np.isfinite(m)
    e, sd = (m - y)[ok], s[ok]
    nll = np.mean(0.5 * np.log(2 * np.pi * sd ** 2) + 0.5 * (e / sd) ** 2)
    scores.append([float(np.sqrt(np.mean(e ** 2))), float(nll), float(np.mean(np.abs(e) < 1.96 * sd))])
out["colorado"] = dict(zip(("rmse", "nll", "coverage"), np.mean(scores, 0).tolist()), draws=scores)
ds = rt.load_era5().isel(time=slice(0, 12)).to_dataset(name="t2m").load()
src = ds.isel(latitude=slice(0, None, 2), longitude=slice(0, None, 2))
src = src.where(np.random.default_rng(1).random(src.t2m.shape) > 0.3)
tg = ds.isel(latitude=slice(1, None, 2), longitude=slice(1, None, 2))
res = src.np.infill("t2m", targets=xr.Dataset(coords={"latitude": tg.latitude, "longitude": tg.longitude}))
e = (res.t2m_mean - tg.t2m).values
out["era5"] = {"rmse": float(np.sqrt(np.nanmean(e ** 2))),
               "coverage": float(np.nanmean(np.abs(e) < 1.96 * res.t2m_std.values))}
july = geonp.open_dataset(str(rt.data_dir() / "colorado_monthly_met_1895_1997.nc")).sel(time="1990-07")
xs, ys = np.arange(150e3, 750e3, 25e3), np.arange(4100e3, 4550e3, 25e3)
axes = {"x": ("x", xs, {"units": "m"}), "y": ("y", ys, {"units": "m"})}
grid = geonp.io.write_crs(xr.Dataset(coords=axes), "EPSG:32613")
on_grid = july.np.infill("tmax", targets=grid).tmax_mean.isel(time=0).transpose("y", "x").values.ravel()
lon, lat = pyproj.Transformer.from_crs("EPSG:32613", "EPSG:4326", always_xy=True).transform(*np.meshgrid(xs, ys))
pts = xr.Dataset(coords={"lat": ("p", lat.ravel()), "lon": ("p", lon.ravel())})
listed = july.np.infill("tmax", targets=pts).tmax_mean.isel(time=0).values
one = july.np.infill("tmax", targets=pts.isel(p=[0])).tmax_mean.isel(time=0).values
fifty = july.np.infill("tmax", targets=pts.isel(p=slice(0, 50))).tmax_mean.isel(time=0).values
out["consistency_degC"] = {"grid_vs_list": float(np.nanmax(np.abs(on_grid - listed))),
                           "one_alone": float(np.nanmax(np.abs(one - listed[:1]))),
                           "fifty_alone": float(np.nanmax(np.abs(fifty - listed[:50])))}
out["cpu_s"] = time.process_time() - start
print(json.dumps(out))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code", nargs="+", default=[f"now={ROOT}"], metavar="LABEL=PATH",
                        help="checkouts to run, each imported from PATH")
    args = parser.parse_args()
    rows = {}
    for item in args.code:
        label, path = item.split("=", 1)
        env = {**os.environ, "PYTHONPATH": str(Path(path).resolve()), "OMP_NUM_THREADS": "1"}
        done = subprocess.run([sys.executable, "-c", _CHILD, str(Path(__file__).resolve().parent)], env=env,
                              cwd="/tmp", check=True, capture_output=True, text=True).stdout
        rows[label] = json.loads(done.splitlines()[-1])
        print(label, rows[label], flush=True)
    save_json("targets", {"machine": machine(), "results": rows})


if __name__ == "__main__":
    main()
