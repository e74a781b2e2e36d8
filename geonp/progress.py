"""Progress on stderr: a live bar on a terminal, a few plain lines in a log file.

A live bar redraws itself with carriage returns ten times a second; written to a batch job's log
file that becomes one line of thousands of updates. :func:`compute_progress` therefore gives dask's
:class:`~dask.diagnostics.ProgressBar` only where a bar can redraw itself (a terminal, or a Jupyter
kernel, whose output cells handle carriage returns and widgets), and otherwise a
:class:`LineProgress` that writes one line per tenth of the tasks. :func:`bar_options` does the same
for the ``tqdm`` bars of writes and training. No torch here.
"""

from __future__ import annotations

import math
import re
import sys
import threading
import time
from typing import TextIO

from dask.callbacks import Callback

from .errors import ConfigError

__all__ = ["LineProgress", "PREDICTION_PREFIX", "compute_progress", "bar_options", "is_live", "is_prediction",
           "region_progress"]


def is_live(stream: TextIO | None) -> bool:
    """``True`` where a live bar can redraw itself: ``stream`` is a terminal, or this is a Jupyter kernel.

    A kernel's stderr is not a terminal, yet its output cells render carriage returns and tqdm
    widgets, so notebooks keep the live bars.
    """
    if "ipykernel" in sys.modules:
        return True
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except ValueError:  # a closed stream
        return False


class LineProgress(Callback):
    """A dask callback that writes ``geonp: 40 % of 250 tasks done (12.3 s)`` lines, one per ``step`` %.

    Where the graph holds a prediction (:func:`is_prediction`), only its tiles are counted
    (``40 % of 120 predictions done``): a CLI infill's log said 30 % of 3,346 tasks at 251.0 s and
    100 % at 251.7 s (a thirtieth new-user test), the reads and sums around the tiles being most of
    the tasks and none of the time.

    Parameters
    ----------
    out : file-like
        Where the lines go.
    minimum : float
        Seconds a computation must have run before its first line (short ones stay silent).
    step : int
        Percent of the tasks between two lines.
    label : str
        Prefix of each line.
    interval : float
        Least seconds between two lines (tasks that finish together give one line); the line at
        100 % is always written.
    heartbeat : float or None
        Seconds after which a line is written even though no step was passed (a long task, such as
        a calibration, holds the count still): a batch log shows the job alive. ``None``: none.
    """

    def __init__(self, out: TextIO, minimum: float = 1.0, step: int = 10, label: str = "geonp",
                 interval: float = 1.0, heartbeat: float | None = 30.0) -> None:
        super().__init__()
        if not 0 < step <= 100:
            raise ConfigError(f"step={step!r} must be a percentage in (0, 100]; e.g. step=10 for a line per tenth.")
        if heartbeat is not None and not heartbeat > 0:
            raise ConfigError(f"heartbeat={heartbeat!r} must be a positive number of seconds, or None for none.")
        self.out, self.minimum, self.step, self.label = out, float(minimum), int(step), label
        self.interval, self.heartbeat = float(interval), heartbeat
        self._start_time = self._last = 0.0
        self._total = self._done = 0
        self._unit = "tasks"
        self._next = step
        self._lock = threading.Lock()
        self._stop: threading.Event | None = None

    def _start(self, dsk) -> None:
        self._start_time = time.perf_counter()
        self._last = -math.inf
        self._total = self._done = 0
        self._next = self.step
        if self.heartbeat is not None:
            self._stop = threading.Event()
            threading.Thread(target=self._beat, args=(self._stop,), daemon=True, name="geonp-progress").start()

    def _start_state(self, dsk, state) -> None:
        keys = [k for name in ("ready", "waiting", "running", "finished") for k in state[name]]
        tiles = sum(map(is_prediction, keys))
        self._unit = "predictions" if tiles else "tasks"
        self._total = tiles or len(keys)
        self._done = sum(map(is_prediction, state["finished"])) if tiles else len(state["finished"])

    def _posttask(self, key, result, dsk, state, worker_id) -> None:
        if not self._total:
            return
        if self._unit == "predictions":  # the network's tiles: the reads and sums around them take no time
            if not is_prediction(key):
                return
            self._done += 1
        else:
            self._done = len(state["finished"])
        done = self._done
        percent = 100 * done // self._total
        if percent < self._next:
            return
        now = time.perf_counter()
        elapsed = now - self._start_time
        if elapsed < self.minimum or (percent < 100 and now - self._last < self.interval):
            return  # the step is passed silently: lines come at most every `interval` s, and the last one
        self._line(now, done)
        while self._next <= percent:
            self._next += self.step

    def _finish(self, dsk, state, errored) -> None:
        if self._stop is not None:
            self._stop.set()

    def _line(self, now: float, done: int) -> None:
        with self._lock:
            percent = 100 * done // self._total
            self.out.write(f"{self.label}: {percent} % of {self._total:,} {self._unit} done "
                           f"({now - self._start_time:.1f} s)\n")
            self.out.flush()
            self._last = now

    def _beat(self, stop: threading.Event) -> None:
        """Write a line whenever ``heartbeat`` seconds pass without one (from a thread of its own)."""
        while not stop.wait(min(1.0, self.heartbeat / 4)):
            now = time.perf_counter()
            quiet = now - max(self._last, self._start_time)
            if self._total and quiet >= self.heartbeat and now - self._start_time >= self.minimum:
                self._line(now, self._done)


#: the key name of a prediction's tile tasks (:class:`geonp.graph.BlockGraph`), the work a computation waits for
PREDICTION_PREFIX = "geonp-tile-"


def is_prediction(key) -> bool:
    """Whether dask ``key`` is a tile of a prediction (:data:`PREDICTION_PREFIX`)."""
    name = key[0] if isinstance(key, tuple) and key else key
    return isinstance(name, str) and name.startswith(PREDICTION_PREFIX)


def compute_progress(out: TextIO | None = None, minimum: float = 1.0) -> Callback:
    """Progress of dask computations on ``out`` (stderr by default): a live bar or plain lines.

    Use as a context manager around ``.compute()``, ``.load()`` or anything that computes.
    """
    out = sys.stderr if out is None else out
    if is_live(out):
        from dask.diagnostics import ProgressBar

        return ProgressBar(out=out, minimum=minimum)
    return LineProgress(out, minimum=minimum)


def region_progress(out: TextIO | None, label: str):
    """Progress lines within one long region of a write, in a log only (a terminal has its live bar).

    The write's bar moves once per region; a region that computes for minutes would leave a batch
    log silent. Here a :class:`LineProgress` with a ``label`` naming the region writes nothing for
    regions done within 30 s, then a line per tenth of its tasks (at most one per 30 s) or, while
    none completes, one every 30 s.
    """
    import contextlib

    out = sys.stderr if out is None else out
    if is_live(out):
        return contextlib.nullcontext()
    return LineProgress(out, minimum=30.0, label=label, interval=30.0, heartbeat=30.0)


def bar_options(out: TextIO | None = None) -> dict:
    """Keyword arguments for a ``tqdm`` bar on ``out``: live on a terminal, a line every 30 s in a file."""
    out = sys.stderr if out is None else out
    return {"file": out} if is_live(out) else {"file": _Lines(out), "mininterval": 30.0, "ascii": True}


_COUNT = re.compile(r"\b\d+/\d+ \[")  # tqdm's "n/total [" of a bar


class _Lines:
    r"""A stream for a ``tqdm`` bar that writes each of its updates as a line of its own.

    tqdm redraws a bar by writing ``"\r" + bar``; in a log file those updates run together on one
    line. Here each update becomes ``bar + "\n"`` and the bar's closing newline is dropped, and so
    is a redraw at the count already written (tqdm's ``close`` redraws the last update, with
    another rate: the 100 % line came twice).
    """

    def __init__(self, out: TextIO):
        self._out = out
        self._count = None

    def write(self, text: str) -> int:
        line = text.replace("\r", "").rstrip()
        count = _COUNT.search(line)
        count = count.group(0) if count else None
        if line and (count is None or count != self._count):
            self._out.write(line + "\n")
            self._count = count
        return len(text)

    def flush(self) -> None:
        self._out.flush()

    def __getattr__(self, name):  # encoding, isatty, ... of the stream itself
        return getattr(self._out, name)
