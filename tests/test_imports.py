"""Import layering: the model engine never pulls in xarray, pandas or dask."""

import subprocess
import sys


def test_models__do_not_import_xarray():
    """Importing geonp.models (and training, checkpoints, synthetic tasks) loads no xarray/pandas/dask."""
    code = (
        "import sys, geonp.models, geonp.train, geonp.checkpoint, geonp.synthetic, geonp.pretrained; "
        "bad = [m for m in ('xarray', 'pandas', 'dask') if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_geonp__imports_pyproj_first():
    """geonp imports pyproj before anything can load eccodes (see docs/conventions.md)."""
    code = "import sys, geonp; print(list(sys.modules).index('pyproj') < list(sys.modules).index('geonp.errors'))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "True", proc.stderr
