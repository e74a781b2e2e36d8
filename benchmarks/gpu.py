"""GPU benchmark: attention kernels, training and inference steps, and a whole ERA5-sized month on CUDA.

Run ``python benchmarks/gpu.py`` on a machine with a CUDA GPU (``--out DIR`` for the JSON, default
``benchmarks/results``). Every figure is a median of repeated runs timed with ``torch.cuda.synchronize``
around them; memory is the peak of ``torch.cuda.max_memory_allocated`` above what the inputs hold.
The matmul reference is float32 with TF32 off (the dtype and precision the kernels run in), measured
in the same run. Results: ``gpu.json`` and the "GPU" section of ``docs/benchmarks.md`` (written by hand
from the JSON: the development machine has no GPU).

Sections (each guarded, so one failure leaves the rest): ``matmul``; ``attention`` (forward, BSA-TNP's
setting of ``benchmarks/attention.py``: 4 heads × 32 dims, RBF bias with 5 bases per head; "tiled" is
geonp's default, "tiled-big" the same kernel with GPU-sized tiles, "dense-sdpa" the bias materialised
and one SDPA call where it fits, "flex" geonp's ``backend="flex"``); ``backward`` (forward + backward);
``steps`` (a training step and an inference batch at the seeds' 2-D GP shape: 8 tasks, 512 context,
1,024 targets); ``month`` (``ds.np.infill(device="cuda")`` on a synthetic 744 × 33 × 49 grid with 90 % of
the cells hidden: the issue's ERA5 UK month). With ``GEONP_FUSED_BIAS=1`` the whole-tile bias is the
compiled one-pass form (an experiment, see ``geonp.models.whole_tile.fused_bias_kernel``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import pyproj  # noqa: F401  isort: skip  (before anything loads eccodes)
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, machine  # noqa: E402

from geonp.models import build_model  # noqa: E402
from geonp.models.attention import attention, dense_attention, tiled_attention  # noqa: E402
from geonp.models.bias import RBFBias  # noqa: E402

CUDA = torch.device("cuda")
HEADS, DIM = 4, 32
SIZES = [(4096, 4096), (16384, 4096), (65536, 8192), (1_000_000, 10_000)]
DENSE_MAX_BYTES = 20e9  # the materialised bias (and logits) of dense-sdpa
FLEX_SIZES = {(16384, 4096), (1_000_000, 10_000)}  # flex_attention compiles once per shape (~12 s)


def gpu_timed(fn, repeats: int = 5, warmup: int = 1) -> dict:
    """Median wall seconds of ``fn()`` with the GPU synchronised around each run."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    wall = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        wall.append(time.perf_counter() - t)
    return {"wall_s": statistics.median(wall), "repeats": repeats}


def matmul_tflops(n: int = 8192) -> float:
    torch.backends.cuda.matmul.allow_tf32 = False
    a, b = torch.randn(n, n, device=CUDA), torch.randn(n, n, device=CUDA)
    return 2 * n**3 / gpu_timed(lambda: a @ b, repeats=10, warmup=3)["wall_s"] / 1e12


def _inputs(nq: int, nk: int, requires_grad: bool = False):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, HEADS, n, DIM, generator=g) for n in (nq, nk, nk))
    side = nk**0.5  # ~1 context point per unit area, as in benchmarks/attention.py
    xq, xk = torch.rand(1, nq, 2, generator=g) * side, torch.rand(1, nk, 2, generator=g) * side
    bias = RBFBias(HEADS, 5, (0, 1), lengthscales=(0.3, 10.0)).to(CUDA)
    q, k, v = (t.to(CUDA).requires_grad_(requires_grad) for t in (q, k, v))
    return q, k, v, xq.to(CUDA), xk.to(CUDA), bias


def _rel_error(out, q, k, v, xq, xk, bias, n: int = 256) -> float:
    idx = torch.linspace(0, q.shape[2] - 1, min(n, q.shape[2]), device=CUDA).long()
    ref = dense_attention(q[:, :, idx].double(), k.double(), v.double(), bias.double(), xq[:, idx].double(),
                          xk.double())
    bias.float()
    return float((out[:, :, idx].double() - ref).norm() / ref.norm())


def attention_rows(sizes, flex: bool) -> list[dict]:
    rows = []
    for nq, nk in sizes:
        rows += _attention_size(nq, nk, flex)
        torch.cuda.empty_cache()
    return rows


def _attention_size(nq: int, nk: int, flex: bool) -> list[dict]:
    """Every implementation at one size (the inputs are freed on return)."""
    q, k, v, xq, xk, bias = _inputs(nq, nk)
    impls = {
        "tiled": lambda: tiled_attention(q, k, v, bias, xq, xk),
        "tiled-big": lambda: tiled_attention(q, k, v, bias, xq, xk, q_tile=min(nq, 8192), k_tile=min(nk, 4096)),
    }
    if 3 * nq * nk * HEADS * 4 <= DENSE_MAX_BYTES:
        impls["dense-sdpa"] = lambda: torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=bias.fast_bias(xq, xk))
    if flex and (nq, nk) in FLEX_SIZES:
        impls["flex"] = lambda: attention(q, k, v, bias, xq, xk, backend="flex")
    rows = []
    for name, fn in impls.items():
        row = {"impl": name, "nq": nq, "nk": nk}
        try:
            with torch.no_grad():
                torch.cuda.synchronize()
                base = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
                t0 = time.perf_counter()
                out = fn()  # the first call (compiles flex)
                torch.cuda.synchronize()
                row["first_call_s"] = time.perf_counter() - t0
                row.update(gpu_timed(fn, repeats=3 if nq * nk >= 1e9 else 10, warmup=0))
                row["extra_peak_mb"] = (torch.cuda.max_memory_allocated() - base) / 2**20
                row["tflops"] = 4.0 * nq * nk * HEADS * DIM / row["wall_s"] / 1e12
                row["rel_error"] = _rel_error(out, q, k, v, xq, xk, bias)
                out = None
        except Exception as exc:  # noqa: BLE001  record and go on
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        torch.cuda.empty_cache()
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def backward_rows(nq: int = 16384, nk: int = 4096) -> list[dict]:
    rows = []
    q, k, v, xq, xk, bias = _inputs(nq, nk, requires_grad=True)
    grad = torch.randn(1, HEADS, nq, DIM, device=CUDA)
    impls = {"tiled": lambda: tiled_attention(q, k, v, bias, xq, xk),
             "dense": lambda: dense_attention(q, k, v, bias, xq, xk)}
    for name, fn in impls.items():
        def step(fn=fn):
            torch.autograd.backward(fn(), grad)
            for t in (q, k, v):
                t.grad = None
            bias.zero_grad()
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        row = {"impl": name, "nq": nq, "nk": nk, **gpu_timed(step, repeats=10, warmup=2)}
        row["extra_peak_mb"] = (torch.cuda.max_memory_allocated() - base) / 2**20
        row["tflops"] = 3 * 4.0 * nq * nk * HEADS * DIM / row["wall_s"] / 1e12
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def step_rows() -> list[dict]:
    from geonp.synthetic import GP2D

    batch = GP2D(num_context=(512, 512), num_targets=1024, joint_targets=False).sample(
        8, torch.Generator().manual_seed(0)).to(CUDA, torch.float32)
    rows = []
    for name, preset in (("bsa-tnp", "small"), ("bsa-tnp", "paper"), ("te-pt-tnp", "small"), ("tnp-d", "small")):
        torch.manual_seed(0)
        model = build_model(name, preset=preset, space_dims=2).to(CUDA)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def train_step(model=model, opt=opt):
            opt.zero_grad(set_to_none=True)
            loss = -model(batch).log_prob(batch.yt).mean()
            loss.backward()
            opt.step()

        def infer(model=model):
            with torch.no_grad():
                model(batch)

        row = {"model": name, "preset": preset, "parameters": model.num_parameters(),
               "train_step_s": gpu_timed(train_step, repeats=10, warmup=3)["wall_s"],
               "inference_batch_s": gpu_timed(infer, repeats=10, warmup=2)["wall_s"]}
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def month_row() -> dict:
    import numpy as np
    import pandas as pd
    import xarray as xr

    import geonp  # noqa: F401  registers ds.np

    rng = np.random.default_rng(0)
    times = pd.date_range("2019-03-01", periods=744, freq="h")
    lat, lon = np.linspace(49.5, 57.5, 33), np.linspace(-8.0, 4.0, 49)
    yy, xx = np.meshgrid(lat, lon, indexing="ij")
    hours = np.arange(744)[:, None, None]
    v = 280 + 3 * np.sin(yy / 3) + 2 * np.cos(xx / 4) + 4 * np.sin(2 * np.pi * hours / 24 + xx / 10)
    v = v + 0.3 * rng.standard_normal(v.shape)
    v[rng.random(v.shape) < 0.9] = np.nan
    ds = xr.Dataset({"t2m": (("time", "latitude", "longitude"), v.astype("float32"))},
                    coords={"time": times, "latitude": lat, "longitude": lon})
    out = {}
    for model in ("bsa-tnp", "te-pt-tnp"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()  # this model's peak only, not an earlier section's
        t0 = time.perf_counter()
        res = ds.np.infill("t2m", model=model, device="cuda")
        res = res.compute()
        out[model] = {"wall_s": time.perf_counter() - t0, "filled_nan": int(res.t2m_filled.isnull().sum()),
                      "gpu_peak_mb": torch.cuda.max_memory_allocated() / 2**20}
        print(json.dumps({model: out[model]}), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(RESULTS), help="folder for gpu.json")
    parser.add_argument("--sections", nargs="+", default=["matmul", "attention", "backward", "steps", "month"])
    parser.add_argument("--no-flex", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("benchmarks/gpu.py needs a CUDA GPU; torch sees none.")
    data = {"machine": machine(), "capability": list(torch.cuda.get_device_capability(0)),
            "fused_bias": os.environ.get("GEONP_FUSED_BIAS", "0") == "1"}  # geonp.models.whole_tile.fused_bias_kernel
    path = Path(args.out) / "gpu.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    jobs = {"matmul": lambda: {"before": matmul_tflops()}, "attention": lambda: attention_rows(SIZES, not args.no_flex),
            "backward": backward_rows, "steps": step_rows, "month": month_row}
    for name in args.sections:
        t0 = time.perf_counter()
        try:
            data[name] = jobs[name]()
        except Exception:  # noqa: BLE001  keep the other sections
            data[name] = {"error": traceback.format_exc()[-1500:]}
            print(data[name]["error"], file=sys.stderr, flush=True)
        data.setdefault("section_s", {})[name] = time.perf_counter() - t0
        path.write_text(json.dumps(data, indent=2))
    if "matmul" in data and "before" in data["matmul"]:
        data["matmul"]["after"] = matmul_tflops()
        path.write_text(json.dumps(data, indent=2))
    print(f"wrote {path}", flush=True)


if __name__ == "__main__":
    main()
