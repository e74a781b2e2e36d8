"""The geonp command line (`geonp fit|infill|forecast|demo`) and the demo.

Each test runs `main(argv)` in-process on a tiny NetCDF file (8 x 10 grid x 4 hourly frames with NaN gaps)
written to tmp_path; errors are checked for exit code 2 and one `geonp: error:` line on stderr.
"""

import re

import numpy as np
import pandas as pd
import pyproj
import pytest
import xarray as xr

import geonp.pretrained as pretrained
from geonp.cli import main, parse_chunks
from geonp.demo import BLOCK, CRS, FRAMES, KEEP, SIDE, VAR, demo_dataset
from geonp.errors import ConfigError


def _field(time: bool = True) -> xr.Dataset:
    rng = np.random.default_rng(0)
    lat = np.linspace(40.0, 47.0, 8)
    lon = np.linspace(5.0, 14.0, 10)
    yy, xx = np.meshgrid(lat, lon, indexing="ij")
    base = 285.0 + np.sin(yy / 2.0) + np.cos(xx / 3.0)
    attrs = {"units": "K", "standard_name": "air_temperature"}
    if not time:
        v = (base + 0.1 * rng.standard_normal(base.shape)).astype("float32")
        v[rng.random(v.shape) < 0.3] = np.nan
        return xr.Dataset({"t2m": (("latitude", "longitude"), v, attrs)}, coords={"latitude": lat, "longitude": lon})
    v = (base[None] + 0.1 * rng.standard_normal((4, *base.shape))).astype("float32")
    v[rng.random(v.shape) < 0.3] = np.nan
    return xr.Dataset({"t2m": (("time", "latitude", "longitude"), v, attrs)},
                      coords={"time": pd.date_range("2020-01-01", periods=4, freq="h"), "latitude": lat,
                              "longitude": lon})


@pytest.fixture
def nc(tmp_path):
    """Write a tiny gridded NetCDF file with gaps."""
    path = tmp_path / "t2m.nc"
    _field().to_netcdf(path)
    return path


@pytest.fixture
def nc_no_time(tmp_path):
    """Write a tiny NetCDF field without a time axis."""
    path = tmp_path / "static.nc"
    _field(time=False).to_netcdf(path)
    return path


def _one_error_line(capsys, startswith: str = "geonp: error: ") -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if not line.startswith("geonp: warning: ")]
    assert len(lines) == 1, err
    assert lines[0].startswith(startswith), err
    assert "Traceback" not in err
    return lines[0]


def _tree(path):
    """Every file under ``path`` with its size and mtime (to check that nothing changed)."""
    return sorted((str(p.relative_to(path)), p.stat().st_size, p.stat().st_mtime_ns) for p in path.rglob("*"))


# ------------------------------------------------------------------------------------------ parsing


def test_cli__unknown_command_exits_2(capsys):
    """An unknown subcommand is an argparse error with exit code 2."""
    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code == 2
    assert "invalid choice: 'frobnicate'" in _one_error_line(capsys)


@pytest.mark.parametrize("argv", [["demo", "--bogus"], ["infill", "x.nc", "--out", "o.zarr", "--bogus"]])
def test_cli__unknown_option_exits_2(capsys, argv):
    """An unknown option is one `geonp: error:` line (no usage block) naming the command's help."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    line = _one_error_line(capsys)
    assert "unrecognized arguments: --bogus" in line and f"see `geonp {argv[0]} --help`" in line


def test_cli__bad_option_value_is_one_error_line(capsys):
    """An option value of the wrong type is one `geonp: error:` line too."""
    with pytest.raises(SystemExit) as exc:
        main(["forecast", "x.nc", "--steps", "abc", "--out", "o.zarr"])
    assert exc.value.code == 2
    assert "argument --steps: invalid int value: 'abc'" in _one_error_line(capsys)


@pytest.mark.parametrize("argv, expected", [
    (["infill", "x.nc"], "the following arguments are required: .*--out"),
    (["forecast", "x.nc", "--out", "o.zarr"], "one of the arguments --hours --steps is required"),
    (["forecast", "x.nc", "--out", "o.zarr", "--hours", "2", "--steps", "2"],
     "argument --steps: not allowed with argument --hours"),
    (["fit", "--out", "m.geonp"], "the following arguments are required: .*INPUT"),
])
def test_cli__missing_required_argument_exits_2(capsys, argv, expected):
    """A missing INPUT or --out, or neither or both of --hours and --steps, is argparse's usage error, exit 2."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert re.search(rf"error: {expected}", _one_error_line(capsys))


def test_cli__version(capsys):
    """`geonp --version` prints the package version and exits 0."""
    import geonp

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"geonp {geonp.__version__}"


@pytest.mark.parametrize("spec, expected", [
    ("24", 24),
    ("time=24,latitude=64,longitude=64", {"time": 24, "latitude": 64, "longitude": 64}),
    (" time = 2 , x=-1 ", {"time": 2, "x": -1}),
])
def test_parse_chunks__accepts_an_int_or_dim_sizes(spec, expected):
    """`--chunks 24` is frames per chunk; `dim=size,...` a dict for chunks=."""
    assert parse_chunks(spec) == expected


@pytest.mark.parametrize("spec", ["", "0", "time", "time=", "time=abc", "time=24;lat=3", "time=0", "time=2,time=3",
                                  "2.5", "=4"])
def test_parse_chunks__rejects_malformed_specs(spec):
    """Anything else is a ConfigError naming --chunks."""
    with pytest.raises(ConfigError, match="--chunks"):
        parse_chunks(spec)


# ------------------------------------------------------------------------------------------ infill


def test_cli_infill__writes_mean_std_filled_with_crs_and_history(nc, tmp_path, capsys):
    """`geonp infill IN.nc --out OUT.zarr`: a store with the three variables, the CRS and the command line."""
    out = tmp_path / "out.zarr"
    assert main(["infill", str(nc), "--out", str(out)]) == 0
    cap = capsys.readouterr()
    assert cap.out.startswith("wrote t2m_mean, t2m_std, t2m_filled") and str(out) in cap.out
    assert len(cap.out.strip().splitlines()) == 1
    assert f"writing {out}" in cap.err  # progress on stderr, naming the store as given
    ds = xr.open_zarr(out, decode_coords="all")
    assert {"t2m_mean", "t2m_std", "t2m_filled"} <= set(ds.data_vars)
    assert ds.t2m_mean.dims == ("time", "latitude", "longitude") and ds.t2m_mean.shape == (4, 8, 10)
    assert np.isfinite(ds.t2m_mean.values).all() and (ds.t2m_std.values > 0).all()
    src = xr.open_dataset(nc).t2m
    observed = src.notnull().values
    np.testing.assert_allclose(ds.t2m_filled.values[observed], src.values[observed])
    np.testing.assert_allclose(ds.t2m_filled.values[~observed], ds.t2m_mean.values[~observed])
    assert ds.t2m_mean.attrs["units"] == "K"
    assert pyproj.CRS.from_wkt(ds.spatial_ref.attrs["crs_wkt"]).is_geographic
    pytest.importorskip("rioxarray")  # registers .rio (in the test extra)
    assert ds.t2m_mean.rio.crs.to_epsg() == 4326  # as rioxarray reads it back
    assert f"geonp infill {nc} --out {out}" in ds.attrs["history"]


def test_cli_infill__chunked_equals_unchunked_and_quiet_is_quiet(nc, tmp_path, capsys):
    """`--chunks` computes lazily chunk by chunk; on one space tile it matches the in-memory run."""
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    assert main(["infill", str(nc), "--out", str(a), "--quiet"]) == 0
    assert main(["infill", str(nc), "--out", str(b), "--chunks", "time=1", "--quiet"]) == 0
    cap = capsys.readouterr()
    assert cap.err == ""
    xa, xb = xr.open_zarr(a), xr.open_zarr(b)
    assert xb.t2m_mean.encoding["chunks"][0] == 1
    np.testing.assert_allclose(xa.t2m_mean.values, xb.t2m_mean.values, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(xa.t2m_std.values, xb.t2m_std.values, rtol=1e-5, atol=1e-5)


def test_cli_infill__tile_and_halo_reach_the_prediction(nc, tmp_path, capsys):
    """`--tile` and `--halo` size the output tiles and their context windows, in model units."""
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    assert main(["infill", str(nc), "--out", str(a), "--quiet", "--tile", "1", "--halo", "1000"]) == 0
    assert main(["infill", str(nc), "--out", str(b), "--quiet", "--tile", "1000", "--halo", "0"]) == 0
    xa, xb = xr.open_zarr(a), xr.open_zarr(b)
    np.testing.assert_allclose(xa.t2m_mean.values, xb.t2m_mean.values, rtol=1e-5, atol=2e-4)
    assert main(["infill", str(nc), "--out", str(tmp_path / "c.zarr"), "--tile", "-2"]) == 2
    assert "geonp: error: --tile -2.0; expected a finite number > 0" in capsys.readouterr().err
    assert not (tmp_path / "c.zarr").exists()


def test_cli_infill__calibrate_changes_only_the_std(nc, tmp_path, capsys):
    """`--calibrate` calibrates the shipped weights on the input first: same mean, rescaled std."""
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    assert main(["infill", str(nc), "--out", str(a), "--quiet", "--model", "te-pt-tnp", "--no-calibrate"]) == 0
    assert main(["infill", str(nc), "--out", str(b), "--quiet", "--model", "te-pt-tnp", "--calibrate"]) == 0
    xa, xb = xr.open_zarr(a), xr.open_zarr(b)
    np.testing.assert_allclose(xa.t2m_mean.values, xb.t2m_mean.values, rtol=1e-6)
    assert not np.allclose(xa.t2m_std.values, xb.t2m_std.values)
    assert (xa.attrs["geonp_calibrated"], xb.attrs["geonp_calibrated"]) == (
        "no", "on held-out observed values of the input")


def test_cli_infill__overwrite_replaces_the_store(nc, tmp_path, capsys):
    """`--overwrite` replaces an existing store."""
    out = tmp_path / "out.zarr"
    assert main(["infill", str(nc), "--out", str(out), "--quiet"]) == 0
    assert main(["infill", str(nc), "--out", str(out), "--quiet", "--overwrite", "--var", "t2m"]) == 0
    assert "--overwrite" in xr.open_zarr(out).attrs["history"]


def test_cli_infill__at_targets(nc, tmp_path, capsys):
    """`--targets FILE` predicts at that file's coordinates (no `_filled` then)."""
    grid = tmp_path / "grid.nc"
    xr.Dataset(coords={"latitude": np.linspace(41, 46, 5), "longitude": np.linspace(6, 13, 6)}).to_netcdf(grid)
    out = tmp_path / "out.zarr"
    assert main(["infill", str(nc), "--targets", str(grid), "--out", str(out), "--quiet"]) == 0
    ds = xr.open_zarr(out, decode_coords="all")
    assert set(ds.data_vars) == {"t2m_mean", "t2m_std"}
    assert ds.t2m_mean.shape == (4, 5, 6) and np.isfinite(ds.t2m_mean.values).all()


# ------------------------------------------------------------------------------------------ forecast, fit


def test_cli_forecast__two_hours(nc, tmp_path, capsys):
    """`geonp forecast --hours 2`: leads 1 h and 2 h after the last time step."""
    out = tmp_path / "fc.zarr"
    assert main(["forecast", str(nc), "--hours", "2", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("wrote t2m_mean, t2m_std (init_time: 1, lead_time: 2,")
    assert f"writing {out}" in captured.err and "writing" not in captured.out  # progress on stderr only
    ds = xr.open_zarr(out)
    assert ds.t2m_mean.dims == ("init_time", "lead_time", "latitude", "longitude")
    assert ds.t2m_mean.shape == (1, 2, 8, 10) and np.isfinite(ds.t2m_mean.values).all()
    assert ds.valid_time.values[0, -1] == np.datetime64("2020-01-01T05:00")
    # a duration, as the API takes (before: "invalid float value: '120min'")
    assert main(["forecast", str(nc), "--hours", "120min", "--out", str(tmp_path / "d.zarr")]) == 0
    np.testing.assert_array_equal(xr.open_zarr(tmp_path / "d.zarr").t2m_mean.values, ds.t2m_mean.values)


def test_cli_fit__passes_the_options_on_and_saves(nc, tmp_path, capsys, monkeypatch):
    """The CLI maps its options one to one onto geonp.api.fit and saves the returned model (no training here)."""
    import geonp.api

    seen = {}

    class Fitted:
        name, task, variables, metadata = "te-tnp", "forecast", ("t2m",), {"steps": 7}

        def save(self, path, overwrite=False):
            assert overwrite  # the CLI checked --overwrite itself, before training
            path.write_bytes(b"model")

    def fake_fit(ds, var, **kwargs):
        seen.update(kwargs, var=var, sizes=dict(ds.sizes))
        return Fitted()

    monkeypatch.setattr(geonp.api, "fit", fake_fit)
    model = tmp_path / "m.geonp"
    argv = ["fit", str(nc), "--out", str(model), "--var", "t2m", "--model", "te-tnp", "--task", "forecast",
            "--max-time", "90s", "--steps", "7", "--seed", "3", "--covariates", "hour", "--device", "cpu", "--quiet",
            "--reference", "none", "--preset", "paper", "--from-scratch", "--context-frames", "3",
            "--land", "lsm", "--mask", "observed"]
    assert main(argv) == 0
    assert seen == {"var": "t2m", "sizes": {"time": 4, "latitude": 8, "longitude": 10}, "model": "te-tnp",
                    "task": "forecast", "max_time": "90s", "steps": 7, "seed": 3, "covariates": ["hour"], "crs": None,
                    "device": "cpu", "progress": False, "reference": "none", "preset": "paper", "pretrained": False,
                    "time_window": None, "context_frames": 3, "land": "lsm", "mask": "observed"}
    assert model.read_bytes() == b"model"
    assert capsys.readouterr().out.startswith(f"saved te-tnp (forecast of t2m, 7 steps) to {model}")


@pytest.mark.parametrize("command, extra", [("infill", ["--time-window", "2"]),
                                            ("forecast", ["--hours", "1", "--context-frames", "2"]),
                                            ("forecast", ["--steps", "3", "--context-frames", "2"])])
def test_cli_predict__passes_batch_size_and_windows_on(nc, tmp_path, monkeypatch, command, extra):
    """--batch-size and the window options reach geonp.api (nothing is computed here)."""
    import geonp.api

    seen = {}

    def fake(ds, var, **kwargs):
        seen.update(kwargs)
        raise geonp.errors.ConfigError("stop here")

    monkeypatch.setattr(geonp.api, command, fake)
    argv = [command, str(nc), "--out", str(tmp_path / "o.zarr"), "--batch-size", "3", *extra]
    assert main(argv) == 2
    assert seen["batch_size"] == 3
    assert seen.get("land") == ("auto" if command == "infill" else None)  # forecasts take no land option
    assert seen.get("time_window", seen.get("context_frames")) == 2
    if command == "forecast":
        assert (seen["hours"], seen["steps"]) == ((1.0, None) if "--hours" in extra else (None, 3))
    assert not (tmp_path / "o.zarr").exists()


@pytest.mark.parametrize("command, extra", [("infill", []), ("forecast", ["--hours", "1"])])
@pytest.mark.parametrize("flag, infill, forecast", [([], "auto", "auto"), (["--calibrate"], True, True),
                                                    (["--no-calibrate"], False, False)])
def test_cli_predict__calibrate_flags(nc, tmp_path, monkeypatch, command, extra, flag, infill, forecast):
    """Shipped weights are calibrated by default ("auto"); --calibrate/--no-calibrate force it."""
    import geonp.api

    seen = {}

    def fake(ds, var, **kwargs):
        seen.update(kwargs)
        raise geonp.errors.ConfigError("stop here")

    monkeypatch.setattr(geonp.api, command, fake)
    assert main([command, str(nc), "--out", str(tmp_path / "o.zarr"), *extra, *flag]) == 2
    want = infill if command == "infill" else forecast
    assert seen["calibrate"] == want and type(seen["calibrate"]) is type(want)


@pytest.mark.slow
def test_cli_fit__then_infill_with_the_saved_model(nc, tmp_path, capsys):
    """`geonp fit --steps 3` saves a model that `geonp infill --model PATH` uses (~10 s on 2 cores)."""
    model = tmp_path / "t2m.geonp"
    assert main(["fit", str(nc), "--steps", "3", "--out", str(model), "--quiet"]) == 0
    assert model.is_file()
    assert capsys.readouterr().out.startswith(f"saved bsa-tnp (infill of t2m, 3 steps) to {model}")
    out = tmp_path / "out.zarr"
    assert main(["infill", str(nc), "--model", str(model), "--out", str(out), "--quiet"]) == 0
    ds = xr.open_zarr(out)
    assert ds.attrs["geonp_model_source"] == str(model)
    assert np.isfinite(ds.t2m_mean.values).all()
    more = tmp_path / "more.geonp"  # --model PATH trains the saved model further
    capsys.readouterr()
    assert main(["fit", str(nc), "--model", str(model), "--steps", "2", "--out", str(more), "--quiet"]) == 0
    assert capsys.readouterr().out.startswith(f"saved bsa-tnp (infill of t2m, 2 steps) to {more}")
    import geonp

    assert geonp.load_model(more).metadata["source"] == f"fitted from {model}"


def test_cli_fit__refuses_an_existing_model_file_before_training(nc, tmp_path, capsys, monkeypatch):
    """An existing model file is refused before any training and left as it was."""
    import geonp.api

    model = tmp_path / "t2m.geonp"
    model.write_bytes(b"precious")
    monkeypatch.setattr(geonp.api, "fit", lambda *a, **k: pytest.fail("trained although --out exists"))
    assert main(["fit", str(nc), "--steps", "3", "--out", str(model)]) == 3  # exists: nothing done
    line = _one_error_line(capsys)
    assert f"{str(model)!r} exists" in line and "--overwrite" in line
    assert model.read_bytes() == b"precious"


# ------------------------------------------------------------------------------------------ errors


def test_cli_fit__needs_a_budget(nc, tmp_path, capsys):
    """Without --max-time or --steps, fit says which CLI options give it a budget."""
    assert main(["fit", str(nc), "--out", str(tmp_path / "m.geonp")]) == 2
    assert "--max-time" in _one_error_line(capsys)
    assert not (tmp_path / "m.geonp").exists()
    # a data file's name for the model (it was written as a model file named m.zarr)
    assert main(["fit", str(nc), "--steps", "0", "--out", str(tmp_path / "m.zarr")]) == 2
    assert "names a data file, but fit writes a model file; pass a name such as m.geonp" in _one_error_line(capsys)
    assert not (tmp_path / "m.zarr").exists()


def test_cli__an_output_another_run_is_writing_exits_4(nc, tmp_path, capsys):
    """'exists' and 'locked' exited 2 like any error: a nightly job could not tell done or running from failed."""
    from geonp.io.lock import write_lock

    out = tmp_path / "out.zarr"
    with write_lock(out):
        assert main(["infill", str(nc), "--out", str(out), "--quiet"]) == 4
    assert "is writing" in _one_error_line(capsys) and not out.exists()
    assert main(["infill", str(nc), "--out", str(out), "--quiet"]) == 0  # released: the next run writes
    plain = tmp_path / "notes.zarr"
    plain.write_text("mine")  # not an output of ours: an error (2), not "done already" (3), --overwrite or not
    for flag in ([], ["--overwrite"]):
        assert main(["infill", str(nc), "--out", str(plain), "--quiet", *flag]) == 2
        assert "is a file of 4 bytes, not a Zarr store" in _one_error_line(capsys)
    assert plain.read_text() == "mine"


def test_cli__existing_out_is_refused_before_computing_and_left_alone(nc, tmp_path, capsys, monkeypatch):
    """An existing --out is refused (same message as geonp.to_zarr) before computing, and not touched."""
    import geonp.api

    out = tmp_path / "out.zarr"
    assert main(["infill", str(nc), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    before = _tree(out)
    monkeypatch.setattr(geonp.api, "infill", lambda *a, **k: pytest.fail("computed although --out exists"))
    monkeypatch.setattr(geonp.api, "forecast", lambda *a, **k: pytest.fail("computed although --out exists"))
    assert main(["infill", str(nc), "--out", str(out)]) == 3  # a cron job's run already done: not a failure
    line = _one_error_line(capsys)
    assert line == (f"geonp: error: {str(out)!r} exists; expected a new output path; pass --overwrite or choose "
                    "another path")
    assert main(["forecast", str(nc), "--hours", "1", "--out", str(out)]) == 3
    _one_error_line(capsys)
    assert _tree(out) == before
    # a store named like another format is refused the same way, before computing (and writes nothing)
    assert main(["infill", str(nc), "--out", str(tmp_path / "out.nc")]) == 2
    assert "ends in '.nc', but geonp writes Zarr stores" in _one_error_line(capsys)
    assert not (tmp_path / "out.nc").exists()


def test_cli__missing_input_file(tmp_path, capsys):
    """A missing input file is one error line and writes nothing."""
    out = tmp_path / "out.zarr"
    assert main(["infill", str(tmp_path / "nope.nc"), "--out", str(out)]) == 2
    assert "nope.nc" in _one_error_line(capsys)
    assert not out.exists()


def test_cli__unknown_variable(nc, tmp_path, capsys):
    """An unknown --var names the variables there are."""
    assert main(["infill", str(nc), "--var", "tp", "--out", str(tmp_path / "o.zarr")]) == 2
    line = _one_error_line(capsys)
    assert "'tp'" in line and "t2m" in line
    assert not (tmp_path / "o.zarr").exists()


def test_cli__hours_not_a_multiple_of_the_step(nc, tmp_path, capsys):
    """--hours must be a whole number of time steps."""
    assert main(["forecast", str(nc), "--hours", "1.5", "--out", str(tmp_path / "o.zarr")]) == 2
    line = _one_error_line(capsys)
    assert "--hours 1.5" in line and "1 h" in line and "use e.g. --hours 2, or --steps 2" in line
    assert not (tmp_path / "o.zarr").exists()
    assert main(["forecast", str(nc), "--hours", "nan", "--out", str(tmp_path / "o.zarr")]) == 2
    assert "expected a finite positive multiple" in _one_error_line(capsys)
    assert not (tmp_path / "o.zarr").exists()


@pytest.mark.parametrize("content, message", [
    (b"not a checkpoint at all", "not a geonp"),
    (None, "no model file at"),
])
def test_cli__bad_model_file_is_one_error_line(nc, tmp_path, capsys, content, message):
    """A --model path that is missing or not a geonp file is one error line, and nothing is written."""
    model = tmp_path / "m.geonp"
    if content is not None:
        model.write_bytes(content)
    out = tmp_path / "o.zarr"
    assert main(["infill", str(nc), "--model", str(model), "--out", str(out)]) == 2
    assert message in _one_error_line(capsys)
    assert not out.exists()


def test_cli__forecast_needs_time(nc_no_time, tmp_path, capsys):
    """Forecasting data without a time axis is refused."""
    assert main(["forecast", str(nc_no_time), "--hours", "1", "--out", str(tmp_path / "o.zarr")]) == 2
    assert "no time axis" in _one_error_line(capsys)
    assert not (tmp_path / "o.zarr").exists()


def test_cli__error_found_while_writing_leaves_nothing(nc, tmp_path, capsys):
    """Bad input found only while the lazy result is computed is one error line, and no store is left.

    Here the bad input is no history to calibrate on before the first initial time; neither the store
    nor a partial one is left.
    """
    out = tmp_path / "o.zarr"
    args = ["forecast", str(nc), "--hours", "1", "--model", "te-pt-tnp", "--init-time", "2020-01-01T00:00",
            "--calibrate", "--context-frames", "1", "--chunks", "time=4", "--quiet", "--out", str(out)]
    assert main(args) == 2
    assert "calibrate" in _one_error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t2m.nc"]


@pytest.mark.parametrize("spec, message", [("time=abc", "is not a chunk spec"), ("lat=4", "chunks has dim 'lat'")])
def test_cli__bad_chunks(nc, tmp_path, capsys, spec, message):
    """A malformed --chunks, or one naming a dim the data lack, is one error line."""
    assert main(["infill", str(nc), "--chunks", spec, "--out", str(tmp_path / "o.zarr")]) == 2
    assert message in _one_error_line(capsys)
    assert not (tmp_path / "o.zarr").exists()


def test_cli__out_may_not_be_the_input(nc, capsys):
    """--out may not replace the input, even with --overwrite."""
    before = nc.read_bytes()
    assert main(["infill", str(nc), "--out", str(nc), "--overwrite"]) == 2
    assert "is the input" in _one_error_line(capsys)
    assert nc.read_bytes() == before


def test_cli__unknown_model_prints_one_error_line(tmp_path, capsys, monkeypatch):
    """A model without shipped weights prints `geonp: error: ...` and returns 2, writing nothing."""
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--model", "tnp-d"]) == 2
    assert _one_error_line(capsys).startswith("geonp: error: no shipped weights for 'tnp-d'")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------ shipped weights


def test_pretrained__missing_weights_file_is_typed(tmp_path, monkeypatch):
    """A package installed without its weights raises CheckpointNotFoundError with a fix hint."""
    monkeypatch.setattr(pretrained, "WEIGHTS_DIR", tmp_path)
    with pytest.raises(pretrained.CheckpointNotFoundError, match="scripts/pretrain.py --model bsa-tnp"):
        pretrained.load_pretrained("bsa-tnp")


@pytest.mark.parametrize("name", sorted(pretrained.PRETRAINED))
def test_pretrained__shipped_weights_load(name):
    """The shipped weights load safely and are space-time models in eval mode."""
    model = pretrained.load_pretrained(name)
    assert model.config.space_dims == 2 and model.config.time_dims == 1
    assert not model.training
    meta = pretrained.pretrained_metadata(name)
    assert meta["units"]["time"] == "one time step"


def test_pretrained__recipe_options_are_recorded():
    """The recipe builds the shipped architecture; its noise prior is an option recorded in the metadata."""
    model, data, config = pretrained.pretraining_recipe("bsa-tnp", max_cpu_time=1.0)
    assert data.noise_std_range == (0.01, 0.3) and data.hole_probability == 0.5
    assert model.config.proximity_features and model.config.position_moments == 4 and config.max_cpu_time == 1.0
    assert model.config == pretrained.load_pretrained("bsa-tnp").config  # the recipe is what was shipped
    _, wide, _ = pretrained.pretraining_recipe("bsa-tnp", max_cpu_time=1.0, noise_std_range=[0.01, 1.0])
    assert pretrained.recipe_metadata(wide, config)["generator_config"]["noise_std_range"] == [0.01, 1.0]
    _, big, _ = pretrained.pretraining_recipe("bsa-tnp", max_cpu_time=1.0, num_locations=(64, 384), max_points=2000,
                                              lattice_probability=0.5, hole_fraction=(0.1, 0.45))
    meta = pretrained.recipe_metadata(big, config)["generator_config"]
    assert (meta["num_locations"], meta["max_points"], meta["lattice_probability"]) == ([64, 384], 2000, 0.5)
    assert meta["hole_fraction"] == [0.1, 0.45] and data.hole_fraction == (0.03, 0.3)
    with pytest.raises(pretrained.UnknownOptionError, match="no pretraining recipe for 'tnp-d'"):
        pretrained.pretraining_recipe("tnp-d", max_cpu_time=1.0)


def test_pretrained__terrain_recipe_starts_from_the_shipped_weights():
    """terrain=True: one elevation covariate with an attention bias, on terrain priors.

    Initialised from the shipped weights it predicts exactly what they predict, whatever the elevations.
    """
    import torch

    from geonp.fitting import init_from
    from geonp.models import Batch

    model, data, _ = pretrained.pretraining_recipe("bsa-tnp", max_cpu_time=1.0, terrain=True, num_locations=(40, 60))
    assert data.terrain and model.config.covariate_dims == 1 and tuple(model.config.bias_covariates) == (0,)
    shipped = pretrained.load_pretrained("bsa-tnp")
    init_from(model, shipped)
    batch = data.sample(2, torch.Generator().manual_seed(0))
    assert batch.zc is not None and batch.zc.std() > 0
    with torch.no_grad():
        a, b = model.eval()(batch), shipped(Batch(xc=batch.xc, yc=batch.yc, xt=batch.xt))
    torch.testing.assert_close(a.loc, b.loc)
    torch.testing.assert_close(a.scale, b.scale)
    with pytest.raises(pretrained.UnknownOptionError, match="terrain=True needs"):
        pretrained.pretraining_recipe("te-pt-tnp", max_cpu_time=1.0, terrain=True)


# ------------------------------------------------------------------------------------------ demo


def test_demo__dataset_is_a_projected_field_with_realistic_gaps():
    """The demo's input is what a user would have: CF attrs, x/y in metres on EPSG:3035, hourly times, gaps."""
    ds = demo_dataset()
    da = ds[VAR]
    assert da.dims == ("time", "y", "x") and da.shape == (FRAMES, SIDE, SIDE)
    assert da.attrs["units"] == "K" and da.attrs["standard_name"] == "air_temperature"
    assert pyproj.CRS.from_wkt(ds.spatial_ref.attrs["crs_wkt"]).equals(pyproj.CRS(CRS))
    assert np.diff(ds.x.values).tolist() == [5000.0] * (SIDE - 1)
    assert (np.diff(ds.time.values) == np.timedelta64(1, "h")).all()
    kept = da.notnull().mean(("y", "x")).values
    assert np.all(np.abs(kept - KEEP) < 0.03)
    lo = (SIDE - BLOCK) // 2
    assert da.isel(time=FRAMES // 2, y=slice(lo, lo + BLOCK), x=slice(lo, lo + BLOCK)).isnull().all()


def test_cli_demo__refuses_existing_outputs_before_computing(tmp_path, capsys, monkeypatch):
    """`geonp demo` refuses an existing demo.png (or demo.zarr) before computing anything."""
    import geonp.api

    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo.png").write_bytes(b"old")
    monkeypatch.setattr(geonp.api, "infill", lambda *a, **k: pytest.fail("computed although demo.png exists"))
    assert main(["demo"]) == 3
    assert "'demo.png' exists" in _one_error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.png"]
    (tmp_path / "demo.png").unlink()
    assert main(["demo", "--png", "map.jpg"]) == 2  # it wrote PNG bytes into the .jpg
    assert "--png map.jpg ends in '.jpg'; the demo writes a PNG image" in _one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_cli_demo__custom_outputs_model_and_seed(tmp_path, capsys):
    """`geonp demo --model te-pt-tnp --seed 1 --out X --png Y` writes where it is told, with that model."""
    out, png = tmp_path / "sub" / "x.zarr", tmp_path / "maps" / "map.png"  # new folders, made for both
    assert main(["demo", "--model", "te-pt-tnp", "--seed", "1", "--out", str(out), "--png", str(png), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "geonp te-pt-tnp (zero-shot)" in text and f"wrote {out} and {png}" in text
    assert xr.open_zarr(out).attrs["geonp_model"] == "te-pt-tnp"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "demo.zarr").exists() and not (tmp_path / "demo.png").exists()


@pytest.mark.slow
def test_cli_demo__end_to_end(tmp_path, capsys, monkeypatch):
    """`geonp demo` in an empty directory: the score table, a CRS-readable Zarr store and a PNG.

    Zero-shot, the shipped BSA-TNP infills the field far better than the mean of the observations, with
    wide but covering intervals (the shipped small models are under-trained, see MODEL_CARD.md).
    """
    rioxarray = pytest.importorskip("rioxarray")  # noqa: F841  registers .rio
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "exact GP, true kernel" in out and "wrote demo.zarr and demo.png" in out
    rows = {m.group(1).strip(): [float(v) for v in m.group(2).split()]
            for m in re.finditer(r"^(geonp bsa-tnp \(zero-shot\)|exact GP, true kernel|mean of observations)"
                                 r"\s+([-\d.\s]+?)(?:\s+–.*)?$", out, re.M)}
    rmse, nll, cov, _ = rows["geonp bsa-tnp (zero-shot)"]
    assert rows["exact GP, true kernel"][0] < rmse < 0.5 * rows["mean of observations"][0]
    assert cov > 0.9
    ds = xr.open_zarr(tmp_path / "demo.zarr", decode_coords="all")
    assert ds.rio.crs.to_epsg() == pyproj.CRS(CRS).to_epsg() == 3035
    assert {f"{VAR}_mean", f"{VAR}_std", f"{VAR}_filled", VAR, f"{VAR}_truth"} <= set(ds.data_vars)
    assert ds[f"{VAR}_mean"].attrs["units"] == "K"
    assert (tmp_path / "demo.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------------------ targets, warnings

_UTM32 = "EPSG:32632"


def _target_points():
    """Three lat/lon points inside the tiny field, and the same points in UTM zone 32N metres."""
    lat, lon = np.array([41.5, 43.0, 45.5]), np.array([6.5, 9.0, 12.0])
    x, y = pyproj.Transformer.from_crs("EPSG:4326", _UTM32, always_xy=True).transform(lon, lat)
    return lat, lon, x, y


def test_cli_infill__projected_targets_get_their_crs_from_targets_crs(nc, tmp_path, capsys):
    """x/y targets with lat/lon data: --targets-crs gives them a CRS (--crs would be the data's, and is refused)."""
    lat, lon, x, y = _target_points()
    xy_csv, ll_csv = tmp_path / "xy.csv", tmp_path / "ll.csv"
    pd.DataFrame({"station": list("abc"), "x": x, "y": y}).to_csv(xy_csv, index=False)
    pd.DataFrame({"station": list("abc"), "lat": lat, "lon": lon}).to_csv(ll_csv, index=False)
    assert main(["infill", str(nc), "--targets", str(xy_csv), "--out", str(tmp_path / "no.zarr"), "--quiet"]) == 2
    assert "--targets-crs for a --targets file" in _one_error_line(capsys)
    out, ref = tmp_path / "xy.zarr", tmp_path / "ll.zarr"
    assert main(["infill", str(nc), "--targets", str(xy_csv), "--targets-crs", _UTM32, "--out", str(out),
                 "--quiet", "--no-calibrate"]) == 0
    assert main(["infill", str(nc), "--targets", str(ll_csv), "--out", str(ref), "--quiet", "--no-calibrate"]) == 0
    got, want = xr.open_zarr(out, decode_coords="all"), xr.open_zarr(ref)
    assert got.t2m_mean.shape == want.t2m_mean.shape == (4, 3)
    np.testing.assert_allclose(got.t2m_mean.values, want.t2m_mean.values, atol=1e-3)
    assert pyproj.CRS.from_wkt(got.spatial_ref.attrs["crs_wkt"]).to_epsg() == 32632


def test_cli_infill__netcdf_targets_without_a_crs_name_the_targets_and_targets_crs(nc, tmp_path, capsys):
    """x/y targets in NetCDF without spatial_ref: the error names --targets (not an internal name) and --targets-crs."""
    _, _, x, y = _target_points()
    grid = tmp_path / "xy.nc"
    xr.Dataset(coords={"x": np.sort(x), "y": np.sort(y)}).to_netcdf(grid)
    assert main(["infill", str(nc), "--targets", str(grid), "--out", str(tmp_path / "no.zarr"), "--quiet"]) == 2
    line = _one_error_line(capsys)
    assert "--targets has projected coordinates" in line and "--targets-crs" in line and "__target__" not in line
    out = tmp_path / "xy.zarr"
    assert main(["infill", str(nc), "--targets", str(grid), "--targets-crs", _UTM32, "--out", str(out),
                 "--quiet", "--no-calibrate"]) == 0
    assert xr.open_zarr(out).t2m_mean.shape == (4, 3, 3)


def test_cli_infill__projected_data_with_lat_lon_targets(tmp_path, capsys):
    """--crs is the data's: lat/lon targets beside projected data are not given it."""
    lat, lon, _, _ = _target_points()
    field = _field()
    xx, yy = pyproj.Transformer.from_crs("EPSG:4326", _UTM32, always_xy=True).transform(
        *np.meshgrid(field.longitude.values, field.latitude.values))
    xs, ys = np.linspace(xx.min(), xx.max(), 10), np.linspace(yy.min(), yy.max(), 8)
    data = tmp_path / "xy.nc"
    field.rename(latitude="y", longitude="x").assign_coords(x=xs, y=ys).to_netcdf(data)
    ll_csv = tmp_path / "ll.csv"
    pd.DataFrame({"station": list("abc"), "lat": lat, "lon": lon}).to_csv(ll_csv, index=False)
    out = tmp_path / "o.zarr"
    assert main(["infill", str(data), "--crs", _UTM32, "--targets", str(ll_csv), "--out", str(out), "--quiet",
                 "--no-calibrate"]) == 0
    assert np.isfinite(xr.open_zarr(out).t2m_mean.values).all()


def test_cli__out_may_not_be_the_targets(nc, tmp_path, capsys):
    """--out may not replace the --targets file either, even with --overwrite or through a symlink."""
    grid = tmp_path / "grid.zarr"
    grid.mkdir()  # a store written before: only its path matters here
    (grid / "zarr.json").write_text("{}")
    link = tmp_path / "link.zarr"
    link.symlink_to(grid)
    before = _tree(grid)
    for out in (grid, link, tmp_path / "." / "grid.zarr"):
        assert main(["infill", str(nc), "--targets", str(grid), "--out", str(out), "--overwrite", "--quiet"]) == 2
        assert "is the --targets file" in _one_error_line(capsys)
    assert _tree(grid) == before


def test_cli__warnings_are_one_geonp_line(nc, tmp_path, capfd):
    """A warning prints `geonp: warning: <message>` on stderr, without Python's file:line and source line."""
    out = tmp_path / "fc.zarr"
    assert main(["forecast", str(nc), "--hours", "1", "--init-time", "2020-01-01T00:00", "--out", str(out),
                 "--quiet", "--no-calibrate"]) == 0
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if "warning" in line.lower()]
    assert lines and all(line.startswith("geonp: warning: ") for line in lines), err
    assert "init_time 2020-01-01" in lines[0] and "is the first time step" in lines[0]
    assert "ShortHistoryWarning" not in err and ".py:" not in err


def test_cli__dayfirst_reads_csv_dates_day_first(tmp_path, capsys, monkeypatch):
    """--dayfirst reaches geonp.open_dataset for the input (and --targets), so 01/02/1990 is 1 February."""
    import geonp.io

    seen = []
    monkeypatch.setattr(geonp.io, "open_dataset", lambda path, **kw: seen.append(kw) or xr.Dataset())
    monkeypatch.setattr("geonp.api.infill", lambda *a, **kw: (_ for _ in ()).throw(ConfigError("stop here")))
    csv = tmp_path / "st.csv"
    csv.write_text("station,time,lat,lon,tmax\na,01/02/1990,40,-105,1\n")
    assert main(["infill", str(csv), "--dayfirst", "--targets", str(csv), "--out", str(tmp_path / "o.zarr")]) == 2
    assert [kw["dayfirst"] for kw in seen] == [True, True]


def test_cli__na_values_mask_every_format(tmp_path, capsys, monkeypatch):
    """--na-values masks a CSV's sentinel and a grid's undeclared fill value; a grid's markers must be numbers.

    A NetCDF's -999 land read as data gave gap means from -791.5 to 184 °C (a new-user report).
    """
    import geonp.io

    seen = []
    real = geonp.io.open_dataset
    monkeypatch.setattr(geonp.io, "open_dataset", lambda path, **kw: seen.append(real(path, **kw)) or seen[-1])
    monkeypatch.setattr("geonp.api.infill", lambda *a, **kw: (_ for _ in ()).throw(ConfigError("stop here")))
    csv = tmp_path / "st.csv"
    csv.write_text("station,time,lat,lon,tmax\na,1990-06-01,40,-105,-9999\na,1990-06-02,40,-105,21\n"
                   "a,1990-06-03,40,-105,-9999\n")
    assert main(["infill", str(csv), "--na-values", "-9999", "--out", str(tmp_path / "o.zarr")]) == 2
    np.testing.assert_array_equal(seen[0].tmax.values[:, 0], [np.nan, 21.0, np.nan])
    grid = _field()
    grid["t2m"].values[:, :2, :2] = -999.0
    grid["t2m"].attrs["units"] = "K"
    grid.to_netcdf(tmp_path / "fill.nc")
    capsys.readouterr()
    assert main(["infill", str(tmp_path / "fill.nc"), "--na-values", "-999", "--out", str(tmp_path / "p.zarr")]) == 2
    masked = seen[-1].t2m
    assert np.isnan(masked.values[:, :2, :2]).all() and masked.attrs["units"] == "K"
    np.testing.assert_array_equal(masked.values[:, 2:], grid.t2m.values[:, 2:])
    capsys.readouterr()
    assert main(["infill", str(tmp_path / "fill.nc"), "--na-values", "M", "--out", str(tmp_path / "q.zarr")]) == 2
    assert "--na-values 'M' is not a number" in _one_error_line(capsys)


# ------------------------------------------------------------------------------------------ output safety, interrupts


def test_cli__overwrite_replaces_only_a_zarr_store_apart_from_the_input(nc, tmp_path, capsys, monkeypatch):
    """--overwrite never deletes a folder holding the input, a store inside the input, a file or another folder.

    Each is refused before computing, nothing deleted.
    """
    import geonp.api

    monkeypatch.setattr(geonp.api, "infill", lambda *a, **k: pytest.fail("computed although --out is refused"))
    sandbox = tmp_path / "sandbox"
    store = sandbox / "gappy.zarr"
    _field().to_zarr(store)
    (sandbox / "notes.txt").write_text("my notes")
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    before = _tree(tmp_path)
    cases = [(store, sandbox, r"output path '.*sandbox' contains the input \('.*gappy.zarr'\)"),
             (store, store / "t2m", r"output path '.*t2m' is inside the input"),
             (nc, precious, r"'.*precious.txt' exists and is a file of 7 bytes, not a Zarr store; .*replaces only "
                            r"a Zarr store \(a directory holding .zgroup, .zmetadata, .zarray, zarr.json\)"),
             (nc, sandbox, r"is a directory of 2 entries \('gappy.zarr', 'notes.txt'\), not a Zarr store")]
    for data, out, message in cases:
        assert main(["infill", str(data), "--out", str(out), "--overwrite", "--quiet"]) == 2
        assert re.search(message, _one_error_line(capsys))
    assert _tree(tmp_path) == before


def test_cli_fit__overwrite_replaces_only_a_model_file(nc, tmp_path, capsys, monkeypatch):
    """`geonp fit --overwrite` refuses a directory or a file that is not a geonp model, before training."""
    import geonp.api

    monkeypatch.setattr(geonp.api, "fit", lambda *a, **k: pytest.fail("trained although --out is refused"))
    notes = tmp_path / "models" / "notes.txt"
    notes.parent.mkdir()
    notes.write_text("keep me")
    for out, what in ((notes, "a file of 7 bytes"), (notes.parent, "a directory of 1 entry ('notes.txt')")):
        assert main(["fit", str(nc), "--out", str(out), "--steps", "1", "--overwrite", "--quiet"]) == 2
        assert f"exists and is {what}, not a model file" in _one_error_line(capsys)
    assert notes.read_text() == "keep me"


def test_cli_demo__png_folder_is_made_before_computing(tmp_path, capsys, monkeypatch):
    """`geonp demo --png newdir/x.png` creates newdir (as --out's folder is) before anything is computed."""
    import geonp.demo

    def stop(seed):
        assert (tmp_path / "maps").is_dir() and (tmp_path / "stores").is_dir()
        raise ConfigError("stop here")

    monkeypatch.setattr(geonp.demo, "_draw", stop)
    png, out = tmp_path / "maps" / "x.png", tmp_path / "stores" / "x.zarr"
    assert main(["demo", "--png", str(png), "--out", str(out), "--quiet"]) == 2
    assert _one_error_line(capsys) == "geonp: error: stop here"


def test_cli_fit__interrupt_says_nothing_was_saved(nc, tmp_path, capsys, monkeypatch):
    """Ctrl-C during `geonp fit` says that no model was saved (nothing about resuming a Zarr write)."""
    import geonp.api

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(geonp.api, "fit", interrupted)
    assert main(["fit", str(nc), "--out", str(tmp_path / "m.geonp"), "--steps", "5", "--quiet"]) == 130
    assert capsys.readouterr().err == ("geonp: interrupted (nothing was saved: training does not resume; run the "
                                       "command again to train again)\n")
    assert not (tmp_path / "m.geonp").exists()


def test_cli_infill__interrupt_before_the_write_says_nothing_was_written(nc, tmp_path, capsys, monkeypatch):
    """Ctrl-C while computing an in-memory result (no partial store yet) does not promise a resume."""
    import geonp.api

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(geonp.api, "infill", interrupted)
    assert main(["infill", str(nc), "--out", str(tmp_path / "o.zarr"), "--quiet"]) == 130
    assert capsys.readouterr().err == "geonp: interrupted (nothing was written yet: the same command starts afresh)\n"


def test_cli_infill__all_nan_output_is_said_in_the_summary(nc, tmp_path, capsys, monkeypatch):
    """An output that is NaN everywhere (targets far from the data) says so in its one-line summary."""
    import geonp.api

    nan = _field().rename(t2m="t2m_mean").isel(time=slice(0, 2)) * np.nan
    monkeypatch.setattr(geonp.api, "infill", lambda *a, **k: nan)
    assert main(["infill", str(nc), "--out", str(tmp_path / "o.zarr"), "--quiet"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("; all 160 values of t2m_mean are NaN: no prediction was "
                                                     "possible (are the targets far from the data, or the data all "
                                                     "missing?)")


# ------------------------------------------------------------------------------------------ hints in CLI syntax


def test_cli__error_hints_are_in_cli_syntax(nc, tmp_path, capsys):
    """A geonp error's Python keyword hints print as the subcommand's options (a new-user report).

    ``reference='none'`` (the library's message) cannot be typed on the command line; ``--reference none`` can.
    """
    out = tmp_path / "o.zarr"
    argv = ["forecast", str(nc), "--hours", "1", "--reference", "seasonal", "--quiet", "--out", str(out)]
    assert main(argv) == 2
    line = _one_error_line(capsys)
    assert "--reference seasonal needs a year of history" in line
    assert "Pass --reference none, or give more history." in line
    assert "reference=" not in line
    argv[argv.index("seasonal")] = "diurnal"
    assert main(argv) == 2
    line = _one_error_line(capsys)
    assert "--reference diurnal cannot be used" in line and "Pass --reference none" in line
    assert "reference=" not in line
    assert not out.exists()


@pytest.mark.parametrize("command, message, expected", [
    ("forecast", "Pass reference='none', or give more history.", "Pass --reference none, or give more history."),
    ("forecast", "use e.g. hours=6, or steps=6.", "use e.g. --hours 6, or --steps 6."),
    ("forecast", "pass init_time=... later", "pass --init-time ... later"),
    ("forecast", "context_frames=2 is too many", "--context-frames 2 is too many"),
    ("infill", "Pass calibrate=False.", "Pass --no-calibrate."),
    ("infill", "calibrate=True found nothing", "--calibrate found nothing"),
    ("infill", "pass var='t2m' or var='2m temp'", "pass --var t2m or --var '2m temp'"),
    ("infill", "pass overwrite=True (CLI: --overwrite) or choose another path",
     "pass --overwrite or choose another path"),
    ("infill", "or pass targets= (CLI --targets PATH) to predict", "or pass --targets PATH to predict"),
    ("fit", "fit one with task='forecast' (CLI: geonp fit --task forecast) or use",
     "fit one with --task forecast or use"),
    ("infill", "Pass crs= (e.g. crs='EPSG:27700', CLI --crs) or", "Pass --crs (e.g. --crs EPSG:27700) or"),
    ("infill", "use a shipped model (model='bsa-tnp').", "use a shipped model (--model bsa-tnp)."),
    ("fit", "pass covariates=['elevation', ...], or none (covariates=[]).",
     "pass --covariates elevation ..., or none (--covariates)."),
    ("fit", "Leave it out, or pass context_frames=.", "Leave it out, or pass --context-frames."),
    ("fit", "use `max_time='10min'`", "use `--max-time 10min`"),
])
def test_cli_hints__rewrites_options_of_the_command(command, message, expected):
    """Bare ``name=value`` hints naming an option of the subcommand become that option as typed."""
    from geonp.cli_hints import cli_hints

    assert cli_hints(message, command) == expected


@pytest.mark.parametrize("command, message", [
    ("forecast", "resample first: ds.resample(time='1h').mean(), or ds.np.fit(task='forecast')"),
    ("infill", "read it with xr.decode_cf(ds) or open_dataset(path, sep=';') or geonp.to_zarr(ds, p, overwrite=True)"),
    ("infill", "pass hours=6 or init_time=..."),  # options of forecast, not of infill
    ("fit", "pass calibrate=False"),  # fit has no --calibrate
    ("forecast", "calibrate='auto' is the default; reference='bogus'; steps==3; hours=f(3); ds.hours=2"),
    ("infill", "time=24,latitude=64 and elevation_bias=True"),
])
def test_cli_hints__leaves_calls_and_other_names_alone(command, message):
    """Keywords inside a call's parentheses, names the subcommand has no option for and values it cannot take."""
    from geonp.cli_hints import cli_hints

    assert cli_hints(message, command) == message


def test_cli_hints__options_come_from_the_parser():
    """The rewrite knows each subcommand's options from its argparse parser (dest -> option strings)."""
    from geonp.cli_hints import command_options

    forecast = command_options("forecast")
    assert forecast["init_time"].option_strings == ["--init-time"]
    assert "--no-calibrate" in forecast["calibrate"].option_strings
    assert "input" not in forecast and "help" not in forecast
    assert "calibrate" not in command_options("fit") and "hours" not in command_options("infill")
    assert command_options("frobnicate") == {}


def test_cli__warnings_name_cli_options_and_a_full_disk_says_the_write_resumes(nc, tmp_path, capsys, monkeypatch):
    """Warnings named Python keywords (time_window=) on the command line; a full disk gave a bare OS message."""
    import errno
    import warnings

    def warning_infill(*a, **kw):
        warnings.warn("Widen time_window= (or halo=) to predict them.", UserWarning, stacklevel=1)
        (tmp_path / "o.zarr.partial").mkdir()
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "o.zarr.partial"))

    monkeypatch.setattr("geonp.api.infill", warning_infill)
    assert main(["infill", str(nc), "--out", str(tmp_path / "o.zarr")]) == 1
    err = capsys.readouterr().err
    assert "geonp: warning: Widen --time-window (or --halo) to predict them." in err
    assert "geonp: error: No space left on device: " in err and "resumes when the same command is run again" in err


def test_cli__a_warning_raised_by_every_block_prints_once(nc, tmp_path, monkeypatch, capsys):
    """Raised in dask's threads, one per block, a chunked infill printed the same line 11 times."""
    import threading
    import warnings

    def warning_infill(*a, **kw):
        def warn():
            warnings.warn("Some frames have no observation.", UserWarning, stacklevel=1)

        threads = [threading.Thread(target=warn) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        warnings.warn("Another text.", UserWarning, stacklevel=1)
        raise ConfigError("stop here")

    monkeypatch.setattr("geonp.api.infill", warning_infill)
    assert main(["infill", str(nc), "--out", str(tmp_path / "o.zarr")]) == 2
    err = capsys.readouterr().err
    assert err.count("geonp: warning: Some frames have no observation.") == 1
    assert err.count("geonp: warning: Another text.") == 1
