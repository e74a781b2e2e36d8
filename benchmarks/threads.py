"""CPU and wall time of torch's OpenMP waiting policies, on an idle host and on one that others load.

``import geonp`` sets ``OMP_WAIT_POLICY=PASSIVE`` (:mod:`geonp.openmp`) before torch loads. Each
workload runs in a fresh process, in three modes: ``spin`` (torch imported before geonp: libgomp's
default, threads spin before they sleep; what geonp did before 2026-12-07), ``passive`` (the
default now) and ``one`` (``OMP_NUM_THREADS=1``). ``--load N`` runs N busy processes (a Python
loop each) beside every workload, as another user of the host would. Workloads: ``forecast``
(ERA5 UK t2m, 6 hours from one initial time after 72 hourly frames, calibrated by default: one
prediction task, so torch's own threads do the work) and ``fit`` (20 training steps on 48 frames).

Run ``python benchmarks/threads.py [--load 0 2] [--repeats 3]`` (results
``benchmarks/results/threads.json``); medians of the repeats, process CPU-s (the workload's
process and its threads) and wall s.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODES = ("spin", "passive", "one")
WORKLOADS = ("forecast", "fit")


def worker(workload: str, mode: str) -> None:
    """One workload in this process; prints ``{"cpu_s", "wall_s"}`` as JSON."""
    if mode == "spin":
        import torch  # noqa: F401  before geonp: libgomp reads OMP_WAIT_POLICY (unset) now
    import pyproj  # noqa: F401  isort: skip
    import time
    import warnings

    import geonp  # noqa: F401

    sys.path.insert(0, str(HERE))
    import realdata_tasks as T

    da = T.load_era5()
    da = da.drop_vars([c for c in da.coords if c not in da.dims]).rename("t2m")
    wall, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if workload == "forecast":
            da.isel(time=slice(0, 72)).to_dataset().np.forecast(hours=6, init_time=da.time.values[65:66]).compute()
        else:
            da.isel(time=slice(0, 48)).to_dataset().np.fit(steps=20, progress=False, seed=0)
    print(json.dumps({"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall}))


def _busy() -> None:
    while True:
        pass


def run(workload: str, mode: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    if mode == "one":
        env["OMP_NUM_THREADS"] = "1"
    out = subprocess.run([sys.executable, __file__, "--worker", workload, mode], env=env, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", nargs=2, metavar=("WORKLOAD", "MODE"), help=argparse.SUPPRESS)
    parser.add_argument("--load", nargs="+", type=int, default=[0, 2], help="busy processes beside each run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=WORKLOADS)
    args = parser.parse_args()
    if args.worker:
        return worker(*args.worker)
    from _common import machine, save_json

    rows = []
    for load in args.load:
        busy = [mp.Process(target=_busy, daemon=True) for _ in range(load)]
        for p in busy:
            p.start()
        try:
            for workload in args.workloads:
                runs = {mode: [] for mode in MODES}
                for _ in range(args.repeats):  # interleaved: a noisy host hits every mode alike
                    for mode in MODES:
                        runs[mode].append(run(workload, mode))
                for mode in MODES:
                    row = {"load": load, "workload": workload, "mode": mode,
                           **{k: round(statistics.median(r[k] for r in runs[mode]), 1) for k in ("cpu_s", "wall_s")},
                           "runs": runs[mode]}
                    rows.append(row)
                    print({k: v for k, v in row.items() if k != "runs"}, flush=True)
        finally:
            for p in busy:
                p.terminate()
    path = save_json("threads", {"machine": machine(), "rows": rows})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
