"""Outputs that could not be written are refused before any work (tenth new-user test)."""

import pyproj  # noqa: F401  isort: skip

import os

import pytest

from geonp.errors import OutputExistsError, OutputPathError
from geonp.io.lock import check_new_path, check_store_path, check_writable


def test_a_parent_that_is_a_file_is_refused(tmp_path):
    afile = tmp_path / "afile.txt"
    afile.write_text("x")
    with pytest.raises(OutputPathError, match=r"afile.txt' is a file of 1 bytes, not a folder"):
        check_store_path(afile / "x.zarr", overwrite=False)
    with pytest.raises(OutputPathError, match="not a folder"):
        check_new_path(afile / "deeper" / "m.geonp", False, "model")


def test_a_folder_that_takes_no_new_files_is_refused(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("geonp.io.lock.tempfile.mkstemp", refuse)
    with pytest.raises(OutputPathError, match=r"takes no new files \(Permission denied\)"):
        check_writable(tmp_path / "new" / "x.zarr")


def test_missing_folders_below_a_writable_one_are_fine(tmp_path):
    check_writable(tmp_path / "a" / "b" / "x.zarr")
    assert sorted(os.listdir(tmp_path)) == []  # the scratch file is gone, nothing created


def test_the_cli_refuses_before_computing(tmp_path, capsys):
    """`--out afile/x.zarr` (or /proc/x.zarr) used to compute for minutes, then fail on its lock file."""
    from geonp.cli import main

    (tmp_path / "afile").write_text("x")
    assert main(["demo", "--out", str(tmp_path / "afile" / "x.zarr")]) == 2
    assert "geonp: error: cannot write the output" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_model_save_overwrites_only_a_model_file(tmp_path):
    import numpy as np
    import pandas as pd
    import xarray as xr

    import geonp

    precious = tmp_path / "data.nc"
    precious.write_bytes(b"CDF\x01 not a model")
    rng = np.random.default_rng(0)
    v = np.where(rng.random((4, 8, 9)) < 0.3, np.nan, rng.standard_normal((4, 8, 9)))
    ds = xr.Dataset({"t": (("time", "lat", "lon"), v)}, coords={
        "time": pd.date_range("2020", periods=4, freq="h"), "lat": np.linspace(50, 52, 8),
        "lon": np.linspace(0, 2, 9)})
    model = ds.np.fit("t", steps=0)
    with pytest.raises(OutputExistsError, match="not a model file written by geonp"):
        model.save(precious, overwrite=True)
    assert precious.read_bytes() == b"CDF\x01 not a model"
    path = model.save(tmp_path / "m.geonp")
    model.save(path, overwrite=True)  # a model file is replaced
    assert isinstance(geonp.load_model(path), geonp.Model)


def test_a_model_fitted_on_one_time_step_is_refused_on_another():
    """An hourly model on 6-hourly ERA5 covered 0.70: its windows and calibration assume the hourly step."""
    import numpy as np
    import pandas as pd
    import xarray as xr

    from geonp.errors import ModelMismatchError

    rng = np.random.default_rng(1)

    def data(freq):
        v = np.where(rng.random((6, 8, 9)) < 0.3, np.nan, rng.standard_normal((6, 8, 9)))
        return xr.Dataset({"t": (("time", "lat", "lon"), v)}, coords={
            "time": pd.date_range("2020", periods=6, freq=freq), "lat": np.linspace(50, 52, 8),
            "lon": np.linspace(0, 2, 9)})

    model = data("h").np.fit("t", steps=0)
    data("h").np.infill("t", model=model)  # its own step
    with pytest.raises(ModelMismatchError, match=r"time step of 1 h but the data step 6 h.*resample"):
        data("6h").np.infill("t", model=model)
    data("6h").isel(time=[0]).np.infill("t", model=model)  # one frame: no step to compare


def test_a_variable_name_with_a_slash_is_refused_before_writing(tmp_path):
    import numpy as np
    import xarray as xr

    import geonp
    from geonp.errors import ConfigError

    ds = xr.Dataset({"t/2m_mean": (("y", "x"), np.ones((2, 3)))}, coords={"y": [0.0, 1.0], "x": [0.0, 1.0, 2.0]})
    with pytest.raises(ConfigError, match=r"\['t/2m_mean'\] hold '/'.*ds.rename\(\{'t/2m_mean': 't_2m_mean'\}\)"):
        geonp.to_zarr(ds, tmp_path / "o.zarr")
    assert list(tmp_path.iterdir()) == []
