"""Train the shipped weights (geonp/weights) and write their model card.

    python scripts/pretrain.py --model bsa-tnp --budget 1200

Trains the small preset on synthetic space-time GP priors (``geonp.pretrained.pretraining_recipe``)
for ``--budget`` process CPU-seconds, scores it beside the exact GP posterior on held-out infill
and forecast tasks, and saves ``geonp/weights/<model>-small.pt`` (a safe geonp checkpoint with the
recipe and the scores in its metadata) and the model's section of ``geonp/weights/MODEL_CARD.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import platform
import re
from dataclasses import replace
from pathlib import Path

import torch

from geonp.checkpoint import load_model, read_checkpoint, save_model
from geonp.fitting import init_from
from geonp.metrics import gaussian_scores
from geonp.pretrained import (
    OVERRIDES,
    PRETRAINED,
    TERRAIN_OVERRIDES,
    WEIGHTS_DIR,
    pretraining_recipe,
    recipe_metadata,
)
from geonp.synthetic import SpaceTimeGP, gp_posterior
from geonp.train import train

EVAL_SEED = 777
#: held-out task families: infill of random gaps, infill of a hole missing from every frame, forecast
MODES = ("infill", "hole", "forecast")


def evaluate(model, data, n_batches: int = 8) -> dict:
    """Model and oracle scores on held-out infill and forecast tasks (standardised units)."""
    out = {}
    model.eval()
    for mode in MODES:
        holes = {"infill": 0.0, "hole": 1.0}.get(mode, data.hole_probability)
        gen = replace(data, mode="infill" if mode == "hole" else mode, hole_probability=holes)
        g = torch.Generator().manual_seed(EVAL_SEED)
        tot_m, tot_o, n = {}, {}, 0
        for _ in range(n_batches):
            batch, params = gen.sample_with_params(8, g)
            with torch.no_grad():
                pm = model(batch)
            po = gp_posterior(batch, params, noisy_targets=True)
            k = batch.xt.shape[0] * batch.xt.shape[1]
            for tot, dist in ((tot_m, pm), (tot_o, po)):
                for key, v in gaussian_scores(dist, batch.yt.to(dist.loc.dtype)).items():
                    tot[key] = tot.get(key, 0.0) + v * k
            n += k
        out[mode] = {"model": {k: v / n for k, v in tot_m.items()}, "oracle": {k: v / n for k, v in tot_o.items()}}
    return out


def _stages(stages: list[dict]) -> str:
    """One phrase per training stage: steps, CPU-minutes and what changed in it."""
    out = []
    for st in stages:
        what = []
        if "noise_std_range" in st:
            lo, hi = st["noise_std_range"]
            what.append(f"noise up to {hi:g}" if lo == 0.01 else f"noise {lo:g}–{hi:g}")
        if st.get("num_locations", [64, 256]) != [64, 256]:
            lo, hi = st["num_locations"]
            what.append(f"{lo}–{hi} locations, at most {st['max_points']} points")
        if st.get("lattice_probability"):
            what.append(f"{st['lattice_probability']:.0%} of batches on a grid")
        what += [f"{k}={v}" for k, v in st.get("overrides", {}).items()]
        extra = f" ({', '.join(what)})" if what else ""
        out.append(f"{st['steps']} steps / {st['train_cpu_s'] / 60:.0f} min{extra}")
    return "; ".join(out)


def card_section(name: str, meta: dict, digest: str, params: int) -> str:
    """Markdown section of the model card."""
    s = meta["scores"]
    rows = "\n".join(
        f"| {mode} | {s[mode]['model']['nll']:.3f} | {s[mode]['oracle']['nll']:.3f} | {s[mode]['model']['rmse']:.3f} | "
        f"{s[mode]['oracle']['rmse']:.3f} | {s[mode]['model']['coverage']:.3f} |"
        for mode in MODES if mode in s
    )
    g = meta["generator_config"]
    return f"""## {name} (`geonp/weights/{PRETRAINED[name]}`)

- **Architecture**: `build_model("{name}", preset="small", space_dims=2, time_dims=1)` with
  {meta['overrides'] or 'no overrides'}; {params:,} parameters; sha256 `{digest[:16]}…`.
- **Data**: `SpaceTimeGP(mode="mixed")`: per task a separable GP, space kernel from {g['space_kernels']},
  space lengthscale log-uniform on {g['space_lengthscale_range']} spacing units, time lengthscale
  log-uniform on {g['time_lengthscale_range']} steps, noise std log-uniform on {g['noise_std_range']},
  {g['num_locations']} locations (at most {g.get('max_points', 1500)} context + target points per task;
  {g.get('lattice_probability', 0.0):.0%} of batches on a regular grid), half-window {g['window']} frames,
  leads 1–{g['max_lead']}, values
  standardised by the context (the last stage's recipe). Half the batches infill frame 0 from frames −k..k,
  half forecast;
  {g.get('hole_probability', 0.0):.0%} of the infill batches have a hole of {g.get('hole_fraction')} of the locations
  missing from every frame.
- **Budget**: {meta['train_cpu_s'] / 60:.1f} CPU-minutes ({meta['steps']} steps of batch 8, in
  {len(meta['stages'])} stage(s): `--budget` then `--continue`; {_stages(meta['stages'])}) on
  {meta['machine']}, torch {meta['torch']}, {meta['date']}. Seed {meta['train_config']['seed']}.
- **Held-out scores** (64 tasks per mode, standardised units, noisy targets; oracle = exact GP with the
  true hyperparameters; infill = random gaps only, hole = every task with a hole missing from every frame):

| mode | NLL | oracle NLL | RMSE | oracle RMSE | 95 % coverage |
|---|---|---|---|---|---|
{rows}
"""


def main() -> None:
    """Train (or ship) the weights of one model; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(PRETRAINED), required=True)
    parser.add_argument("--budget", type=float, default=1200.0, help="training CPU-seconds")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu",
                        help="torch device to train on (e.g. cuda); the budget stays --budget CPU-seconds of this "
                             "process, and scoring and saving run on the CPU")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--continue", dest="resume", action="store_true",
                        help="start from the shipped weights (a further training stage, lr 5e-4 → 1e-5)")
    parser.add_argument("--from", dest="source", type=Path, default=None, metavar="PATH",
                        help="with --continue: start from these weights (saved with --out) instead of the shipped ones")
    parser.add_argument("--holes", type=float, default=0.5, help="share of infill batches with a persistent hole")
    parser.add_argument("--hole-fraction", type=float, nargs=2, default=(0.03, 0.3), metavar=("MIN", "MAX"),
                        help="range of a hole's share of the task's locations")
    parser.add_argument("--noise-max", type=float, default=0.3,
                        help="largest observation noise std of the prior (relative to the signal)")
    parser.add_argument("--noise-min", type=float, default=0.01,
                        help="smallest observation noise std of the prior (relative to the signal; e.g. 0.002 "
                             "for fields as smooth as reanalysis)")
    parser.add_argument("--locations", type=int, nargs=2, default=(64, 256), metavar=("MIN", "MAX"),
                        help="range of locations per task (larger tasks: dense grids with thousands of context points)")
    parser.add_argument("--lattice", type=float, default=0.0,
                        help="share of batches whose locations are a regular grid (as gridded data are)")
    parser.add_argument("--max-points", type=int, default=1500, help="cap on context + targets per task")
    parser.add_argument("--no-proximity", action="store_true",
                        help="bsa-tnp without the distance-to-data features (for comparison)")
    parser.add_argument("--moments", type=int, default=None,
                        help="bsa-tnp: position_moments channels per head (added zero-initialised to older weights)")
    parser.add_argument("--terrain", action="store_true",
                        help="bsa-tnp: an elevation covariate with an attention bias, on priors that depend on it")
    parser.add_argument("--elevation-lengthscale", type=float, nargs=2, default=None, metavar=("MIN", "MAX"),
                        help="with --terrain: prior range of the field's elevation lengthscale (km)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the weights here instead of geonp/weights (no model card update)")
    parser.add_argument("--ship", type=Path, default=None, metavar="PATH",
                        help="ship weights saved earlier with --out (weights file and model card); no training")
    args = parser.parse_args()
    if args.elevation_lengthscale is not None and not args.terrain:
        parser.error("--elevation-lengthscale needs --terrain (the elevation prior of the terrain tasks)")
    if args.ship is not None:
        model, meta = load_model(args.ship, expected_name=args.model), read_checkpoint(args.ship)["metadata"]
        gen = {k: tuple(v) if isinstance(v, list) else v for k, v in meta["generator_config"].items()}
        meta["scores"] = evaluate(model.eval(), SpaceTimeGP(**gen))  # rescored with this script's task families
        ship(args.model, model, meta)
        return
    torch.set_num_threads(args.threads)
    extra = {"proximity_features": False} if args.no_proximity else {}
    if args.moments is not None:
        extra["position_moments"] = args.moments
    model, data, config = pretraining_recipe(args.model, max_cpu_time=args.budget, seed=args.seed,
                                             hole_probability=args.holes, hole_fraction=tuple(args.hole_fraction),
                                             noise_std_range=(args.noise_min, args.noise_max),
                                             num_locations=tuple(args.locations), max_points=args.max_points,
                                             lattice_probability=args.lattice, terrain=args.terrain, **extra)
    if args.elevation_lengthscale is not None:
        data = replace(data, elevation_lengthscale_range=tuple(args.elevation_lengthscale))
    if args.terrain:
        extra.update(TERRAIN_OVERRIDES)
    stages = []
    if args.resume:
        source = args.source or WEIGHTS_DIR / PRETRAINED[args.model]
        previous = load_model(source, expected_name=args.model)
        init_from(model, previous)  # adds zero-weighted proximity inputs (and zero-output moments) to older weights
        old = read_checkpoint(source)["metadata"]
        stages = old.get("stages") or [
            {"steps": old["steps"], "train_cpu_s": old["train_cpu_s"], "lr": old["train_config"]["lr"]}]
        config = replace(config, lr=5e-4, warmup_steps=0, seed=args.seed + len(stages))
    model.to(args.device)
    result = train(model, data, config, val_data=data)
    result.model.cpu()
    stages = stages + [{"steps": result.steps, "train_cpu_s": result.cpu_seconds, "lr": config.lr,
                        "noise_std_range": list(data.noise_std_range), "hole_probability": data.hole_probability,
                        "hole_fraction": list(data.hole_fraction),
                        "num_locations": list(data.num_locations), "max_points": data.max_points,
                        "lattice_probability": data.lattice_probability,
                        "overrides": {k: v for k, v in extra.items()}}]
    meta = recipe_metadata(data, config)
    overrides = {**OVERRIDES[args.model], **extra}
    meta.update(
        overrides={k: list(v) if isinstance(v, tuple) else v for k, v in overrides.items()}, stages=stages,
        steps=sum(st["steps"] for st in stages), train_cpu_s=sum(st["train_cpu_s"] for st in stages),
        train_wall_s=result.wall_seconds, best_val=result.best_val,
        machine=f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch thread(s)"
                + (f", trained on {args.device}" if args.device != "cpu" else ""),
        torch=str(torch.__version__), date=dt.date.today().isoformat(), units={
            "space": "typical context spacing: sqrt(area / context points per frame)",
            "time": "one time step", "values": "standardised by the context mean and std"},
    )
    meta["scores"] = evaluate(result.model, data)
    print({m: {k: round(v, 3) for k, v in meta["scores"][m]["model"].items()} for m in MODES})
    if args.out is not None:
        save_model(result.model, args.out, metadata=meta)
        print(f"saved {args.out}")
        return
    ship(args.model, result.model, meta)


def ship(name: str, model, meta: dict) -> None:
    """Save ``model`` as the shipped weights of ``name`` and rewrite its model card section."""
    path = save_model(model, WEIGHTS_DIR / PRETRAINED[name], metadata=meta)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    card = WEIGHTS_DIR / "MODEL_CARD.md"
    text = card.read_text() if card.exists() else (
        "# Pretrained geonp weights\n\nRegenerate with `python scripts/pretrain.py --model <name> --budget <s>`.\n"
        "Zero-shot use needs the units below: the xarray layer converts real data to them.\n"
    )
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{card_section(name, meta, digest, model.num_parameters())}{end}"
    if start in text:
        text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    card.write_text(text)
    print(f"saved {path} ({path.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
