"""The real-data benchmark tasks: one definition shared by the classical baselines and geonp.

Both ``benchmarks/baselines.py`` and the geonp runner import the task definitions from here, so they
score exactly the same points. numpy / pandas / xarray / pyproj only (no torch, no geonp models).

Data: ``shared/data`` next to the project (``GEONP_DATA`` overrides), see its README.

Tasks
-----
* **ERA5 UK t2m infill** (``era5-2mt-2019-03-uk.grib``, hourly 2019-03, 33 × 49 grid at 0.25°):
  eval frames every ``step_hours`` of 2019-03-25 00:00 .. 2019-03-31 23:00 (default 6 h: 28 frames).
  ``kind="random"``: 90 % of the cells hidden (exactly round(0.9 · 1617) = 1455), scored on all of
  them; ``kind="block"``: the centred 12 × 12 block hidden plus 50 % of the other cells, scored inside
  the block only. Spatial only: the context is the frame's visible cells.
* **ERA5 forecast**: inits every 6 h from 2019-03-25 00:00 to 2019-03-30 18:00 (24), leads 1..6 h, all
  grid cells scored. Anything up to ``ERA5_FIT_END`` may be used to fit (statistics, training).
* **Colorado monthly tmax** (``colorado_monthly_met_1895_1997.nc``): 20 evenly spaced months of
  1950-01 .. 1990-12 among those with ≥ 100 observed stations; 20 % of the observed stations hidden
  and scored (exactly round(0.2 · n_observed)), the remaining observed ones are the context.

Coordinates are Lambert azimuthal equal-area km centred at 4°W 54°N (ERA5) or at the centre of the
Colorado stations' bounding box (:func:`colorado_centre`).

Scores (:func:`scores`): RMSE, MAE and, for a Gaussian predictive, mean NLL per point, 95 % coverage
and closed-form CRPS, in data units (K or °C). Benchmark figures are means over frames / months.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import pyproj  # noqa: F401  isort: skip  (must be imported before eccodes/cfgrib; see shared/data/README.md)
import numpy as np
import pandas as pd

DATA = Path(os.environ.get("GEONP_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
ERA5_FILE = "era5-2mt-2019-03-uk.grib"
COLORADO_FILE = "colorado_monthly_met_1895_1997.nc"

ERA5_FIT_END = "2019-03-21T23:00"
ERA5_EVAL_START = "2019-03-25T00:00"
ERA5_EVAL_END = "2019-03-31T23:00"
ERA5_CENTRE = (-4.0, 54.0)  # lon, lat of the LAEA projection centre
ERA5_BLOCK = 12  # side of the hidden block (cells)
ERA5_RANDOM_HIDDEN = 0.9
ERA5_BLOCK_OTHER_HIDDEN = 0.5
ERA5_LEADS = (1, 2, 3, 4, 5, 6)  # hours

COLORADO_FIRST, COLORADO_LAST = "1950-01", "1990-12"
COLORADO_N_MONTHS = 20
COLORADO_MIN_STATIONS = 100
COLORADO_HIDDEN = 0.2


def data_dir() -> Path:
    """The shared data folder (``GEONP_DATA`` or ``<repo>/../shared/data``)."""
    return Path(os.environ.get("GEONP_DATA", DATA))


# --------------------------------------------------------------------------------------------- ERA5


@lru_cache(maxsize=1)
def load_era5():
    """ERA5 t2m as an in-memory ``xarray.DataArray`` (time 744, latitude 33 desc., longitude 49), K."""
    import xarray as xr

    path = data_dir() / ERA5_FILE
    with xr.open_dataset(path, engine="cfgrib", backend_kwargs={"indexpath": ""}) as ds:
        da = ds["t2m"].load()
    return da


def era5_time_index(time) -> int:
    """Index of ``time`` (str or datetime64) in the full 744-step axis."""
    times = pd.DatetimeIndex(load_era5().time.values)
    return int(times.get_loc(pd.Timestamp(time)))


def era5_eval_times(step_hours: int = 6) -> np.ndarray:
    """Indices (into the full time axis) of the infill eval frames.

    Every ``step_hours`` h of 2019-03-25 00:00 .. 2019-03-31 23:00 (28 frames at 6 h, 168 at 1 h).
    """
    times = pd.DatetimeIndex(load_era5().time.values)
    sel = np.where((times >= pd.Timestamp(ERA5_EVAL_START)) & (times <= pd.Timestamp(ERA5_EVAL_END)))[0]
    return sel[::step_hours]


def era5_infill_mask(time_index: int, shape: tuple[int, int] = (33, 49), kind: str = "random"):
    """Hidden and scored masks (boolean, ``shape``) of the infill task for one frame.

    ``time_index`` is the frame's index in the full 744-step axis (the seed).
    random: round(0.9 · n) cells hidden (``default_rng(time_index)``), all of them scored.
    block: the centred 12 × 12 block hidden plus round(0.5 · n_outside) of the other cells
    (``default_rng(10_000 + time_index)``); only the block is scored.
    """
    ny, nx = shape
    n = ny * nx
    hidden = np.zeros(n, dtype=bool)
    if kind == "random":
        rng = np.random.default_rng(seed=int(time_index))
        hidden[rng.permutation(n)[: int(round(ERA5_RANDOM_HIDDEN * n))]] = True
        hidden = hidden.reshape(shape)
        return hidden, hidden.copy()
    if kind == "block":
        block = np.zeros(shape, dtype=bool)
        r0, c0 = (ny - ERA5_BLOCK) // 2, (nx - ERA5_BLOCK) // 2
        block[r0 : r0 + ERA5_BLOCK, c0 : c0 + ERA5_BLOCK] = True
        outside = np.flatnonzero(~block.ravel())
        rng = np.random.default_rng(seed=10_000 + int(time_index))
        k = int(round(ERA5_BLOCK_OTHER_HIDDEN * outside.size))
        hidden[outside[rng.permutation(outside.size)[:k]]] = True
        hidden = hidden.reshape(shape) | block
        return hidden, block
    raise ValueError(f"kind must be 'random' or 'block', not {kind!r}")


def era5_grid_lonlat() -> tuple[np.ndarray, np.ndarray]:
    """Longitude and latitude of every cell, each of shape (33, 49) (row = latitude, descending)."""
    da = load_era5()
    lon, lat = np.meshgrid(da.longitude.values, da.latitude.values)
    return lon, lat


def era5_grid_km() -> np.ndarray:
    """LAEA km coordinates of every cell, shape (33, 49, 2) with (x, y)."""
    lon, lat = era5_grid_lonlat()
    return project_km(lon, lat, ERA5_CENTRE)


def era5_infill_task(time_index: int, kind: str = "random") -> dict:
    """One infill frame as flat arrays, plus the masks and lon/lat.

    ``x_context`` (n_c, 2) km, ``y_context`` (n_c,) K, ``x_target`` (n_t, 2), ``y_target`` (n_t,)
    (the scored cells).
    """
    da = load_era5()
    field = np.asarray(da.values[time_index], dtype=np.float64)
    hidden, scored = era5_infill_mask(time_index, field.shape, kind)
    xy = era5_grid_km()
    lon, lat = era5_grid_lonlat()
    ctx = ~hidden
    return {
        "time_index": int(time_index),
        "time": str(pd.Timestamp(da.time.values[time_index])),
        "kind": kind,
        "x_context": xy[ctx],
        "y_context": field[ctx],
        "x_target": xy[scored],
        "y_target": field[scored],
        "lonlat_context": np.stack([lon[ctx], lat[ctx]], -1),
        "lonlat_target": np.stack([lon[scored], lat[scored]], -1),
        "hidden": hidden,
        "scored": scored,
    }


def era5_forecast_inits(start: str = ERA5_EVAL_START, end: str = "2019-03-30T18:00",
                        step_hours: int = 6) -> np.ndarray:
    """Indices (full time axis) of the forecast inits.

    Every 6 h from 2019-03-25 00:00 to 2019-03-30 18:00 (24 inits); every lead 1..6 h stays inside March.
    """
    times = pd.DatetimeIndex(load_era5().time.values)
    sel = np.where((times >= pd.Timestamp(start)) & (times <= pd.Timestamp(end)))[0]
    return sel[::step_hours]


def era5_fit_inits(step_hours: int = 6, history_hours: int = 24) -> np.ndarray:
    """Inits for fitting forecast error statistics, entirely inside the fit period.

    Every 6 h from the first init with ``history_hours`` of history (2019-03-02 00:00) to the last
    whose +6 h lead is ≤ ``ERA5_FIT_END`` (2019-03-21 12:00): 79 inits at 6 h steps.
    """
    times = pd.DatetimeIndex(load_era5().time.values)
    last = pd.Timestamp(ERA5_FIT_END) - pd.Timedelta(hours=max(ERA5_LEADS))
    sel = np.where(times <= last)[0]
    return sel[history_hours::step_hours]


# ----------------------------------------------------------------------------------------- Colorado


@lru_cache(maxsize=1)
def load_colorado():
    """The Colorado monthly met ``xarray.Dataset``, in memory.

    Time 1236, station 376; tmax/tmin °C, ppt; coords lon, lat, elevation m.
    """
    import xarray as xr

    with xr.open_dataset(data_dir() / COLORADO_FILE) as ds:
        return ds.load()


def colorado_centre() -> tuple[float, float]:
    """(lon, lat) of the centre of the stations' bounding box: the LAEA centre for Colorado."""
    ds = load_colorado()
    lon, lat = ds.lon.values, ds.lat.values
    return (float(lon.min() + lon.max()) / 2, float(lat.min() + lat.max()) / 2)


def colorado_months(variable: str = "tmax", n_months: int | None = COLORADO_N_MONTHS) -> np.ndarray:
    """Indices (full time axis) of the eval months.

    ``n_months`` (20) evenly spaced (``np.linspace`` rounded) among the months of 1950-01 .. 1990-12
    with ≥ 100 observed stations; ``n_months=None``: all of them.
    """
    ds = load_colorado()
    times = pd.DatetimeIndex(ds.time.values)
    n_obs = ds[variable].notnull().sum("station").values
    ok = (times >= pd.Timestamp(COLORADO_FIRST)) & (times <= pd.Timestamp(COLORADO_LAST))
    cand = np.flatnonzero(ok & (n_obs >= COLORADO_MIN_STATIONS))
    if n_months is None:
        return cand
    pick = np.round(np.linspace(0, cand.size - 1, n_months)).astype(int)
    return cand[pick]


def colorado_mask(month_index: int, observed: np.ndarray) -> np.ndarray:
    """Boolean hidden mask over all stations: round(0.2 · n_observed) of the ``observed`` stations.

    ``observed`` is boolean, per station; the hidden ones are chosen by ``default_rng(month_index)``;
    unobserved ones are never hidden.
    """
    observed = np.asarray(observed, dtype=bool)
    idx = np.flatnonzero(observed)
    rng = np.random.default_rng(seed=int(month_index))
    k = int(round(COLORADO_HIDDEN * idx.size))
    hidden = np.zeros(observed.shape, dtype=bool)
    hidden[idx[rng.permutation(idx.size)[:k]]] = True
    return hidden


def colorado_masked(variable: str = "tmax", n_months: int | None = COLORADO_N_MONTHS):
    """``(data, masked, hidden, months)``: the variable's Dataset, a masked copy, the masks and the eval months.

    ``masked`` is a copy with every eval month's hidden stations set to NaN, ``hidden`` the hidden masks
    by month index (:func:`colorado_mask`) and ``months`` the eval months (``n_months`` of them, all
    with ``None``).
    """
    data = load_colorado()[[variable]]
    months = colorado_months(variable, n_months)
    values = data[variable].values
    masked_values = values.copy()
    hidden = {}
    for i in months:
        hidden[i] = colorado_mask(int(i), np.isfinite(values[i]))
        masked_values[i, hidden[i]] = np.nan
    masked = data.copy()
    masked[variable] = data[variable].dims, masked_values
    return data, masked, hidden, months


def colorado_task(month_index: int, variable: str = "tmax") -> dict:
    """One Colorado month as flat arrays, plus lon/lat and station ids.

    ``x_context`` (n_c, 2) km, ``elev_context`` (n_c,) km, ``y_context`` °C, and the same for the
    hidden (scored) stations.
    """
    ds = load_colorado()
    y = np.asarray(ds[variable].values[month_index], dtype=np.float64)
    observed = np.isfinite(y)
    hidden = colorado_mask(month_index, observed)
    ctx = observed & ~hidden
    lon, lat = ds.lon.values.astype(np.float64), ds.lat.values.astype(np.float64)
    xy = project_km(lon, lat, colorado_centre())
    elev = ds.elevation.values.astype(np.float64) / 1000.0
    return {
        "month_index": int(month_index),
        "time": str(pd.Timestamp(ds.time.values[month_index]).strftime("%Y-%m")),
        "x_context": xy[ctx], "elev_context": elev[ctx], "y_context": y[ctx],
        "x_target": xy[hidden], "elev_target": elev[hidden], "y_target": y[hidden],
        "lonlat_context": np.stack([lon[ctx], lat[ctx]], -1),
        "lonlat_target": np.stack([lon[hidden], lat[hidden]], -1),
        "station_context": ds.station.values[ctx], "station_target": ds.station.values[hidden],
    }


# ------------------------------------------------------------------------------------- projection


@lru_cache(maxsize=8)
def _laea(lon_0: float, lat_0: float):
    return pyproj.Transformer.from_crs(
        "EPSG:4326",
        pyproj.CRS.from_proj4(f"+proj=laea +lat_0={lat_0} +lon_0={lon_0} +datum=WGS84 +units=m"),
        always_xy=True,
    )


def project_km(lon, lat, centre: tuple[float, float] = ERA5_CENTRE) -> np.ndarray:
    """Lambert azimuthal equal-area coordinates in km, centred at ``centre`` = (lon, lat).

    The default centre is 4°W 54°N (ERA5); pass :func:`colorado_centre` for Colorado. Returns
    ``(..., 2)`` with (x, y).
    """
    x, y = _laea(float(centre[0]), float(centre[1])).transform(np.asarray(lon, float), np.asarray(lat, float))
    return np.stack([np.asarray(x) / 1000.0, np.asarray(y) / 1000.0], -1)


def colorado_space_only(data, masked, hidden, months, variable: str = "tmax", **infill_options) -> dict:
    """Infill each eval month of ``masked`` alone (``time_window=0``) with geonp and score its hidden stations.

    Returns the mean RMSE, NLL and 95 % coverage over the months, and the wall and process CPU
    seconds taken (the inputs are those of :func:`colorado_masked`; ``infill_options`` go to
    ``.np.infill``).
    """
    import time

    import geonp  # noqa: F401  (the accessor)

    start, cpu = time.perf_counter(), time.process_time()
    values = data[variable].values
    rows = []
    for i in months:
        pred = masked.isel(time=slice(i, i + 1)).np.infill(variable, time_window=0, **infill_options).isel(time=0)
        h = hidden[i]
        rows.append(scores(values[i, h], pred[f"{variable}_mean"].values[h], pred[f"{variable}_std"].values[h]))
    return {**{k: float(np.mean([r[k] for r in rows])) for k in ("rmse", "nll", "coverage")},
            "wall_s": time.perf_counter() - start, "cpu_s": time.process_time() - cpu}


def show(row: dict) -> None:
    """Print a result row, floats to three decimals."""
    print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, flush=True)


# ----------------------------------------------------------------------------------------- scores

_Z95 = 1.959963984540054


def scores(y, mean, std=None) -> dict:
    """RMSE and MAE of ``mean`` against ``y``; with a Gaussian ``std`` also NLL, coverage and CRPS.

    With ``std``: the mean NLL per point (natural log, data units), 95 % central-interval coverage
    and the mean closed-form CRPS.
    """
    from scipy.special import erf

    y, mean = np.asarray(y, float).ravel(), np.asarray(mean, float).ravel()
    err = y - mean
    out = {"rmse": float(np.sqrt(np.mean(err**2))), "mae": float(np.mean(np.abs(err))), "n": int(y.size)}
    if std is not None:
        s = np.maximum(np.broadcast_to(np.asarray(std, float), mean.shape).ravel(), 1e-12)
        z = err / s
        out["nll"] = float(np.mean(0.5 * np.log(2 * np.pi) + np.log(s) + 0.5 * z**2))
        out["coverage"] = float(np.mean(np.abs(z) <= _Z95))
        pdf = np.exp(-0.5 * z**2) / np.sqrt(2 * np.pi)
        cdf = 0.5 * (1 + erf(z / np.sqrt(2)))
        out["crps"] = float(np.mean(s * (z * (2 * cdf - 1) + 2 * pdf - 1 / np.sqrt(np.pi))))
    return out
