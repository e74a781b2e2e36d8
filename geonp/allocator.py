"""Keep freed memory in the process, so that tile-sized temporaries are not page-faulted afresh.

Attention works on tiles of up to 64 MB, and every forward and backward pass allocates and frees
many of them. glibc's ``malloc`` serves blocks above its mmap threshold (at most 32 MB) with fresh
``mmap`` pages and returns them to the system on ``free``, so each new tile is page-faulted and
zeroed by the kernel again: on the benchmark machine that was about 30 % of a training step's CPU
time (``docs/benchmarks.md``, "exp2 and the allocator"). :func:`keep_freed_memory` raises glibc's mmap and trim
thresholds (``mallopt``), so large blocks come from the heap and freed ones are reused, as
PyTorch's own GPU allocator does.

The cost: memory freed after a peak stays with the process (its resident size does not fall back),
so the peak, not the current use, is what the process holds. :func:`geonp.train.train` calls it
(one thread allocates the tiles); chunked inference does not, because with dask's threads each
thread's arena keeps its own freed blocks: the realdata scaling benchmark's peak RSS rose from
825 / 1,202 MB to 1,359 / 2,285 MB with it. Call it yourself for single-threaded inference; set
``GEONP_KEEP_FREED_MEMORY=0`` to make it a no-op. On platforms without glibc it does nothing.

:func:`release_freed_memory` is the other half, for chunked inference: each dask block ends with
``malloc_trim(0)``, which hands the free pages of every arena back to the system. Without it, blocks
predicted on several threads leave glibc's heaps fragmented, so the process grew with the number of
blocks written, not with the size of one: in the realdata scaling benchmark with TE-PT-TNP
(``docs/benchmarks.md``) peak RSS went from 565 MB on a grid to 1,402 MB on one 10 × larger; with the
trim 573 and 784 MB, at no measurable cost in time (a trim per block, not per tile).
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["keep_freed_memory", "release_freed_memory", "ENV"]

#: environment variable: ``0`` turns :func:`keep_freed_memory` off
ENV = "GEONP_KEEP_FREED_MEMORY"
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameter numbers (malloc.h)
#: blocks up to this size come from the heap (larger ones, rare here, are still mapped and unmapped)
MMAP_THRESHOLD = 1 << 30
#: free memory at the top of the heap is returned to the system only beyond this much (mallopt takes an int)
TRIM_THRESHOLD = 2**31 - 1
_state: bool | None = None
_libc: ctypes.CDLL | None | bool = False  # False: not looked up yet; None: no glibc


def _glibc() -> ctypes.CDLL | None:
    """Return the C library when it is glibc (looked up once), else ``None``."""
    global _libc
    if _libc is False:
        _libc = None
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(None)
                if hasattr(libc, "gnu_get_libc_version"):  # glibc only: musl's mallopt/malloc_trim are stubs
                    libc.malloc_trim.argtypes, libc.malloc_trim.restype = (ctypes.c_size_t,), ctypes.c_int
                    libc.mallopt.argtypes, libc.mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
                    _libc = libc
            except OSError:
                pass
    return _libc


def release_freed_memory() -> bool:
    """Return the free pages of glibc's heaps to the system (``malloc_trim(0)``).

    Called at the end of every chunked-inference block (:mod:`geonp.inference`), so that the memory a
    block freed does not stay with the process as fragments that the next blocks cannot reuse. Costs a
    walk over the heaps (milliseconds); the next allocations fault their pages in again.

    Returns
    -------
    bool
        ``True`` when glibc released memory, ``False`` when there was none to release or the
        platform has no glibc.
    """
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.malloc_trim(0))


def keep_freed_memory() -> bool:
    """Make glibc keep and reuse freed large blocks (once per process; later calls are free).

    Returns
    -------
    bool
        ``True`` when the thresholds are set (now or by an earlier call); ``False`` when the
        platform has no glibc or ``GEONP_KEEP_FREED_MEMORY=0`` turns it off.
    """
    global _state
    if _state is not None:
        return _state
    _state = False
    if os.environ.get(ENV, "1").strip() == "0" or not sys.platform.startswith("linux"):
        return _state
    libc = _glibc()
    if libc is None:
        return _state
    mallopt = libc.mallopt
    _state = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    return _state
