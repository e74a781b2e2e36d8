"""One writer per output store (``geonp.io.lock``)."""

import pyproj  # noqa: F401  isort: skip

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from geonp.errors import OutputExistsError
from geonp.io import to_zarr
from geonp.io.lock import write_lock


def _ds():
    values = np.arange(12.0).reshape(4, 3)
    return xr.Dataset({"v": (("time", "x"), values)}, coords={"time": np.arange(4), "x": [0, 1, 2]})


def test_a_second_writer_is_refused_while_the_first_runs(tmp_path):
    out = tmp_path / "o.zarr"
    with write_lock(out) as lock:
        assert json.loads(lock.read_text())["pid"] == os.getpid()
        with pytest.raises(OutputExistsError, match=r"another geonp run \(pid \d+ on .*\) is writing .*o.zarr.*remove"):
            to_zarr(_ds(), out, progress=False)
        assert not out.exists() and not (tmp_path / "o.zarr.partial").exists()
    assert not lock.exists()  # released
    to_zarr(_ds(), out, progress=False)
    assert not lock.exists()
    np.testing.assert_array_equal(xr.open_zarr(out).v.values, _ds().v.values)


def test_a_lock_left_by_a_run_that_has_gone_is_taken_over(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    import socket

    out = tmp_path / "o.zarr"
    (tmp_path / "o.zarr.lock").write_text(json.dumps({"pid": int(gone.stdout), "host": socket.gethostname()}))
    to_zarr(_ds(), out, progress=False)
    assert out.exists() and not (tmp_path / "o.zarr.lock").exists()


def test_the_lock_is_released_when_the_write_fails(tmp_path):
    out = tmp_path / "o.zarr"
    with pytest.raises(OutputExistsError):
        with write_lock(out):
            raise OutputExistsError("simulated")
    assert not (tmp_path / "o.zarr.lock").exists()


def test_a_store_in_a_new_folder_is_written(tmp_path):
    out = tmp_path / "sub" / "deeper" / "o.zarr"
    to_zarr(_ds(), out, progress=False)
    assert out.exists() and not (out.parent / "o.zarr.lock").exists()
