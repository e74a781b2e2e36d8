"""Which reference a forecast uses, and the diurnal reference of a gappy history filled by an infill (no torch).

A diurnal forecast adds ``y(valid - 24 h)`` back to the forecast change since then, and its
departures ``D(t) = y(t) - y(t - 24 h)`` are the network's context. Where ``y(t - 24 h)`` is
missing, its point's values a few frames around it, or the same hour days earlier, stood in
(:func:`geonp.reference.reference_values`): fine for a value missing here and there, but a gap
lasting hours (a cloud, a sensor down for the morning) left the departures missing and the
forecast added back a value days old. On ERA5 with 30 % of the cells missing in blobs that move
over hours, the default forecast's RMSE at +1 h went 0.28 → 0.76 K (on a week when the diurnal
reference is the right one) and 0.34 → 1.11 K (on a week of changing weather), where forecasting
the variable itself scored 0.55 and 0.50 K (a twenty-seventh new-user test).

Here the reference is the history itself where observed and an infill of it elsewhere (the same
model, each frame from itself alone, :data:`FILL_TIME_WINDOW`, so that no fill reads a frame after
an initial time it serves; the shipped BSA-TNP for a model fitted to forecast), over the frames the
forecast and its calibration read. The departures are those of the
filled history, and the forecast's variance adds the infill's at the value added back and at the initial
time (whose filled value the forecast change starts from). Where points have no data in the frames
just before an initial time (:func:`geonp.late.region_age`: a late region, or blobs over the initial
time), only the values subtracted and added back are filled: such points keep the std of their
lead from their newest data. A history without gaps is left as it is.
"""

from __future__ import annotations

import warnings

import numpy as np
import xarray as xr

from . import reference as references
from .calibrate_input import AUTO_CALIBRATION_INITS, calibrated_leads
from .domain import DOMAIN_COORD
from .errors import FarFromDataWarning, ModelMismatchError, NeverObservedWarning, NoContextWarning, NoDataError

__all__ = ["MIN_MISSING", "FILL_TIME_WINDOW", "reference_of", "filled_reference"]

#: a share of missing values in the frames read below this leaves the reference to the stand-ins
MIN_MISSING = 0.005
#: frames each side of a frame its fill is predicted from: 0, or an earlier initial time's fill (and the
#: calibration's) would read frames after it (±1 frame scored 0.43 K at +1 h against 0.52 on blob gaps, leaking)
FILL_TIME_WINDOW = 0


def filled_reference(ds: xr.Dataset, layout, model, inits: np.ndarray, lag: int, context_frames: int, leads: int,
                     reach: int = 0, device: str = "auto") -> tuple[xr.DataArray, xr.DataArray] | None:
    """The history with its gaps infilled, and the infill's variance there (0 where observed), or ``None``.

    The frames filled are those from ``lag`` frames before the first the forecast's calibration reads
    (:func:`geonp.calibrate_input.calibrated_leads` of ``leads`` and
    :data:`~geonp.calibrate_input.AUTO_CALIBRATION_INITS` initial times before the first initial time,
    each with ``context_frames`` and ``reach`` frames of context) to the last initial time; nothing
    after it is read. ``None`` when fewer than :data:`MIN_MISSING` of their values are missing (the
    stand-ins then do).
    """
    from .api import infill

    first, last = int(np.min(inits)), int(np.max(inits))
    calibrated = calibrated_leads(leads + reach, first + 1, context_frames, lag)
    lo = max(0, first - context_frames - reach - calibrated - AUTO_CALIBRATION_INITS - lag)
    part = ds.isel({layout.time: slice(lo, last + 1)})
    y = part[layout.var]
    missing, defined = y.isnull(), xr.ones_like(y, dtype=bool)
    if DOMAIN_COORD in y.coords:  # outside mask= nothing is missing: the field is not defined there
        missing, defined = missing.where(y[DOMAIN_COORD], False), defined.where(y[DOMAIN_COORD], False)
    others = [d for d in y.dims if d != layout.time]
    gaps, points = (np.asarray(a.sum(others).values) for a in (missing, defined))
    # a frame with no observation has nothing to be filled from (each frame is filled from itself alone): a
    # single missing hour paid 73 CPU-s for the fill of a 1 % gap it could not fill (a 28th new-user test)
    frames = np.flatnonzero((gaps > 0) & (gaps < points))
    if gaps[frames].sum() < MIN_MISSING * max(1, points.sum()):
        return None
    usable = getattr(model, "task", "any") in ("any", "infill")  # a model fitted to forecast: the shipped one
    # the fill's own warnings speak of a subset the user never passed (a never-observed share of its frames, targets
    # far from its data: a 29th new-user test); the forecast warns of its input itself
    with warnings.catch_warnings():
        for quiet in (FarFromDataWarning, NeverObservedWarning, NoContextWarning):
            warnings.simplefilter("ignore", quiet)
        try:
            filled = infill(part.isel({layout.time: frames}), layout.var, model=model if usable else "bsa-tnp",
                            device=device, time_window=FILL_TIME_WINDOW)
        except NoDataError:  # nothing to fill after all (e.g. gaps only where the field is not defined)
            return None
        # once: the departures, the calibration, the values added back and the choice of reference all read it
        filled = filled.persist() if y.chunks is not None else filled.compute()
    name, full = layout.var, ds[layout.var]

    def bare(a: xr.DataArray) -> xr.DataArray:  # the values alone: the infill's coordinates are its own
        return xr.DataArray(a.transpose(*y.dims).data, dims=y.dims)

    def placed(a: xr.DataArray) -> xr.DataArray:  # the filled frames' values at their places in `part`
        return bare(a).assign_coords({layout.time: frames}).reindex({layout.time: np.arange(y.sizes[layout.time])})

    std, raw = filled[f"{name}_std"], bare(y)
    value = raw.where(raw.notnull(), placed(filled[f"{name}_filled"])).astype(full.dtype).drop_vars(layout.time)
    variance = placed(std.astype(np.float32) ** 2)
    variance = variance.where(raw.isnull() & variance.notnull(), 0.0).drop_vars(layout.time)
    cut = [{layout.time: slice(0, lo)}, {layout.time: slice(last + 1, None)}]
    zero = xr.zeros_like(full, dtype=np.float32)
    reference = xr.concat([bare(full.isel(cut[0])), value, bare(full.isel(cut[1]))], dim=layout.time)
    var = xr.concat([bare(zero.isel(cut[0])), variance, bare(zero.isel(cut[1]))], dim=layout.time)
    return full.copy(data=reference.data), zero.copy(data=var.data)


def reference_of(model, reference: str | None) -> str:
    """The reference to use: the option, unless the model was fitted with another one."""
    own = str(model.settings.get("reference", "auto"))
    if reference is None:
        return own
    wanted = references.check(reference)
    if own != "auto" and wanted not in ("auto", own):
        raise ModelMismatchError(f"this model was fitted to {model.task} with reference={own!r}, not {wanted!r}; "
                                 f"leave reference= out, or fit a model with reference={wanted!r}.")
    return wanted
