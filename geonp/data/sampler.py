"""Training tasks drawn from a dataset itself (numpy only, no torch).

:class:`TaskSampler` draws the kind of task the model will later solve:

* ``"infill"`` – pick a series (extra-dim index), a frame ``i``, a region (the points nearest a
  random point) and a keep fraction ``f`` (log-uniform); each frame within the half-window keeps
  ``f`` of its observed points as context; the observed points of frame ``i`` that are not
  context (plus, sometimes, a contiguous hole) are the targets;
* ``"forecast"`` – pick an initial frame ``i`` and a region; the context is the observed points
  of the ``context_frames`` frames up to ``i``; the targets are observed points at random leads
  ``1 … max_lead``.

Regions keep the density of the data (they are a neighbourhood, not a thinning), so the model
trains at the spacing it will see at prediction time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, NoDataError
from ..normalise import Normaliser
from .tasks import Task, Window, make_task

__all__ = ["SamplerConfig", "TaskSampler"]


@dataclass(frozen=True)
class SamplerConfig:
    """How training tasks are drawn (counts per task; windows in frames)."""

    task: str = "infill"
    max_context: int = 384
    max_targets: int = 128
    half_window: int = 3  # infill: frames each side of the target frame
    context_frames: int = 4  # forecast: frames up to and including the initial frame
    max_lead: int = 6  # forecast: largest lead in frames
    keep_range: tuple[float, float] = (0.05, 1.0)  # infill: fraction of observed points kept as context
    hole_probability: float = 0.25  # infill: chance of a contiguous hole (missing from every frame of the window)
    vanish_probability: float = 0.0  # infill, without a hole: chance that the targets are missing from every frame
    thin_other_frames: bool = True  # infill: keep_range thins every frame; False: only the target frame (as prediction)

    def __post_init__(self) -> None:
        if self.task not in ("infill", "forecast"):
            raise ConfigError(f"task={self.task!r}; expected 'infill' or 'forecast'.")
        if self.max_context < 8 or self.max_targets < 1:
            raise ConfigError("max_context must be >= 8 and max_targets >= 1.")
        lo, hi = self.keep_range
        if not 0 < lo <= hi <= 1:
            raise ConfigError(f"keep_range={self.keep_range}; expected 0 < low <= high <= 1.")


class TaskSampler:
    """Draw training tasks from in-memory data.

    Parameters
    ----------
    values : ndarray ``[E, T, P]``
        Series (extra-dim indices) × frames × points, NaN = missing.
    window : Window
        Coordinates of the frames and points (its ``values`` are ignored).
    norm : Normaliser
        Scales (covariates, value standardisation).
    config : SamplerConfig
        Counts and windows.
    raw : ndarray ``[E, T, P]``, optional
        Forecast: the variable itself when ``values`` are departures from a reference (``values =
        raw - reference``); it gives each task's ``trend`` (see
        :attr:`geonp.normalise.Normaliser.lead_trend_weight`). Default: ``values`` (no reference).
    """

    def __init__(self, values: np.ndarray, window: Window, norm: Normaliser, config: SamplerConfig,
                 raw: np.ndarray | None = None) -> None:
        self.values = np.asarray(values, dtype=np.float64)
        self.raw = self.values if raw is None else np.asarray(raw, dtype=np.float64)
        if self.raw.shape != self.values.shape:
            raise ConfigError(f"raw has shape {self.raw.shape}; expected the shape of values {self.values.shape}.")
        self.window = window
        self.norm = norm
        self.config = config
        E, T, P = self.values.shape
        finite = np.isfinite(self.values)
        if not finite.any():
            raise NoDataError("every value is missing; there is nothing to train on.")
        self.frame_counts = finite.sum(2)  # [E, T]
        self.obs_fraction = float(finite.mean())
        c = config
        if c.task == "forecast":
            lo, hi = min(c.context_frames - 1, max(T - 2, 0)), T - 2
            if hi < 0:
                raise NoDataError(f"forecast training needs at least 2 frames; the data have {T}.")
            self.inits = np.arange(lo, hi + 1)
        else:
            self.inits = np.arange(T)
        ok = self.frame_counts[:, self.inits] >= 2
        if not ok.any():
            raise NoDataError("no frame has two or more observations; infill training needs context and targets.")
        self.choices = np.argwhere(ok)  # (e, index into inits)
        self.cov = window.covariates(norm) if norm.covariates else None

    def _region(self, rng: np.random.Generator, size: int) -> np.ndarray:
        P = len(self.window.xy)
        if size >= P:
            return np.arange(P)
        centre = self.window.xy[rng.integers(P)]
        d = ((self.window.xy - centre) ** 2).sum(1)
        return np.argpartition(d, size - 1)[:size]

    def sample(self, rng: np.random.Generator) -> Task:
        """One task with values standardised by its context."""
        e, k = self.choices[rng.integers(len(self.choices))]
        i = int(self.inits[k])
        if self.config.task == "forecast":
            return self._forecast(rng, e, i)
        return self._infill(rng, e, i)

    def _gather(self, e: int, picks: list[tuple[int, np.ndarray]]):
        """Coordinates, values, covariates and point indices of ``(frame, points)`` picks."""
        pts = np.concatenate([p for _, p in picks]) if picks else np.zeros(0, dtype=int)
        frames = np.concatenate([np.full(len(p), j) for j, p in picks]) if picks else np.zeros(0, dtype=int)
        x = np.concatenate([self.window.xy[pts], self.window.t[frames][:, None]], 1)
        z = None if self.cov is None else self.cov[frames, pts]
        return x, self.values[e, frames, pts], z, pts

    def _infill(self, rng, e, i) -> Task:
        c, T = self.config, self.values.shape[1]
        lo, hi = np.log(c.keep_range[0]), np.log(c.keep_range[1])
        keep = float(np.exp(rng.uniform(lo, hi)))
        frames = np.arange(max(0, i - c.half_window), min(T, i + c.half_window + 1))
        kept_frames = len(frames) * keep if c.thin_other_frames else keep + len(frames) - 1
        per_point = kept_frames * max(self.obs_fraction, 1e-3)
        region = self._region(rng, int(max(32, c.max_context / per_point)))
        picks, target_idx, hole, vanish = [], None, None, False
        for j in [i, *(f for f in frames if f != i)]:  # the target frame first: it decides the hole
            obs = np.flatnonzero(np.isfinite(self.values[e, j, region]))
            kept = obs[rng.random(len(obs)) < keep] if j == i or c.thin_other_frames else obs
            if j == i:
                if len(obs) >= 2 and len(kept) >= len(obs):  # keep at least one target
                    kept = kept[: len(kept) - 1]
                if rng.random() < c.hole_probability and len(kept) > 4:
                    xy = self.window.xy[region[kept]]
                    centre = xy[rng.integers(len(xy))]
                    radius = np.sqrt(rng.uniform(0.02, 0.2) * np.ptp(xy, 0).prod() / np.pi + 1e-12)
                    hole = centre, radius
            if hole is not None:  # a hole persists: it is missing from every frame of the window
                kept = kept[((self.window.xy[region[kept]] - hole[0]) ** 2).sum(1) > hole[1] ** 2]
            if j == i:
                target_idx = np.setdiff1d(obs, kept)
                # scattered places missing from the whole window (new stations); no draw when off, so that
                # the training streams stay as they were
                vanish = hole is None and c.vanish_probability > 0 and rng.random() < c.vanish_probability
            elif vanish:
                kept = np.setdiff1d(kept, target_idx)
            picks.append((j, region[kept]))
        if len(target_idx) > c.max_targets:
            target_idx = rng.choice(target_idx, c.max_targets, replace=False)
        targets = region[target_idx]
        n_context = sum(len(p) for _, p in picks)
        if n_context == 0:  # nothing kept: move one target into the context
            picks, targets = [(i, targets[:1])], (targets[1:] if len(targets) > 1 else targets)
        xc, yc, zc, pc = self._gather(e, picks)
        if len(xc) > c.max_context:
            sel = rng.choice(len(xc), c.max_context, replace=False)
            xc, yc, pc = xc[sel], yc[sel], pc[sel]
            zc = None if zc is None else zc[sel]
        xt, yt, zt, pt = self._gather(e, [(i, targets)])
        return self._task(xc, yc, zc, pc, xt, yt, zt, pt)

    def _forecast(self, rng, e, i) -> Task:
        c, T = self.config, self.values.shape[1]
        past = np.arange(max(0, i - c.context_frames + 1), i + 1)
        region = self._region(rng, int(max(16, c.max_context / (len(past) * max(self.obs_fraction, 1e-3)))))
        picks = [(j, region[np.isfinite(self.values[e, j, region])]) for j in past]
        xc, yc, zc, pc = self._gather(e, picks)
        max_lead = min(c.max_lead, T - 1 - i)
        leads = rng.integers(1, max_lead + 1, size=c.max_targets)
        pts = region[rng.integers(len(region), size=c.max_targets)]
        frames = i + leads
        ok = np.isfinite(self.values[e, frames, pts])
        frames, pts = frames[ok], pts[ok]
        xt = np.concatenate([self.window.xy[pts], self.window.t[frames][:, None]], 1)
        zt = None if self.cov is None else self.cov[frames, pts]
        task = self._task(xc, yc, zc, pc, xt, self.values[e, frames, pts], zt, pts)
        task.persistence = self.values[e, i, pts]
        task.trend = self._trend(e, i, frames, pts)
        return task

    def _trend(self, e: int, i: int, frames: np.ndarray, pts: np.ndarray) -> np.ndarray:
        """``(y(t0) - y(t0 - 1)) - (r(v) - r(v - 1))`` at the targets (data units; 0 where unknown).

        ``y`` is ``raw``, ``r = raw - values`` the reference, ``t0`` frame ``i`` and ``v`` the valid frames.
        """
        t = self.window.t
        if i < 1 or abs(t[i] - t[i - 1] - 1.0) > 1e-6:  # no previous step (or a gap in the kept frames)
            return np.zeros(len(pts))
        raw, dep = self.raw[e], self.values[e]
        change = raw[i, pts] - raw[i - 1, pts]
        ref_change = (raw[frames, pts] - dep[frames, pts]) - (raw[frames - 1, pts] - dep[frames - 1, pts])
        out = change - ref_change
        return np.where(np.isfinite(out), out, 0.0)

    def _task(self, xc, yc, zc, pc, xt, yt, zt, pt) -> Task:
        elev = self.window.elevation
        land = self.window.land if self.config.task == "infill" else None  # as in prediction
        return make_task(self.norm, xc, yc, zc, None if elev is None else elev[pc], xt, zt,
                         None if elev is None else elev[pt], yt=yt, lc=None if land is None else land[pc],
                         lt=None if land is None else land[pt])
