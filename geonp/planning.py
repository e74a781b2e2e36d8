"""Plan a prediction: count the observations, refuse inputs with nothing to do, build the problem."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple

import dask
import dask.array as da
import numpy as np
import xarray as xr

from . import geo
from .chunked import Problem, _dask_data, build_problem
from .domain import DOMAIN_COORD, NEVER_OBSERVED_MIN_FRAMES, find_domain
from .errors import NeverObservedWarning, NoDataError, SparseDataWarning, warn_user
from .geo import Layout
from .io.stations import SENTINELS
from .report_times import warn_mixed_times

if TYPE_CHECKING:
    from .model import Model

__all__ = ["plan_problem", "sparse_warning", "observed_stats", "Observed", "SPARSE_POINTS", "PLAN_FRAMES",
           "NONNEGATIVE_TOLERANCE"]

#: fewer observed points per frame than this (on average) get a :class:`~geonp.errors.SparseDataWarning`
SPARSE_POINTS = 10

#: observed values below 0 by at most this share of the observed range still count as 0 (the numerical noise
#: of accumulated fields such as ERA5 ``tp``, e.g. -1e-6 m): the variable is kept at 0 or above
NONNEGATIVE_TOLERANCE = 1e-4

#: a record with more frames than this is planned (observed fraction, spread) from this many evenly spaced frames
PLAN_FRAMES = 32


class Observed(NamedTuple):
    """What planning counts of a variable (:func:`observed_stats`)."""

    count: int  #: observed values
    total: int  #: values (where the field is defined)
    spread: float  #: their std
    share: float  #: share of the values in a frame (of an extra dims' index) with any observation
    lowest: float  #: the smallest observed value
    highest: float  #: the largest
    never: tuple[float, float]  #: share of the points never observed, and the share independent gaps would leave
    #: per point ``[P]``, whether it holds a value in any frame counted (of any index of the extra dims)
    seen: np.ndarray | None = None


def plan_problem(ds: xr.Dataset, layout: geo.Layout, model: Model, task: str, target=None,
                 part: bool = False, counted: xr.Dataset | None = None,
                 raw: xr.Dataset | None = None, warn_sparse: bool = True) -> tuple[Problem | None, int]:
    """Count the observations (a bounded sample of a long record), refuse inputs with nothing to do, build the problem.

    Returns the problem and the number of observed values. ``part``: one index of an extra dim
    (:mod:`geonp.members`), whose whole was checked already: the problem is ``None`` where it has
    fewer than two observed values, and it may have no gaps. ``counted``: the part of ``ds`` the
    counts, the observed fraction (the space unit) and the spread come from (forecasts: the history
    up to the first initial time, so that nothing after it changes the forecast); default ``ds``.
    ``raw``: the variable itself where ``counted`` holds departures from a reference; its smallest and
    largest observed values decide whether the prediction is never negative (``Normaliser.nonnegative``)
    and whether they look like missing-value markers. ``warn_sparse=False``: the caller warns of few
    observed points per frame itself (:func:`sparse_warning`, where no calibration widens the intervals).
    """
    gaps_needed = task == "infill" and target is None and not part
    if layout.time is not None and not part:
        warn_mixed_times(ds[layout.var], layout.time)
    n_obs, n_all, spread, share, lowest, highest, never, seen = observed_stats(
        ds if counted is None else counted, layout, gaps_needed=gaps_needed)
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
    if gaps_needed or (task == "forecast" and not part):  # forecasts: the history's points never observed
        _warn_never_observed(ds, layout, never)
    if raw is not None:  # departures from a reference: the variable itself decides bounds and markers
        lowest, highest = observed_stats(raw, layout)[4:6]
    if not part:
        _warn_sentinel(layout, lowest, highest)
    points = math.prod(ds.sizes[d] for d in layout.space_dims)
    per_frame = n_obs / max(n_all / points * share, 1.0)  # frames (and members, levels) with data
    if warn_sparse and not part:
        _warn_sparse(layout.var, per_frame)
    # shipped weights take the spacing of the observations as their space unit; fitted models keep theirs
    # tasks with a handful of context values take the data's spread as their scale (Normaliser.standardise),
    # and no task's scale falls below a thousandth of it: a floor in the data's own units, whatever they are
    # (an absolute 1e-6 made methane mole fractions, spread 1e-8, infill 12 times worse than linear interpolation)
    floor = 1e-3 * spread if spread > 0 else model.normaliser.value_std_floor
    norm = replace(model.normaliser, small_context_scale=spread, value_std_floor=floor,
                   nonnegative=bool(lowest >= -NONNEGATIVE_TOLERANCE * max(highest - lowest, 0.0)))
    # the observed fraction among the members/levels that hold data: an empty one does not move the others
    problem = build_problem(ds, layout, norm, observed_fraction=n_obs / (n_all * share), targets=target)
    problem.source.seen = seen  # windows reach past places never observed (geonp.tiling.window)
    problem.observed_per_frame = per_frame
    return problem, n_obs


def sparse_warning(problem: Problem | None, calibration) -> None:
    """The :class:`~geonp.errors.SparseDataWarning` of :func:`plan_problem` (``warn_sparse=False``), unless calibrated.

    A calibration measures the std on held-out observations: twelve Irish wind stations (9.3 observed
    per frame) were warned that the std was likely far too small, and covered 0.955 (a thirtieth
    new-user test).
    """
    if problem is not None and calibration is None:
        _warn_sparse(problem.layout.var, problem.observed_per_frame)


def _warn_sparse(var, per_frame: float) -> None:
    if per_frame < SPARSE_POINTS:
        warn_user(f"{var!r} has {per_frame:.3g} observed points per frame on average (fewer than "
                  f"{SPARSE_POINTS}): geonp measures distances in the spacing of the observations and takes the "
                  "field's spread from their values, which so few points cannot show, so the std is likely far "
                  "too small (two observed corners of an ERA5 grid: coverage 0.11). Treat the intervals as "
                  "unreliable, add observations, or calibrate them (calibrate=True).", SparseDataWarning)


def _warn_sentinel(layout: Layout, lowest: float, highest: float) -> None:
    """Warn when the smallest or largest value is a common missing-value marker (-999, -9999, ...) read as data."""
    for value, which in ((lowest, "smallest"), (highest, "largest")):
        if np.isfinite(value) and np.any(np.isclose(value, SENTINELS, rtol=0, atol=1e-9)):
            v = layout.var
            warn_user(f"the {which} value of {v!r} is {value:g}, a common missing-value marker, and it is read as "
                      f"data. If it means missing, mask it: ds[{v!r}] = ds[{v!r}].where(ds[{v!r}] != {value:g}), or "
                      f"geonp.open_dataset(path, na_values=[{value:g}]) (CLI --na-values {value:g}).", UserWarning)


def _warn_never_observed(ds: xr.Dataset, layout: Layout, never: tuple[float, float]) -> None:
    """Warn when more points of a grid lack a value in every frame than gaps drawn frame by frame would leave."""
    share, chance = never
    if (len(layout.space_dims) != 2 or layout.time is None or DOMAIN_COORD in ds.coords
            or ds.sizes[layout.time] < NEVER_OBSERVED_MIN_FRAMES or share <= max(0.01, 3.0 * chance + 0.005)):
        return
    warn_user(f"{share:.1%} of the points of {layout.var!r} have no value in any frame (land in a sea-surface field, "
              "a level below the ground, outside a swath?); they are predicted from their neighbours alone like any "
              "gap (forecasts: covered 0.28 at +1 h in a test), and count as gaps deep inside the data. If the "
              "field is not defined there, pass mask='observed' (CLI --mask observed) to leave them NaN, or mask= "
              "where it is defined (e.g. mask=ds.lsm < 0.5).", NeverObservedWarning)


def observed_stats(ds: xr.Dataset, layout: Layout, *, gaps_needed: bool = False) -> Observed:
    """The :class:`Observed` counts of ``layout.var``.

    With more than :data:`PLAN_FRAMES` frames they come from that many evenly spaced frames (read
    chunk by chunk; the counts scaled to the whole), so that planning a long record reads a bounded
    sample of it, whatever its backing or chunking (so chunked and unchunked runs plan alike). The
    whole record is counted instead where the sample would raise an error the whole might not: fewer
    than two observed values, or, with ``gaps_needed``, no missing value.

    ``share`` is the share of the values that lie in a frame (of an index of the extra dims: a member,
    a level) with any observation: the observed fraction that sets the space unit is taken over those,
    so an empty member (missing, or a level below ground), or a frame missing whole, does not change
    the others' predictions (a day inserted as an empty frame moved other days' infill by up to 0.83 °C).
    Values count only where the field is defined (``mask=``, :mod:`geonp.domain`).
    """
    data = _dask_data(ds, layout, {})
    inside = find_domain(ds, layout)
    part = 1.0 if inside is None else float(inside.mean())  # the share of the points where the field is defined
    n_extra, n_all = len(layout.extra_dims), round(math.prod(data.shape) * part)  # time follows the extra dims
    n_frames = data.shape[n_extra]
    if n_frames > PLAN_FRAMES:
        frames_ = np.unique(np.linspace(0, n_frames - 1, PLAN_FRAMES).round().astype(int))
        count, n, *moments = _moments(data[(slice(None),) * n_extra + (frames_,)], n_extra)
        n = round(n * part)
        if count >= 2 and (count < n or not gaps_needed):
            estimate = round(count / n * n_all)
            count = min(max(2, estimate), n_all if count == n else n_all - 1)
            return Observed(count, n_all, *moments)
    count, _, *moments = _moments(data, n_extra)
    return Observed(count, n_all, *moments)


def _moments(data: da.Array, n_extra: int = 0) -> tuple:
    """:class:`Observed`'s fields of ``data`` ``[extra..., time, *space]`` (values not scaled to a mask), one pass."""
    x = data.astype(np.float64)
    finite = da.isfinite(data)
    per_index = finite.sum(axis=tuple(range(n_extra, data.ndim))) if n_extra else finite.sum()
    space = tuple(range(n_extra + 1, data.ndim))
    counts, total, squares, lowest, highest, ever, per_frame = dask.compute(
        per_index, da.nansum(x), da.nansum(x * x), da.nanmin(x), da.nanmax(x), finite.any(axis=n_extra),
        finite.mean(axis=space))
    count, counts = int(np.sum(counts)), np.atleast_1d(np.asarray(counts)).ravel()
    if count == 0:
        return 0, int(math.prod(data.shape)), 0.0, 1.0, np.nan, np.nan, (0.0, 0.0), None
    mean = total / count  # moments in float64: a floor for tiny contexts needs no more precision than this
    spread = float(np.sqrt(max(squares / count - mean * mean, 0.0)))
    # points without a value in any frame, and as many as gaps drawn independently frame by frame would leave
    with_data = counts > 0 if n_extra else np.ones(1, dtype=bool)
    ever = np.asarray(ever).reshape(len(counts), -1)[with_data]
    chance = np.prod(1.0 - np.asarray(per_frame).reshape(len(counts), -1)[with_data], axis=1)
    never = (float(np.mean(~ever)), float(np.mean(chance)))
    share = float(np.mean(np.asarray(per_frame) > 0))  # frames (of members, levels) with data
    return count, int(math.prod(data.shape)), spread, share, float(lowest), float(highest), never, ever.any(0)
