"""Side-by-side cost of two commits: one training step and one inference batch, alternating.

Run ``python benchmarks/ab_commits.py REF_A REF_B`` (git refs of this repository). Each ref is checked
out in a temporary ``git worktree``; the same child script times the shipped BSA-TNP architecture
(small preset, proximity features, position moments) in each, alternately A, B, A, B, ... so that
both see the same machine load, with one torch thread. Shapes: the seeds' 2-D GP batch (8 tasks,
512 context, 1024 targets) and a station-sized batch (8 × 170 context, 43 targets, time and two
covariates). Where a ref has ``geonp.keep_freed_memory`` the child calls it first (``train`` does;
inference may). Prints and saves (``benchmarks/results/ab-commits.json``) the median process CPU-s per
step and per batch, and each side's loss, which must agree when a change is meant to be exact.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, save_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHAPES = {"gp2d": (512, 1024, 0, 0), "stations": (170, 43, 1, 2)}  # context, targets, time dims, covariates

CHILD = """
import pyproj, json, sys, time, torch
sys.path.insert(0, sys.argv[1])
import geonp
from geonp.models import Batch, build_model
torch.set_num_threads(1)
if hasattr(geonp, "keep_freed_memory"):  # as train() does, where the ref has it
    geonp.keep_freed_memory()
nc, nt, td, cd = (int(a) for a in sys.argv[2:6])
torch.manual_seed(0)
model = build_model("bsa-tnp", preset="small", space_dims=2, time_dims=td, covariate_dims=cd,
                    proximity_features=True, position_moments=4)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
g = torch.Generator().manual_seed(0)
x = lambda n: torch.rand(8, n, 2 + td, generator=g) * 4 - 2
kw = dict(zc=torch.randn(8, nc, cd, generator=g), zt=torch.randn(8, nt, cd, generator=g)) if cd else {}
b = Batch(xc=x(nc), yc=torch.randn(8, nc, 1, generator=g), xt=x(nt), yt=torch.randn(8, nt, 1, generator=g), **kw)
def step():
    opt.zero_grad(); loss = model.loss(b); loss.backward(); opt.step(); return loss.item()
def infer():
    with torch.no_grad():
        return float(model(b).loc.sum())
out = {"geonp": geonp.__file__}
for name, fn in (("train", step), ("infer", infer)):
    fn()
    times = []
    for _ in range(3):
        c = time.process_time(); value = fn(); times.append(time.process_time() - c)
    out[name] = sorted(times)[1]
    out[name + "_value"] = value
print(json.dumps(out))
"""


def _run(tree: Path, shape: tuple[int, ...]) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tree), *map(str, shape)], capture_output=True,
                          text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ref_a")
    parser.add_argument("ref_b")
    parser.add_argument("--rounds", type=int, default=2, help="alternations per shape")
    args = parser.parse_args()
    result = {"machine": machine(), "refs": {}, "shapes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {}
        for ref in (args.ref_a, args.ref_b):
            tree = Path(tmp) / ref.replace("/", "_")
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), ref], check=True)
            commit = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, check=True).stdout.strip()
            trees[ref] = tree
            result["refs"][ref] = commit
        try:
            for name, shape in SHAPES.items():
                runs = {ref: [] for ref in trees}
                for _ in range(args.rounds):
                    for ref, tree in trees.items():
                        runs[ref].append(_run(tree, shape))
                result["shapes"][name] = {
                    ref: {"train_cpu_s": sorted(r["train"] for r in rs)[len(rs) // 2],
                          "infer_cpu_s": sorted(r["infer"] for r in rs)[len(rs) // 2],
                          "loss": rs[0]["train_value"], "infer_sum": rs[0]["infer_value"]}
                    for ref, rs in runs.items()}
                print(name, json.dumps(result["shapes"][name]), flush=True)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    save_json("ab-commits", result)


if __name__ == "__main__":
    main()
