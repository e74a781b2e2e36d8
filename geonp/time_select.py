"""Infill only some times of a long record: the frames asked for, read with the context they need (no torch).

A nightly job over a growing archive infills the newest hours. Infilling the whole archive every
night grows in cost with it; cutting the input to the new hours alone leaves their first and last
frames without the context frames beside them (and moves the frame groups). :func:`select_times`
cuts the input to the times asked for plus, each side, the frames their tasks can read
(:func:`context_pad`: the time window and the rest of a frame group), and :func:`keep_times` cuts
the prediction back to the times asked for. The frames kept are predicted as in the whole record
(to within what planning counts from the frames it reads: scales, spacing), except near its end,
whose last frames change when later data arrive (docs/user-guide.md, "Adding nights to an archive").
"""

from __future__ import annotations

import xarray as xr

from .errors import ConfigError, TimeAxisError

__all__ = ["parse_times", "context_pad", "select_times", "keep_times"]


def parse_times(spec: str) -> tuple[str | None, str | None]:
    """``"START/END"`` (ISO dates or times, either may be empty: ``"2019-03-07/"``) as its two ends.

    A single time (no ``/``) is both ends. Raises :class:`~geonp.errors.ConfigError` for more than
    one ``/`` or both ends empty.
    """
    parts = [p.strip() for p in str(spec).split("/")]
    if len(parts) == 1:
        parts = parts * 2
    if len(parts) != 2 or not any(parts):
        raise ConfigError(f"--times {spec!r} is not START/END; expected ISO times with a slash between them, either "
                          "end may be left open: --times 2019-03-07T00/2019-03-07T23, --times 2019-03-07/")
    return parts[0] or None, parts[1] or None


def context_pad(half_window: int, frames_per_task: int) -> int:
    """Frames each side of the times asked for that their tasks read: the rest of a group, then the window."""
    return int(half_window) + max(1, int(frames_per_task)) - 1


def select_times(ds: xr.Dataset, time_dim: str | None, spec: str, pad: int) -> tuple[xr.Dataset, slice]:
    """``ds`` cut to the times ``spec`` (:func:`parse_times`) asks for plus ``pad`` frames each side.

    Returns the cut dataset and the positions, in it, of the times asked for (:func:`keep_times`).

    Raises
    ------
    TimeAxisError
        The data have no time axis, or no time step within ``spec``.
    ConfigError
        ``spec`` is not ``START/END``, or names something that is not a time.
    """
    start, end = parse_times(spec)
    if time_dim is None or time_dim not in ds.indexes:
        raise TimeAxisError(f"--times {spec} selects time steps, but the data have no time axis; leave --times out.")
    index = ds.indexes[time_dim]
    try:
        where = index.slice_indexer(start, end)
    except (KeyError, ValueError, TypeError) as err:
        raise ConfigError(f"--times {spec!r}: {err}; expected ISO times such as 2019-03-07T00 (either end may be "
                          "left open: 2019-03-07/).") from None
    lo, hi, _ = where.indices(len(index))
    if hi <= lo:
        raise TimeAxisError(f"--times {spec} holds no time step of the data, which run from {index[0]} to "
                            f"{index[-1]}; choose times within them.")
    first, last = max(0, lo - int(pad)), min(len(index), hi + int(pad))
    return ds.isel({time_dim: slice(first, last)}), slice(lo - first, hi - first)


def keep_times(out: xr.Dataset, time_dim: str, keep: slice) -> xr.Dataset:
    """The prediction ``out`` at the times asked for only (``keep`` from :func:`select_times`)."""
    if time_dim not in out.dims:
        return out
    return out.isel({time_dim: keep})
