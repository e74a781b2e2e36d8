"""Attention benchmark: tiled vs dense vs flex_attention, time, peak memory, accuracy, GFLOP/s.

Run ``python benchmarks/attention.py`` (all sizes, ~15 min on 2 cores) or ``--quick``.
Each configuration runs in its own subprocess so its peak memory is its own.
Results: ``benchmarks/results/attention.json`` and the attention section of ``docs/benchmarks.md``.

Setting: BSA-TNP's attention, b=1, 4 heads × 32 dims (the paper's "128 for attention"), RBF bias on
2-D space with 5 bases per head. FLOPs count only QKᵀ and AV: ``4 · nq · nk · h · d``.
"tiled" is the default inference path (points packed into compact tiles, far bias terms skipped);
"tiled-unsorted" is the same kernel on the points in their given order, for comparison.
``--breakdown NQxNK`` splits the tiled forward's CPU time into the bias evaluation and the rest, beside
bare ``scaled_dot_product_attention`` calls over the same tiles (with and without a float mask), one
torch thread; results in ``attention-breakdown.json`` and the attention-breakdown section.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from _common import machine, matmul_gflops, peak_rss_mb, save_json, timed, update_doc_section  # noqa: E402

from geonp.allocator import keep_freed_memory  # noqa: E402
from geonp.models.attention import default_tiles, dense_attention, tiled_attention  # noqa: E402
from geonp.models.bias import RBFBias  # noqa: E402

HEADS, DIM = 4, 32
SIZES = [(1024, 1024), (4096, 4096), (16384, 4096), (65536, 8192), (1_000_000, 10_000)]
# "dense" = dense_attention (the reference); "dense-sdpa" = the whole bias materialised once + one SDPA call
QUICK = [(1024, 1024), (4096, 4096), (16384, 4096)]
BACKWARD_MAX = 16384 * 4096  # fwd+bwd timed up to this many query-key pairs
DENSE_MAX_BYTES = 6e9
UNSORTED_MIN = 16384 * 4096  # from here on, also time the tiles in the points' given order
FLEX_MAX = 65536 * 8192  # flex_attention compiles per shape; beyond this it is not run (time budget)


def _inputs(nq, nk, requires_grad=False):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, HEADS, nq, DIM, generator=g, requires_grad=requires_grad)
    k = torch.randn(1, HEADS, nk, DIM, generator=g, requires_grad=requires_grad)
    v = torch.randn(1, HEADS, nk, DIM, generator=g, requires_grad=requires_grad)
    # points spread like a real task: a 2-D domain with ~1 context point per unit area
    side = nk**0.5
    xq = torch.rand(1, nq, 2, generator=g) * side
    xk = torch.rand(1, nk, 2, generator=g) * side
    bias = RBFBias(HEADS, 5, (0, 1), lengthscales=(0.3, 10.0))
    return q, k, v, xq, xk, bias


def _accuracy(out, q, k, v, xq, xk, bias, n=256):
    """Max relative error of ``out`` on ``n`` query rows against a float64 dense reference."""
    idx = torch.linspace(0, q.shape[2] - 1, min(n, q.shape[2])).long()
    ref = dense_attention(
        q[:, :, idx].double(), k.double(), v.double(), bias.double(), xq[:, idx].double(), xk.double()
    )
    bias.float()
    err = (out[:, :, idx].double() - ref).norm() / ref.norm()
    return float(err)


def run_one(impl: str, nq: int, nk: int, mode: str) -> dict:
    """One measurement (called in a fresh subprocess)."""
    keep_freed_memory()  # opt-in for inference (geonp.allocator); GEONP_KEEP_FREED_MEMORY=0 turns it off
    torch.manual_seed(0)
    q, k, v, xq, xk, bias = _inputs(nq, nk, requires_grad=(mode == "fwd+bwd"))
    flops = 4.0 * nq * nk * HEADS * DIM * (3.0 if mode == "fwd+bwd" else 1.0)  # bwd ≈ 2× the fwd products
    if impl == "tiled":  # inference sorts points into compact tiles and skips far bias terms
        fn = lambda: tiled_attention(q, k, v, bias, xq, xk)  # noqa: E731
    elif impl == "tiled-unsorted":  # the same kernel on points in their given (random) order
        fn = lambda: tiled_attention(q, k, v, bias, xq, xk, reorder=False)  # noqa: E731
    elif impl == "dense":  # the reference: materialised logits, autograd-friendly bias
        fn = lambda: dense_attention(q, k, v, bias, xq, xk)  # noqa: E731
    elif impl == "dense-sdpa":  # the fastest untiled form: whole bias materialised once, one SDPA call

        def fn():
            mask = bias.fast_bias(xq, xk) if not torch.is_grad_enabled() else bias.bias(xq, xk)
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    elif impl == "flex":
        from torch.nn.attention.flex_attention import flex_attention

        a = bias.weight.detach()
        r = bias.rate().detach()

        def score_mod(score, b, h, i, j):
            dx = xq[b, i, 0] - xk[b, j, 0]
            dy = xq[b, i, 1] - xk[b, j, 1]
            d2 = dx * dx + dy * dy
            for f in range(5):
                score = score + a[h, f] * torch.exp(torch.clamp(-r[h, f] * d2, min=-80.0))
            return score

        compiled = torch.compile(flex_attention)
        fn = lambda: compiled(q, k, v, score_mod=score_mod)  # noqa: E731
    else:
        raise ValueError(impl)
    base = peak_rss_mb()
    if mode == "fwd+bwd":
        grad = torch.randn(1, HEADS, nq, DIM)

        def step():
            out = fn()
            torch.autograd.backward(out, grad)
            for t in (q, k, v):
                t.grad = None
            bias.zero_grad()

        body = step
    else:
        captured = {}

        def body():
            with torch.no_grad():
                captured["out"] = fn()

    big = nq * nk >= 1e9
    t = timed(body, repeats=1 if big else 3, warmup=0 if big else 1)
    extra = peak_rss_mb() - base
    result = {"impl": impl, "nq": nq, "nk": nk, "mode": mode, **t, "extra_peak_mb": extra}
    result["gflops"] = flops / t["wall_s"] / 1e9
    if mode == "fwd":  # the last timed output, not another run
        with torch.no_grad():
            result["rel_error"] = _accuracy(captured.pop("out"), q, k, v, xq, xk, bias)
    return result


def breakdown(nq: int, nk: int, repeats: int = 3) -> dict:
    """Process CPU seconds (medians of ``repeats``) of the tiled forward, its bias, and bare SDPA on its tiles."""
    torch.set_num_threads(1)
    keep_freed_memory()
    q, k, v, xq, xk, bias = _inputs(nq, nk)
    spent = [0.0]
    fast_bias = bias.fast_bias

    def counted(a, b):  # the instance attribute shadows the method: every tile's bias is timed
        t = time.process_time()
        out = fast_bias(a, b)
        spent[0] += time.process_time() - t
        return out

    bias.fast_bias = counted
    q_tile, k_tile = default_tiles(1, HEADS, nq, nk)
    mask = torch.randn(1, HEADS, q_tile, k_tile)
    tiles = [(i, j) for i in range(0, nq, q_tile) for j in range(0, nk, k_tile)]

    def sdpa(with_mask: bool) -> None:
        for i, j in tiles:
            qi, kj, vj = q[:, :, i : i + q_tile], k[:, :, j : j + k_tile], v[:, :, j : j + k_tile]
            m = mask[:, :, : qi.shape[2], : kj.shape[2]] if with_mask else None
            torch.nn.functional.scaled_dot_product_attention(qi, kj, vj, attn_mask=m)

    rows = {"total": [], "bias": [], "sdpa_mask": [], "sdpa": []}
    with torch.no_grad():
        tiled_attention(q, k, v, bias, xq, xk)  # warm-up
        for _ in range(repeats):
            spent[0] = 0.0
            t = time.process_time()
            tiled_attention(q, k, v, bias, xq, xk)
            rows["total"].append(time.process_time() - t)
            rows["bias"].append(spent[0])
            for name, flag in (("sdpa_mask", True), ("sdpa", False)):
                t = time.process_time()
                sdpa(flag)
                rows[name].append(time.process_time() - t)
    out = {k: statistics.median(v) for k, v in rows.items()}
    flops = 4.0 * nq * nk * HEADS * DIM
    return {"nq": nq, "nk": nk, "q_tile": q_tile, "k_tile": k_tile, "repeats": repeats, "cpu_s": out,
            "gflops": {k: flops / v / 1e9 for k, v in out.items() if k != "bias"}}


def _breakdown_markdown(info, mm, rows) -> str:
    lines = [f"Run {info['date']} on {info['cpu']} (one torch thread, CPU only), torch {info['torch']}; "
             f"matmul reference {mm:.0f} GFLOP/s in the same run; process CPU seconds, medians of "
             f"{rows[0]['repeats']}. Regenerate: `python benchmarks/attention.py --breakdown "
             + " ".join(f"{r['nq']}x{r['nk']}" for r in rows) + "`.", "",
             "| nq × nk (tiles) | tiled forward | of which bias | rest | bare SDPA, float mask | bare SDPA, no mask |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        c, g = r["cpu_s"], r["gflops"]
        cell = {k: f"{c[k]:.2f} s ({g[k]:.0f} GFLOP/s, {g[k] / mm:.0%})" for k in g}
        lines.append(f"| {r['nq']:,} × {r['nk']:,} ({r['q_tile']} × {r['k_tile']}) | {cell['total']} | "
                     f"{c['bias']:.2f} s ({c['bias'] / c['total']:.0%}) | {c['total'] - c['bias']:.2f} s | "
                     f"{cell['sdpa_mask']} | {cell['sdpa']} |")
    return "\n".join(lines)


def _spawn(impl, nq, nk, mode, timeout):
    cmd = [sys.executable, __file__, "--one", json.dumps([impl, nq, nk, mode])]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"impl": impl, "nq": nq, "nk": nk, "mode": mode, "error": f"timed out after {timeout} s"}
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["?"])[-1][:160]
        return {"impl": impl, "nq": nq, "nk": nk, "mode": mode, "error": tail}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--no-flex", action="store_true", help="skip flex_attention")
    parser.add_argument("--sizes", nargs="+", metavar="NQxNK",
                        help="only these sizes, forward only (e.g. 65536x8192); results in attention-sizes.json and "
                             "the attention-sizes section of docs/benchmarks.md")
    parser.add_argument("--breakdown", nargs="+", metavar="NQxNK",
                        help="split the tiled forward's CPU time into bias and the rest at these sizes")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(*json.loads(args.one))))
        return
    if args.breakdown:
        torch.set_num_threads(1)
        info, mm = machine(), matmul_gflops()
        rows = [breakdown(*(int(n) for n in size.lower().split("x"))) for size in args.breakdown]
        mm = max(mm, matmul_gflops())
        save_json("attention-breakdown", {"machine": info, "matmul_gflops": mm, "rows": rows})
        update_doc_section("attention-breakdown", _breakdown_markdown(info, mm, rows))
        return
    info = machine()
    matmul_before = matmul_gflops()
    rows = []
    if args.sizes:
        for nq, nk in (tuple(int(n) for n in size.lower().split("x")) for size in args.sizes):
            for impl in ("tiled", "tiled-unsorted"):
                rows.append(_spawn(impl, nq, nk, "fwd", timeout=3600))
                print(json.dumps(rows[-1]), file=sys.stderr)
        matmul_after = matmul_gflops()
        for r in rows:
            if "gflops" in r:
                r["fraction_of_matmul"] = r["gflops"] / max(matmul_before, matmul_after)
        save_json("attention-sizes", {"machine": info, "matmul_gflops": [matmul_before, matmul_after], "rows": rows})
        command = "python benchmarks/attention.py --sizes " + " ".join(args.sizes)
        update_doc_section("attention-sizes", _markdown(info, matmul_before, matmul_after, rows, command))
        return
    for nq, nk in QUICK if args.quick else SIZES:
        dense_fits = 3 * 4 * HEADS * nq * nk < DENSE_MAX_BYTES
        flex = not args.no_flex and nq * nk <= FLEX_MAX
        impls = ["tiled"] + (["tiled-unsorted"] if nq * nk >= UNSORTED_MIN else [])
        impls += (["dense", "dense-sdpa"] if dense_fits else []) + (["flex"] if flex else [])
        for impl in impls:
            rows.append(_spawn(impl, nq, nk, "fwd", timeout=1800))
            print(json.dumps(rows[-1]), file=sys.stderr)
        if nq * nk <= BACKWARD_MAX:
            for impl in ["tiled"] + (["dense", "dense-sdpa"] if dense_fits else []):
                rows.append(_spawn(impl, nq, nk, "fwd+bwd", timeout=1800))
                print(json.dumps(rows[-1]), file=sys.stderr)
    matmul_after = matmul_gflops()
    matmul = max(matmul_before, matmul_after)
    for r in rows:
        if "gflops" in r:
            r["fraction_of_matmul"] = r["gflops"] / matmul
    save_json("attention", {"machine": info, "matmul_gflops": [matmul_before, matmul_after], "rows": rows})
    update_doc_section("attention", _markdown(info, matmul_before, matmul_after, rows))


def _markdown(info, mm0, mm1, rows, command="python benchmarks/attention.py") -> str:
    lines = [
        f"Run {info['date']} on {info['cpu']} ({info['cores']} cores, {info['torch_threads']} torch threads, "
        f"{info['device']}), torch {info['torch']}. Regenerate: `{command}`.",
        f"Matmul reference (4096³ float32) in the same run: {mm0:.0f} GFLOP/s before, {mm1:.0f} after; "
        "fractions use the larger. b=1, 4 heads × 32, RBF space bias (5 bases/head).",
        "",
        "| nq × nk | impl | mode | wall s | CPU s | extra peak MB | GFLOP/s (QKᵀ+AV) | % of matmul | rel. error |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        size = f"{r['nq']:,} × {r['nk']:,}"
        if "error" in r:
            lines.append(f"| {size} | {r['impl']} | {r['mode']} | – | – | – | – | – | failed: {r['error']} |")
            continue
        err = f"{r['rel_error']:.1e}" if "rel_error" in r else ""
        lines.append(
            f"| {size} | {r['impl']} | {r['mode']} | {r['wall_s']:.3f} | {r['cpu_s']:.2f} | "
            f"{r['extra_peak_mb']:.0f} | {r['gflops']:.1f} | {100 * r.get('fraction_of_matmul', 0):.0f} % | {err} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
