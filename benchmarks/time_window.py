"""How many frames each side an infill reads: the model's ±3, ±1 and the default's near window.

ERA5 UK t2m (March 2019) at coarser steps and resolutions, with 30 % of the cells hidden at random in
every frame (``--hidden`` to change), infilled with the shipped BSA-TNP at ``time_window=3``,
``time_window=1`` and by default (since 2026-12-07: for frame-change ratios in (0.8, 2], each frame
from one frame each side where at least ``NEAR_FRAMES`` frames of that window hold observations
within ``NEAR_UNITS`` of every target, else the model's ±3 frame groups,
:func:`geonp.reach.near_entries`). The ``outage`` case is the thirtieth new-user test's week,
rebuilt: 72 hourly frames at 0.25° with 10 % random gaps, a disc of radius 4 cells drifting east one
cell an hour, and the western half of the domain missing for 6 hours; it is scored on the outage
(beside linear interpolation in time) and on the other gaps. ``outage-10h`` holds the west out for 10
hours, ``late-10h`` for the last 10 hours of the record (a late region: nothing after it).

Run ``python benchmarks/time_window.py [--cases 6h-1deg 2h-025 ...] [--name NAME]`` (results
``benchmarks/results/time-window.json``, or ``NAME.json``); RMSE K / 95 % coverage / CPU-s per case and setting.
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip  (before anything loads eccodes)
import argparse
import contextlib
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata_tasks as T  # noqa: E402
from _common import machine, save_json  # noqa: E402

import geonp  # noqa: E402  registers ds.np
import geonp.pretrained  # noqa: E402

#: name: (hours per frame, cells per coarse cell, frames)
CASES = {
    "6h-1deg": (6, 4, 120),
    "3h-05": (3, 2, 120),
    "2h-025": (2, 1, 120),
    "1h-025-50": (1, 1, 72),
    "outage": (1, 1, 72),
    "outage-10h": (1, 1, 72),
    "late-10h": (1, 1, 72),
}
#: the west half missing in these frames (outage cases)
OUTAGES = {"outage": slice(30, 36), "outage-10h": slice(30, 40), "late-10h": slice(62, 72)}
SETTINGS = {"default": {}, "tw3": {"time_window": 3}, "tw1": {"time_window": 1}, "no-wide": {},
            "te": {"model": "te-pt-tnp"}, "te-wide": {"model": "te-pt-tnp"}, "side-8": {},
            "te-side-8": {"model": "te-pt-tnp"}}
#: settings run with geonp.pretrained's WIDE_WINDOWS and SIDE_WINDOWS replaced: ``no-wide`` is the default
#: before sessions 47-48 (neither), the others candidates measured against the default (``side-8``: the floors'
#: first reach; the default has been 12 since session 48)
WINDOWS = {"no-wide": ({}, {}), "te-wide": ({"bsa-tnp": 8, "te-pt-tnp": 8}, None),
           "side-8": (None, {"bsa-tnp": 8, "te-pt-tnp": 8}), "te-side-8": (None, {"bsa-tnp": 8, "te-pt-tnp": 8})}


@contextlib.contextmanager
def pretrained_windows(wide: dict | None, side: dict | None):
    """``geonp.pretrained.WIDE_WINDOWS`` and ``SIDE_WINDOWS`` replaced (``None``: kept) inside the block."""
    tables = [(geonp.pretrained.WIDE_WINDOWS, wide), (geonp.pretrained.SIDE_WINDOWS, side)]
    saved = [dict(table) for table, _ in tables]
    try:
        for table, new in tables:
            if new is not None:
                table.clear()
                table.update(new)
        yield
    finally:
        for (table, _), old in zip(tables, saved):
            table.clear()
            table.update(old)


def field(step: int, coarse: int, frames: int):
    """ERA5 t2m every ``step`` hours, averaged over ``coarse`` × ``coarse`` cells, its first ``frames`` frames."""
    da = T.load_era5().isel(time=slice(0, step * frames, step))
    if coarse > 1:
        da = da.coarsen(latitude=coarse, longitude=coarse, boundary="trim").mean()
    return da.drop_vars([c for c in da.coords if c not in da.dims])


def masks(case: str, shape: tuple, hidden: float, seed: int = 0) -> dict[str, np.ndarray]:
    """The hidden cells of ``case`` by kind (``"gaps"``; the outage case also ``"outage"``)."""
    rng = np.random.default_rng(seed)
    if case == "1h-025-50":
        return {"gaps": rng.random(shape) < 0.5}
    if case not in OUTAGES:
        return {"gaps": rng.random(shape) < hidden}
    t, ny, nx = shape
    yy, xx = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
    blob = np.stack([np.hypot(yy - ny / 2, xx - (k % nx)) <= 4 for k in range(t)])
    outage = np.zeros(shape, bool)
    outage[OUTAGES[case], :, : nx // 2] = True
    return {"gaps": (rng.random(shape) < 0.1) | blob, "outage": outage}


def linear_in_time(values: np.ndarray, hide: np.ndarray) -> np.ndarray:
    """Each cell's hidden values linearly interpolated from its own observed frames (nearest at the ends)."""
    out = values.copy()
    t = np.arange(values.shape[0])
    flat, miss = out.reshape(len(t), -1), hide.reshape(len(t), -1)
    for p in range(flat.shape[1]):
        ok = ~miss[:, p]
        if ok.any() and (~ok).any():
            flat[~ok, p] = np.interp(t[~ok], t[ok], flat[ok, p])
    return out


def run_case(case: str, hidden: float, settings: list[str]) -> list[dict]:
    step, coarse, frames = CASES[case]
    truth = field(step, coarse, frames)
    kinds = masks(case, truth.shape, hidden)
    hide = np.logical_or.reduce(list(kinds.values()))
    gappy = truth.where(~hide).rename("t2m")
    rows = []
    for name in settings:
        w, c = time.perf_counter(), time.process_time()
        with pretrained_windows(*WINDOWS.get(name, (None, None))), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = gappy.np.infill(**SETTINGS[name]).compute()
        cpu, wall = time.process_time() - c, time.perf_counter() - w
        mean, std = out.t2m_mean.values, out.t2m_std.values
        row = {"case": case, "setting": name, "cpu_s": round(cpu, 1), "wall_s": round(wall, 1),
               "settings": out.attrs.get("geonp_settings", "")}
        for kind, sel in kinds.items():
            sel = sel & (~kinds["outage"] if kind == "gaps" and "outage" in kinds else True)
            done = sel & np.isfinite(mean)  # a late region's last hours have no context: NaN, counted apart
            s = T.scores(truth.values[done], mean[done], std[done])
            row[kind] = {**{k: round(s[k], 3) for k in ("rmse", "nll", "coverage")},
                         "predicted": round(float(done.sum() / sel.sum()), 3)}
        rows.append(row)
        T.show({k: v for k, v in row.items() if k != "settings"})
    if "outage" in kinds:
        lin = linear_in_time(truth.values, hide)
        s = T.scores(truth.values[kinds["outage"]], lin[kinds["outage"]])
        rows.append({"case": case, "setting": "linear in time", "outage": {"rmse": round(s["rmse"], 3)}})
        T.show(rows[-1])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--hidden", type=float, default=0.3)
    parser.add_argument("--name", default="time-window", help="results file benchmarks/results/NAME.json")
    args = parser.parse_args()
    rows = []
    for case in args.cases:
        rows += run_case(case, args.hidden, args.settings)
    path = save_json(args.name, {"machine": machine(), "hidden": args.hidden, "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
