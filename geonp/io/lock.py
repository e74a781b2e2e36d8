"""Output paths (no torch, no dask): what an output may replace, and one writer per store (a lock file)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..errors import ConfigError, ExistingOutputError, OutputExistsError, OutputLockedError, OutputPathError

__all__ = ["LOCK_SUFFIX", "ZARR_MARKERS", "check_apart", "check_new_path", "check_store_path", "check_unlocked",
           "check_writable", "is_zarr_store", "write_lock"]

LOCK_SUFFIX = ".lock"

try:  # a lock file is also held with flock while its run lives (POSIX)
    import fcntl
except ImportError:  # pragma: no cover - Windows: the recorded pid alone
    fcntl = None

#: a lock file younger than this (seconds) is never taken over: its run may be about to flock it
LOCK_GRACE_S = 2.0


#: top-level files that make a directory a Zarr store: format 2 group, consolidated metadata, array; format 3
ZARR_MARKERS = (".zgroup", ".zmetadata", ".zarray", "zarr.json")


def is_zarr_store(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a directory (or a link to one) whose top level holds one of :data:`ZARR_MARKERS`."""
    path = Path(path)
    return path.is_dir() and any((path / name).is_file() for name in ZARR_MARKERS)


def _describe(path: Path) -> str:
    """What is at an existing ``path``, in words, for an error message."""
    if not path.exists():
        return "a broken link"
    if path.is_dir():
        try:
            names = sorted(os.listdir(path))
        except OSError:
            return "a directory"
        if not names:
            return "an empty directory"
        shown = ", ".join(map(repr, names[:3])) + (", ..." if len(names) > 3 else "")
        return f"a directory of {len(names)} {'entry' if len(names) == 1 else 'entries'} ({shown})"
    if path.is_file():
        return f"a file of {path.stat().st_size} bytes"
    return "neither a file nor a directory"


def _refuse_replacing(path: Path, what: str, detail: str = "") -> None:
    raise OutputExistsError(f"{str(path)!r} exists and is {_describe(path)}, not {what}; overwrite=True (CLI: "
                            f"--overwrite) replaces only {what}{detail}, nothing else. Remove it yourself if it is "
                            "to go, or choose another path.")


def _refuse_existing(path: Path, what: str) -> None:
    raise ExistingOutputError(f"{str(path)!r} exists; expected a new {what} path; pass overwrite=True "
                            "(CLI: --overwrite) or choose another path")


def check_new_path(path: str | os.PathLike, overwrite: bool, what: str = "output", magic: bytes | None = None) -> Path:
    """``path`` as a :class:`~pathlib.Path`, refused where it exists (a link too) unless ``overwrite``.

    With ``overwrite`` an existing ``path`` must be a regular file (starting with ``magic`` where given):
    a directory, or a file of another kind, is never replaced.

    Raises
    ------
    OutputExistsError
        ``path`` exists and ``overwrite`` is ``False``, or it is not a file geonp may replace.
    OutputPathError
        ``path`` could not be written (:func:`check_writable`).
    """
    path = Path(path).expanduser()
    check_writable(path, what)
    if not (path.exists() or path.is_symlink()):
        return path
    if not overwrite:
        _refuse_existing(path, what)
    if not path.is_file():
        _refuse_replacing(path, f"a {what} file")
    if magic is not None:
        with open(path, "rb") as f:
            if f.read(len(magic)) != magic:
                _refuse_replacing(path, f"a {what} file written by geonp")
    return path


def check_writable(path: str | os.PathLike, what: str = "output") -> None:
    """Refuse an output ``path`` that could not be written, before any work is done for it.

    Its nearest existing folder must be a folder that takes new files: a scratch file is created there
    and removed (permissions alone would miss read-only file systems, ``/proc``, or a user who may write
    anywhere). Missing folders below it are created when the output is written.

    Raises
    ------
    OutputPathError
        A parent of ``path`` is a file, or the nearest existing folder takes no new files.
    """
    path = Path(path).expanduser()
    folder = path.parent
    while not (folder.exists() or folder.is_symlink()) and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise OutputPathError(f"cannot write the {what} {str(path)!r}: {str(folder)!r} is {_describe(folder)}, "
                              "not a folder. Choose another path.")
    try:
        fd, scratch = tempfile.mkstemp(prefix=".geonp-write-test-", dir=folder)
        os.close(fd)
        os.unlink(scratch)
    except OSError as err:
        raise OutputPathError(f"cannot write the {what} {str(path)!r}: the folder {str(folder)!r} takes no new "
                              f"files ({err.strerror or err}). Choose a folder you can write to.") from None


#: suffixes of other formats, refused as Zarr store names (a "z.nc" directory would puzzle every reader)
_OTHER_FORMATS = frozenset({".nc", ".nc4", ".netcdf", ".cdf", ".h5", ".hdf5", ".grib", ".grib2", ".grb", ".grb2",
                            ".tif", ".tiff", ".csv", ".png"})


def check_apart(path: str | os.PathLike, others: Iterable[tuple[str, str | os.PathLike | None]]) -> None:
    """Refuse an output ``path`` that is, contains or lies inside one of ``others`` (``[("the input", path)]``).

    Links are followed: writing (or replacing) the output must never touch the data it is computed from.

    Raises
    ------
    OutputExistsError
        ``path`` is, holds or is inside one of ``others``.
    """
    out = Path(path).expanduser().resolve()
    for what, other in others:
        if other is None:
            continue
        given = Path(other).expanduser().resolve()
        if out == given:
            raise OutputExistsError(f"output path {str(path)!r} is {what}; choose another output path.")
        if out in given.parents:
            raise OutputExistsError(f"output path {str(path)!r} contains {what} ({str(other)!r}), which "
                                    "replacing it would delete; choose another output path.")
        if given in out.parents:
            raise OutputExistsError(f"output path {str(path)!r} is inside {what} ({str(other)!r}); choose an "
                                    "output path outside it.")


def check_store_path(path: str | os.PathLike, overwrite: bool,
                     others: Iterable[tuple[str, str | os.PathLike | None]] = ()) -> Path:
    """:func:`check_new_path` for a Zarr store, which may not be named like a file of another format.

    ``overwrite`` replaces only an existing Zarr store (:func:`is_zarr_store`), never a file or another
    directory, nor one of ``others`` (:func:`check_apart`).

    Raises
    ------
    ConfigError
        ``path`` ends in the suffix of another format (``.nc``, ``.tif``, ...).
    OutputExistsError
        ``path`` exists and ``overwrite`` is ``False`` or it is not a Zarr store; it is, holds or lies
        inside one of ``others``.
    OutputPathError
        ``path`` could not be written (:func:`check_writable`).
    OutputLockedError
        Another live run is writing ``path`` (:func:`check_unlocked`).
    """
    check_apart(path, others)
    suffix = Path(path).suffix.lower()
    if suffix in _OTHER_FORMATS:
        raise ConfigError(f"output path {str(path)!r} ends in {suffix!r}, but geonp writes Zarr stores; expected a "
                          "path ending in '.zarr'. For NetCDF, write the result with ds.to_netcdf(...) yourself.")
    path = Path(path).expanduser()
    check_writable(path)
    check_unlocked(path)
    if not (path.exists() or path.is_symlink()):
        return path
    if not is_zarr_store(path):  # not an output of ours, with or without overwrite (CLI exit 2, not 3)
        _refuse_replacing(path, "a Zarr store", f" (a directory holding {', '.join(ZARR_MARKERS)})")
    if not overwrite:
        _refuse_existing(path, "output")
    return path


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def _unheld(lock: Path) -> bool:
    """Whether no process holds ``lock`` with flock: its run has gone, on whatever host or container it ran.

    A run killed outright (SIGKILL, out of memory) leaves its lock file, whose recorded pid says nothing
    on another host (a batch job's container gets a new hostname each run): such a lock blocked every
    later run (a twenty-seventh new-user test). The kernel drops a dead process's flock. Never true
    without flock, or for a file younger than :data:`LOCK_GRACE_S`.
    """
    if fcntl is None:
        return False
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return False
    try:
        if time.time() - os.fstat(fd).st_mtime < LOCK_GRACE_S:
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held
        return False
    finally:
        os.close(fd)  # releases the test lock
    return True


def _holder(lock: Path) -> dict | None:
    """The ``{"pid", "host"}`` recorded in ``lock``, or ``None`` when it is gone or unreadable."""
    try:
        return json.loads(lock.read_text())
    except (OSError, ValueError):
        return None


def _gone(lock: Path) -> bool:
    """Whether the run that wrote ``lock`` has gone.

    No process holds its flock (:func:`_unheld`), or the process it records no longer exists on this host.
    """
    held = _holder(lock)
    here = held is not None and held.get("host") == socket.gethostname()
    return _unheld(lock) or (here and not _alive(int(held.get("pid", -1))))


def _refuse_locked(path: Path, lock: Path) -> None:
    held = _holder(lock)
    who = "another run" if held is None else f"another geonp run (pid {held.get('pid')} on {held.get('host')})"
    raise OutputLockedError(
        f"{who} is writing {str(path)!r} ({lock.name} exists); expected one writer per output. Wait for "
        f"it to finish, or, if that run is gone, remove {str(lock)!r} and run again.") from None


def check_unlocked(path: str | os.PathLike) -> None:
    """Refuse, before any work is done, an output ``path`` that another live run is writing.

    :func:`write_lock` refuses it too, but only once the result has been computed: a second overlapping
    CLI run computed everything before it was turned away (a twenty-ninth new-user test). A lock left by
    a run that has gone is no reason to refuse (``write_lock`` takes it over).

    Raises
    ------
    OutputLockedError
        Another live run holds ``<path>.lock``.
    """
    path = Path(path).expanduser()
    lock = path.with_name(path.name + LOCK_SUFFIX)
    if (lock.exists() or lock.is_symlink()) and (_holder(lock) or {}).get("pid") != os.getpid() and not _gone(lock):
        _refuse_locked(path, lock)


@contextlib.contextmanager
def write_lock(path: Path) -> Iterator[Path]:
    """Hold ``<path>.lock`` while a store is written to ``path``.

    Two runs writing one output at once (a batch scheduler retrying a job that is still running)
    would write the same partial store. The second is refused; a lock left by a run that has gone
    (no process holds its flock, :func:`_unheld`, or its process no longer exists on this host) is
    taken over. Without flock (Windows), a lock from another host is trusted: remove it by hand if
    that run is gone.

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
            if _gone(lock):
                lock.unlink(missing_ok=True)  # its run has gone: take over
                continue
            _refuse_locked(path, lock)
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held until this run ends, however it ends
        os.write(fd, json.dumps(me).encode())
        break
    else:  # pragma: no cover - lost the race to retake a stale lock twice
        raise OutputLockedError(f"could not take the lock {str(lock)!r} for {str(path)!r}; run again.")
    try:
        yield lock
    finally:
        if (_holder(lock) or {}).get("pid") == me["pid"]:
            lock.unlink(missing_ok=True)
        os.close(fd)
