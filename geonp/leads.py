"""How many lead times a forecast asks for: ``hours=`` (a number, a duration) or ``steps=``. No torch here."""

from __future__ import annotations

import datetime

import numpy as np
import pandas as pd

from .errors import ConfigError, TimeAxisError

__all__ = ["lead_count"]


def _number_or_text(hours):
    """``hours`` as a number of hours when the text is one ("6" from the command line), else as it is."""
    if isinstance(hours, str):
        try:
            return pd.Timedelta(hours=float(hours))
        except ValueError:
            return hours
    return hours


def lead_count(hours, steps, step: float) -> int:
    """The number of lead times asked for by ``hours=`` or ``steps=`` (exactly one) on an axis of ``step`` hours.

    Raises
    ------
    ConfigError
        Both or neither given.
    TimeAxisError
        ``hours`` not a positive multiple of ``step``, or ``steps`` not a whole number >= 1.
    """
    if (hours is None) == (steps is None):
        raise ConfigError(f"forecast needs exactly one of hours= (the last lead time, in hours) or steps= (the "
                          f"number of lead times, each one time step of {step:g} h); got "
                          f"{'both' if hours is not None else 'neither'}.")
    if steps is not None:
        whole = isinstance(steps, (int, np.integer)) or (isinstance(steps, (float, np.floating))
                                                           and float(steps).is_integer())  # 2.0 from arithmetic
        if isinstance(steps, bool) or not whole or steps < 1:
            raise TimeAxisError(f"steps={steps!r}; expected a whole number of time steps >= 1 (the data's step is "
                                f"{step:g} h), e.g. steps=6.")
        return int(steps)
    if isinstance(hours, (bool, np.bool_)):
        raise TimeAxisError(f"hours={hours!r}; expected the last lead time in hours, e.g. hours={6 * step:g}.")
    try:  # "6h", "90min", "1D", a Timedelta or a timedelta64 are durations too (and "6" on the command line)
        duration = isinstance(hours, (str, pd.Timedelta, datetime.timedelta, np.timedelta64))
        hours = pd.Timedelta(_number_or_text(hours)) / pd.Timedelta(hours=1) if duration else float(hours)
    except (TypeError, ValueError) as exc:
        months = step >= 28 * 24  # calendar months are no fixed duration: count them
        hint = (f"steps=6 (six {'months' if months else 'time steps'})" if months else
                f"hours={6 * step:g} or a duration string such as hours='{6 * step:g}h'")
        raise TimeAxisError(f"hours={hours!r} is not a number of hours; expected e.g. {hint}.") from exc
    if not np.isfinite(hours):
        raise TimeAxisError(f"hours={hours:g}; expected a finite positive multiple of the data's time step "
                            f"({step:g} h), e.g. hours={6 * step:g}.")
    n_leads = hours / step
    if hours <= 0 or abs(n_leads - round(n_leads)) > 1e-4:  # (times stored to the millisecond: 19:59.9988 min)
        raise TimeAxisError(f"hours={hours:g} is not a positive multiple of the data's time step ({step:g} h); "
                            f"use e.g. hours={step * max(1, round(n_leads)):g}, or steps={max(1, round(n_leads))}.")
    return int(round(n_leads))
