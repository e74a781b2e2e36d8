"""2-D GP benchmark of the seeds (003 §5.1) under one equal CPU budget per model.

Each model (small preset) trains for the same number of process CPU-seconds on the seeds' 2-D GP
prior (SE kernel, ℓ ~ Beta(3, 7), context U[−2, 2]² with noise 0.1, noiseless targets as in 003),
then is scored on fixed test tasks of the seeds' design: in-domain, shifted (+10), scaled ([−4, 4]²,
same counts), multiresolution, and scaled-dense ([−4, 4]², counts ×4), beside the exact GP posterior
with the true kernel and lengthscale (the best any model can do) and the seeds' published numbers.

Scores: mean NLL per target point on noiseless targets (the seeds' protocol) and on noisy targets
(the model's predictive plus the known noise variance 0.1², the oracle's likewise), RMSE, 95 % coverage.

Run ``python benchmarks/gp2d.py`` (defaults: 20 CPU-minutes per model, 300 test tasks, two models
at a time, one torch thread each). Results: ``benchmarks/results/gp2d.json`` and the gp2d section of
``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, machine, save_json, update_doc_section  # noqa: E402

from geonp.checkpoint import save_model  # noqa: E402
from geonp.metrics import gaussian_scores  # noqa: E402
from geonp.models import build_model  # noqa: E402
from geonp.models.bsa_tnp import with_position_moments  # noqa: E402
from geonp.models.windows import predict_in_windows  # noqa: E402
from geonp.synthetic import GP2D, gp_posterior  # noqa: E402
from geonp.train import TrainConfig, train  # noqa: E402

MODELS = ["bsa-tnp", "bsa-tnp+prox", "te-pt-tnp", "tnp-d", "te-tnp"]
#: benchmark rows that are a registered model with overrides
VARIANT_MODELS = {"bsa-tnp+prox": ("bsa-tnp", {"proximity_features": True}),
                  "te-pt-tnp-m64": ("te-pt-tnp", {"num_pseudo": 64})}
LABELS = {"bsa-tnp+prox": "bsa-tnp + proximity features", "te-pt-tnp-m64": "te-pt-tnp, 64 pseudo-tokens"}
VARIANTS = ["in-domain", "shifted", "scaled", "multires", "scaled-dense"]
NOISE = 0.1
EVAL_SEED = 2024
# 003 Table 1/2 (NLL; the paper's scores fit noiseless targets, see docs/baselines.md)
PAPER = {
    "bsa-tnp": {"in-domain": -0.32, "shifted": -0.32, "scaled": -0.28, "multires": -0.23},
    "te-pt-tnp": {"in-domain": 0.32, "shifted": 0.32, "scaled": 1.28, "multires": 0.12},
    "tnp-d": {"in-domain": -0.26, "shifted": 21.32, "scaled": 4.10},
}


def eval_tasks(variant: str, n_tasks: int, batch_size: int = 8):
    """The fixed test batches of one variant (identical for every model and the oracle).

    "shifted" and "scaled-dense" are paired with "in-domain": batch ``i`` of either is drawn from
    the generator state that draws in-domain batch ``i``, so it has the same context count (×4 for
    scaled-dense) and the same lengthscales. Shifted tasks are the in-domain tasks moved by +10;
    scaled-dense tasks are the in-domain tasks' lengthscales on a domain twice as wide at the same
    density (the seeds' "doubled along each axis", 64 × 64 → 128 × 128 pixels), so their score
    differs from in-domain only through the scale of the domain. Scaled-dense draws its 4,096
    targets independently given the context (``joint_targets=False``: the exact marginal of each
    target, which is all a per-target score sees, without a 6,144-point Cholesky per task).
    """
    paired = variant in ("shifted", "scaled-dense")
    gen = GP2D(variant=variant, joint_targets=variant != "scaled-dense")  # yt noisy; params["ft"] noiseless
    g = torch.Generator().manual_seed(EVAL_SEED + VARIANTS.index("in-domain" if paired else variant))
    out = []
    for start in range(0, n_tasks, batch_size):
        n = min(batch_size, n_tasks - start)
        if variant == "scaled-dense":
            twin = torch.Generator()
            twin.set_state(g.get_state())
            out.append(gen.sample_with_params(n, twin))
            GP2D().sample_with_params(n, g)  # advance exactly as the in-domain batches do
        else:
            out.append(gen.sample_with_params(n, g))
    return out


def _score(dists, tasks) -> dict:
    """Average scores over batches, weighted by target count; noiseless and noisy targets."""
    totals: dict[str, float] = {}
    weight = 0
    for dist, (batch, params) in zip(dists, tasks):
        n = batch.xt.shape[0] * batch.xt.shape[1]
        clean = gaussian_scores(dist, params["ft"].to(dist.loc.dtype))
        noisy_dist = torch.distributions.Normal(dist.loc, (dist.scale**2 + NOISE**2).sqrt())
        noisy = gaussian_scores(noisy_dist, batch.yt.to(dist.loc.dtype))
        for k, v in clean.items():
            totals[f"{k}"] = totals.get(k, 0.0) + v * n
        for k, v in noisy.items():
            totals[f"{k}_noisy"] = totals.get(f"{k}_noisy", 0.0) + v * n
        weight += n
    return {k: v / weight for k, v in totals.items()}


def oracle(n_tasks: int, dense_tasks: int) -> dict:
    """Exact-GP scores per variant (noiseless predictive; noise added for noisy targets).

    Cached in ``benchmarks/results/gp2d-oracle.json`` per (tasks, dense tasks): the test tasks are fixed.
    """
    cache = RESULTS / "gp2d-oracle.json"
    if cache.exists():
        cached = json.loads(cache.read_text())
        if cached.get("tasks") == n_tasks and cached.get("dense_tasks") == dense_tasks:
            return cached["oracle"]
    out = {}
    for variant in VARIANTS:
        tasks = eval_tasks(variant, dense_tasks if variant == "scaled-dense" else n_tasks)
        dists = [gp_posterior(b, p, noisy_targets=False) for b, p in tasks]
        out[variant] = _score(dists, tasks)
    save_json("gp2d-oracle", {"tasks": n_tasks, "dense_tasks": dense_tasks, "oracle": out})
    return out


def run_model(name: str, budget: float, n_tasks: int, dense_tasks: int, train_targets: int, seed: int,
              tag: str = "", independent_targets: bool = False, lr: float = 1e-3, init_from: str | None = None,
              position_moments: int = 0) -> dict:
    """Train one model under ``budget`` CPU-seconds and score it on every variant (``tag``: result file suffix).

    ``independent_targets`` draws each training target from its exact conditional given the context
    (``GP2D(joint_targets=False)``): the same law for every (context, target) pair, hence the same
    expected per-target loss, for a third of the sampling cost. Training writes a checkpoint to
    ``benchmarks/out/gp2d-<name><tag>.train`` and resumes from it when rerun. ``init_from`` starts
    from saved weights (a ``.geonp`` file) instead of a fresh model, and ``position_moments`` adds
    that many zero-initialised position-moment channels per head to a BSA-TNP (predictions unchanged
    until training moves them).
    """
    torch.manual_seed(seed)
    base, overrides = VARIANT_MODELS.get(name, (name, {}))
    if init_from:
        from geonp.checkpoint import load_model

        model = load_model(init_from)
    else:
        model = build_model(base, preset="small", space_dims=2, **overrides)
    if position_moments:
        model = with_position_moments(model, position_moments)
    config = TrainConfig(
        max_cpu_time=budget, batch_size=8, lr=lr, lr_final=1e-5, warmup_steps=50,
        val_every=250, val_batches=8, seed=seed, progress=False,
    )
    data = GP2D(num_targets=train_targets, noisy_targets=False, joint_targets=not independent_targets)
    out_dir = RESULTS.parent / "out"
    out_dir.mkdir(exist_ok=True)
    ckpt = out_dir / f"gp2d-{name}{tag}.train"
    result = train(model, data, config, val_data=GP2D(noisy_targets=False), checkpoint=ckpt, resume=ckpt.exists())
    save_model(result.model, out_dir / f"gp2d-{name}{tag}.geonp",
               metadata={"benchmark": "gp2d", "budget_cpu_s": budget})
    model = result.model.eval()
    scores, timing = {}, {}
    for variant in VARIANTS:
        tasks = eval_tasks(variant, dense_tasks if variant == "scaled-dense" else n_tasks)
        c0, w0 = time.process_time(), time.perf_counter()
        with torch.no_grad():
            dists = [model(b) for b, _ in tasks]
        timing[variant] = {"cpu_s_per_batch": (time.process_time() - c0) / len(tasks),
                           "wall_s_per_batch": (time.perf_counter() - w0) / len(tasks)}
        scores[variant] = _score(dists, tasks)
    return {
        "model": name, "parameters": model.num_parameters(), "steps": result.steps,
        "independent_targets": independent_targets, "lr": lr, "machine": machine(),
        "init_from": init_from, "position_moments": position_moments,
        "train_cpu_s": result.cpu_seconds, "train_wall_s": result.wall_seconds, "best_val": result.best_val,
        "scores": scores, "inference": timing,
        "history": [h for h in result.history if h.get("val") is not None],
    }


def rescore(variant: str, models: list[str], n_tasks: int, dense_tasks: int) -> None:
    """Score ``variant`` again for the oracle and every saved model (after a change of test tasks)."""
    from geonp.checkpoint import load_model

    tasks = eval_tasks(variant, dense_tasks if variant == "scaled-dense" else n_tasks)
    cache = RESULTS / "gp2d-oracle.json"
    cached = json.loads(cache.read_text())
    cached["oracle"][variant] = _score([gp_posterior(b, p, noisy_targets=False) for b, p in tasks], tasks)
    if variant == "scaled-dense":
        cached["dense_tasks"] = dense_tasks
    cache.write_text(json.dumps(cached, indent=2))
    for name in models:
        path = RESULTS / f"gp2d-{name}.json"
        res = json.loads(path.read_text())
        model = load_model(RESULTS.parent / "out" / f"gp2d-{name}.geonp").eval()
        with torch.no_grad():
            res["scores"][variant] = _score([model(b) for b, _ in tasks], tasks)
        path.write_text(json.dumps(res, indent=2))


#: the variants scored in windows (``--windows``): the training domain and the doubled one
WINDOW_VARIANTS = ["in-domain", "scaled-dense"]


def score_windows(names: list[str], tile: float, halo: float, n_tasks: int, dense_tasks: int) -> dict:
    """Score saved models (``benchmarks/out/gp2d-<name>.geonp``) whole and in windows of ``tile`` + ``halo``.

    The whole-domain prediction is what the seeds score; in windows, each target is predicted from
    the context within ``halo`` of its tile (:func:`geonp.models.predict_in_windows`), the way geonp
    runs every model on real data. A window of ``tile + 2 * halo`` = 4 units is the training domain.
    """
    from geonp.checkpoint import load_model

    ref = oracle(n_tasks, dense_tasks)
    out = {"machine": machine(), "tile": tile, "halo": halo, "tasks": n_tasks, "dense_tasks": dense_tasks,
           "oracle": {v: ref[v] for v in WINDOW_VARIANTS}, "models": {}}
    tasks = {v: eval_tasks(v, dense_tasks if v == "scaled-dense" else n_tasks) for v in WINDOW_VARIANTS}
    for name in names:
        model = load_model(RESULTS.parent / "out" / f"gp2d-{name}.geonp").eval()
        row = {}
        for variant in WINDOW_VARIANTS:
            for how in ("whole", "windows"):
                c0 = time.process_time()
                with torch.no_grad():
                    dists = [model(b) if how == "whole" else predict_in_windows(model, b, tile=tile, halo=halo)
                             for b, _ in tasks[variant]]
                row[f"{variant} {how}"] = {**_score(dists, tasks[variant]),
                                           "cpu_s_per_batch": (time.process_time() - c0) / len(tasks[variant])}
                print(name, variant, how, f"{row[f'{variant} {how}']['nll']:.3f}", flush=True)
        out["models"][name] = row
    return out


def windows_markdown(data: dict) -> str:
    """The in-windows table of docs/benchmarks.md."""
    info, o = data["machine"], data["oracle"]
    cols = [f"{v} {how}" for v in WINDOW_VARIANTS for how in ("whole", "windows")]
    lines = [
        f"Run {info['date']} on {info['cpu']} ({info['device']}), torch {info['torch']}. Regenerate: "
        f"`python benchmarks/gp2d.py --windows {data['tile']:g} {data['halo']:g} --models <saved weights>`. "
        f"Tiles of {data['tile']:g} units, context within {data['halo']:g} of each tile (windows of "
        f"{data['tile'] + 2 * data['halo']:g} × {data['tile'] + 2 * data['halo']:g}); {data['tasks']} tasks per "
        "variant. NLL noiseless / noisy, RMSE, 95 % coverage (noisy targets); the scaled gap is scaled-dense in "
        "windows minus in-domain whole (the seeds' in-domain score).",
        "",
        "| weights | " + " | ".join(cols) + " | scaled gap |",
        "|---|" + "---|" * len(cols) + "---|",
        "| exact GP (oracle) | " + " | ".join(
            f"{o[c.split()[0]]['nll']:.3f} / {o[c.split()[0]]['nll_noisy']:.3f}" for c in cols)
        + f" | {o['scaled-dense']['nll'] - o['in-domain']['nll']:+.3f} |",
    ]
    for name, row in data["models"].items():
        cells = " | ".join(f"{row[c]['nll']:.3f} / {row[c]['nll_noisy']:.3f}, {row[c]['rmse']:.3f}, "
                           f"{row[c]['coverage_noisy']:.2f}" for c in cols)
        gap = row["scaled-dense windows"]["nll"] - row["in-domain whole"]["nll"]
        gap_noisy = row["scaled-dense windows"]["nll_noisy"] - row["in-domain whole"]["nll_noisy"]
        lines.append(f"| {name} | {cells} | {gap:+.3f} / {gap_noisy:+.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=1200.0, help="training CPU-seconds per model")
    parser.add_argument("--models", nargs="+", default=MODELS)
    parser.add_argument("--tasks", type=int, default=300, help="test tasks per variant")
    parser.add_argument("--dense-tasks", type=int, default=300, help="test tasks of the scaled-dense variant")
    parser.add_argument("--train-targets", type=int, default=256, help="targets per training task")
    parser.add_argument("--independent-targets", action="store_true",
                        help="train on targets drawn independently given the context (cheaper, same per-target law)")
    parser.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (cosine to 1e-5)")
    parser.add_argument("--parallel", type=int, default=2, help="models trained at once (one thread each)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--init-from",
                        help="start --run-model from these saved weights (.geonp) instead of a fresh model")
    parser.add_argument("--position-moments", type=int, default=0,
                        help="add this many zero-initialised position-moment channels per head (BSA-TNP)")
    parser.add_argument("--aggregate", action="store_true", help="only combine existing per-model results")
    parser.add_argument("--oracle-only", action="store_true", help="only compute (and cache) the oracle scores")
    parser.add_argument("--rescore", help="re-evaluate one variant with the saved checkpoints (benchmarks/out)")
    parser.add_argument("--run-model", help="train and score this one model only (results in gp2d-<model><tag>.json)")
    parser.add_argument("--tag", default="", help="suffix of --run-model's result file (e.g. a longer budget)")
    parser.add_argument("--windows", nargs=2, type=float, metavar=("TILE", "HALO"),
                        help="score the saved --models whole and in windows (results in gp2d-windows.json)")
    args = parser.parse_args()
    if args.windows:
        torch.set_num_threads(1)
        data = score_windows(args.models, *args.windows, args.tasks, args.dense_tasks)
        save_json("gp2d-windows", data)
        update_doc_section("gp2d-windows", windows_markdown(data))
        return
    if args.rescore:
        torch.set_num_threads(1)
        rescore(args.rescore, args.models, args.tasks, args.dense_tasks)
        return
    if args.oracle_only:
        torch.set_num_threads(1)
        oracle(args.tasks, args.dense_tasks)
        return
    if args.run_model:
        torch.set_num_threads(1)
        res = run_model(args.run_model, args.budget, args.tasks, args.dense_tasks, args.train_targets, args.seed,
                        args.tag, args.independent_targets, args.lr, args.init_from, args.position_moments)
        save_json(f"gp2d-{args.run_model}{args.tag}", res)
        return
    info = machine()
    procs, results = [], {}
    pending = [] if args.aggregate else list(args.models)
    if args.aggregate:
        for name in args.models:
            path = RESULTS / f"gp2d-{name}.json"
            results[name] = json.loads(path.read_text()) if path.exists() else {"model": name, "error": "not run"}
    while pending or procs:
        while pending and len(procs) < args.parallel:
            name = pending.pop(0)
            cmd = [sys.executable, __file__, "--run-model", name, "--budget", str(args.budget), "--tasks",
                   str(args.tasks), "--dense-tasks", str(args.dense_tasks), "--train-targets",
                   str(args.train_targets), "--seed", str(args.seed)]
            procs.append((name, subprocess.Popen(cmd)))
        time.sleep(5)
        for name, p in list(procs):
            if p.poll() is not None:
                procs.remove((name, p))
                path = RESULTS / f"gp2d-{name}.json"
                results[name] = json.loads(path.read_text()) if p.returncode == 0 and path.exists() else {
                    "model": name, "error": f"exit code {p.returncode}"}
    torch.set_num_threads(1)
    ref = oracle(args.tasks, args.dense_tasks)
    data = {"machine": info, "budget_cpu_s": args.budget, "tasks": args.tasks, "dense_tasks": args.dense_tasks,
            "train_targets": args.train_targets, "oracle": ref, "models": results, "paper": PAPER}
    save_json("gp2d", data)
    update_doc_section("gp2d", markdown(data))


def markdown(data: dict) -> str:
    """The results tables of docs/benchmarks.md."""
    info = data["machine"]
    lines = [
        f"Run {info['date']} on {info['cpu']} ({info['cores']} cores, one torch thread per model, two models "
        f"at a time; {info['device']}), torch {info['torch']}. Regenerate: `python benchmarks/gp2d.py`.",
        f"Every model: small preset, {data['budget_cpu_s'] / 60:.0f} CPU-minutes of training (AdamW, cosine 1e-3 → "
        f"1e-5, clip 0.5, batch 8, {data['train_targets']} noiseless targets per training task), then "
        f"{data['tasks']} fixed test tasks per variant ({data['dense_tasks']} for scaled-dense), identical for all.",
        "",
        "Mean NLL per target point, noiseless targets (the seeds' protocol) / noisy targets; the paper column is "
        "003 Tables 1–2 (GPU, 100K steps).",
        "",
        "| model | params | steps | " + " | ".join(VARIANTS) + " | paper (in / shift / scale / multires) |",
        "|---|---|---|" + "---|" * len(VARIANTS) + "---|",
    ]
    o = data["oracle"]
    lines.append("| exact GP (oracle) | – | – | " + " | ".join(
        f"{o[v]['nll']:.3f} / {o[v]['nll_noisy']:.3f}" for v in VARIANTS) + " | – |")
    for name, r in data["models"].items():
        if "error" in r:
            lines.append(f"| {name} | failed: {r['error']} |")
            continue
        s = r["scores"]
        paper = data["paper"].get(name, {})
        pp = " / ".join(f"{paper[v]:.2f}" if v in paper else "–" for v in VARIANTS[:4])
        lines.append(f"| {LABELS.get(name, name)} | {r['parameters']:,} | {r['steps']} | " + " | ".join(
            f"{s[v]['nll']:.3f} / {s[v]['nll_noisy']:.3f}" for v in VARIANTS) + f" | {pp} |")
    lines += ["", "RMSE (noiseless targets) and 95 % coverage (noisy targets):", "",
              "| model | " + " | ".join(VARIANTS) + " | inference CPU-s / batch of 8 (in-domain) |",
              "|---|" + "---|" * len(VARIANTS) + "---|"]
    lines.append("| exact GP | " + " | ".join(f"{o[v]['rmse']:.3f} / {o[v]['coverage_noisy']:.2f}" for v in VARIANTS)
                 + " | – |")
    for name, r in data["models"].items():
        if "error" in r:
            continue
        s = r["scores"]
        cells = " | ".join(f"{s[v]['rmse']:.3f} / {s[v]['coverage_noisy']:.2f}" for v in VARIANTS)
        lines.append(f"| {LABELS.get(name, name)} | {cells} | {r['inference']['in-domain']['cpu_s_per_batch']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
