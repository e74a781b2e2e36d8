"""Frames missing at every point of a long record: infilled from the frames either side.

Three records, each with frames hidden at every point (30 single frames and five runs of three,
chosen by ``default_rng(0)``), infilled in one call with geonp's defaults (departures from each
point's annual cycle):

- Irish daily wind 1961-1978 (12 stations),
- Colorado monthly tmax 1950-1990 (the stations observed then),
- a synthetic daily grid, 3 years of 14 x 14 points: an annual cycle whose amplitude grows
  northwards plus departures that persist (AR(1), 0.7 a day) and vary smoothly in space (a
  squared-exponential of 8° on a 5° grid; 20 % of the other values hidden too). On such smooth
  fields the automatic ``time_window`` is 0.

Beside geonp, two references on the same departures: the climatology (each point's annual cycle,
fitted by :func:`geonp.seasonal.fit_cycle` on the gappy record) and the mean of the point's
departures in the nearest frames with data either side (no shrinking), each added to the cycle.
Scores on the hidden frames' values: RMSE, 95 % coverage and RMS std.

``--short``: records too short for a cycle, infilled as the variable itself (frames missing whole are
kriged along time, :mod:`geonp.bridge`), against linear interpolation in time: ERA5 UK t2m as daily
means of March 2019 (31 frames; the automatic ``time_window`` is 0, where geonp had no prediction
before), the same hourly over its first 10 days, Irish daily wind of 1961, and the synthetic grid's
first year. Single frames every 6 frames (each offset in turn) and pairs every 8.

Run ``python benchmarks/empty_frames.py [--short]`` (results ``benchmarks/results/empty-frames[-short].json``).
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
from geonp import seasonal  # noqa: E402


def synthetic_grid(rho: float = 0.7, days: int = 3 * 365, n: int = 14, ell: float = 8.0, seed: int = 1) -> xr.Dataset:
    """Daily grid: each point's annual cycle plus smooth AR(1) departures (std 2)."""
    rng = np.random.default_rng(seed)
    lat, lon = np.meshgrid(np.linspace(50, 55, n), np.linspace(-5, 0, n), indexing="ij")
    d = np.hypot(lat.ravel()[:, None] - lat.ravel()[None], lon.ravel()[:, None] - lon.ravel()[None])
    chol = np.linalg.cholesky(np.exp(-((d / ell) ** 2) / 2) + 1e-6 * np.eye(n * n))
    z = chol @ rng.standard_normal((n * n, days))
    a = np.zeros((days, n * n))
    for t in range(days):
        a[t] = (rho * a[t - 1] if t else 0.0) + np.sqrt(1 - rho**2) * z[:, t]
    phase = np.arange(days) / 365.25
    cycle = 10 + (8 + lat.ravel() - 50)[None] * np.sin(2 * np.pi * (phase[:, None] - 0.3))
    values = (cycle + 2.0 * a).reshape(days, n, n).astype("f4")
    return xr.Dataset({"t2m": (("time", "lat", "lon"), values)},
                      coords={"time": pd.date_range("2001-01-01", periods=days, freq="D"),
                              "lat": lat[:, 0], "lon": lon[0]})


def records() -> dict[str, tuple[xr.Dataset, str]]:
    wind = xr.open_dataset(T.data_dir() / "ireland_wind_1961_1978.nc").load()
    colorado = T.load_colorado()[["tmax"]].sel(time=slice("1950-01", "1990-12"))
    colorado = colorado.isel(station=np.flatnonzero(colorado.tmax.notnull().any("time").values))
    return {"Irish daily wind": (wind, "wind_speed"), "Colorado monthly tmax": (colorado, "tmax"),
            "synthetic daily grid": (synthetic_grid(), "t2m")}


def hidden_frames(n_frames: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    singles = rng.choice(np.arange(5, n_frames - 5), 30, replace=False)
    runs = rng.choice(np.arange(5, n_frames - 5), 5, replace=False)[:, None] + np.arange(3)
    return np.unique(np.concatenate([singles, runs.ravel()]))


def nearest_mean(dep: np.ndarray, empty: np.ndarray, t: int) -> np.ndarray:
    """Mean of each point's departures in the nearest frames with data either side (0 where it has none)."""
    sides = []
    for step in (-1, 1):
        u = t + step
        while 0 <= u < len(empty) and empty[u]:
            u += step
        if 0 <= u < len(empty):
            sides.append(dep[u])
    mean = np.nanmean(sides, 0) if sides else np.zeros(dep.shape[1:])
    return np.nan_to_num(mean)  # a point missing on both sides: its cycle


def scores(mean, std, truth) -> dict:
    ok = np.isfinite(truth)
    e = mean[ok] - truth[ok]
    out = {"rmse": float(np.sqrt(np.mean(e**2)))}
    if std is not None:
        out.update(coverage=float(np.mean(np.abs(e) <= 1.96 * std[ok])), rms_std=float(np.sqrt(np.mean(std[ok] ** 2))))
    return out


def short_records() -> dict[str, tuple[xr.Dataset, str]]:
    era5 = geonp.open_dataset(T.data_dir() / "era5-2mt-2019-03-uk.grib")[["t2m"]]
    wind = xr.open_dataset(T.data_dir() / "ireland_wind_1961_1978.nc").isel(time=slice(0, 365))
    return {"ERA5 t2m, daily means of March": (era5.resample(time="1D").mean().load(), "t2m"),
            "ERA5 t2m, hourly, 10 days": (era5.isel(time=slice(0, 240)).load(), "t2m"),
            "Irish daily wind, 1961": (wind.load(), "wind_speed"),
            "synthetic daily grid, one year": (synthetic_grid(days=365), "t2m")}


def short_patterns(n_frames: int, most: int = 3) -> list[tuple[str, np.ndarray]]:
    """Single frames every 6 frames and pairs every 8: every offset on a short record, ``most`` on a longer one."""
    singles = [("single frames", np.arange(o, n_frames - 1, 6)) for o in range(1, 7)]
    pairs = [("pairs of frames", np.sort(np.concatenate([s, s + 1]))) for s in
             (np.arange(o, n_frames - 2, 8) for o in range(1, 9))]
    return singles + pairs if n_frames <= 64 else singles[:most] + pairs[:most]


def short_main() -> None:
    warnings.simplefilter("ignore")
    out = {"machine": machine(), "results": {}}
    for name, (ds, var) in short_records().items():
        truth = ds[var].values
        sums: dict[tuple[str, str], list] = {}
        w, c = time.perf_counter(), time.process_time()
        for kind, hide in short_patterns(len(truth)):
            values = truth.copy()
            values[hide] = np.nan
            gappy = ds.assign({var: (ds[var].dims, values, ds[var].attrs)})
            pred = gappy.np.infill(var)
            linear = gappy[var].interpolate_na("time").values
            for label, mean, std in (("geonp default", pred[f"{var}_mean"].values, pred[f"{var}_std"].values),
                                     ("linear interpolation in time", linear, None)):
                e = mean[hide] - truth[hide]
                row = [np.sum(e**2), e.size, np.sum(np.isnan(e))]
                if std is not None:
                    row += [np.sum(np.abs(e) <= 1.96 * std[hide]), np.sum(std[hide] ** 2)]
                sums.setdefault((kind, label), []).append(row)
        rows = {}
        for (kind, label), r in sums.items():
            r = np.sum(np.array(r, dtype=np.float64), 0)
            rows[f"{kind}: {label}"] = {"rmse": float(np.sqrt(r[0] / r[1])), "nan_share": float(r[2] / r[1]),
                                        **({"coverage": float(r[3] / r[1]), "rms_std": float(np.sqrt(r[4] / r[1]))}
                                           if len(r) > 3 else {})}
        out["results"][name] = {"frames": int(truth.shape[0]), "rows": rows, "wall_s": time.perf_counter() - w,
                                "cpu_s": time.process_time() - c}
        for label, r in rows.items():
            print(name, "|", label, {k: round(v, 3) for k, v in r.items()}, flush=True)
    save_json("empty-frames-short", out)


def main() -> None:
    if "--short" in sys.argv[1:]:
        return short_main()
    warnings.simplefilter("ignore")
    out = {"machine": machine(), "results": {}}
    for name, (ds, var) in records().items():
        truth = ds[var].values
        hide = hidden_frames(truth.shape[0])
        values = truth.copy()
        values[hide] = np.nan
        if name.startswith("synthetic"):
            values[np.random.default_rng(1).random(values.shape) < 0.2] = np.nan
        gappy = ds.assign({var: (ds[var].dims, values, ds[var].attrs)})
        cycle = seasonal.cycle_at(seasonal.fit_cycle(gappy[var], "time"), gappy.time.values, ("time",))
        cycle = cycle.transpose(*gappy[var].dims).values
        dep = values - cycle
        empty = ~np.isfinite(dep).reshape(len(dep), -1).any(1)
        near = np.stack([nearest_mean(dep, empty, t) for t in hide]) + cycle[hide]
        rows = {"climatology (each point's annual cycle)": scores(cycle[hide], None, truth[hide]),
                "mean of the nearest frames either side": scores(near, None, truth[hide])}
        w, c = time.perf_counter(), time.process_time()
        pred = gappy.np.infill(var)
        mean, std = pred[f"{var}_mean"].values, pred[f"{var}_std"].values
        rows["geonp default"] = {**scores(mean[hide], std[hide], truth[hide]), "wall_s": time.perf_counter() - w,
                                 "cpu_s": time.process_time() - c, "reference": pred.attrs["geonp_reference"]}
        out["results"][name] = {"frames": int(truth.shape[0]), "hidden_frames": int(len(hide)), "rows": rows}
        for label, r in rows.items():
            print(name, "|", label, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}, flush=True)
    save_json("empty-frames", out)


if __name__ == "__main__":
    main()
