"""Prediction in windows: a large domain cut into tiles, each predicted from the context near it.

A model trained on tasks of one size sees, on a domain four times as large, four times the keys per
query, and a pseudo-token model spreads its fixed number of pseudo-tokens four times as thin. Cutting
the targets into square tiles of edge ``tile`` (space units of the model) and predicting each from
the context inside the tile grown by ``halo`` on every side gives every prediction a task of the
training size. This is the tensor-level form of what the xarray layer does with its context windows
(``geonp.tiling``); researchers use it on batches directly.

>>> import torch
>>> from geonp.models import Batch, build_model
>>> from geonp.models.windows import predict_in_windows
>>> model = build_model("bsa-tnp", preset="small", space_dims=2).eval()
>>> batch = Batch(xc=torch.rand(1, 64, 2) * 8, yc=torch.randn(1, 64, 1), xt=torch.rand(1, 100, 2) * 8)
>>> with torch.no_grad():
...     pred = predict_in_windows(model, batch, tile=2.0, halo=1.0)
>>> tuple(pred.loc.shape)
(1, 100, 1)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..errors import ConfigError, EmptyContextError
from .base import NeuralProcess
from .batch import Batch

__all__ = ["Window", "plan_windows", "predict_in_windows"]


@dataclass(frozen=True)
class Window:
    """One window: a task of the batch, its targets (a tile) and its context (the tile plus a halo)."""

    task: int
    targets: Tensor  # indices into the task's targets
    context: Tensor  # indices into the task's context


def plan_windows(batch: Batch, space_dims: int, tile: float, halo: float, metric: str = "euclidean") -> list[Window]:
    """Cut each task's targets into tiles of edge ``tile`` and find each tile's context.

    Tiles are aligned to the lower corner of each task's targets, along the first ``space_dims``
    coordinate columns (time columns are not cut: every context time is kept). A tile's context is
    every real context point within ``halo`` of the tile (per axis, a box). Tiles without targets
    are skipped.

    With ``metric="geodesic"`` the two space columns are longitude and latitude in degrees, as the
    geodesic models read them: tiles are ``tile`` degrees of longitude and latitude, and a tile's
    context is every context point within ``halo`` degrees of great-circle arc of one of its
    targets, so windows see across the dateline and over the poles.

    Raises
    ------
    ConfigError
        ``tile`` not positive and finite, ``halo`` negative or not finite, or a model without space columns.
    EmptyContextError
        A tile has no context point within its halo (name a larger ``halo``).
    """
    if not (tile > 0 and math.isfinite(tile)):
        raise ConfigError(f"tile={tile!r}; expected a positive, finite edge length in the model's space units.")
    if not (halo >= 0 and math.isfinite(halo)):
        raise ConfigError(f"halo={halo!r}; expected a non-negative, finite distance in the model's space units "
                          "(for one window over everything, call the model on the batch itself).")
    if metric not in ("euclidean", "geodesic"):
        raise ConfigError(f"metric={metric!r}; expected 'euclidean' or 'geodesic'.")
    if space_dims < 1:
        raise ConfigError("the model has no space columns (space_dims=0): there is nothing to cut into windows.")
    windows = []
    for task in range(batch.batch_size):
        # indices and coordinates on the CPU (small); the model runs where the batch is
        t_idx = torch.arange(batch.xt.shape[1]) if batch.mt is None else torch.nonzero(batch.mt[task].cpu()).flatten()
        c_idx = torch.arange(batch.xc.shape[1]) if batch.mc is None else torch.nonzero(batch.mc[task].cpu()).flatten()
        if t_idx.numel() == 0:
            continue
        xt = batch.xt[task, :, :space_dims].detach().to("cpu", torch.float64)[t_idx]
        xc = batch.xc[task, :, :space_dims].detach().to("cpu", torch.float64)[c_idx]
        origin = xt.min(0).values
        cells = torch.floor((xt - origin) / tile).long()
        keys, inverse = torch.unique(cells, dim=0, return_inverse=True)
        for k in range(keys.shape[0]):
            lo = origin + keys[k].double() * tile - halo
            hi = lo + tile + 2 * halo
            if metric == "geodesic":
                arc = torch.cdist(_unit(xt[inverse == k]), _unit(xc)).mul(0.5).clamp(max=1.0).asin().mul(2.0)
                inside = torch.rad2deg(arc).min(0).values <= halo
            else:
                inside = ((xc >= lo) & (xc <= hi)).all(1)
            if not bool(inside.any()):
                raise EmptyContextError(
                    f"task {task}: the tile from {lo.add(halo).tolist()} (edge {tile}) has no context point within "
                    f"halo={halo}; pass a larger halo or a larger tile."
                )
            windows.append(Window(task, t_idx[inverse == k], c_idx[inside]))
    return windows


def _unit(lonlat: Tensor) -> Tensor:
    """Unit vectors ``[n, 3]`` of longitude/latitude in degrees."""
    lon, lat = torch.deg2rad(lonlat[:, 0]), torch.deg2rad(lonlat[:, 1])
    return torch.stack([lat.cos() * lon.cos(), lat.cos() * lon.sin(), lat.sin()], dim=1)


def _gather(t: Tensor | None, task_idx: Tensor, idx: Tensor) -> Tensor | None:
    return None if t is None else t[task_idx, idx]


def predict_in_windows(model: NeuralProcess, batch: Batch, *, tile: float, halo: float,
                       windows_per_call: int = 16) -> torch.distributions.Normal:
    """Predict every target of ``batch`` from the context of its window (see :func:`plan_windows`).

    Windows are padded into batches of ``windows_per_call`` and run through ``model``; each target's
    prediction comes from its own window only. Padded targets get ``loc`` 0 and ``scale`` 1.

    Parameters
    ----------
    model : NeuralProcess
        Any geonp model; its ``config.space_dims`` first columns are cut (on the sphere for a
        model with ``space_metric="geodesic"``, see :func:`plan_windows`).
    batch : Batch
        The tasks, as the model takes them.
    tile, halo : float
        Tile edge and the margin of context around it, in the model's space units.
    windows_per_call : int
        Windows per forward pass (memory grows with it).

    Returns
    -------
    torch.distributions.Normal
        ``loc``/``scale`` of shape ``[b, nt, y_dims]``, as ``model(batch)``.
    """
    if windows_per_call < 1:
        raise ConfigError(f"windows_per_call={windows_per_call!r}; expected a positive integer.")
    metric = getattr(model.config, "space_metric", "euclidean")
    windows = plan_windows(batch, model.config.space_dims, tile, halo, metric)
    b, nt = batch.xt.shape[:2]
    dy = batch.yc.shape[-1]
    loc = torch.zeros(b, nt, dy, dtype=batch.yc.dtype, device=batch.yc.device)
    scale = torch.ones_like(loc)
    for start in range(0, len(windows), windows_per_call):
        group = windows[start:start + windows_per_call]
        nc = max(w.context.numel() for w in group)
        ntw = max(w.targets.numel() for w in group)
        # index tensors padded by repeating each window's first point; the masks mark the padding
        task = torch.tensor([w.task for w in group])
        c_idx = torch.stack([torch.cat([w.context, w.context[:1].expand(nc - w.context.numel())]) for w in group])
        t_idx = torch.stack([torch.cat([w.targets, w.targets[:1].expand(ntw - w.targets.numel())]) for w in group])
        mc = torch.arange(nc)[None] < torch.tensor([w.context.numel() for w in group])[:, None]
        mt = torch.arange(ntw)[None] < torch.tensor([w.targets.numel() for w in group])[:, None]
        dev = batch.xc.device
        rows, c_idx, t_idx = task[:, None].to(dev), c_idx.to(dev), t_idx.to(dev)
        sub = Batch(
            xc=_gather(batch.xc, rows, c_idx), yc=_gather(batch.yc, rows, c_idx), xt=_gather(batch.xt, rows, t_idx),
            zc=_gather(batch.zc, rows, c_idx), zt=_gather(batch.zt, rows, t_idx),
            mc=None if bool(mc.all()) else mc.to(dev), mt=None if bool(mt.all()) else mt.to(dev),
        )
        pred = model(sub)
        keep = mt.to(dev)
        where = (rows.expand_as(t_idx)[keep], t_idx[keep])
        loc[where] = pred.loc[keep].to(loc.dtype)
        scale[where] = pred.scale[keep].to(scale.dtype)
    return torch.distributions.Normal(loc, scale)
