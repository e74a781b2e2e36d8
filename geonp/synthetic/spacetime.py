"""Space-time GP tasks (2-D space + time) for pretraining models that run zero-shot on real data."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..errors import ConfigError
from ..models.batch import Batch
from ._common import (
    GPGenerator,
    Params,
    check_choice,
    check_positive,
    check_range,
    elevation_correlation,
    kernel_params,
    to_batch,
)
from ._draw import cholesky_with_jitter, log_uniform, randint, uniform
from .kernels import correlation, euclidean_distance, kernel_code, kernel_matrix

__all__ = ["SpaceTimeGP", "SPACETIME_MODES"]

SPACETIME_MODES: tuple[str, ...] = ("infill", "forecast", "mixed")


@dataclass(frozen=True)
class SpaceTimeGP(GPGenerator):
    """Separable space×time GP tasks: infill a frame, or forecast a future frame from past ones.

    Coordinates are ``(s1, s2, t)``: ``xc``/``xt`` are ``[b, n, 3]``, space columns then time.

    **Units.** The space unit is the typical context spacing: per batch the domain is a square of
    side ``L`` centred on 0 with ``L² =`` the mean number of context points per context frame, so
    one context frame holds on average one point per unit². The time unit is one time step and
    frames sit at integer times. A real-data pipeline that scales its coordinates the same way
    (space by its context spacing, time by its step) sees the same statistics.

    **Layout.** Per task, ``N_loc`` random locations (uniform in the square) are shared by every
    frame, like a station network or grid cells; each context frame observes a random subset of
    them. Per batch (so no padding is needed): the mode, the half-window ``k``, ``N_loc``, the lead
    and each frame's observed fraction (uniform on ``observed_fraction``).

    ``"infill"``
        Context from frames ``t ∈ {-k, ..., k}``; targets are the locations of frame 0 that its
        context does not observe.
        With probability ``hole_probability`` the batch also has a **hole**: per task, the
        ``m = hole_fraction · N_loc`` locations nearest a random centre are missing from every
        context frame (like a cloud or a failed sensor region), so they are targets that no
        neighbouring frame can fill in.
    ``"forecast"``
        Context from past frames ``{-k, ..., 0}``; targets are every location at ``t = h``, the
        lead ``h`` uniform on ``1..max_lead``.
    ``"mixed"``
        Each batch is a forecast batch with probability ``forecast_probability``, else infill.

    If a batch would exceed ``max_points`` (context + targets per task), ``N_loc`` shrinks by 10 %
    steps until it fits, which keeps the exact oracle cheap.

    **Priors** (per task): space kernel uniform over ``space_kernels``, time kernel
    ``time_kernel``; space lengthscale log-uniform on ``space_lengthscale_range`` (spacing units),
    time lengthscale log-uniform on ``time_lengthscale_range`` (steps), noise std log-uniform on
    ``noise_std_range``, signal variance 1 or log-uniform on ``variance_range``.

    **Sampling.** Values on the full locations × frames product are drawn exactly through the
    Kronecker structure of the separable kernel (``F = σ L_s E L_tᵀ``, one batched float64
    Cholesky of the ``N_loc × N_loc`` space matrix and one of the tiny time matrix), then the
    observed subsets are picked.

    **Terrain** (``terrain=True``). Every location gets an elevation (km): a Matérn-3/2 random
    field with lengthscale log-uniform on ``terrain_lengthscale_range`` (spacing units) and
    standard deviation log-uniform on ``relief_range`` (km), per task. The space kernel is
    multiplied by :func:`~geonp.synthetic._common.elevation_correlation` with a lengthscale
    log-uniform on ``elevation_lengthscale_range`` (km), or ``inf`` (elevation plays no part) with
    probability ``flat_probability``: places at similar heights share their departures, as
    stations on a mountain range do. ``zc``/``zt`` hold each point's elevation less the mean
    elevation of the task's locations (one covariate column) and ``params["elevation_lengthscale"]``
    the lengthscale. With ``terrain=False`` (default) nothing is drawn and the batches are those of
    earlier versions.

    ``standardise=True`` rescales ``yc``, ``yt`` (and ``fc``, ``ft`` in the params) per task by
    the context mean and standard deviation, as the real-data pipeline does; ``params["y_shift"]``
    and ``params["y_scale"]`` hold them, while ``variance`` and ``noise_std`` stay in raw units
    (the oracle undoes and redoes the scaling, which is exact since it depends on the context
    only).

    Parameters
    ----------
    mode : str
        ``"infill"``, ``"forecast"`` or ``"mixed"``.
    forecast_probability : float
        Share of forecast batches in ``"mixed"`` mode.
    space_kernels : tuple of str
        Space kernels drawn uniformly per task.
    time_kernel : str
        Time kernel.
    space_lengthscale_range, time_lengthscale_range, noise_std_range : tuple of float
        Log-uniform priors.
    variance_range : tuple of float, optional
        Log-uniform prior of the signal variance; ``None`` fixes it to 1.
    num_locations : tuple of int
        Inclusive range of ``N_loc``.
    window : tuple of int
        Inclusive range of the half-window ``k`` (number of frames before, and for infill after, 0).
    max_lead : int
        Largest forecast lead ``H`` in steps.
    observed_fraction : tuple of float
        Range of the fraction of locations each context frame observes.
    hole_probability : float
        Share of infill batches with a hole missing from every frame.
    hole_fraction : tuple of float
        Range of the hole's share of the locations (uniform, one value per batch).
    lattice_probability : float
        Share of batches whose locations are the cells of a regular grid (like a gridded product)
        rather than uniform in the square: ``r × c ≈ N_loc`` cells filling the square, the cell
        aspect ratio log-uniform on [0.5, 2] per batch (lat/lon cells are rarely square in metres).
    max_points : int
        Cap on context + target points per task.
    standardise : bool
        Standardise values per task by the context mean and std.
    noisy_targets : bool
        ``yt`` with noise (default) or the noiseless values.
    terrain : bool
        Give each location an elevation covariate that the field's correlation depends on.
    relief_range, terrain_lengthscale_range, elevation_lengthscale_range : tuple of float
        Log-uniform priors of the terrain's standard deviation (km) and lengthscale (spacing units)
        and of the field's elevation lengthscale (km).
    flat_probability : float
        Share of terrain tasks whose field does not depend on elevation.

    Examples
    --------
    >>> import torch
    >>> gen = SpaceTimeGP(mode="forecast", num_locations=(20, 20), window=(1, 1), max_lead=1)
    >>> batch, params = gen.sample_with_params(2, torch.Generator().manual_seed(0))
    >>> tuple(batch.xt.shape), batch.xt[0, 0, 2].item(), batch.xc[..., 2].unique().tolist()
    ((2, 20, 3), 1.0, [-1.0, 0.0])
    """

    mode: str = "mixed"
    forecast_probability: float = 0.5
    space_kernels: tuple[str, ...] = ("se", "matern-1.5", "matern-2.5")
    time_kernel: str = "se"
    space_lengthscale_range: tuple[float, float] = (0.5, 30.0)
    time_lengthscale_range: tuple[float, float] = (1.0, 100.0)
    noise_std_range: tuple[float, float] = (0.01, 0.3)
    variance_range: tuple[float, float] | None = None
    num_locations: tuple[int, int] = (64, 256)
    window: tuple[int, int] = (1, 3)
    max_lead: int = 6
    observed_fraction: tuple[float, float] = (0.1, 0.9)
    hole_probability: float = 0.0
    hole_fraction: tuple[float, float] = (0.03, 0.3)
    lattice_probability: float = 0.0
    max_points: int = 1500
    standardise: bool = True
    noisy_targets: bool = True
    terrain: bool = False
    relief_range: tuple[float, float] = (0.02, 1.0)
    terrain_lengthscale_range: tuple[float, float] = (1.0, 30.0)
    elevation_lengthscale_range: tuple[float, float] = (0.05, 3.0)
    flat_probability: float = 0.25

    def __post_init__(self) -> None:
        check_choice("mode", self.mode, SPACETIME_MODES)
        if not 0.0 <= self.forecast_probability <= 1.0:
            raise ConfigError(
                f"forecast_probability={self.forecast_probability!r} is not valid; expected a number in [0, 1]."
            )
        if isinstance(self.space_kernels, str) or not isinstance(self.space_kernels, (tuple, list)) or not (
            self.space_kernels
        ):
            raise ConfigError(
                f"space_kernels={self.space_kernels!r} is not valid; expected a non-empty tuple of kernel names "
                "such as ('se', 'matern-2.5')."
            )
        for k in self.space_kernels:
            kernel_code(k)
        if kernel_code(self.time_kernel) == kernel_code("periodic"):
            raise ConfigError("time_kernel='periodic' is not supported; expected 'se', 'matern-1.5', 'matern-2.5' "
                              "or 'exponential'.")
        check_range("space_lengthscale_range", self.space_lengthscale_range)
        check_range("time_lengthscale_range", self.time_lengthscale_range)
        check_range("noise_std_range", self.noise_std_range)
        if self.variance_range is not None:
            check_range("variance_range", self.variance_range)
        check_range("num_locations", self.num_locations, low=2, strict=False, integer=True)
        check_range("window", self.window, low=0, strict=False, integer=True)
        if isinstance(self.max_lead, bool) or not isinstance(self.max_lead, int) or self.max_lead < 1:
            raise ConfigError(f"max_lead={self.max_lead!r} is not valid; expected an int >= 1 (steps ahead).")
        check_range("observed_fraction", self.observed_fraction)
        if self.observed_fraction[1] > 1.0:
            raise ConfigError(
                f"observed_fraction={self.observed_fraction!r} is not valid; expected fractions in (0, 1], "
                "e.g. (0.1, 0.9)."
            )
        if not 0.0 <= self.hole_probability <= 1.0:
            raise ConfigError(
                f"hole_probability={self.hole_probability!r} is not valid; expected a number in [0, 1]."
            )
        if not 0.0 <= self.lattice_probability <= 1.0:
            raise ConfigError(
                f"lattice_probability={self.lattice_probability!r} is not valid; expected a number in [0, 1]."
            )
        check_range("hole_fraction", self.hole_fraction)
        check_range("relief_range", self.relief_range)
        check_range("terrain_lengthscale_range", self.terrain_lengthscale_range)
        check_range("elevation_lengthscale_range", self.elevation_lengthscale_range)
        if not 0.0 <= self.flat_probability <= 1.0:
            raise ConfigError(
                f"flat_probability={self.flat_probability!r} is not valid; expected a number in [0, 1]."
            )
        if self.hole_fraction[1] >= 1.0:
            raise ConfigError(
                f"hole_fraction={self.hole_fraction!r} is not valid; expected fractions below 1, e.g. (0.03, 0.3)."
            )
        check_positive("max_points", self.max_points, integer=True)
        if self.max_points < 2 * (2 * self.window[1] + 2):
            raise ConfigError(
                f"max_points={self.max_points} is too small for window={self.window}; expected at least "
                f"{2 * (2 * self.window[1] + 2)} (two locations in every frame). Raise max_points or shrink window."
            )

    def _counts(
        self, n_loc: int, fractions: Tensor, forecast: bool, hole: float = 0.0
    ) -> tuple[int, list[int], int, int]:
        """Shrink ``n_loc`` until context + targets fit ``max_points``.

        Returns ``n_loc``, the context count per frame, the number of targets and the hole size.
        """
        zero = len(fractions) - 1 if forecast else len(fractions) // 2
        while True:
            m = min(max(1, round(hole * n_loc)), n_loc - 1) if hole else 0
            free = n_loc - m
            counts = [min(max(1, round(float(f) * free)), free) for f in fractions]
            if not forecast and not m:
                counts[zero] = min(counts[zero], n_loc - 1)
            nt = n_loc if forecast else n_loc - counts[zero]
            if sum(counts) + nt <= self.max_points or n_loc <= 2:
                return n_loc, counts, nt, m
            n_loc = max(2, math.floor(0.9 * n_loc))

    def _draw(self, batch_size: int, generator: torch.Generator) -> tuple[Batch, Params]:
        b = batch_size
        if self.mode == "mixed":
            forecast = bool(torch.rand((), generator=generator) < self.forecast_probability)
        else:
            forecast = self.mode == "forecast"
        k = randint(*self.window, generator)
        lead = randint(1, self.max_lead, generator) if forecast else 0
        ctx_times = list(range(-k, 1)) if forecast else list(range(-k, k + 1))
        fractions = uniform((len(ctx_times),), *self.observed_fraction, generator)
        n_loc = randint(*self.num_locations, generator)
        hole = 0.0
        # draws nothing when hole_probability is 0, so the batches stay those of earlier versions
        if not forecast and self.hole_probability and float(torch.rand((), generator=generator)) < (
            self.hole_probability
        ):
            hole = float(uniform((), *self.hole_fraction, generator))
        # draws nothing when lattice_probability is 0, so the batches stay those of earlier versions
        lattice = bool(self.lattice_probability) and float(torch.rand((), generator=generator)) < (
            self.lattice_probability
        )
        if lattice:
            aspect = float(log_uniform((), 0.5, 2.0, generator))
            rows = max(2, round(math.sqrt(n_loc * aspect)))
            cols = max(2, round(n_loc / rows))
            n_loc = rows * cols
        n_loc, counts, nt, m = self._counts(n_loc, fractions, forecast, hole)
        side = math.sqrt(sum(counts) / len(counts))
        if lattice:
            loc = _lattice(b, n_loc, rows, cols, side, generator)
        else:
            loc = uniform((b, n_loc, 2), -0.5 * side, 0.5 * side, generator)

        codes = torch.tensor([kernel_code(name) for name in self.space_kernels], dtype=torch.long)
        kernel = codes[torch.randint(0, len(codes), (b,), generator=generator)]
        ell_s = log_uniform((b,), *self.space_lengthscale_range, generator)
        ell_t = log_uniform((b,), *self.time_lengthscale_range, generator)
        noise = log_uniform((b,), *self.noise_std_range, generator)
        if self.variance_range is None:
            var = torch.ones(b, dtype=torch.float64)
        else:
            var = log_uniform((b,), *self.variance_range, generator)

        frame_times = ctx_times + ([lead] if forecast else [])
        times = torch.tensor(frame_times, dtype=torch.float64)
        k_s = kernel_matrix(loc, loc, kernel=kernel, lengthscale=ell_s, period=ell_s)
        elev = ell_e = None
        if self.terrain:  # draws nothing otherwise, so the batches stay those of earlier versions
            elev, ell_e = self._terrain(loc, generator)
            k_s = k_s * elevation_correlation(elev, elev, ell_e)
        tt = times.reshape(1, -1, 1).expand(b, -1, 1)
        k_t = correlation(kernel_code(self.time_kernel), euclidean_distance(tt, tt), ell_t)
        low_s, _ = cholesky_with_jitter(k_s, what="space covariance")
        low_t, _ = cholesky_with_jitter(k_t.contiguous(), what="time covariance")
        eps = torch.randn((b, n_loc, len(frame_times)), generator=generator, dtype=torch.float64)
        field = var.sqrt().reshape(-1, 1, 1) * (low_s @ eps @ low_t.transpose(-1, -2))  # [b, n_loc, T]

        # the hole: the m locations nearest a random centre, missing from every frame
        if m:
            centre = uniform((b, 1, 2), -0.5 * side, 0.5 * side, generator)
            order = (loc - centre).square().sum(-1).argsort(dim=1)
            holes, free = order[:, :m], order[:, m:]
        else:
            holes = free = None
        xc_parts, fc_parts, idx_parts = [], [], []
        target_idx = None
        for j, (t, n_j) in enumerate(zip(ctx_times, counts)):
            if m:
                perm = free.gather(1, torch.rand(free.shape, generator=generator).argsort(dim=1))
                perm = torch.cat([perm, holes], dim=1)  # observed first, the hole always unobserved
            else:
                perm = torch.rand((b, n_loc), generator=generator).argsort(dim=1)
            idx = perm[:, :n_j]
            xc_parts.append(_frame_points(loc, idx, t))
            idx_parts.append(idx)
            fc_parts.append(field[:, :, j].gather(1, idx))
            if not forecast and t == 0:
                target_idx = perm[:, n_j:]
        if forecast:
            target_idx = torch.arange(n_loc).expand(b, n_loc)
            ft = field[:, :, -1].gather(1, target_idx)
            xt = _frame_points(loc, target_idx, lead)
        else:
            ft = field[:, :, ctx_times.index(0)].gather(1, target_idx)
            xt = _frame_points(loc, target_idx, 0)
        xc = torch.cat(xc_parts, dim=1)
        zc = zt = None
        if elev is not None:
            zc = torch.cat([elev.gather(1, i) for i in idx_parts], dim=1).unsqueeze(-1)
            zt = elev.gather(1, target_idx).unsqueeze(-1)
        fc = torch.cat(fc_parts, dim=1).unsqueeze(-1)
        ft = ft.unsqueeze(-1)
        yc = fc + noise.reshape(-1, 1, 1) * torch.randn(fc.shape, generator=generator, dtype=torch.float64)
        yt = ft + noise.reshape(-1, 1, 1) * torch.randn(ft.shape, generator=generator, dtype=torch.float64)

        if self.standardise:
            shift = yc.mean(dim=1, keepdim=True)
            scale = yc.std(dim=1, keepdim=True, correction=0).clamp_min(1e-8)
        else:
            shift = torch.zeros(b, 1, 1, dtype=torch.float64)
            scale = torch.ones(b, 1, 1, dtype=torch.float64)
        yc, yt, fc, ft = ((v - shift) / scale for v in (yc, yt, fc, ft))

        params = kernel_params(b, kernel=kernel, lengthscale=ell_s, variance=var, noise_std=noise, space_dims=2)
        params.update(
            time_kernel=torch.full((b,), kernel_code(self.time_kernel), dtype=torch.long),
            time_lengthscale=ell_t,
            y_shift=shift.reshape(b),
            y_scale=scale.reshape(b),
            lead=torch.full((b,), lead, dtype=torch.long),
            forecast=torch.full((b,), forecast, dtype=torch.bool),
            domain_side=torch.full((b,), side, dtype=torch.float64),
            hole_size=torch.full((b,), m, dtype=torch.long),
        )
        if ell_e is not None:
            params["elevation_lengthscale"] = ell_e
        return to_batch(xc, yc, xt, yt, params, fc=fc, ft=ft, noisy_targets=self.noisy_targets, zc=zc, zt=zt)

    def _terrain(self, loc: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """Elevations ``[b, n_loc]`` (km, mean 0 over the locations) and elevation lengthscales ``[b]``."""
        b = loc.shape[0]
        ell = log_uniform((b,), *self.terrain_lengthscale_range, generator)
        relief = log_uniform((b,), *self.relief_range, generator)
        k = kernel_matrix(loc, loc, kernel="matern-1.5", lengthscale=ell)
        low, _ = cholesky_with_jitter(k, what="terrain covariance")
        e = (low @ torch.randn((b, loc.shape[1], 1), generator=generator, dtype=torch.float64))[..., 0]
        e = relief.reshape(-1, 1) * (e - e.mean(dim=1, keepdim=True))
        ell_e = log_uniform((b,), *self.elevation_lengthscale_range, generator)
        flat = torch.rand((b,), generator=generator) < self.flat_probability
        return e, torch.where(flat, torch.full_like(ell_e, float("inf")), ell_e)


def _lattice(b: int, n_loc: int, rows: int, cols: int, side: float, generator: torch.Generator) -> Tensor:
    """``[b, n_loc, 2]`` cells of a ``rows × cols`` grid filling a square of ``side``.

    If ``n_loc`` was cut below ``rows × cols`` to fit ``max_points``, the grid keeps its shape and a
    random subset of ``n_loc`` cells is kept. A random offset of less than a cell moves the grid.
    """
    dy, dx = side / rows, side / cols
    r, c = torch.meshgrid(torch.arange(rows, dtype=torch.float64), torch.arange(cols, dtype=torch.float64),
                          indexing="ij")
    cells = torch.stack([(c.reshape(-1) + 0.5) * dx, (r.reshape(-1) + 0.5) * dy], -1) - 0.5 * side
    keep = torch.rand((b, rows * cols), generator=generator).argsort(dim=1)[:, :n_loc]
    offset = uniform((b, 1, 2), -0.5, 0.5, generator) * torch.tensor([dx, dy], dtype=torch.float64)
    return cells[keep] + offset


def _frame_points(loc: Tensor, idx: Tensor, t: float) -> Tensor:
    """``[b, n, 3]`` points ``(s1, s2, t)`` of the locations ``idx`` (``[b, n]``) at time ``t``."""
    s = loc.gather(1, idx.unsqueeze(-1).expand(-1, -1, 2))
    return torch.cat([s, torch.full_like(s[..., :1], float(t))], dim=-1)
