"""Probe: elevation as the time coordinate of space-only station infill (Colorado).

    python benchmarks/elevation_time.py      # ~8 CPU-minutes; results/probe-elevation-time.json
    python benchmarks/elevation_time.py --linear-trend --models bsa-tnp te-pt-tnp --scales 150 300
                                             # results/probe-elevation-time-linear.json

On Colorado space only (each month infilled from its own stations, ``time_window=0``) the GP
with elevation inside its kernel scores 1.116 °C, universal kriging with an elevation drift 1.211
and BSA-TNP 1.205: the elevation trend geonp removes matches the drift, but the GP also lets
stations at similar elevations share their departures from it. The shipped weights have no
elevation input, but they do have a time axis, unused when every point is on one frame, and were
pretrained on space-time GPs. This probe puts each point's elevation on that axis (``t + e / s``,
``s`` metres of elevation per model time unit) after the task is built, so the attention's time
bias weighs neighbours by their difference in elevation, then scores the package default
(calibrated on held-out stations of the input, which sees the same tasks) on the 20 eval months
of ``realdata.py colorado``. Not in the package: a probe of whether a pretrained elevation axis
would be worth having. ``--linear-trend`` keeps only the trend's linear elevation term (no quadratic
term, no variation across the region), as a model that carried elevation in its attention might.
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip

import argparse
import contextlib
import sys
from dataclasses import replace
from pathlib import Path
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import realdata_tasks as rt  # noqa: E402
from _common import machine, save_json  # noqa: E402

import geonp  # noqa: E402, F401  (the accessor)
import geonp.data.tasks as tasks  # noqa: E402
import geonp.normalise as normalise  # noqa: E402


def _elevation_time(scale_m: float | None):
    """``make_task`` with each point's time coordinate moved by its elevation / ``scale_m`` (None: unchanged)."""
    original = tasks.make_task

    def make_task(norm, xc, yc, zc, ec, xt, zt, et, yt=None, lc=None, lt=None):
        task = original(norm, xc, yc, zc, ec, xt, zt, et, yt=yt, lc=lc, lt=lt)
        if scale_m is None or ec is None or et is None:
            return task
        xc2, xt2 = task.xc.copy(), task.xt.copy()
        xc2[:, -1] += np.asarray(ec) / scale_m
        xt2[:, -1] += np.asarray(et) / scale_m
        return replace(task, xc=xc2, xt=xt2)

    return mock.patch.object(tasks, "make_task", make_task)


def _linear_trend():
    """The package's trend cut to its linear terms (no quadratic term, no variation across the task)."""
    original = normalise.static_basis

    def static_basis(ec, lc, **kw):
        kw.pop("xyc", None)
        basis = original(ec, lc, **kw)
        return None if basis is None else replace(basis, e_powers=min(basis.e_powers, 1),
                                                  l_powers=min(basis.l_powers, 1))

    return mock.patch.object(normalise, "static_basis", static_basis)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=float, nargs="+", default=[40, 60, 100, 150, 300, 1000], metavar="M")
    parser.add_argument("--models", nargs="+", default=["bsa-tnp"], choices=["bsa-tnp", "te-pt-tnp"])
    parser.add_argument("--linear-trend", action="store_true", help="only the linear elevation term of the trend")
    args = parser.parse_args()
    ds, data, hidden, months = rt.colorado_masked("tmax")
    rows = []
    for model in args.models:
        for scale in [None, *args.scales]:
            with _elevation_time(scale), (_linear_trend() if args.linear_trend else contextlib.nullcontext()):
                row = {"model": model, "linear_trend": args.linear_trend, "metres_per_time_unit": scale,
                       **rt.colorado_space_only(ds, data, hidden, months, model=model)}
            rows.append(row)
            rt.show(row)
    name = "probe-elevation-time" + ("-linear" if args.linear_trend else "")
    save_json(name, {"machine": machine(), "rows": rows})


if __name__ == "__main__":
    main()
