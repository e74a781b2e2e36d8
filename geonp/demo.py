"""``geonp demo``: infill a synthetic gridded field with realistic gaps, the way a user would.

A 48 × 48 grid over 7 hourly frames is drawn from a known space-time GP (Matérn-5/2 in space,
lengthscale 6 cells; squared-exponential in time, 4 steps; noise 0.05). It is laid out as an
``xarray.Dataset`` of near-surface air temperature (K, unit variance about 288.15 K) on a projected
grid of 5 km cells in EPSG:3035 (LAEA Europe) with hourly ``time`` coordinates. Each frame keeps
15 % of its cells at random (the rest are NaN) and the middle frame also loses a 12 × 12 block.

``ds.np.infill(model=...)`` fills every gap with the shipped weights, zero-shot (no training), and the
middle frame's gaps are scored against the truth beside the exact GP posterior with the true kernel
(the best any method can do) and the mean of the observations. The result can be written with
:func:`geonp.to_zarr` and drawn as a PNG map.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import xarray as xr
from torch.distributions import Normal

from .errors import ConfigError
from .io.lock import check_new_path, check_store_path
from .metrics import gaussian_scores
from .synthetic.kernels import correlation

__all__ = ["DemoResult", "run_demo", "demo_dataset", "VAR", "CRS"]

SIDE, FRAMES, BLOCK = 48, 7, 12
SPACE_LS, TIME_LS, NOISE, KEEP = 6.0, 4.0, 0.05, 0.15
VAR = "tas"
CRS = "EPSG:3035"  # ETRS89 / LAEA Europe
CELL_M = 5000.0
X0, Y0 = 4_100_000.0, 2_900_000.0  # centre of the first column / row (southern Germany)
BASE_K = 288.15
START = "2024-07-01T00:00"


@dataclass(frozen=True)
class DemoResult:
    """Scores of the demo (values in the field's units, K with unit variance).

    Attributes
    ----------
    model : str
        The shipped model used.
    num_context : int
        Observed cells over all frames.
    num_targets : int
        Gaps of the middle frame (the scored cells).
    scores : dict
        Method -> ``nll``, ``rmse``, ``mae``, ``coverage``, ``crps`` (only ``rmse`` for the mean).
    seconds : float
        Wall time of ``ds.np.infill`` (all gaps of all frames, model loading included).
    output : xarray.Dataset or None
        The infilled field with the truth and the observations (what the Zarr store holds).
    out, png : pathlib.Path or None
        What was written.
    """

    model: str
    num_context: int
    num_targets: int
    scores: dict[str, dict[str, float]]
    seconds: float
    output: xr.Dataset | None = None
    out: Path | None = None
    png: Path | None = None

    def table(self) -> str:
        """Format the scores as a plain-text table."""
        lines = [f"{'method':<28}{'RMSE':>8}{'NLL':>9}{'95% cov':>9}{'CRPS':>8}"]
        for name, s in self.scores.items():
            nll = f"{s['nll']:9.3f}" if math.isfinite(s.get("nll", math.nan)) else f"{'–':>9}"
            cov = f"{s['coverage']:9.3f}" if math.isfinite(s.get("coverage", math.nan)) else f"{'–':>9}"
            crps = f"{s['crps']:8.3f}" if math.isfinite(s.get("crps", math.nan)) else f"{'–':>8}"
            lines.append(f"{name:<28}{s['rmse']:8.3f}{nll}{cov}{crps}")
        return "\n".join(lines)


def _field(g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Grid coordinates ``[SIDE², 2]`` (row, column in cells) and a noiseless field ``[FRAMES, SIDE²]`` (float64)."""
    ax = torch.arange(SIDE, dtype=torch.float64)
    grid = torch.stack(torch.meshgrid(ax, ax, indexing="ij"), -1).reshape(-1, 2)
    ks = correlation("matern-2.5", torch.cdist(grid, grid), SPACE_LS)
    ks = ks + 1e-8 * torch.eye(SIDE * SIDE, dtype=torch.float64)
    t = torch.arange(FRAMES, dtype=torch.float64)[:, None]
    kt = correlation("se", torch.cdist(t, t), TIME_LS) + 1e-8 * torch.eye(FRAMES, dtype=torch.float64)
    e = torch.randn(SIDE * SIDE, FRAMES, generator=g, dtype=torch.float64)
    f = torch.linalg.cholesky(ks) @ e @ torch.linalg.cholesky(kt).T  # [cells, frames]
    return grid, f.T.contiguous()


def _exact_gp(xc, yc, xt) -> torch.distributions.Normal:
    """Posterior predictive of noisy observations with the true kernel and zero prior mean (float64)."""

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


@dataclass(frozen=True)
class _Draw:
    grid: torch.Tensor  # [SIDE², 2] cells
    y: torch.Tensor  # [FRAMES, SIDE²] noisy field (anomaly, unit variance)
    observed: torch.Tensor  # [FRAMES, SIDE²] bool


def _draw(seed: int) -> _Draw:
    g = torch.Generator().manual_seed(seed)
    grid, f = _field(g)
    y = f + NOISE * torch.randn(f.shape, generator=g, dtype=torch.float64)
    observed = torch.rand(f.shape, generator=g, dtype=torch.float64) < KEEP
    lo = (SIDE - BLOCK) // 2
    block = (grid[:, 0] >= lo) & (grid[:, 0] < lo + BLOCK) & (grid[:, 1] >= lo) & (grid[:, 1] < lo + BLOCK)
    observed[FRAMES // 2] &= ~block
    return _Draw(grid, y, observed)


def _dataset(draw: _Draw) -> tuple[xr.Dataset, xr.DataArray]:
    """Lay the draw out as xarray: (observed Dataset with NaN gaps and a CRS, the full noisy truth)."""
    from .io import write_crs

    shape = (FRAMES, SIDE, SIDE)  # grid rows run north to south, as in a raster
    x = X0 + CELL_M * np.arange(SIDE)
    y = Y0 + CELL_M * (SIDE - 1 - np.arange(SIDE))
    coords = {
        "time": ("time", pd.date_range(START, periods=FRAMES, freq="h").values, {"standard_name": "time"}),
        "y": ("y", y, {"standard_name": "projection_y_coordinate", "long_name": "northing", "units": "m"}),
        "x": ("x", x, {"standard_name": "projection_x_coordinate", "long_name": "easting", "units": "m"}),
    }
    attrs = {"standard_name": "air_temperature", "long_name": "near-surface air temperature (synthetic)",
             "units": "K"}
    truth = BASE_K + draw.y.numpy().reshape(shape)
    obs = np.where(draw.observed.numpy().reshape(shape), truth, np.nan).astype(np.float32)
    ds = xr.Dataset({VAR: (("time", "y", "x"), obs, attrs)}, coords=coords)
    ds.attrs.update(title="geonp demo: a synthetic space-time GP field with gaps",
                    source=f"Matérn-5/2 (lengthscale {SPACE_LS:g} cells) × SE in time ({TIME_LS:g} steps), "
                           f"noise {NOISE:g}; {KEEP:.0%} of cells kept per frame, a {BLOCK}×{BLOCK} block missing "
                           "in the middle frame")
    truth_da = xr.DataArray(truth.astype(np.float32), dims=("time", "y", "x"), coords=ds.coords,
                            attrs={**attrs, "long_name": "near-surface air temperature (synthetic truth)"})
    return write_crs(ds, CRS), truth_da


def demo_dataset(seed: int = 0) -> xr.Dataset:
    """Return the demo's observed field: ``tas`` (time: 7, y: 48, x: 48) in K with NaN gaps, on EPSG:3035."""
    return _dataset(_draw(seed))[0]


def _check_outputs(out: Path | None, png: Path | None, overwrite: bool) -> None:
    """Refuse existing outputs (with ``overwrite``: anything but a Zarr store / a PNG file) before computing."""
    if out is not None:
        check_store_path(out, overwrite)
    if png is not None:
        check_new_path(png, overwrite, "PNG image", magic=_PNG_MAGIC)
        if png.suffix.lower() != ".png":
            raise ConfigError(f"png={str(png)!r} ends in {png.suffix!r}; the demo writes a PNG image: give a path "
                              "ending in '.png'.")


_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png(path: Path, truth: np.ndarray, obs: np.ndarray, mean: np.ndarray, std: np.ndarray, title: str,
         extent: list[float]) -> None:
    """Four maps of the middle frame, written atomically (Agg canvas; the global backend is left alone)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(13, 3.6), layout="constrained")
    axes = fig.subplots(1, 4, sharex=True, sharey=True)
    lo, hi = float(np.nanmin(truth)), float(np.nanmax(truth))
    panels = [("truth", truth, "RdYlBu_r", lo, hi), ("observations", obs, "RdYlBu_r", lo, hi),
              ("infilled mean", mean, "RdYlBu_r", lo, hi), ("predictive std", std, "viridis", 0.0, None)]
    for ax, (name, data, cmap, vmin, vmax) in zip(axes, panels, strict=True):
        ax.set_facecolor("0.85")
        im = ax.imshow(data, origin="upper", extent=extent, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest")
        ax.set_title(name)
        ax.set_xlabel("x (km, EPSG:3035)")
        fig.colorbar(im, ax=ax, shrink=0.8, label="K")
    axes[0].set_ylabel("y (km, EPSG:3035)")
    fig.suptitle(title)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fig.savefig(tmp, format="png", dpi=100)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def run_demo(model: str = "bsa-tnp", seed: int = 0, out: str | os.PathLike | None = None,
             png: str | os.PathLike | None = None, overwrite: bool = False, progress: bool = False) -> DemoResult:
    """Run the demo with shipped model ``model``; see the module docstring.

    Parameters
    ----------
    model : str, default "bsa-tnp"
        A shipped model name (or anything ``ds.np.infill(model=...)`` takes).
    seed : int, default 0
        Seed of the synthetic field, its noise and its gaps.
    out : path, optional
        Write the infilled field (``tas_mean``, ``tas_std``, ``tas_filled``), the observations ``tas`` and the
        truth ``tas_truth`` to this Zarr store.
    png : path, optional
        Write a map of the middle frame (truth, observations, infilled mean, predictive std).
    overwrite : bool, default False
        Replace existing ``out`` / ``png``.
    progress : bool, default False
        Say what is being done, and show progress bars of the infill and the Zarr write, on stderr.

    Raises
    ------
    OutputExistsError
        ``out`` or ``png`` exists and ``overwrite`` is False (checked before any computation).
    """
    from . import to_zarr
    from .model import resolve_model

    out = Path(out).expanduser() if out is not None else None
    png = Path(png).expanduser() if png is not None else None
    _check_outputs(out, png, overwrite)
    resolve_model(model)  # fail fast on an unknown name, before drawing the field
    for path in (out, png):  # their folders, as the Zarr write creates its own, before computing
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)

    if progress:
        print(f"geonp demo: infilling a {SIDE}×{SIDE}×{FRAMES} synthetic field with the shipped {model} ...",
              file=sys.stderr)
    draw = _draw(seed)
    ds, truth = _dataset(draw)
    bar = contextlib.nullcontext()
    if progress:
        from .progress import compute_progress

        bar = compute_progress(sys.stderr, minimum=1.0)
    start = time.perf_counter()
    with bar:
        result = ds.np.infill(VAR, model=model)
    seconds = time.perf_counter() - start

    mid = FRAMES // 2
    target = ~draw.observed[mid]
    yt = draw.y[mid][target]
    mean = torch.from_numpy(result[f"{VAR}_mean"].isel(time=mid).values.reshape(-1).astype(np.float64))
    std = torch.from_numpy(result[f"{VAR}_std"].isel(time=mid).values.reshape(-1).astype(np.float64))
    times = torch.arange(FRAMES, dtype=torch.float64) - mid
    pts = torch.cat([draw.grid.repeat(FRAMES, 1), times.repeat_interleave(SIDE * SIDE)[:, None]], 1)
    obs = draw.observed.reshape(-1)
    xc, yc = pts[obs], draw.y.reshape(-1)[obs]
    xt = pts[mid * SIDE * SIDE : (mid + 1) * SIDE * SIDE][target]

    scores = {
        f"geonp {model} (zero-shot)": gaussian_scores(Normal(mean[target] - BASE_K, std[target]), yt),
        "exact GP, true kernel": gaussian_scores(_exact_gp(xc, yc, xt), yt),
        "mean of observations": {"rmse": float((yc.mean() - yt).pow(2).mean().sqrt())},
    }

    output = result.assign({VAR: ds[VAR], f"{VAR}_truth": truth})
    output.attrs.update(title=f"geonp demo: {ds.attrs['title'][len('geonp demo: '):]}, infilled by {model}",
                        comment=ds.attrs["source"])
    if out is not None:
        to_zarr(output, out, overwrite=overwrite, progress=progress,
                history=f"geonp demo --model {model} --seed {seed}: wrote {out.name}")
    if png is not None:
        x_km, y_km = ds["x"].values / 1000.0, ds["y"].values / 1000.0
        half = CELL_M / 2000.0
        extent = [x_km.min() - half, x_km.max() + half, y_km.min() - half, y_km.max() + half]
        s = scores[f"geonp {model} (zero-shot)"]
        _png(png, truth.isel(time=mid).values, ds[VAR].isel(time=mid).values,
             result[f"{VAR}_mean"].isel(time=mid).values, result[f"{VAR}_std"].isel(time=mid).values,
             f"geonp demo, {str(ds.time.values[mid])[:16]}: {model} zero-shot, RMSE {s['rmse']:.3f} K on the "
             f"{len(yt)} gaps (exact GP {scores['exact GP, true kernel']['rmse']:.3f} K)", extent)
    return DemoResult(model, len(xc), len(yt), scores, seconds, output, out, png)
