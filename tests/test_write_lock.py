"""One writer per output store (``geonp.io.lock``)."""

import pyproj  # noqa: F401  isort: skip

import contextlib
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


def test_a_write_stopped_by_sigterm_in_the_cli_is_resumable(tmp_path, capsys, monkeypatch):
    """SIGTERM (a batch scheduler) during `geonp infill` is handled like Ctrl-C.

    A message, exit 143, the lock released and the partial store kept; the same command then finishes the write.
    """
    import signal

    import pandas as pd

    import geonp.api
    import geonp.io.zarr as gz
    from geonp.cli import main

    result = xr.Dataset({"t2m_mean": (("time", "x"), np.arange(12.0).reshape(4, 3))},
                        coords={"time": pd.date_range("2020-01-01", periods=4, freq="h"), "x": [0, 1, 2]})
    data = tmp_path / "in.nc"
    result.rename(t2m_mean="t2m").to_netcdf(data)
    monkeypatch.setattr(geonp.api, "infill", lambda *a, **k: result.chunk(time=1))
    write_step, steps = gz._write_step, []

    def terminated_at_the_second(ds, plan, key, partial):
        steps.append(key)
        if len(steps) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        write_step(ds, plan, key, partial)

    monkeypatch.setattr(gz, "_write_step", terminated_at_the_second)
    out = tmp_path / "o.zarr"
    argv = ["infill", str(data), "--out", str(out), "--quiet"]
    assert main(argv) == 143
    assert capsys.readouterr().err == ("geonp: interrupted by SIGTERM (a Zarr write resumes when the same command "
                                       "is run again)\n")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # restored after the command
    assert (tmp_path / "o.zarr.partial").is_dir() and not out.exists() and not (tmp_path / "o.zarr.lock").exists()
    steps.clear()
    monkeypatch.setattr(gz, "_write_step", lambda *args: steps.append(args[2]) or write_step(*args))
    assert main(argv) == 0
    assert steps == ["region:1:2", "region:2:3", "region:3:4"]  # resumed: the first region was written
    np.testing.assert_array_equal(xr.open_zarr(out).t2m_mean.values, result.t2m_mean.values)


@pytest.mark.parametrize("content", [json.dumps({"pid": 1, "host": "a-container-long-gone"}), ""])
def test_a_lock_no_process_holds_is_taken_over_whatever_host_it_names(tmp_path, content):
    """A killed run's lock naming another host (a batch container), or empty, blocked every later run."""
    out = tmp_path / "o.zarr"
    lock = tmp_path / "o.zarr.lock"
    lock.write_text(content)
    os.utime(lock, (0, 0))  # older than the grace a new lock gets
    to_zarr(_ds(), out, progress=False)
    assert out.exists() and not lock.exists()


@contextlib.contextmanager
def _held_elsewhere(lock):
    """``lock`` as a live run on another host holds it (pid 1 there, its flock held)."""
    import fcntl

    lock.write_text(json.dumps({"pid": 1, "host": "another-host"}))
    os.utime(lock, (0, 0))
    fd = os.open(lock, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield lock
    finally:
        os.close(fd)


def test_a_lock_a_live_process_holds_is_refused_whatever_host_it_names(tmp_path):
    out = tmp_path / "o.zarr"
    with _held_elsewhere(tmp_path / "o.zarr.lock"):
        with pytest.raises(OutputExistsError, match=r"pid 1 on another-host\) is writing"):
            to_zarr(_ds(), out, progress=False)
    assert not out.exists()


def test_the_cli_refuses_an_output_another_run_is_writing_before_computing(tmp_path, capsys, monkeypatch):
    """A second overlapping `geonp infill` computed the whole result before it was turned away (29th test)."""
    import geonp.api
    from geonp.cli import main

    data = tmp_path / "in.nc"
    _ds().rename(v="t2m").to_netcdf(data)
    computed = []
    monkeypatch.setattr(geonp.api, "infill", lambda *a, **k: computed.append(1))
    out = tmp_path / "o.zarr"
    lock = tmp_path / "o.zarr.lock"
    with _held_elsewhere(lock):  # the first run, alive
        assert main(["infill", str(data), "--out", str(out), "--quiet"]) == 4
    assert computed == [] and "pid 1 on another-host) is writing" in capsys.readouterr().err
    assert not out.exists() and lock.exists()  # the first run's lock is left to it


def test_a_lock_of_this_process_is_checked_by_write_lock_alone(tmp_path):
    """check_unlocked passes the lock a run holds itself (to_zarr checks the path again inside it)."""
    from geonp.io.lock import check_unlocked

    out = tmp_path / "o.zarr"
    with write_lock(out):
        check_unlocked(out)  # no error: this run holds it
    check_unlocked(out)  # no lock at all
