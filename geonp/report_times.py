"""Times that mix report offsets (stations at :00 and a few at :20): found, and said (no torch).

Station data gathered from several networks often mix report times. Each distinct time is a frame
of its own, so the values at the odd times never share a frame with the others': a forecast of
such data is refused (its steps are irregular), but an infill ran silently, its frames at :20
holding five stations of sixty (held-out RMSE 0.592 K, against 0.238 K with the times put on the
hour; a new-user report). :func:`warn_mixed_times` says so, naming the points, and how to align them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from .errors import MixedTimesWarning, warn_user
from .timeaxis import freq_string, is_monthly, is_time, time_hours

__all__ = ["warn_mixed_times", "DENSE_SHARE", "LAZY_VALUES"]

#: frames holding at least this share of the fullest frame's values set the common step
DENSE_SHARE = 0.5
#: a lazy variable larger than this many values is not read for the check (mixed report times are a matter
#: of station tables, small; a large lazy grid would be read whole when the call is made, not computed)
LAZY_VALUES = 1 << 24


def warn_mixed_times(y: xr.DataArray, time_dim: str) -> bool:
    """Warn (:class:`~geonp.errors.MixedTimesWarning`) when some times lie off the step of the well-observed ones.

    Only an irregular time axis is looked at (counting the values of each frame reads the variable once),
    and a lazy variable only up to :data:`LAZY_VALUES` values. Returns whether it warned.
    """
    times = y[time_dim].values
    if len(times) < 3 or not is_time(times) or is_monthly(times):
        return False
    h = time_hours(times)
    spacing = np.diff(h)
    step = float(np.median(spacing))
    if step <= 0 or np.abs(spacing - step).max() <= 0.01 * step:
        return False  # regular: nothing to mix
    if y.chunks is not None and y.size > LAZY_VALUES:
        return False
    counts = np.asarray(y.notnull().sum([d for d in y.dims if d != time_dim]).values, dtype=np.int64)
    dense = counts >= DENSE_SHARE * max(int(counts.max()), 1)
    if dense.sum() < 2:
        return False
    base = float(np.min(np.diff(h[dense])))
    phase = (h - h[dense][0]) / base
    off = (np.abs(phase - np.round(phase)) > 0.01) & (counts > 0)
    if not off.any():
        return False  # frames missing between the others: irregular, not mixed
    who = y.isel({time_dim: np.flatnonzero(off)}).notnull().any(time_dim)
    points = [d for d in y.dims if d != time_dim]
    where = ""
    if len(points) == 1:
        names = [str(v) for v in y[points[0]].values[np.asarray(who.values, dtype=bool)]]
        where = f" ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''})"
    freq = freq_string(base)
    warn_user(f"{int(off.sum())} of the {len(times)} times of {time_dim!r} lie off the {base:g} h step of the "
              f"well-observed ones (e.g. {pd.Timestamp(times[off][0])}) and hold the values of only "
              f"{int(who.sum())} points{where}: each time is a frame of its own, so those values never share a "
              f"frame with the others'. Put them on the common step first, e.g. "
              f"ds = ds.resample({time_dim}='{freq}').mean().", MixedTimesWarning)
    return True
