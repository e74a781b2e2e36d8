"""Import order: pyproj first (the source-level layering rules are in test_distributed.py)."""

import subprocess
import sys


def test_geonp__imports_pyproj_first():
    """Geonp imports pyproj before anything can load eccodes (see docs/conventions.md)."""
    code = "import sys, geonp; print(list(sys.modules).index('pyproj') < list(sys.modules).index('geonp.errors'))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "True", proc.stderr
