"""CPU cost of one training step and one inference batch per model, at the seeds' 2-D GP shape.

Batch 8, 512 context, 1024 targets, 2-D space (003 §5.1). Median of ``--repeats`` runs after one
warm-up, process CPU-seconds and wall seconds, one torch thread (``--threads`` to change), with
``geonp.keep_freed_memory()`` on as ``train()`` turns it on (``--no-keep-freed-memory`` to compare).
The papers' reference code on this machine (docs/baselines.md): BSA-TNP (JAX) 18.0 CPU-s per
training step and 10.6 per inference batch; TE-PT-TNP (PyTorch) 21.3 and 8.3.

Run ``python benchmarks/step_cost.py``; results in ``benchmarks/results/step_cost.json`` and the
step-cost section of ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, save_json, timed, update_doc_section  # noqa: E402

from geonp.allocator import keep_freed_memory  # noqa: E402
from geonp.models import Batch, build_model  # noqa: E402

#: (model, preset, architecture overrides); the shipped BSA-TNP adds proximity features and position moments
SHIPPED = dict(proximity_features=True, position_moments=4)
CASES = [("bsa-tnp", "paper", {}), ("bsa-tnp", "small", {}), ("bsa-tnp", "small", SHIPPED),
         ("te-pt-tnp", "paper", {}), ("te-pt-tnp", "small", {}), ("tnp-d", "small", {}), ("tnp-kr", "small", {}),
         ("te-tnp", "small", {})]
REFERENCE = {("bsa-tnp", "paper"): (18.0, 10.6), ("te-pt-tnp", "paper"): (21.3, 8.3)}


def _batch() -> Batch:
    g = torch.Generator().manual_seed(0)
    return Batch(
        xc=torch.rand(8, 512, 2, generator=g) * 4 - 2, yc=torch.randn(8, 512, 1, generator=g),
        xt=torch.rand(8, 1024, 2, generator=g) * 4 - 2, yt=torch.randn(8, 1024, 1, generator=g),
    )


def measure(name: str, preset: str, repeats: int, overrides: dict | None = None) -> dict:
    """Training-step and inference cost of one model."""
    torch.manual_seed(0)
    model = build_model(name, preset=preset, space_dims=2, **(overrides or {}))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = _batch()

    def step():
        opt.zero_grad()
        model.loss(batch).backward()
        opt.step()

    def infer():
        with torch.no_grad():
            model(batch)

    slow = name == "te-tnp"
    return {
        "model": name, "preset": preset + "".join(f", {k}={v}" for k, v in (overrides or {}).items()),
        "parameters": model.num_parameters(),
        "train": timed(step, repeats=1 if slow else repeats, warmup=0 if slow else 1),
        "infer": timed(infer, repeats=1 if slow else repeats, warmup=0 if slow else 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-keep-freed-memory", dest="keep", action="store_false",
                        help="leave glibc's allocator as it is (train() turns keep_freed_memory on)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    kept = keep_freed_memory() if args.keep else False
    info = machine()
    rows = []
    for name, preset, overrides in CASES:
        rows.append(measure(name, preset, args.repeats, overrides))
        print(rows[-1], file=sys.stderr)
    save_json("step_cost", {"machine": info, "threads": args.threads, "keep_freed_memory": bool(kept), "rows": rows})
    lines = [
        f"Run {info['date']} on {info['cpu']} ({info['device']}), torch {info['torch']}, {args.threads} torch "
        f"thread(s); batch 8 × 512 context × 1024 targets, 2-D; median of {args.repeats} (1 for te-tnp); "
        f"keep_freed_memory {'on, as train() has it' if kept else 'off'}. "
        "Regenerate: `python benchmarks/step_cost.py`.",
        "",
        "| model | preset | params | train CPU-s / step | train wall s | infer CPU-s / batch | infer wall s | "
        "reference code (train / infer CPU-s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ref = REFERENCE.get((r["model"], r["preset"]))  # plain presets only
        lines.append(
            f"| {r['model']} | {r['preset']} | {r['parameters']:,} | {r['train']['cpu_s']:.2f} | "
            f"{r['train']['wall_s']:.2f} | {r['infer']['cpu_s']:.2f} | {r['infer']['wall_s']:.2f} | "
            f"{f'{ref[0]} / {ref[1]}' if ref else '–'} |"
        )
    update_doc_section("step-cost", "\n".join(lines))


if __name__ == "__main__":
    main()
