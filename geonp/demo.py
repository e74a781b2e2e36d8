"""``geonp demo``: infill a synthetic gridded field with realistic gaps using a shipped model.

A 48 × 48 grid over 7 hourly frames is drawn from a known space-time GP (Matérn-5/2 in space,
lengthscale 6 cells; squared-exponential in time, 4 steps; noise 0.05). Each frame keeps 15 % of
its cells at random and the middle frame also loses a 12 × 12 block. The shipped model infills the
middle frame from every observation of the 7 frames, with no training, and is scored against the
truth beside the exact GP posterior with the true kernel (the best any method can do) and the
mean of the observations.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch

from .metrics import gaussian_scores
from .models import Batch
from .pretrained import load_pretrained
from .synthetic.kernels import correlation

__all__ = ["DemoResult", "run_demo"]

SIDE, FRAMES, BLOCK = 48, 7, 12
SPACE_LS, TIME_LS, NOISE, KEEP = 6.0, 4.0, 0.05, 0.15


@dataclass(frozen=True)
class DemoResult:
    """Scores of the demo (values in the field's units)."""

    model: str
    num_context: int
    num_targets: int
    scores: dict[str, dict[str, float]]  # method -> nll, rmse, mae, coverage, crps
    seconds: float

    def table(self) -> str:
        """A plain-text table of the scores."""
        lines = [f"{'method':<28}{'RMSE':>8}{'NLL':>9}{'95% cov':>9}{'CRPS':>8}"]
        for name, s in self.scores.items():
            nll = f"{s['nll']:9.3f}" if math.isfinite(s.get("nll", math.nan)) else f"{'–':>9}"
            cov = f"{s['coverage']:9.3f}" if math.isfinite(s.get("coverage", math.nan)) else f"{'–':>9}"
            crps = f"{s['crps']:8.3f}" if math.isfinite(s.get("crps", math.nan)) else f"{'–':>8}"
            lines.append(f"{name:<28}{s['rmse']:8.3f}{nll}{cov}{crps}")
        return "\n".join(lines)


def _field(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Grid coordinates ``[SIDE², 2]`` and a noiseless field ``[FRAMES, SIDE²]`` (float64)."""
    ax = torch.arange(SIDE, dtype=torch.float64)
    grid = torch.stack(torch.meshgrid(ax, ax, indexing="ij"), -1).reshape(-1, 2)
    ks = correlation("matern-2.5", torch.cdist(grid, grid), SPACE_LS) + 1e-8 * torch.eye(SIDE * SIDE, dtype=torch.float64)
    t = torch.arange(FRAMES, dtype=torch.float64)[:, None]
    kt = correlation("se", torch.cdist(t, t), TIME_LS) + 1e-8 * torch.eye(FRAMES, dtype=torch.float64)
    e = torch.randn(SIDE * SIDE, FRAMES, generator=g, dtype=torch.float64)
    f = torch.linalg.cholesky(ks) @ e @ torch.linalg.cholesky(kt).T  # [cells, frames]
    return grid, f.T.contiguous()


def _exact_gp(xc, yc, xt) -> torch.distributions.Normal:
    """Posterior predictive of noisy observations with the true kernel (float64)."""

    def k(a, b):
        return correlation("matern-2.5", torch.cdist(a[:, :2], b[:, :2]), SPACE_LS) * correlation(
            "se", torch.cdist(a[:, 2:], b[:, 2:]), TIME_LS
        )

    chol = torch.linalg.cholesky(k(xc, xc) + NOISE**2 * torch.eye(len(xc), dtype=torch.float64))
    kct = k(xc, xt)
    alpha = torch.cholesky_solve(yc[:, None], chol)
    v = torch.linalg.solve_triangular(chol, kct, upper=False)
    var = (1.0 + NOISE**2 - (v * v).sum(0)).clamp_min(1e-12)
    return torch.distributions.Normal((kct.T @ alpha)[:, 0], var.sqrt())


def run_demo(model: str = "bsa-tnp", seed: int = 0) -> DemoResult:
    """Run the demo with shipped model ``model``; see the module docstring."""
    g = torch.Generator().manual_seed(seed)
    grid, f = _field(g)
    y = f + NOISE * torch.randn(f.shape, generator=g, dtype=torch.float64)
    observed = torch.rand(f.shape, generator=g, dtype=torch.float64) < KEEP
    mid = FRAMES // 2
    lo = (SIDE - BLOCK) // 2
    block = ((grid[:, 0] >= lo) & (grid[:, 0] < lo + BLOCK) & (grid[:, 1] >= lo) & (grid[:, 1] < lo + BLOCK))
    observed[mid] &= ~block
    times = torch.arange(FRAMES, dtype=torch.float64) - mid
    pts = torch.cat([grid.repeat(FRAMES, 1), times.repeat_interleave(SIDE * SIDE)[:, None]], 1)  # [frames·cells, 3]
    obs = observed.reshape(-1)
    xc, yc = pts[obs], y.reshape(-1)[obs]
    target = ~observed[mid]
    xt, yt = pts[mid * SIDE * SIDE : (mid + 1) * SIDE * SIDE][target], y[mid][target]

    start = time.perf_counter()
    net = load_pretrained(model)
    # the shipped units: space in typical context spacings, time in steps, values standardised by the context
    spacing = math.sqrt(SIDE * SIDE / (len(xc) / FRAMES))
    scale = torch.tensor([spacing, spacing, 1.0], dtype=torch.float64)
    mu, sd = yc.mean(), yc.std()
    batch = Batch(xc=(xc / scale)[None], yc=((yc - mu) / sd)[None, :, None], xt=(xt / scale)[None])
    with torch.no_grad():
        pred = net(batch)
    loc = pred.loc[0, :, 0].double() * sd + mu
    std = pred.scale[0, :, 0].double() * sd
    seconds = time.perf_counter() - start

    scores = {
        f"geonp {model} (zero-shot)": gaussian_scores(torch.distributions.Normal(loc, std), yt),
        "exact GP, true kernel": gaussian_scores(_exact_gp(xc, yc, xt), yt),
    }
    mean_only = torch.full_like(yt, float(yc.mean()))
    scores["mean of observations"] = {"rmse": float((mean_only - yt).pow(2).mean().sqrt())}
    return DemoResult(model, len(xc), len(xt), scores, seconds)
