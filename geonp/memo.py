"""Results computed once per process, by the dask token of their inputs (no torch).

``geonp.to_zarr`` computes a lazy result region by region, and every region's graph holds the tasks
that read the whole input (a calibration, each point's annual cycle, the lag statistics of
departures): run as they are, they ran once per region (a calibration 4 times for 4 chunks, 81 s
against 15 s; the cycle of a 3-year daily grid 2,289 chunk reads for 44 chunks). A
:class:`ProcessMemo` keeps the most recent few results, so each runs once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["ProcessMemo"]


class ProcessMemo:
    """The results of the ``size`` most recent keys, each computed once (thread-safe).

    Examples
    --------
    >>> memo = ProcessMemo(size=2)
    >>> memo.get("a", lambda: 1), memo.get("a", lambda: 2)
    (1, 1)
    """

    def __init__(self, size: int = 8):
        self.size = int(size)
        self._results: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._pending: dict[str, threading.Lock] = {}  # a lock per key being computed

    def get(self, key: str, compute: Callable[[], Any]) -> Any:
        """The result kept for ``key``, or ``compute()`` kept for it.

        Threads asking for one key together wait for a single ``compute()`` (blocks of one prediction
        that all need the input's statistics); other keys are not held up.
        """
        with self._lock:
            if key in self._results:
                self._results.move_to_end(key)
                return self._results[key]
            pending = self._pending.setdefault(key, threading.Lock())
        with pending:
            with self._lock:
                if key in self._results:  # computed while this thread waited
                    self._results.move_to_end(key)
                    return self._results[key]
            try:
                out = compute()
                with self._lock:
                    self._results[key] = out
                    while len(self._results) > self.size:
                        self._results.popitem(last=False)
            finally:
                with self._lock:
                    self._pending.pop(key, None)
        return out

    def clear(self) -> None:
        """Forget every result (a benchmark that times the computation again)."""
        with self._lock:
            self._results.clear()
