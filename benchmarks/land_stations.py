"""The bundled land fraction at stations: Irish daily wind speed (``land="auto"`` against ``"none"``).

    python benchmarks/land_stations.py            # ~2 CPU-minutes; results/land-stations.json

The 12 Irish synoptic stations of ``../shared/data/ireland_wind_1961_1978.nc`` (Haslett and
Raftery 1989; daily mean wind in knots, no gaps) range from exposed headlands to the midlands.
On 80 days drawn at random (``default_rng(0)``) 3 of the 12 stations are hidden, and the whole
record is infilled zero-shot with BSA-TNP in one call (±3 days of context, the package's frame
groups), as a user would: with no land trend, with the default ``land="auto"`` (the station's
land fraction over a 10 km disk, ``geonp.coastline.station_land_fraction``), and with disks of 0
(its own 0.05° cell), 25 and 50 km; the network alone and the default (calibrated on held-out
stations of the input). Beside them: inverse-distance weighting of the same day's other
stations. Scored on the hidden values.
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata_tasks as rt  # noqa: E402
from _common import machine, save_json  # noqa: E402

import geonp  # noqa: E402, F401  (the accessor)
from geonp.coastline import station_land_fraction  # noqa: E402

FILE = "ireland_wind_1961_1978.nc"
DAYS, HIDDEN, WINDOW = 80, 3, 3


def _idw(lon, lat, v, h) -> np.ndarray:
    x = np.c_[lon * np.cos(np.deg2rad(53.5)), lat] * 111.2
    d = np.linalg.norm(x[h][:, None] - x[~h][None], axis=-1)
    w = 1.0 / d ** 2
    return (w * v[~h]).sum(1) / w.sum(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--radii", type=float, nargs="+", default=[0.0, 25.0, 50.0], metavar="KM")
    args = parser.parse_args()
    import xarray as xr

    with xr.open_dataset(rt.data_dir() / FILE) as f:
        ds = f.load()
    lon, lat, v = ds.lon.values, ds.lat.values, ds.wind_speed.values
    rng = np.random.default_rng(0)
    days = np.sort(rng.choice(np.arange(WINDOW, v.shape[0] - WINDOW), DAYS, replace=False))
    masked, hidden = v.copy(), {}
    for d in days:
        h = np.zeros(v.shape[1], dtype=bool)
        h[rng.permutation(v.shape[1])[:HIDDEN]] = True
        hidden[d] = h
        masked[d, h] = np.nan
    base = ds.copy()
    base["wind_speed"] = ds.wind_speed.dims, masked
    rows = [{"method": "inverse-distance weighting (same day)",
             **rt.scores(np.concatenate([v[d, hidden[d]] for d in days]),
                         np.concatenate([_idw(lon, lat, v[d], hidden[d]) for d in days]))}]
    print(rows[-1], flush=True)
    # the whole record in one call, as a user would infill it (the default then calibrates on held-out stations)
    settings = [("none", None, False), ("none", None, "auto"), ("auto", None, False), ("auto", None, "auto")]
    settings += [(f"station fraction over {r:g} km", r, "auto") for r in args.radii]
    for label, radius, calibrate in settings:
        data = base if radius is None else base.assign_coords(lsm=("station", station_land_fraction(lon, lat, radius)))
        start, cpu = time.perf_counter(), time.process_time()
        pred = data.np.infill("wind_speed", time_window=WINDOW, land=label if radius is None else "data",
                              calibrate=calibrate)
        mean, std = pred.wind_speed_mean.values, pred.wind_speed_std.values
        scores = [rt.scores(v[d, hidden[d]], mean[d, hidden[d]], std[d, hidden[d]]) for d in days]
        method = f"land={label!r}" if radius is None else label
        how = "default (calibrated on the input)" if calibrate else "the network alone"
        rows.append({"method": f"bsa-tnp zero-shot, {method}, {how}",
                     **{k: float(np.mean([s[k] for s in scores])) for k in ("rmse", "mae", "nll", "coverage")},
                     "calibrated": pred.attrs.get("geonp_calibrated"),
                     "wall_s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu})
        print({k: round(x, 3) if isinstance(x, float) else x for k, x in rows[-1].items()}, flush=True)
    save_json("land-stations", {"machine": machine(), "days": int(DAYS), "hidden_per_day": HIDDEN,
                                "fractions_10km": station_land_fraction(lon, lat).round(3).tolist(), "rows": rows})


if __name__ == "__main__":
    main()
