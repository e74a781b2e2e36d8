"""``geonp infill --times START/END``: the newest night of a growing archive, with the frames its context needs."""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pytest
import xarray as xr
from test_api import field

from geonp.cli import main
from geonp.errors import ConfigError
from geonp.time_select import context_pad, parse_times, select_times


@pytest.fixture
def archive(tmp_path):
    ds, _ = field(times=30, keep=0.6)
    path = tmp_path / "archive.zarr"
    ds.to_zarr(path)
    return ds, path


def test_infill_times_predicts_those_hours_as_the_whole_record_does(archive, tmp_path, capsys):
    ds, path = archive
    whole, night = tmp_path / "whole.zarr", tmp_path / "night.zarr"
    assert main(["infill", str(path), "--out", str(whole), "--quiet"]) == 0
    assert main(["infill", str(path), "--out", str(night), "--times", "2019-03-01T12/2019-03-01T17", "--quiet"]) == 0
    a, b = xr.open_zarr(whole), xr.open_zarr(night)
    np.testing.assert_array_equal(b.time.values, ds.time.values[12:18])  # those hours only
    for name in ("t2m_mean", "t2m_std", "t2m_filled"):  # planning counts other frames: 4e-4 here
        np.testing.assert_allclose(b[name].values, a[name].isel(time=slice(12, 18)).values, atol=2e-3)
    open_end = tmp_path / "tail.zarr"
    assert main(["infill", str(path), "--out", str(open_end), "--times", "2019-03-02T03/", "--quiet"]) == 0
    np.testing.assert_array_equal(xr.open_zarr(open_end).time.values, ds.time.values[27:])


def test_select_times_reads_the_window_and_the_rest_of_a_group(archive):
    ds, _ = archive
    assert context_pad(3, 3) == 5 and context_pad(0, 1) == 0
    cut, keep = select_times(ds, "time", "2019-03-01T10/2019-03-01T11", 5)
    np.testing.assert_array_equal(cut.time.values, ds.time.values[5:17])
    np.testing.assert_array_equal(cut.time.values[keep], ds.time.values[10:12])
    cut, keep = select_times(ds, "time", "/2019-03-01T01", 5)  # open start: clipped at the record's
    np.testing.assert_array_equal(cut.time.values[keep], ds.time.values[:2])
    assert parse_times("2019-03-07") == ("2019-03-07", "2019-03-07")


def test_infill_times_errors(archive, tmp_path, capsys):
    ds, path = archive
    out = tmp_path / "o.zarr"
    assert main(["infill", str(path), "--out", str(out), "--times", "2020-01-01/2020-01-02", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "holds no time step of the data, which run from 2019-03-01" in err and not out.exists()
    with pytest.raises(ConfigError, match="is not START/END"):
        parse_times("2019/03/07")
    with pytest.raises(ConfigError, match="is not START/END"):
        parse_times("/")
    assert main(["infill", str(path), "--out", str(out), "--times", "yesterday/today", "--quiet"]) == 2
    assert "expected ISO times" in capsys.readouterr().err
    static = tmp_path / "static.zarr"
    ds.isel(time=0, drop=True).to_zarr(static)
    assert main(["infill", str(static), "--out", str(out), "--times", "2019-03-01/", "--quiet"]) == 2
    assert "the data have no time axis" in capsys.readouterr().err


def test_a_chunked_zarr_input_is_infilled_and_written_on_its_own_chunks(tmp_path):
    """Read whole, a 24-frame-chunked week became one 168-frame region that an interrupted run restarted (30th test)."""
    ds, _ = field(times=12, keep=0.6)
    chunked, plain = tmp_path / "chunked.zarr", tmp_path / "plain.nc"
    ds.chunk(time=4).to_zarr(chunked)
    ds.to_netcdf(plain)
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    assert main(["infill", str(chunked), "--out", str(a), "--quiet"]) == 0
    assert main(["infill", str(plain), "--out", str(b), "--quiet"]) == 0
    out, eager = xr.open_zarr(a), xr.open_zarr(b)
    assert out.t2m_mean.chunks[0] == (4, 4, 4) and eager.t2m_mean.chunks[0] == (12,)  # the store's own chunks
    for name in ("t2m_mean", "t2m_std", "t2m_filled"):
        np.testing.assert_allclose(out[name].values, eager[name].values, atol=1e-5)


def test_infill_times_reads_a_model_file_once(archive, tmp_path, monkeypatch):
    import geonp.model as model_module
    from geonp.model import Model

    _, path = archive
    saved = Model.pretrained("bsa-tnp").save(tmp_path / "m.geonp")
    loads = []
    real = model_module.load_model
    monkeypatch.setattr(model_module, "load_model", lambda p: loads.append(p) or real(p))
    out = tmp_path / "night.zarr"
    assert main(["infill", str(path), "--out", str(out), "--model", str(saved), "--times",
                 "2019-03-01T12/2019-03-01T13", "--quiet"]) == 0
    assert len(loads) == 1 and xr.open_zarr(out).attrs["geonp_model_source"] == str(saved)


def test_infill_times_inside_a_long_outage_reads_the_wide_window(tmp_path):
    """A place missing for 12 hours is infilled from both its sides, up to 8 frames away: the cut keeps them."""
    ds, _ = field(nlat=12, nlon=12, times=30, keep=0.8)
    ds["t2m"][8:20, :, :6] = np.nan  # the west half missing in hours 8..19
    path, whole, part = tmp_path / "outage.zarr", tmp_path / "whole.zarr", tmp_path / "part.zarr"
    ds.to_zarr(path)
    assert main(["infill", str(path), "--out", str(whole), "--quiet"]) == 0
    assert main(["infill", str(path), "--out", str(part), "--times", "2019-03-01T12/2019-03-01T14", "--quiet"]) == 0
    a, b = xr.open_zarr(whole), xr.open_zarr(part)
    assert '"wide_window": 8' in a.attrs["geonp_settings"]
    for name in ("t2m_mean", "t2m_std"):
        np.testing.assert_allclose(b[name].values, a[name].isel(time=slice(12, 15)).values, atol=2e-3)
