"""The time axis: datetime64 or cftime dates (climate-model calendars), counted in hours.

cftime dates (``noleap``, ``360_day``, ...) count hours in their own calendar, so a step across a
missing 29 February is still 24 h. No torch here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .errors import TimeAxisError

__all__ = ["is_time", "is_cftime", "steps_seconds", "time_hours", "time_step_hours"]


def is_time(values) -> bool:
    """Whether ``values`` (an array or coordinate) holds times: ``datetime64`` or cftime dates."""
    v = np.asarray(values)
    if np.issubdtype(v.dtype, np.datetime64):
        return True
    return v.dtype == object and v.size > 0 and is_cftime(v.flat[0])


def is_cftime(value) -> bool:
    """Whether ``value`` is a cftime date (climate-model calendars: noleap, 360_day, ...)."""
    return hasattr(value, "calendar") and hasattr(value, "dayofyr")


def steps_seconds(t: np.ndarray) -> np.ndarray:
    """Seconds between consecutive times (datetime64 or cftime)."""
    if np.issubdtype(t.dtype, np.datetime64):
        return np.diff(t.astype("datetime64[ns]").astype(np.int64)) / 1e9
    return np.array([step.total_seconds() for step in np.diff(t)])  # cftime: differences are timedeltas


def time_hours(values: np.ndarray, reference: np.datetime64 | None = None) -> np.ndarray:
    """Hours since ``reference`` (default 1970-01-01) as float64.

    cftime dates count hours in their own calendar (``cftime.date2num``).
    """
    v = np.asarray(values)
    if v.dtype == object and v.size and is_cftime(v.flat[0]):
        import cftime

        ref = "1970-01-01" if reference is None else str(np.datetime64(reference, "s")).replace("T", " ")
        return np.asarray(cftime.date2num(v, f"hours since {ref}", calendar=v.flat[0].calendar), dtype=np.float64)
    t = pd.to_datetime(v).values.astype("datetime64[ns]")
    ref = np.datetime64("1970-01-01T00:00", "ns") if reference is None else np.datetime64(reference, "ns")
    return (t - ref).astype("timedelta64[ns]").astype(np.float64) / 3.6e12


def time_step_hours(values: np.ndarray) -> float:
    """The data's time step in hours: the median spacing (1.0 for a single time)."""
    h = time_hours(values)
    if len(h) < 2:
        return 1.0
    return float(np.median(np.diff(h)))


def check_regular(values: np.ndarray, name: str) -> None:
    """Raise :class:`TimeAxisError` unless the steps are equal (within 1 %) or calendar months.

    Forecasts count leads in steps, so they need a regular axis; months (28–31 days) count one
    frame each, and the 1 % passes leap years and rounding.
    """
    spacing = np.diff(time_hours(values))
    if len(spacing) == 0 or ((spacing >= 28 * 24) & (spacing <= 31 * 24)).all():
        return
    step = float(np.median(spacing))
    if np.abs(spacing - step).max() > 0.01 * step:
        raise TimeAxisError(f"the time steps of {name!r} are irregular (from {spacing.min():g} h to "
                            f"{spacing.max():g} h); forecasting counts leads in steps and needs a regular axis. "
                            f"Insert the missing frames as NaN first, e.g. ds.resample({name}='{spacing.min():g}h')"
                            ".asfreq().")
