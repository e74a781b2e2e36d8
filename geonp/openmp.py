"""OpenMP threads that sleep while they wait, so that a shared host's cores are not burnt spinning.

torch's CPU kernels run on an OpenMP thread pool (GNU libgomp in the PyPI wheels) whose idle
threads spin for a while before they sleep. Between the many small operations of a neural
process, that spinning is CPU time spent on nothing, and on a host whose cores other processes
also use it takes their cores too. With two busy processes on the 2 cores of the benchmark host a
forecast of ERA5 from one initial time took 55.2 CPU-s / 58.3 s wall with the default against
18.0 / 24.8 with ``OMP_WAIT_POLICY=PASSIVE`` (one thread 17.3 / 23.5), 20 training steps 106.6 /
115.3 against 30.0 / 44.2; on the idle host the forecast took 20.8 / 11.8 against 18.3 / 13.9
(``benchmarks/threads.py``, docs/benchmarks.md "Threads that sleep while they wait").

:func:`passive_waits` sets ``OMP_WAIT_POLICY=PASSIVE``; ``import geonp`` calls it. libgomp reads the
variable once, when torch is first imported, so it has no effect where torch was imported before
geonp, and a value set by the user (``OMP_WAIT_POLICY=ACTIVE`` for the fastest wall time on a
machine of one's own) is kept. No torch here.
"""

from __future__ import annotations

import os
import sys

__all__ = ["passive_waits", "ENV"]

#: the OpenMP standard's variable for how waiting threads wait
ENV = "OMP_WAIT_POLICY"


def passive_waits() -> bool:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless it is set already or torch is loaded; whether it was set."""
    if ENV in os.environ or "torch" in sys.modules:
        return False
    os.environ[ENV] = "PASSIVE"
    return True
