"""Where the time of biased attention goes on CPU: the products against the RBF bias.

Run ``python benchmarks/bias_floor.py`` (about a minute). One torch thread, process CPU-seconds,
median of 5, all in one run. Results: ``benchmarks/results/bias_floor.json`` and the bias-floor
section of ``docs/benchmarks.md``.

At one query-key tile (``nq × nk``, 4 heads × 32 dims, 5 RBF bases per head, as in
``benchmarks/attention.py``) it times

* **products**: ``scaled_dot_product_attention`` with no bias (QKᵀ, softmax, AV): what the
  throughput target counts;
* **bias, eager**: :meth:`RBFBias._rbf_sum`, the per-tile bias geonp computes today (distances included);
* **bias, fused**: the same formula through ``torch.compile`` (one pass over the tile);
* **bias, fused, dynamic shapes**: the same with ``torch.compile(dynamic=True)``, which would avoid
  one compilation per tile shape;
* **bias, shared bases** (eager and fused): a cheaper parameterisation that is *not* the paper's,
  timed to size the option: the same 5 bases shared by the 4 heads, mixed by per-head weights
  (5 exponentials per pair instead of 20);
* **matmul**: a square float32 matmul on the same thread, for the fraction.

It then gives the fraction of the matmul rate that attention can reach when it must also pay the
bias: ``products GFLOP / (products + bias time) / matmul GFLOP/s``, for each bias variant.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, save_json, timed, update_doc_section  # noqa: E402

from geonp.models.bias import MIN_EXPONENT, RBFBias  # noqa: E402

HEADS, DIM, BASES = 4, 32, 5
NQ, NK = 2048, 2048


def _fused(d2: torch.Tensor, rate: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    e = torch.exp(torch.clamp(-d2[:, None, :, :, None] * rate[None, :, None, None, :], min=MIN_EXPONENT))
    return (e * weight[None, :, None, None, :]).sum(-1)


def _shared(d2: torch.Tensor, rate: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Bases shared by the heads: ``rate [F]``, ``weight [h, F]`` → ``[b, h, nq, nk]``."""
    e = torch.exp(torch.clamp(-d2[..., None] * rate, min=MIN_EXPONENT))  # [b, nq, nk, F]
    return torch.einsum("bqkf,hf->bhqk", e, weight)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    bias = RBFBias(HEADS, BASES, (0, 1), lengthscales=(0.1, 10.0))
    every = [[True] * BASES for _ in range(HEADS)]  # no term skipped: one tile where every pair is near
    xq, xk = torch.rand(1, NQ, 2) * 10, torch.rand(1, NK, 2) * 10
    q, k, v = (torch.randn(1, HEADS, n, DIM) for n in (NQ, NK, NK))
    d2 = bias.sqdist(xq, xk)
    rate, weight = bias.rate().detach(), bias.weight.detach()
    fused = torch.compile(_fused, dynamic=False)
    shared_fused = torch.compile(_shared, dynamic=False)
    rate_shared = rate[0]
    with torch.no_grad():
        err = float((fused(d2, rate, weight) - bias._rbf_sum(xq, xk, every)).abs().max())
        dynamic = torch.compile(_fused, dynamic=True)
        dynamic(d2[:, : NQ // 2], rate, weight)  # compile for symbolic shapes first
        b = bias._rbf_sum(xq, xk, every)
        n = 1024
        a, c = torch.randn(n, n), torch.randn(n, n)
        runs = {
            "matmul": timed(lambda: a @ c, repeats=5),
            "products": timed(lambda: F.scaled_dot_product_attention(q, k, v), repeats=5),
            "products with bias": timed(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=b), repeats=5),
            "bias, eager": timed(lambda: bias._rbf_sum(xq, xk, every), repeats=5),
            "bias, fused": timed(lambda: fused(d2, rate, weight), repeats=5),
            "bias, fused, dynamic shapes": timed(lambda: dynamic(d2, rate, weight), repeats=5),
            "bias, shared bases, eager": timed(lambda: _shared(d2, rate_shared, weight), repeats=5),
            "bias, shared bases, fused": timed(lambda: shared_fused(d2, rate_shared, weight), repeats=5),
        }
    matmul = 2 * n**3 / runs["matmul"]["cpu_s"] / 1e9
    flop = 4.0 * NQ * NK * HEADS * DIM
    base = runs["products with bias"]["cpu_s"]
    variants = ("bias, eager", "bias, fused", "bias, fused, dynamic shapes", "bias, shared bases, eager",
                "bias, shared bases, fused")
    fractions = {name: flop / (base + runs[name]["cpu_s"]) / 1e9 / matmul for name in variants}
    fractions["no bias at all"] = flop / runs["products"]["cpu_s"] / 1e9 / matmul
    exp_rate = HEADS * BASES * NQ * NK / runs["bias, fused"]["cpu_s"] / 1e9  # exponentials per ns, fused
    result = {"machine": machine(), "nq": NQ, "nk": NK, "heads": HEADS, "dim": DIM, "bases": BASES,
              "matmul_gflops_1_thread": matmul, "fused_max_abs_diff": err, "exp_per_ns": exp_rate,
              "runs": runs, "fractions": fractions}
    save_json("bias_floor", result)
    m = result["machine"]
    lines = [
        f"Run {m['date']} on {m['cpu']} (1 torch thread, CPU only), torch {m['torch']}. "
        "Regenerate: `python benchmarks/bias_floor.py`.",
        f"One tile of {NQ:,} × {NK:,}, {HEADS} heads × {DIM}, {BASES} RBF bases per head; process CPU-s, median of 5; "
        f"matmul {matmul:.0f} GFLOP/s on this thread; the fused bias computes {exp_rate:.2f} exponentials per ns.",
        "",
        "| part | CPU s | attention rate with it, % of matmul |",
        "|---|---|---|",
        f"| products (SDPA, no bias) | {runs['products']['cpu_s']:.3f} | {100 * fractions['no bias at all']:.0f} % |",
        f"| products with a precomputed bias | {base:.3f} | – |",
    ]
    for name in variants:
        lines.append(f"| {name} | {runs[name]['cpu_s']:.3f} | {100 * fractions[name]:.0f} % |")
    lines.append("")
    lines.append(f"The fused bias equals the eager one to {err:.1e} (absolute). The shared-bases rows are a "
                 "different parameterisation (5 bases shared by the heads, not the paper's 5 per head), timed only "
                 "to size that option; no geonp model uses it.")
    update_doc_section("bias-floor", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
