"""Plan a prediction: count the observations, refuse inputs with nothing to do, build the problem."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

import xarray as xr

from . import geo
from .chunked import Problem, build_problem, observed_stats
from .errors import NoDataError, SparseDataWarning, warn_user

if TYPE_CHECKING:
    from .model import Model

__all__ = ["plan_problem", "SPARSE_POINTS"]

#: fewer observed points per frame than this (on average) get a :class:`~geonp.errors.SparseDataWarning`
SPARSE_POINTS = 10


def plan_problem(ds: xr.Dataset, layout: geo.Layout, model: Model, task: str, target=None,
                 part: bool = False, counted: xr.Dataset | None = None,
                 raw: xr.Dataset | None = None) -> tuple[Problem | None, int]:
    """Count the observations (a bounded sample of a long record), refuse inputs with nothing to do, build the problem.

    Returns the problem and the number of observed values. ``part``: one index of an extra dim
    (:mod:`geonp.members`), whose whole was checked already: the problem is ``None`` where it has
    fewer than two observed values, and it may have no gaps. ``counted``: the part of ``ds`` the
    counts, the observed fraction (the space unit) and the spread come from (forecasts: the history
    up to the first initial time, so that nothing after it changes the forecast); default ``ds``.
    ``raw``: the variable itself where ``counted`` holds departures from a reference; its smallest
    observed value decides whether the prediction is never negative (``Normaliser.nonnegative``).
    """
    gaps_needed = task == "infill" and target is None and not part
    n_obs, n_all, spread, share, lowest = observed_stats(ds if counted is None else counted, layout,
                                                         gaps_needed=gaps_needed)
    if part and n_obs < 2:
        return None, n_obs
    if n_obs == 0:
        raise NoDataError(f"every value of {layout.var!r} is missing; expected observations to condition on. "
                          "Check the variable and the selection (e.g. .sel(time=...)).")
    if n_obs == 1:
        raise NoDataError(f"{layout.var!r} has a single observed value; expected at least two (one value says nothing "
                          "about how the field varies, so no interval could be given). Widen the selection.")
    if gaps_needed and n_obs == n_all:
        raise NoDataError(f"{layout.var!r} has no gaps (no NaN values) to fill; mask the cells to predict with NaN "
                          "(e.g. ds.where(mask)), or pass targets= (CLI --targets PATH) to predict at other "
                          "coordinates.")
    points = math.prod(ds.sizes[d] for d in layout.space_dims)
    per_frame = n_obs / max(n_all / points * share, 1.0)  # frames (and members, levels) with data
    if per_frame < SPARSE_POINTS and not part:
        warn_user(f"{layout.var!r} has {per_frame:.3g} observed points per frame on average (fewer than "
                  f"{SPARSE_POINTS}): geonp measures distances in the spacing of the observations and takes the "
                  "field's spread from their values, which so few points cannot show, so the std is likely far "
                  "too small (two observed corners of an ERA5 grid: coverage 0.11). Treat the intervals as "
                  "unreliable, or add observations.", SparseDataWarning)
    # shipped weights take the spacing of the observations as their space unit; fitted models keep theirs
    # tasks with a handful of context values take the data's spread as their scale (Normaliser.standardise),
    # and no task's scale falls below a thousandth of it: a floor in the data's own units, whatever they are
    # (an absolute 1e-6 made methane mole fractions, spread 1e-8, infill 12 times worse than linear interpolation)
    floor = 1e-3 * spread if spread > 0 else model.normaliser.value_std_floor
    if raw is not None:  # departures from a reference go below 0 whatever the variable does
        lowest = observed_stats(raw, layout)[4]
    norm = replace(model.normaliser, small_context_scale=spread, value_std_floor=floor, nonnegative=lowest >= 0)
    # the observed fraction among the members/levels that hold data: an empty one does not move the others
    return build_problem(ds, layout, norm, observed_fraction=n_obs / (n_all * share), targets=target), n_obs
