"""Output tile size and halo of zero-shot prediction, on subsets of the real-data tasks.

    python benchmarks/tiles.py bsa-tnp --tiles none 8,3 6,3 12,3
    python benchmarks/tiles.py benchmarks/candidates/bsa-tnp-2026-11-25-J2.pt --parts forecast demo

Each configuration ``TILE,HALO`` (model units; ``none`` = one window over the whole grid, as
before 2026-11-25) predicts, with no training:

* ``forecast``: every 3rd of the 24 ERA5 forecast inits, leads 1..6 h, 2 past frames;
* ``random`` / ``block``: every 4th of the 28 ERA5 infill frames, ±3 h / ±1 h of context
  (the candidates' subsets, ``candidates.py``; ``--time-window K`` sets ±K h for both);
* ``demo``: ``geonp demo``'s middle frame for seeds 0..3, scored against the truth.

Results go to ``benchmarks/results/tiles-<name>.json``; the reading is in docs/benchmarks.md
("Tiles the size of the pretraining tasks").
"""

from __future__ import annotations

import pyproj  # noqa: F401  isort: skip

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.distributions import Normal

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, save_json  # noqa: E402
from candidates import era5_forecast, era5_infill  # noqa: E402

import geonp  # noqa: E402, F401  registers the .np accessor
from geonp import demo  # noqa: E402
from geonp.metrics import gaussian_scores  # noqa: E402

PARTS = ("forecast", "random", "block", "demo")
KEYS = ("rmse", "nll", "coverage")


def _mean(rows: list[dict]) -> dict:
    return {k: float(np.mean([r[k] for r in rows])) for k in KEYS}


def _windows(config: tuple[float, float] | None) -> dict:
    # "none": a tile larger than any of these grids (the cap of 128 cells) and no halo needed
    return {"tile": 1000.0, "halo": 8.0} if config is None else {"tile": config[0], "halo": config[1]}


def demo_field(model, config) -> dict:
    mid, rows = demo.FRAMES // 2, []
    for seed in range(4):
        draw = demo._draw(seed)
        ds, _ = demo._dataset(draw)
        pred = ds.np.infill(demo.VAR, model=model, **_windows(config)).isel(time=mid)
        gap = ~draw.observed[mid].numpy()
        mean = pred[f"{demo.VAR}_mean"].values.reshape(-1)[gap].astype(np.float64) - demo.BASE_K
        std = pred[f"{demo.VAR}_std"].values.reshape(-1)[gap].astype(np.float64)
        dist = Normal(torch.from_numpy(mean), torch.from_numpy(std))
        rows.append(gaussian_scores(dist, draw.y[mid][torch.from_numpy(gap)]))
    return _mean(rows)


def _config(text: str) -> tuple[float, float] | None:
    if text == "none":
        return None
    tile, halo = (float(v) for v in text.split(","))
    return tile, halo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="a shipped model name or a weights file")
    parser.add_argument("--tiles", nargs="+", default=["none", "8,3", "6,3", "12,3"], metavar="TILE,HALO")
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    parser.add_argument("--name", default=None, help="results file suffix (default: the model's name)")
    parser.add_argument("--time-window", type=int, default=None,
                        help="frames each side of infill context for both masks (default: 3 random, 1 block)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for text in args.tiles:
        config = _config(text)
        for part in args.parts:
            start = time.process_time()
            if part == "forecast":
                res = era5_forecast(args.model, **_windows(config))
            elif part == "demo":
                res = demo_field(args.model, config)
            else:
                tw = args.time_window if args.time_window is not None else (3 if part == "random" else 1)
                res = era5_infill(args.model, part, tw, **_windows(config))
            rows.append({"tiles": text, "part": part, **res, "cpu_s": time.process_time() - start})
            print(rows[-1], flush=True)
    name = args.name or Path(args.model).stem
    save_json(f"tiles-{name}", {"machine": machine(), "model": args.model, "time_window": args.time_window,
                                "rows": rows})


if __name__ == "__main__":
    main()
