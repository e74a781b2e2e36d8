"""One writer per output store: a lock file beside it while a write runs (no torch, no dask)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

from ..errors import OutputExistsError

__all__ = ["LOCK_SUFFIX", "write_lock"]

LOCK_SUFFIX = ".lock"


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def _holder(lock: Path) -> dict | None:
    """The ``{"pid", "host"}`` recorded in ``lock``, or ``None`` when it is gone or unreadable."""
    try:
        return json.loads(lock.read_text())
    except (OSError, ValueError):
        return None


@contextlib.contextmanager
def write_lock(path: Path) -> Iterator[Path]:
    """Hold ``<path>.lock`` while a store is written to ``path``.

    Two runs writing one output at once (a batch scheduler retrying a job that is still running)
    would write the same partial store. The second is refused; a lock left by a run that has gone
    (its process no longer exists on this host) is taken over. On another host the lock is trusted:
    remove it by hand if that run is gone.

    Raises
    ------
    OutputExistsError
        Another live run holds the lock.
    """
    lock = path.with_name(path.name + LOCK_SUFFIX)
    me = {"pid": os.getpid(), "host": socket.gethostname()}
    lock.parent.mkdir(parents=True, exist_ok=True)  # as the store's own folder would be
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            held = _holder(lock)
            if held is not None and held.get("host") == me["host"] and not _alive(int(held.get("pid", -1))):
                lock.unlink(missing_ok=True)  # its run has gone: take over
                continue
            who = "another run" if held is None else f"another geonp run (pid {held.get('pid')} on {held.get('host')})"
            raise OutputExistsError(
                f"{who} is writing {str(path)!r} ({lock.name} exists); expected one writer per output. Wait for "
                f"it to finish, or, if that run is gone, remove {str(lock)!r} and run again.") from None
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        break
    else:  # pragma: no cover - lost the race to retake a stale lock twice
        raise OutputExistsError(f"could not take the lock {str(lock)!r} for {str(path)!r}; run again.")
    try:
        yield lock
    finally:
        if (_holder(lock) or {}).get("pid") == me["pid"]:
            lock.unlink(missing_ok=True)
