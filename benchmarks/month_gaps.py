"""Irish daily wind: a station missing for a whole month, infilled from the whole record.

Twelve months across 1962-1978 (every 17th month from February 1962), each with one station (the
stations in turn) missing for the whole month; the rest of the record as it is. geonp infills the
whole record in one call with its defaults (``reference="auto"``: departures from each station's
annual cycle, as the record spans 18 years) and with ``reference="none"`` (the variable itself),
beside inverse-distance weighting of the stations' anomalies from their own means over the record
(the baseline a new-user test found ahead of geonp, session 36). Scores on the hidden station-days:
RMSE and 95 % coverage in knots.

Run ``python benchmarks/month_gaps.py`` (results ``benchmarks/results/month-gaps.json``).
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip  (before anything loads eccodes)
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata_tasks as T  # noqa: E402
from _common import machine, save_json  # noqa: E402

import geonp  # noqa: E402,F401  registers ds.np

WIND_FILE = "ireland_wind_1961_1978.nc"


def hidden_months(ds: xr.Dataset, n: int = 12) -> list[tuple[np.ndarray, int]]:
    """(days of the month, station) of each hidden station-month."""
    out = []
    times = ds.time.values
    for k, start in enumerate(pd.date_range("1962-02-01", periods=n, freq="17MS")):
        end = start + pd.offsets.MonthBegin(1)
        out.append(((times >= start.to_datetime64()) & (times < end.to_datetime64()), k % ds.sizes["station"]))
    return out


def idw_of_anomalies(values: np.ndarray, lat: np.ndarray, lon: np.ndarray, days: np.ndarray,
                     station: int) -> np.ndarray:
    """The station's mean plus the inverse-distance-squared mean of the other stations' anomalies, day by day."""
    clim = np.nanmean(values, 0)
    d = np.hypot((lat - lat[station]) * 111.2, (lon - lon[station]) * 111.2 * np.cos(np.deg2rad(lat[station])))
    w = np.where(np.arange(len(lat)) == station, 0.0, 1.0 / np.maximum(d, 1.0) ** 2)
    a = values[days] - clim
    ok = np.isfinite(a) & (w > 0)
    return clim[station] + (np.where(ok, a, 0.0) * w).sum(1) / (ok * w).sum(1)


def main() -> None:
    warnings.simplefilter("ignore")
    ds = xr.open_dataset(T.data_dir() / WIND_FILE).load()
    truth = ds.wind_speed.values
    gaps = hidden_months(ds)
    values = truth.copy()
    for days, s in gaps:
        values[days, s] = np.nan
    gappy = ds.assign(wind_speed=(("time", "station"), values, ds.wind_speed.attrs))
    out = {"machine": machine(), "hidden": [[str(ds.time.values[d.argmax()])[:7], str(ds.station.values[s])]
                                            for d, s in gaps], "results": {}}
    err = np.concatenate([idw_of_anomalies(values, ds.lat.values, ds.lon.values, d, s) - truth[d, s] for d, s in gaps])
    out["results"]["IDW of the stations' anomalies"] = {"rmse": float(np.sqrt(np.nanmean(err**2)))}
    for label, ref in (("geonp default (reference auto)", None), ("geonp reference none", "none")):
        w, c = time.perf_counter(), time.process_time()
        pred = gappy.np.infill("wind_speed", reference=ref)
        mean, std = pred.wind_speed_mean.values, pred.wind_speed_std.values
        e = np.concatenate([mean[d, s] - truth[d, s] for d, s in gaps])
        inside = np.concatenate([np.abs(mean[d, s] - truth[d, s]) <= 1.96 * std[d, s] for d, s in gaps])
        out["results"][label] = {"rmse": float(np.sqrt(np.mean(e**2))), "coverage": float(np.mean(inside)),
                                 "reference": pred.attrs["geonp_reference"], "wall_s": time.perf_counter() - w,
                                 "cpu_s": time.process_time() - c}
    for label, r in out["results"].items():
        print(label, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}, flush=True)
    save_json("month-gaps", out)


if __name__ == "__main__":
    main()
