"""Progress output: a live bar on a terminal, plain lines in a log file."""

import io
import sys
import types

import dask
import dask.array as da
import pytest
from dask.diagnostics import ProgressBar

from geonp.errors import ConfigError
from geonp.progress import LineProgress, bar_options, compute_progress, is_live


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_compute_progress__log_file_gets_one_line_per_tenth():
    """Written to a file, progress is whole lines (no carriage returns), 10 % apart, ending at 100 %."""
    out = io.StringIO()
    x = da.ones((100, 10), chunks=(1, 10)).sum(axis=1)
    with dask.config.set(scheduler="synchronous"), LineProgress(out, minimum=0.0, interval=0.0):
        x.compute()
    text = out.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    percents = [int(line.split(": ")[1].split(" %")[0]) for line in lines]
    assert percents == sorted(percents) and percents[-1] == 100
    assert 8 <= len(lines) <= 11 and all(b - a >= 10 for a, b in zip(percents, percents[1:]))
    assert all(line.startswith("geonp: ") and "tasks done" in line for line in lines)


def test_compute_progress__tasks_finishing_together_give_one_line():
    """Lines come at most every ``interval`` seconds; the 100 % line is always written."""
    out = io.StringIO()
    with dask.config.set(scheduler="synchronous"), LineProgress(out, minimum=0.0, interval=3600.0):
        da.ones((100, 10), chunks=(1, 10)).sum(axis=1).compute()
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[-1].startswith("geonp: 100 % of ")


def test_compute_progress__short_computations_stay_silent():
    """Nothing is written before ``minimum`` seconds have passed."""
    out = io.StringIO()
    with dask.config.set(scheduler="synchronous"), compute_progress(out, minimum=3600.0):
        da.ones(10, chunks=2).sum().compute()
    assert out.getvalue() == ""


def test_compute_progress__terminal_gets_the_live_bar():
    """On a terminal the live dask bar is used, and tqdm bars refresh as usual."""
    term = _Terminal()
    assert is_live(term) and not is_live(io.StringIO())
    assert isinstance(compute_progress(term), ProgressBar)
    assert isinstance(compute_progress(io.StringIO()), LineProgress)
    assert bar_options(term) == {"file": term}
    assert bar_options(io.StringIO())["mininterval"] == 30.0


def test_bar_options__a_log_file_gets_one_line_per_update_without_carriage_returns():
    """One line per count: tqdm's close redrew the last one (the 100 % line came twice)."""
    from tqdm import tqdm

    log = io.StringIO()
    with tqdm(total=3, desc="writing out.zarr", **{**bar_options(log), "mininterval": 0.0}) as bar:
        for _ in range(3):
            bar.update(1)
    text = log.getvalue()
    assert "\r" not in text and text.endswith("\n")
    lines = text.splitlines()
    assert lines[0].startswith("writing out.zarr:   0%") and lines[-1].startswith("writing out.zarr: 100%")
    assert all(line.strip() for line in lines)
    assert [line.split("|")[0] for line in lines] == [f"writing out.zarr: {p:3d}%" for p in (0, 33, 67, 100)]


def test_compute_progress__jupyter_kernel_keeps_the_live_bar(monkeypatch):
    """In a Jupyter kernel stderr is no terminal, but its cells render live bars: they are kept."""
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    assert is_live(io.StringIO())
    assert isinstance(compute_progress(io.StringIO()), ProgressBar)
    assert "mininterval" not in bar_options(io.StringIO())


def test_line_progress__bad_step_is_refused():
    """A step outside (0, 100] percent is a typed ConfigError that says what is allowed."""
    with pytest.raises(ConfigError, match=r"step=0 must be a percentage in \(0, 100\]; e.g. step=10"):
        LineProgress(io.StringIO(), step=0)


def test_line_progress__a_long_task_gets_heartbeat_lines():
    """While one long task holds the count still, a line comes every ``heartbeat`` seconds (a log shows life)."""
    import time

    out = io.StringIO()
    slow = dask.delayed(lambda: time.sleep(0.5) or 1)()
    with dask.config.set(scheduler="synchronous"), LineProgress(out, minimum=0.0, interval=0.0, heartbeat=0.1):
        slow.compute()
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and lines[0].startswith("geonp: 0 % of 1 tasks done")
    assert lines[-1].startswith("geonp: 100 % of 1 tasks done")
    with pytest.raises(ConfigError, match="heartbeat=0 must be a positive number of seconds, or None"):
        LineProgress(io.StringIO(), heartbeat=0)


def test_region_progress__lines_in_a_log_only():
    """Within a write's region: a labelled LineProgress in a log, nothing on a terminal."""
    from geonp.progress import region_progress

    cb = region_progress(io.StringIO(), "geonp: region 2/5")
    assert isinstance(cb, LineProgress) and cb.label == "geonp: region 2/5" and cb.heartbeat == 30.0
    assert not isinstance(region_progress(_Terminal(), "x"), LineProgress)


def test_line_progress__a_prediction_counts_its_tiles_only():
    """The reads and sums around a prediction's tiles were most of the tasks (30 % at 251.0 s, 100 % at 251.7 s)."""
    import numpy as np
    import pandas as pd
    import xarray as xr

    import geonp  # noqa: F401  registers ds.np

    rng = np.random.default_rng(0)
    v = rng.normal(size=(12, 10, 12))
    ds = xr.Dataset({"v": (("time", "lat", "lon"), np.where(rng.random(v.shape) < 0.7, v, np.nan))},
                    coords={"time": pd.date_range("2020-01-01", periods=12, freq="h"),
                            "lat": 50 + 0.25 * np.arange(10), "lon": -3 + 0.25 * np.arange(12)})
    out = ds.chunk(time=3).np.infill("v", calibrate=False, chunks={"time": 3})
    tiles = [k for k in out.v_mean.__dask_graph__() if isinstance(k, tuple) and k[0].startswith("geonp-tile-")]
    log = io.StringIO()
    with dask.config.set(scheduler="synchronous"), LineProgress(log, minimum=0.0, interval=0.0):
        out.v_mean.compute()
    lines = log.getvalue().splitlines()
    assert len(tiles) >= 4 and lines[-1].startswith(f"geonp: 100 % of {len(tiles)} predictions done")
    assert all(" predictions done " in line for line in lines)
