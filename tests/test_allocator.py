"""geonp.allocator: freed tile-sized blocks are reused instead of page-faulted afresh."""

import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only"
)

CYCLE = """
import resource, torch
import geonp.allocator as a
on = a.keep_freed_memory()
again = a.keep_freed_memory()
def cycle():  # page faults of allocating, touching and freeing one 64 MB tile
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t = torch.empty(1 << 24)
    t.fill_(1.0)
    del t
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
warm = [cycle() for _ in range(5)]  # aligned blocks need a little slack in the heap before it settles
print(on, again, max(cycle() for _ in range(3)))
"""


def _run(env_value: str | None) -> tuple[str, str, int]:
    env = {k: v for k, v in os.environ.items() if k != "GEONP_KEEP_FREED_MEMORY"}
    if env_value is not None:
        env["GEONP_KEEP_FREED_MEMORY"] = env_value
    out = subprocess.run([sys.executable, "-c", CYCLE], env=env, capture_output=True, text=True, check=True)
    on, again, faults = out.stdout.split()
    return on, again, int(faults)


def test_keep_freed_memory__a_second_tile_reuses_the_first_tiles_pages():
    on, again, faults = _run(None)
    assert (on, again) == ("True", "True")
    assert faults < 2000  # 64 MB is 16,384 pages of 4 KB: once the heap has settled, reused, not faulted again


def test_keep_freed_memory__env_zero_leaves_malloc_alone():
    on, again, faults = _run("0")
    assert (on, again) == ("False", "False")
    assert faults > 8000  # glibc maps a fresh block for every tile
