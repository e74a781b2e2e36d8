"""Static trends removed from each task's context before the network: elevation and land fraction.

The shipped weights were pretrained on stationary random fields. Real fields also follow the
ground: they cool with height (a lapse rate) and differ between land and sea. Each task fits its
context values on powers of both (:class:`StaticBasis`), the network sees the residuals, and the
trend is added back at the targets, as regression kriging does. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["StaticBasis", "static_basis", "smooth_grid", "MIN_TREND_POINTS", "QUADRATIC_TREND_POINTS"]

#: fewest context points for a trend (linear in each quantity)
MIN_TREND_POINTS = 10
#: from this many context points the trends are quadratic
QUADRATIC_TREND_POINTS = 30


@dataclass(frozen=True)
class StaticBasis:
    """Powers of centred elevation (``u = (e − e0) / 1000 m``) and land fraction (``v = l − l0``)."""

    e0: float | None
    e_powers: int
    l0: float | None
    l_powers: int

    @property
    def size(self) -> int:
        return self.e_powers + self.l_powers

    def columns(self, e: np.ndarray | None, land: np.ndarray | None) -> np.ndarray:
        """The basis at points with elevations ``e`` (m) and land fractions ``land``: ``[n, size]``."""
        cols = []
        if self.e0 is not None:
            u = (np.asarray(e, dtype=np.float64) - self.e0) / 1000.0
            cols += [u ** k for k in range(1, self.e_powers + 1)]
        if self.l0 is not None:
            v = np.asarray(land, dtype=np.float64) - self.l0
            cols += [v ** k for k in range(1, self.l_powers + 1)]
        return np.stack(cols, 1)


def _usable(x: np.ndarray | None, spread: float) -> bool:
    return x is not None and len(x) >= MIN_TREND_POINTS and bool(np.isfinite(x).all()) and float(np.std(x)) >= spread


def static_basis(ec: np.ndarray | None, lc: np.ndarray | None, *, elevation: bool = True,
                 land: bool = True) -> StaticBasis | None:
    """The trend basis a context with elevations ``ec`` and land fractions ``lc`` supports, or ``None``.

    Elevation enters when there are at least :data:`MIN_TREND_POINTS` finite values spread over
    more than ~5 m, land fraction when they spread by more than 0.01 (a context all on land, or
    all at sea, has no land trend to learn). Each is linear, quadratic from
    :data:`QUADRATIC_TREND_POINTS` points.
    """
    ec = None if ec is None or not elevation else np.asarray(ec, dtype=np.float64)
    lc = None if lc is None or not land else np.asarray(lc, dtype=np.float64)
    use_e, use_l = _usable(ec, 5.0), _usable(lc, 0.01)
    if not (use_e or use_l):
        return None
    n = len(ec) if use_e else len(lc)
    powers = 2 if n >= QUADRATIC_TREND_POINTS else 1
    return StaticBasis(float(ec.mean()) if use_e else None, powers if use_e else 0,
                       float(lc.mean()) if use_l else None, powers if use_l else 0)


def smooth_grid(values: np.ndarray, sigma: float = 1.0) -> np.ndarray:
    """``values`` ``[ny, nx]`` smoothed by a separable Gaussian of ``sigma`` cells (edges repeated).

    A land fraction changes from 0 to 1 within a cell at a coast, while near-surface fields change
    over tens of km; smoothed over about one 0.25° cell the land trend helped most on ERA5
    (docs/benchmarks.md, "A land–sea trend").
    """
    values = np.asarray(values, dtype=np.float64)
    if sigma <= 0:
        return values
    r = int(np.ceil(4 * sigma))
    kernel = np.exp(-0.5 * (np.arange(-r, r + 1) / sigma) ** 2)
    kernel /= kernel.sum()
    out = values
    for axis in range(values.ndim):  # separable: one 1-D convolution per axis, as a sum of shifted copies
        pad = [(0, 0)] * values.ndim
        pad[axis] = (r, r)
        padded = np.pad(out, pad, mode="edge")
        n = out.shape[axis]
        out = sum(w * np.take(padded, np.arange(k, k + n), axis=axis) for k, w in enumerate(kernel))
    return out
