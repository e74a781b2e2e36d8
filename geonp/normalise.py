"""Scales between data units and model units, saved with fitted models.

* **space**: one model unit is ``space_unit_km`` km. The shipped weights expect the typical
  spacing of the context, ``sqrt(area / observed points per frame)``; a fitted model keeps the
  unit it was trained with.
* **time**: one model unit is ``time_unit_hours`` hours (the data's own time step).
* **values**: standardised per task by the context mean and standard deviation (as the shipped
  weights were trained), with a floor on the standard deviation from the training data.
* **covariates**: elevation standardised by its training mean and standard deviation; hour of
  day (local solar time) and day of year as sine/cosine pairs.

No torch here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace

import numpy as np

from . import ridge as _ridge
from .errors import ConfigError, UnknownOptionError
from .spacing import context_spacing_km, grid_axis_spacing_km, grid_spacing_km, mean_spacing, station_spacing_km
from .trend import MIN_TREND_POINTS, StaticBasis, fit_variance, static_basis, target_neighbours

__all__ = ["Normaliser", "COVARIATES", "covariate_dims", "grid_spacing_km", "grid_axis_spacing_km", "mean_spacing",
           "station_spacing_km", "context_spacing_km"]

#: covariate name -> number of model columns
COVARIATES = {"elevation": 1, "hour": 2, "doy": 2}


#: fewest context points on the target frame for :meth:`Normaliser.frame_offsets` to apply
MIN_FRAME_POINTS = 5
#: a task with fewer context values than this is standardised by at least ``Normaliser.small_context_scale``
SMALL_CONTEXT = 5
#: least standard deviation (m) of each frame's context elevations for a lapse rate per frame
MIN_FRAME_RELIEF = 5.0
#: frame means are removed only when they spread more than this times the residuals within frames
FRAME_MEANS_RATIO = 1.0
_TUPLES = ("covariates", "lead_std_scale", "lead_std_extra", "lead_mean_weight", "lead_trend_weight", "lead_damping",
           "gap_distance", "gap_std_scale", "support_std_scale")


def _target_basis(basis: StaticBasis | None, et, lt) -> StaticBasis | None:
    """``basis`` without the quantities the targets lack (no elevation or land fraction there)."""
    if basis is None:
        return None
    e_ok = basis.e0 is not None and et is not None and np.isfinite(et).all()
    l_ok = basis.l0 is not None and lt is not None and np.isfinite(lt).all()
    if not (e_ok or l_ok):
        return None
    without_e = {} if e_ok else dict(e0=None, e_powers=0, xy0=None, u_range=None)
    without_l = {} if l_ok else dict(l0=None, l_powers=0, v_range=None)
    return replace(basis, **without_e, **without_l)


def _per_lead(table, lead_frames) -> np.ndarray:
    """``table[lead - 1]`` for each lead (in frames); the last entry serves longer leads."""
    table = np.asarray(table, dtype=np.float64)
    idx = np.clip(np.rint(np.asarray(lead_frames, dtype=np.float64)).astype(int) - 1, 0, len(table) - 1)
    return table[idx]


def covariate_dims(names) -> int:
    """Model columns used by covariates ``names``."""
    for n in names:
        if n not in COVARIATES:
            raise UnknownOptionError(f"unknown covariate {n!r}; expected some of {tuple(COVARIATES)}.")
    return sum(COVARIATES[n] for n in names)


@dataclass(frozen=True)
class Normaliser:
    """Data ↔ model scales.

    Parameters
    ----------
    space_unit_km : float or None
        km per model unit of space; ``None`` means "the context spacing of the data at hand"
        (the shipped weights' convention).
    time_unit_hours : float or None
        Hours per model unit of time; ``None`` means "the data's own time step".
    value_std_floor : float
        Smallest standard deviation used to standardise a task's values (data units); with
        ``1e-6 |mean|`` of the task's values, whichever is larger. Set for each run to a thousandth of
        the observed values' spread (``geonp.planning``), so that it scales with the data's units.
    nonnegative : bool
        Every observed value of the input is at least 0 (rain, wind speed): infill means are kept at 0
        or above. Set for each run (``geonp.planning``) from the values it counts.
    small_context_scale : float
        Standard deviation (data units) that standardises a task with fewer than
        :data:`SMALL_CONTEXT` context values when it is larger than theirs: the spread of one to
        four values says next to nothing about the field's, and a tiny scale would turn the
        network's unit-scale std into an interval far too narrow. Set for each run from the
        observed values of the data at hand (``geonp.api``); 0 turns it off.
    covariates : tuple of str
        Covariates fed to the model, in order (see :data:`COVARIATES`).
    elevation_mean, elevation_std : float
        Standardisation of elevation in metres.
    value_mean, value_std : float
        Mean and standard deviation of the training data (recorded, and used for the floor).
    std_scale : float
        Calibration: predictive standard deviations are multiplied by it (fitted by
        :func:`geonp.calibration.calibrate` on held-out points of the training data).
    lead_std_scale : tuple of float
        Forecast calibration per lead (in frames, lead 1 first); the last value serves longer leads.
    lead_std_extra : tuple of float
        Forecast calibration per lead: a std (data units) added in quadrature to the scaled
        predictive std, ``sqrt((lead_std_scale · σ)² + lead_std_extra²)`` (empty: none).
    lead_mean_weight : tuple of float
        Forecast calibration of the mean per lead: ``persistence + w * (mean - persistence)``, with
        persistence the value at the initial time (empty: the network's mean as it is).
    lead_damping : tuple of float
        Forecast calibration per lead: the weight ``c`` of persistence in ``c * persistence + w * (mean -
        persistence)`` for departures from an annual cycle (:func:`geonp.calibration.mean_weights`). Empty: 1.
    infill_std_base, infill_std_extra : float
        Infill calibration: the network's std ``σ`` first becomes
        ``sqrt((infill_std_base · σ)² + infill_std_extra²)`` (``infill_std_extra`` in data units: a
        nugget, where errors do not shrink next to the data as ``σ`` does, as between neighbouring
        weather stations), then ``std_scale`` or the gap factors apply.
        Defaults leave ``σ`` as it is (models saved before these fields).
    infill_mean_weight : float
        Infill calibration of the mean: the weight ``w`` of the network's departure from the task's
        trend, ``trend + w · (network − trend)`` (:func:`geonp.calibration.infill_mean_weight`; 1,
        the default, keeps the network's mean).
    gap_distance, gap_std_scale : tuple of float
        Infill calibration by gap size: factors on the predictive std at these distances (model
        units, increasing) from a target to the nearest context point of its own frame,
        interpolated in log-distance and constant beyond the ends. Empty: ``std_scale`` everywhere.
    support_std_scale : tuple of float
        Infill calibration: factors on the std after the gap factors, by how the target's own place
        is observed in the other frames of its context (:func:`geonp.data.temporal_support`: not
        at all, on one side, on both sides). Empty: 1.
    lead_trend_weight : tuple of float
        Forecast calibration per lead: the weight ``v`` of a trend term added to the mean,
        ``v * ((y(t0) - y(t0 - 1)) - (r(t0 + h) - r(t0 + h - 1)))``: the last step's change less the
        reference ``r``'s change over the step ending at the valid time (``r = 0`` without a
        reference). Empty: no trend term. See :func:`geonp.reference.trend`.
    elevation_trend : bool
        When the points have an elevation, remove a trend in elevation fitted to each task's
        context (least squares, linear or quadratic: :meth:`elevation_fit`) before standardising,
        and add it back to the predictive mean: the model then sees the field without its lapse
        rate (as regression kriging does).
    frame_means : bool
        When an infill task's context spans several frames, remove each frame's own mean (fitted
        jointly with the elevation trend: one intercept per frame) and add the target frame's back:
        the model then sees anomalies, which persist from frame to frame where the frame means do
        not (a seasonal or daily cycle). Models saved before this option read as ``False``.
    """

    space_unit_km: float | None = None
    time_unit_hours: float | None = None
    value_std_floor: float = 1e-6
    small_context_scale: float = 0.0
    nonnegative: bool = False
    covariates: tuple[str, ...] = ()
    elevation_mean: float = 0.0
    elevation_std: float = 1.0
    value_mean: float = 0.0
    value_std: float = 1.0
    std_scale: float = 1.0
    infill_std_base: float = 1.0
    infill_std_extra: float = 0.0
    infill_mean_weight: float = 1.0
    lead_std_scale: tuple[float, ...] = ()
    lead_std_extra: tuple[float, ...] = ()
    lead_mean_weight: tuple[float, ...] = ()
    lead_trend_weight: tuple[float, ...] = ()
    lead_damping: tuple[float, ...] = ()
    gap_distance: tuple[float, ...] = ()
    gap_std_scale: tuple[float, ...] = ()
    support_std_scale: tuple[float, ...] = ()
    elevation_trend: bool = True
    frame_means: bool = True
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        covariate_dims(self.covariates)
        if len(self.gap_distance) != len(self.gap_std_scale) or np.any(np.diff(self.gap_distance) <= 0) or (
                self.gap_distance and min(self.gap_distance) <= 0):
            raise ConfigError(f"gap_distance {self.gap_distance} and gap_std_scale {self.gap_std_scale} must have "
                              "the same length, with positive increasing distances.")
        if self.support_std_scale and len(self.support_std_scale) != 3:
            raise ConfigError(f"support_std_scale must hold 3 factors (support 0, 1, 2) or none, got "
                              f"{self.support_std_scale}.")
        for name in ("space_unit_km", "time_unit_hours"):
            v = getattr(self, name)
            if v is not None and not (np.isfinite(v) and v > 0):
                raise ConfigError(f"{name} must be a positive number or None, got {v!r}.")
        if not self.elevation_std > 0:
            raise ConfigError(f"elevation_std must be > 0, got {self.elevation_std}.")

    @property
    def covariate_dims(self) -> int:
        """Model columns of the covariates."""
        return covariate_dims(self.covariates)

    def to_dict(self) -> dict:
        """Plain-data form (saved with the model)."""
        d = asdict(self)
        for name in _TUPLES:
            d[name] = list(d[name])
        return d

    @classmethod
    def from_dict(cls, data: dict) -> Normaliser:
        """Inverse of :meth:`to_dict`."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ConfigError(f"unknown Normaliser fields {unknown}; expected some of {sorted(names)}.")
        data = dict(data)
        data.setdefault("frame_means", False)  # saved before the option existed: window-wide standardisation
        for name in _TUPLES:
            data[name] = tuple(data.get(name, ()))
        return cls(**data)

    def std_factor(self, lead_frames: np.ndarray | None = None, distance: np.ndarray | None = None,
                   support: np.ndarray | None = None) -> np.ndarray | float:
        """Calibration factor of the predictive std: per lead for forecasts, per gap ``distance`` for infill.

        ``support`` (infill, the shape of ``distance``): each target's
        :func:`~geonp.data.temporal_support`, for the ``support_std_scale`` factors.
        """
        if distance is not None and self.gap_std_scale:
            d = np.log(np.maximum(np.asarray(distance, dtype=np.float64), 1e-6))
            out = np.interp(d, np.log(np.asarray(self.gap_distance)), np.asarray(self.gap_std_scale))
            if support is not None and self.support_std_scale:
                out = out * np.asarray(self.support_std_scale)[np.asarray(support, dtype=np.intp)]
            return out
        if lead_frames is None or not self.lead_std_scale:
            return self.std_scale
        return _per_lead(self.lead_std_scale, lead_frames)

    def infill_std(self, std: np.ndarray) -> np.ndarray:
        """The network's infill std with the nugget of the calibration (before ``std_scale``/gap factors)."""
        if self.infill_std_base == 1.0 and self.infill_std_extra == 0.0:
            return std
        return np.sqrt((self.infill_std_base * std) ** 2 + self.infill_std_extra**2).astype(std.dtype)

    def std_extra(self, lead_frames: np.ndarray) -> np.ndarray | None:
        """Std added in quadrature per lead (data units), or ``None`` when there is none."""
        return _per_lead(self.lead_std_extra, lead_frames) if self.lead_std_extra else None

    def mean_weight(self, lead_frames: np.ndarray) -> np.ndarray | None:
        """Weight of the network's departure from persistence per lead, or ``None`` when uncalibrated."""
        return _per_lead(self.lead_mean_weight, lead_frames) if self.lead_mean_weight else None

    def damping(self, lead_frames: np.ndarray) -> np.ndarray | None:
        """Weight of persistence per lead (see ``lead_damping``), or ``None`` when it is 1."""
        return _per_lead(self.lead_damping, lead_frames) if self.lead_damping else None

    def trend_weight(self, lead_frames: np.ndarray) -> np.ndarray | None:
        """Weight of the trend term per lead (see ``lead_trend_weight``), or ``None`` when there is none."""
        return _per_lead(self.lead_trend_weight, lead_frames) if self.lead_trend_weight else None

    def elevation_fit(self, yc: np.ndarray, ec: np.ndarray | None, lc: np.ndarray | None = None,
                      xyc: np.ndarray | None = None, ground: bool = True) -> tuple[StaticBasis, np.ndarray] | None:
        """Fit the context values' static trend: ``(basis, coefficients)``, or ``None`` when none applies.

        The trend is linear in the :class:`~geonp.trend.StaticBasis` of the context: powers of
        ``u = (e − e0) / 1000 m`` (a lapse rate, and one that changes with height, as inversions
        in valleys make it) and of the land fraction ``l − l0`` (land against sea), least squares
        with an intercept that is not kept. Given the context positions ``xyc``, the elevation
        trend may also vary across the task. Elevation needs ``elevation_trend``; see
        :func:`geonp.trend.static_basis` for the counts and spreads each needs.
        """
        basis = static_basis(ec, lc, elevation=self.elevation_trend, xyc=xyc, ground=ground)
        if basis is None:
            return None
        design = np.concatenate([np.ones((len(yc), 1)), basis.columns(ec, lc, xyc)], 1)
        coef, ridge = _ridge.fit_trend(design, np.asarray(yc, dtype=np.float64), np.r_[False, basis.penalised])
        return replace(basis, ridge=ridge), coef[1:]

    def frame_offsets(self, yc: np.ndarray, tc: np.ndarray, ec: np.ndarray | None, tt: np.ndarray,
                      et: np.ndarray | None, lc: np.ndarray | None = None, lt: np.ndarray | None = None,
                      xyc: np.ndarray | None = None,
                      xyt: np.ndarray | None = None, variance: bool = True,
                      ground: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
        """Per-frame means plus the elevation trend at the context and the targets, and its variance there.

        Returns ``(at the context, at the targets, the estimate's variance at the targets)``
        (:func:`~geonp.trend.fit_variance`; ``None`` with ``variance=False``), or ``None``.

        One least-squares fit of the context values on an intercept per frame (frames are the
        distinct context times ``tc``) and, where :meth:`elevation_fit` would fit one, the same
        trend; when every frame has :data:`~geonp.trend.MIN_TREND_POINTS` points whose elevations
        spread by :data:`MIN_FRAME_RELIEF` m, its linear elevation term is fitted per frame (a lapse
        rate per month: on Colorado ±3 months RMSE 0.825 → 0.791 °C, docs/benchmarks.md), the rest
        of the trend shared. Each target gets the
        intercept (and lapse rate) of its own frame. ``None`` (so the task is
        standardised as a whole) unless ``frame_means`` is on, the context spans two or more frames,
        every target lies on a context frame with at least :data:`MIN_FRAME_POINTS` points, and
        the frame means spread more than :data:`FRAME_MEANS_RATIO` times the residuals within the
        frames. Jumps that large (a seasonal cycle between monthly frames: 2–6 times the spread on
        the Colorado stations) are what a stationary space-time prior cannot produce; smaller
        ones (0.2–0.6 between hourly ERA5 frames) it follows better than the frame means, which are
        noisy when a frame is sparsely observed.
        """
        yc, tc, tt = (np.asarray(a, dtype=np.float64) for a in (yc, tc, tt))
        if not self.frame_means or len(tt) == 0:
            return None
        frames, inv, counts = np.unique(tc, return_inverse=True, return_counts=True)
        at = np.searchsorted(frames, tt).clip(0, len(frames) - 1)  # each target's context frame
        if len(frames) < 2 or (frames[at] != tt).any() or (counts[np.unique(at)] < MIN_FRAME_POINTS).any():
            return None
        F = len(frames)
        basis = _target_basis(static_basis(ec, lc, elevation=self.elevation_trend,
                                           xyc=xyc if xyt is not None else None, ground=ground), et, lt)
        own = basis is not None and self._lapse_per_frame(basis, ec, inv, counts)

        def design(frame: np.ndarray, cols: np.ndarray | None) -> np.ndarray:
            """Intercept per frame, [lapse rate per frame,] shared trend columns."""
            parts = [np.eye(F)[frame]]
            if cols is not None and own:
                parts += [np.eye(F)[frame] * cols[:, :1], cols[:, 1:]]  # the linear elevation term first
            elif cols is not None:
                parts.append(cols)
            return np.concatenate(parts, 1)

        a = design(inv, basis.columns(ec, lc, xyc) if basis is not None else None)
        shared = np.zeros(0, dtype=bool) if basis is None else basis.penalised[1:] if own else basis.penalised
        penalised = np.r_[np.zeros(a.shape[1] - len(shared), dtype=bool), shared]
        coef, ridge = _ridge.fit_trend(a, yc, penalised)
        fitted = a @ coef
        if np.std(coef[:F]) <= FRAME_MEANS_RATIO * np.std(yc - fitted):
            return None  # frame means within the spread inside a frame: the model's time kernel handles them
        design_t = design(at, basis.columns(et, lt, xyt) if basis is not None else None)
        var_t = None
        if variance:
            var_t = fit_variance(a, design_t, yc - fitted, neighbour_rows=target_neighbours(xyt, xyc, a),
                                 penalty=_ridge.ridge_penalty(a, penalised, ridge))
        return fitted, design_t @ coef, var_t

    @staticmethod
    def _lapse_per_frame(basis: StaticBasis, ec, inv: np.ndarray, counts: np.ndarray) -> bool:
        """Whether each frame may have its own lapse rate.

        That is, whether every frame has :data:`~geonp.trend.MIN_TREND_POINTS` context points spread by
        :data:`MIN_FRAME_RELIEF` m in elevation.
        """
        if not basis.e_powers or counts.min() < MIN_TREND_POINTS:
            return False
        ec = np.asarray(ec, dtype=np.float64)
        return min(float(np.std(ec[inv == f])) for f in range(len(counts))) >= MIN_FRAME_RELIEF

    def elevation_offset(self, fit: tuple[StaticBasis, np.ndarray], e: np.ndarray | None,
                         land: np.ndarray | None = None, xy: np.ndarray | None = None) -> np.ndarray:
        """Evaluate the trend of :meth:`elevation_fit` at elevations, land fractions and positions.

        ``e`` holds the elevations (m), ``land`` the land fractions and ``xy`` the positions. Without its
        intercept.
        """
        basis, coef = fit
        return basis.columns(e, land, xy) @ coef

    def standardise(self, yc: np.ndarray) -> tuple[float, float]:
        """Shift and scale of one task's values: the context mean and std (floored; see ``small_context_scale``)."""
        yc = np.asarray(yc, dtype=np.float64)
        if yc.size == 0:
            return 0.0, 1.0
        shift = float(yc.mean())
        scale = float(yc.std()) if yc.size > 1 else 0.0
        floor = max(self.value_std_floor, 1e-6 * abs(shift))  # float32 keeps about 7 digits of the values
        if yc.size < SMALL_CONTEXT:
            floor = max(floor, self.small_context_scale)
        scale = max(scale, floor)
        return shift, scale if scale > 0 else 1.0  # all zeros: any scale standardises them

    def covariate_columns(
        self, elevation_m: np.ndarray | None, lon_deg: np.ndarray, hours: np.ndarray
    ) -> np.ndarray | None:
        """Covariates ``[T, P, covariate_dims]`` for times ``hours`` ``[T]`` (hours since 1970) and points ``[P]``."""
        if not self.covariates:
            return None
        hours = np.asarray(hours, dtype=np.float64)
        lon = np.asarray(lon_deg, dtype=np.float64)
        T, P = len(hours), len(lon)
        cols = []
        for name in self.covariates:
            if name == "elevation":
                if elevation_m is None:
                    raise ConfigError("the model uses elevation but the data have none; pass covariates= or an "
                                      "elevation coordinate.")
                e = (np.asarray(elevation_m, dtype=np.float64) - self.elevation_mean) / self.elevation_std
                cols.append(np.broadcast_to(e[None, :, None], (T, P, 1)))
            elif name == "hour":
                solar = (hours[:, None] + lon[None, :] / 15.0) % 24.0  # local solar time
                a = 2 * np.pi * solar / 24.0
                cols.append(np.stack([np.sin(a), np.cos(a)], -1))
            elif name == "doy":
                days = hours / 24.0
                a = 2 * np.pi * ((days % 365.2425) / 365.2425)
                cols.append(np.broadcast_to(np.stack([np.sin(a), np.cos(a)], -1)[:, None, :], (T, P, 2)))
        return np.concatenate(cols, -1)
