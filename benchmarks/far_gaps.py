"""Coarser space units for targets deep inside a hole (``geonp.data.coarsen_far``), zero-shot BSA-TNP.

    python benchmarks/far_gaps.py                   # reach G = off, 1.5, 2, 2.5 (about 4 CPU-minutes)
    python benchmarks/far_gaps.py --reach 2 --cap 5 --parts block --name far-gaps-cap5

A task (one frame of one tile's window) whose farthest target lies more than ``G`` model units
from the context of its own frame is predicted with its space coordinates divided by
``min(cap, gap / G)``. Scored on the candidates' subsets (``candidates.py``): every 4th ERA5 block
frame (±1 h) and random frame (±3 h), and ``geonp demo``'s middle frame for seeds 0..3
(``tiles.py``). Results: ``benchmarks/results/<name>.json``; the reading is in
docs/benchmarks.md ("Coarser units deep inside holes").
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip

import argparse
import functools
import sys
import time
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, save_json  # noqa: E402
from candidates import era5_infill  # noqa: E402
from tiles import demo_field  # noqa: E402

import geonp.inference  # noqa: E402
from geonp.data.tasks import coarsen_far  # noqa: E402


def _score(part: str) -> dict:
    if part == "demo":
        return demo_field("bsa-tnp", (8.0, 3.0))
    return era5_infill("bsa-tnp", part, 1 if part == "block" else 3, calibrate=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reach", nargs="+", default=["off", "1.5", "2", "2.5"],
                        help="G values in model units ('off': every task as it is)")
    parser.add_argument("--cap", type=float, default=3.0, help="the most the units are coarsened")
    parser.add_argument("--parts", nargs="+", default=["block", "random", "demo"],
                        choices=["block", "random", "demo"])
    parser.add_argument("--name", default="far-gaps", help="results file name")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for reach in args.reach:
        coarsen = (lambda task, **_: task) if reach == "off" else functools.partial(
            coarsen_far, reach=float(reach), max_factor=args.cap)
        with mock.patch.object(geonp.inference, "coarsen_far", coarsen):
            for part in args.parts:
                c0 = time.process_time()
                row = {"reach": reach, "cap": args.cap, "part": part, **_score(part),
                       "cpu_s": time.process_time() - c0}
                rows.append(row)
                print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    save_json(args.name, {"machine": machine(), "rows": rows})


if __name__ == "__main__":
    main()
