"""The time axis: datetime64 or cftime dates (climate-model calendars), counted in hours.

cftime dates (``noleap``, ``360_day``, ...) count hours in their own calendar, so a step across a
missing 29 February is still 24 h. No torch here.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import xarray as xr

from .errors import ConfigError, ShortHistoryWarning, TimeAxisError, UnvalidatedStepWarning, warn_user
from .leads import lead_count

__all__ = ["freq_string", "is_time", "is_cftime", "is_cf_numeric_time", "decode_cf_times", "steps_seconds",
           "time_hours", "time_step_hours", "step_of", "check_regular", "is_monthly",
           "frame_numbers",
           "lead_count", "valid_times", "warn_short_history", "warn_coarse_step", "parse_duration",
           "init_indices"]

#: shortest and longest step of an axis of calendar months, in hours
_MONTH_HOURS = (28 * 24, 31 * 24)


def is_time(values) -> bool:
    """Whether ``values`` (an array or coordinate) holds times: ``datetime64`` or cftime dates."""
    v = np.asarray(values)
    if np.issubdtype(v.dtype, np.datetime64):
        return True
    return v.dtype == object and v.size > 0 and is_cftime(v.flat[0])


def is_cftime(value) -> bool:
    """Whether ``value`` is a cftime date (climate-model calendars: noleap, 360_day, ...)."""
    return hasattr(value, "calendar") and hasattr(value, "dayofyr")


def is_cf_numeric_time(c: xr.DataArray) -> bool:
    """Whether ``c`` holds numbers with CF time units (``"hours since 2019-03-01"``): times not decoded yet."""
    units = str(c.attrs.get("units", "")).lower()
    return " since " in units and np.issubdtype(c.dtype, np.number)


def decode_cf_times(ds: xr.Dataset, dims) -> xr.Dataset:
    """``ds`` with its coordinates on ``dims`` that are CF times still held as numbers decoded to dates.

    A file opened with ``decode_times=False`` keeps ``time`` as, e.g., hours since a date; decoded, it
    is the time axis (datetime64, or cftime dates for other calendars) rather than an extra dim.

    Raises
    ------
    TimeAxisError
        The units or calendar cannot be decoded.
    """
    decoded = {}
    for name, c in ds.coords.items():
        if c.ndim >= 1 and set(c.dims) <= set(dims) and is_cf_numeric_time(c):
            decoded[name] = _decode(str(name), c)
    return ds.assign_coords(decoded) if decoded else ds


def _decode(name: str, c: xr.DataArray) -> xr.Variable:
    try:
        return xr.decode_cf(xr.Dataset(coords={name: c.variable}))[name].variable
    except (ValueError, TypeError, OverflowError) as exc:  # xarray's errors for units/calendars it cannot read
        raise TimeAxisError(
            f"time coordinate {name!r} holds numbers ({c.dtype}) with units {c.attrs.get('units')!r}"
            f"{_calendar(c)} that could not be decoded to dates ({exc}); expected datetimes. Decode them with "
            "ds = xr.decode_cf(ds) (use_cftime=True for other calendars), or fix the units/calendar attributes, "
            f"or assign dates: ds.assign_coords({name}=pd.date_range(...)).") from exc


def _calendar(c: xr.DataArray) -> str:
    return f" and calendar {c.attrs['calendar']!r}" if "calendar" in c.attrs else ""


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


def step_of(ds: xr.Dataset, time_dim: str | None) -> float | None:
    """The data's time step in hours; ``None`` without a time axis or with one frame (no step to compare)."""
    if time_dim is None or ds.sizes[time_dim] < 2:
        return None
    return time_step_hours(ds[time_dim].values)


def time_step_hours(values: np.ndarray) -> float:
    """The data's time step in hours: the median spacing (1.0 for a single time)."""
    h = time_hours(values)
    if len(h) < 2:
        return 1.0
    return float(np.median(np.diff(h)))


def check_regular(values: np.ndarray, name: str, y: xr.DataArray | None = None) -> None:
    """Raise :class:`TimeAxisError` unless the steps are equal (within 1 %) or calendar months.

    Forecasts count leads in steps, so they need a regular axis; months (28–31 days) count one
    frame each, and the 1 % passes leap years and rounding. With the variable ``y``, times that mix
    report offsets are named first (:func:`geonp.report_times.warn_mixed_times`).
    """
    spacing = np.diff(time_hours(values))
    if len(spacing) == 0 or is_monthly(values):
        return
    step = float(np.median(spacing))
    if np.abs(spacing - step).max() > 0.01 * step:
        if y is not None:
            from .report_times import warn_mixed_times

            warn_mixed_times(y, name)
        raise TimeAxisError(f"the time steps of {name!r} are irregular (from {spacing.min():g} h to "
                            f"{spacing.max():g} h); forecasting counts leads in steps and needs a regular axis. "
                            f"Insert the missing frames as NaN first, e.g. ds.resample({name}="
                            f"'{freq_string(spacing.min())}').asfreq(), or, where some points report at other times "
                            "than the rest (a MixedTimesWarning names them and their common step), put them on that "
                            f"step: ds.resample({name}=<step>).mean().")


def freq_string(hours: float) -> str:
    """A pandas frequency for a step of ``hours``, to the second: ``"20min"``, ``"1h"``, ``"24h"``."""
    text = pd.tseries.frequencies.to_offset(pd.Timedelta(hours=float(hours)).round("s")).freqstr
    return text if text[:1].isdigit() else "1" + text


def is_monthly(values: np.ndarray) -> bool:
    """Whether the axis steps by calendar months: every step 28–31 days (two times or more)."""
    spacing = np.diff(time_hours(values))
    return len(spacing) > 0 and bool(((spacing >= _MONTH_HOURS[0]) & (spacing <= _MONTH_HOURS[1])).all())


def frame_numbers(times: np.ndarray | None, step_hours: float) -> np.ndarray:
    """Every time's number in steps of ``step_hours`` from 1970-01-01 (calendar months on a monthly axis).

    Numbered by its own time, not by its place: an axis with a missing hour keeps the later frames'
    numbers (counted from the first time plus the index, every group after the gap moved by an hour
    and its values by 0.17-0.51 K, a twenty-eighth new-user test). Empty without times.
    """
    if times is None or len(times) == 0:
        return np.zeros(0, dtype=np.int64)
    times = np.asarray(times)
    if len(times) > 1 and is_monthly(times):
        stamps = times if is_cftime(times[0]) else [pd.Timestamp(t) for t in times]
        return np.array([(int(t.year) - 1970) * 12 + int(t.month) - 1 for t in stamps], dtype=np.int64)
    return np.floor(time_hours(times) / float(step_hours) + 0.5).astype(np.int64)


def valid_times(times: np.ndarray, inits: np.ndarray, leads: np.ndarray, step: float) -> np.ndarray:
    """``[len(inits), len(leads)]`` valid times of leads ``leads`` (in steps) from ``times[inits]``.

    Lead ``k`` is ``k × step`` hours after its initial time. On an axis of calendar months
    (:func:`is_monthly`) it is the time of the frame ``k`` steps later: the axis' own value while it
    lasts, then calendar months after its last time (the same day of the month, or the last day
    when every time is a month's last day), in the axis' own calendar for cftime dates.
    """
    times = np.asarray(times)
    inits, leads = np.asarray(inits, dtype=np.int64), np.asarray(leads, dtype=np.int64)
    if is_monthly(times):
        frames = inits[:, None] + leads[None, :]
        out = times[np.minimum(frames, len(times) - 1)].copy()
        beyond = frames >= len(times)
        if beyond.any():
            out[beyond] = _add_months(times, times[-1], frames[beyond] - (len(times) - 1))
        return out
    lead_td = pd.to_timedelta(leads * step, unit="h").values
    init_values = times[inits]
    if init_values.dtype == object:  # cftime dates add datetime.timedelta
        lead_td = np.array(lead_td.astype("timedelta64[us]").tolist())
    return init_values[:, None] + lead_td[None, :]


def _add_months(times: np.ndarray, anchor, months: np.ndarray) -> np.ndarray:
    """``anchor`` (a time of ``times``) plus each of ``months`` calendar months.

    Month ends stay month ends when every one of ``times`` is one.
    """
    if times.dtype != object:
        month_end = bool(pd.DatetimeIndex(times).is_month_end.all())
        start = pd.Timestamp(anchor)
        moved = [start + (pd.offsets.MonthEnd(int(k)) if month_end else pd.DateOffset(months=int(k))) for k in months]
        return np.array([np.datetime64(t) for t in moved]).astype(times.dtype)
    month_end = all(d.day == d.daysinmonth for d in times)

    def add(d, k: int):
        year, month0 = divmod(d.month - 1 + k, 12)
        first = d.replace(year=d.year + year, month=month0 + 1, day=1)
        return first.replace(day=first.daysinmonth if month_end else min(d.day, first.daysinmonth))

    return np.array([add(anchor, int(k)) for k in months], dtype=object)


def warn_short_history(times: np.ndarray, inits: np.ndarray) -> None:
    """Warn when an initial time is the data's first frame: one frame of history shows no change in time."""
    if int(inits.min()) == 0:
        warn_user(
            f"init_time {times[0]} is the first time step of the data: its forecast has one past frame, which "
            "shows no change in time, and its std comes out far too small (about 10 x on ERA5 t2m). Start from a "
            f"later init_time (e.g. {times[min(3, len(times) - 1)]}) so that past frames are the context.",
            ShortHistoryWarning)


#: at most this many initial frames are read to check they hold observations (a bounded read)
EMPTY_INIT_CHECK = 32


def warn_empty_init(values, time_dim: str, times: np.ndarray, inits: np.ndarray) -> int:
    """Warn when an initial frame holds no observation (data not yet arrived, say): the forecast starts earlier.

    ``values`` is the variable (lazy or not); only the initial frames are read, and only up to
    :data:`EMPTY_INIT_CHECK` of them. Returns the frames from the last empty initial frame back to the
    newest observed frame before it (0 when every initial frame is observed or none is found within two days):
    its forecasts are that many frames longer than their leads say.
    """
    if len(inits) > EMPTY_INIT_CHECK:
        return 0
    frames = values.isel({time_dim: np.asarray(inits)})
    seen = np.asarray(frames.notnull().any([d for d in frames.dims if d != time_dim]).values)
    if seen.all():
        return 0
    empty = np.asarray(inits)[~seen]
    last = int(empty.max())
    age = trailing_empty(values, time_dim, last + 1)  # the last observed frame within two days before (0: none)
    hint = f" The last observed time before {times[last]} is {times[last - age]}." if age else ""
    warn_user(
        f"init_time {', '.join(str(times[i]) for i in empty[:3])} has no observed value: the forecast starts from "
        f"the newest observed frames before it, without persistence (a calibrated std is that of the lead from "
        f"the last observed frame).{hint} Pass init_time= an observed time to start from the data.",
        ShortHistoryWarning)
    return age


def trailing_empty(values, time_dim: str, end: int, limit: int = 49) -> int:
    """Frames without any observation just before frame ``end`` (exclusive), in the ``limit`` before it.

    0 also where none of those frames holds an observation.
    """
    lo = max(0, int(end) - limit)
    window = values.isel({time_dim: slice(lo, int(end))})
    has = np.asarray(window.notnull().any([d for d in window.dims if d != time_dim]).values)
    return int(len(has) - 1 - np.flatnonzero(has)[-1]) if has.any() else 0


def parse_duration(value: float | int | str | None) -> float | None:
    """Seconds from ``600``, ``"90s"``, ``"10min"``, ``"1.5h"`` (``None`` stays ``None``).

    Raises
    ------
    ConfigError
        Not a positive duration.
    """
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hr|hours?)?\s*",
                         str(value).lower())
        if m is None:
            raise ConfigError(f"max_time={value!r} is not a duration; expected seconds or a string like '90s', "
                              "'10min' or '1h'.")
        unit = (m.group(2) or "s")[0]
        seconds = float(m.group(1)) * {"s": 1.0, "m": 60.0, "h": 3600.0}[unit]
    if not seconds > 0:
        raise ConfigError(f"max_time={value!r} must be positive.")
    return seconds


def warn_coarse_step(step_hours: float, monthly: bool) -> None:
    """Warn that the shipped weights forecast daily or longer steps without an annual cycle to depart from.

    They are benchmarked on hourly ERA5 t2m. On daily and longer steps with two years of history
    ``reference="auto"`` forecasts departures from each point's annual cycle (validated in
    ``benchmarks/coarse_forecast.py``), and this warning is not raised. Without that history the
    network forecasts the variable itself: on monthly Colorado tmax (``reference="none"``, 129
    initial times 1980–1990) +1 month came out 4.7 °C off against the annual cycle's 2.4, as the
    network carries the seasonal change of its context past the turning points.
    """
    if step_hours < 24:
        return
    what = "monthly" if monthly else f"{step_hours / 24:g}-day"
    warn_user(
        f"forecasting {what} steps with the shipped weights and no annual cycle to depart from (reference='none'; "
        "'auto' fits one from two years of history before the first init_time): the network carries the change "
        "over its context frames forward, past the seasonal turning points (monthly Colorado tmax: 4.7 degC at +1 "
        "month against the annual cycle's 2.4). Give more history, score against persistence or climatology on "
        "your own record first, or fit a model on it (ds.np.fit(task='forecast')).", UnvalidatedStepWarning)


def init_indices(times: np.ndarray, init_time) -> np.ndarray:
    """Indices of ``init_time`` on the axis ``times``, in time order.

    ``init_time``: one time, several, a slice of times (every step from its start to its stop, both included)
    or ``None`` (the last step).

    Raises
    ------
    TimeAxisError
        A time that is not a step of the data, one that cannot be read in its calendar, or duplicates.
    """
    if init_time is None:
        return np.array([len(times) - 1])
    if isinstance(init_time, slice):  # every step from start to stop, both included (xarray's label slicing)
        return _slice_indices(times, init_time)
    wanted = [_as_time(w, times) for w in np.atleast_1d(np.asarray(init_time, dtype=object))]
    have, want = time_hours(times), time_hours(np.array(wanted))
    idx = np.searchsorted(have, want)
    bad = [str(w) for w, h, i in zip(wanted, want, idx) if i >= len(have) or have[i] != h]
    if bad:
        raise TimeAxisError(f"init_time {bad[:3]} is not a time step of the data ({times[0]} .. {times[-1]}); "
                            "pick times that are in the data.")
    if len(set(idx.tolist())) != len(idx):
        raise TimeAxisError("init_time has duplicate times; pass each initial time once.")
    return np.sort(idx)  # the output's init_time axis runs forward in time, whatever order they were given in


def _slice_indices(times: np.ndarray, window: slice) -> np.ndarray:
    """Indices of the steps of ``times`` from ``window.start`` to ``window.stop`` (both included; ``None``: open)."""
    if window.step is not None:
        raise TimeAxisError(f"init_time={window!r} has a step; pass a slice of times without one, or the times "
                            "themselves (e.g. ds.time.values[-24::6]).")
    have = time_hours(times)
    lo = -np.inf if window.start is None else time_hours(np.array([_as_time(window.start, times)]))[0]
    hi = np.inf if window.stop is None else time_hours(np.array([_as_time(window.stop, times)]))[0]
    idx = np.flatnonzero((have >= lo) & (have <= hi))
    if len(idx) == 0:
        raise TimeAxisError(f"init_time={window!r} holds no time step of the data ({times[0]} .. {times[-1]}); "
                            "pick a range that overlaps them.")
    return idx


def _as_time(value, times: np.ndarray):
    """``value`` (a string or a date) as a time of the data's kind: datetime64, or cftime in its calendar."""
    try:
        if not is_time(times) or np.issubdtype(times.dtype, np.datetime64):
            return pd.Timestamp(value).to_datetime64()
        import cftime

        calendar = times[0].calendar
        if isinstance(value, str):
            text = value.strip().replace("T", " ")
            formats = {0: "%Y-%m-%d", 1: "%Y-%m-%d %H:%M", 2: "%Y-%m-%d %H:%M:%S"}
            text = text.split(".")[0] if text.count(":") == 2 else text  # fractional seconds: the step is coarser
            return cftime.datetime.strptime(text, formats[min(text.count(":"), 2)], calendar=calendar)
        if isinstance(value, cftime.datetime) and value.calendar == calendar:
            return value
        # another date (datetime, np.datetime64, pd.Timestamp, cftime in another calendar): the same calendar date
        # and clock time in the data's calendar (its hours since 1970 would shift by the leap days one calendar lacks)
        t = value if isinstance(value, cftime.datetime) else pd.Timestamp(value)
        return cftime.datetime(t.year, t.month, t.day, t.hour, t.minute, t.second, calendar=calendar)
    except (ValueError, TypeError) as exc:
        calendar = getattr(times[0], "calendar", None) if len(times) else None
        where = f" of the data's {calendar!r} calendar" if calendar else ""
        raise TimeAxisError(f"init_time={value!r} is not a time{where} ({exc}); expected e.g. "
                            f"{str(times[-1])[:16].replace(' ', 'T')!r}.") from exc
