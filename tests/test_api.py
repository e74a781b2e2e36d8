"""The xarray layer: ds.np.infill / forecast / fit, chunking through dask, models that travel."""

import pyproj  # isort: skip

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import geonp  # noqa: F401  registers ds.np
from geonp.calibrate_input import AUTO_CALIBRATION_POINTS
from geonp.errors import (
    ConfigError,
    CoordinateError,
    CRSError,
    ModelMismatchError,
    NoDataError,
    OutputExistsError,
    TimeAxisError,
    UnknownOptionError,
    VariableNotFoundError,
    VariableTypeError,
)


def field(nlat=8, nlon=10, times=4, keep=0.4, seed=0, lat0=50.0, lon0=-3.0):
    """Make a smooth lat/lon field with random gaps (NaN)."""
    lat = lat0 + 0.25 * np.arange(nlat)
    lon = lon0 + 0.25 * np.arange(nlon)
    t = np.arange(times)
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    truth = np.stack([np.sin(la * 2.0 + k / 3) + np.cos(lo * 1.5) for k in t]).astype("float32") + 280
    rng = np.random.default_rng(seed)
    observed = np.where(rng.random(truth.shape) < keep, truth, np.nan).astype("float32")
    attrs = {"units": "K", "standard_name": "air_temperature", "long_name": "2 m temperature"}
    coords = {"time": pd.date_range("2019-03-01", periods=times, freq="h"), "latitude": lat, "longitude": lon}
    return xr.Dataset({"t2m": (("time", "latitude", "longitude"), observed, attrs)}, coords=coords), truth


@pytest.fixture(scope="module")
def small():
    return field()


def test_infill_output_contract(small):
    ds, truth = small
    out = ds.np.infill("t2m")
    assert set(out.data_vars) == {"t2m_mean", "t2m_std", "t2m_filled"}
    for v in out.data_vars:
        assert out[v].dims == ("time", "latitude", "longitude") and out[v].dtype == np.float32
        assert out[v].attrs["units"] == "K"
    assert out.t2m_std.attrs["standard_name"] == "air_temperature standard_error"
    assert out.t2m_mean.attrs["ancillary_variables"] == "t2m_std"
    assert "ancillary_variables" not in out.t2m_filled.attrs  # t2m_std is not the observations' uncertainty
    assert "t2m_std is the standard deviation of t2m_mean" in out.t2m_filled.attrs["comment"]
    assert (out.t2m_std > 0).all()
    obs = ds.t2m.notnull()
    np.testing.assert_array_equal(out.t2m_filled.where(obs).values, ds.t2m.where(obs).values)
    np.testing.assert_array_equal(out.t2m_filled.where(~obs).values, out.t2m_mean.where(~obs).values)
    assert out.attrs["Conventions"].startswith("CF") and out.attrs["geonp_model"] == "bsa-tnp"
    assert len(out.attrs["geonp_checkpoint_sha256"]) == 64
    assert pyproj.CRS.from_wkt(out.spatial_ref.attrs["crs_wkt"]).to_epsg() == 4326
    # zero-shot it must beat the mean of the observations by a wide margin on this smooth field
    gaps = ~obs.values
    rmse = np.sqrt(np.mean((out.t2m_mean.values[gaps] - truth[gaps]) ** 2))
    assert rmse < 0.5 * np.nanstd(ds.t2m.values)


def test_outputs_carry_only_their_own_attributes_and_write_to_zarr(small, tmp_path):
    # an input with a _FillValue attribute and a reader's own attributes (cfgrib's GRIB_*, a
    # placeholder standard_name): the filled variable used to inherit them all and the write failed
    ds, _ = small
    raw = ds.copy()
    raw["t2m"].attrs.update({"_FillValue": np.float32(np.nan), "GRIB_shortName": "2t", "standard_name": "unknown"})
    out = raw.np.infill("t2m")
    for v in ("t2m_mean", "t2m_std", "t2m_filled"):
        assert not {"_FillValue", "GRIB_shortName"} & set(out[v].attrs) and out[v].attrs["units"] == "K"
        assert "standard_name" not in out[v].attrs  # no meaningful standard name to carry or modify
    back = xr.open_zarr(geonp.to_zarr(out, tmp_path / "out.zarr", progress=False))
    np.testing.assert_array_equal(back.t2m_filled.values, out.t2m_filled.values)


def test_dataarray_accessor_and_var_inference(small):
    ds, _ = small
    a = ds.np.infill()
    b = ds.t2m.np.infill()
    np.testing.assert_allclose(a.t2m_mean, b.t2m_mean, rtol=1e-6)


def test_chunked_equals_unchunked_and_is_lazy(small):
    ds, _ = small
    full = ds.np.infill("t2m", halo=1000.0)
    lazy = ds.np.infill("t2m", chunks={"time": 1, "latitude": 3, "longitude": 4}, halo=1000.0)
    assert lazy.t2m_mean.chunks is not None  # nothing computed yet
    assert lazy.t2m_mean.data.numblocks == (4, 3, 3)
    np.testing.assert_allclose(lazy.t2m_mean.compute(), full.t2m_mean, atol=2e-4)
    np.testing.assert_allclose(lazy.t2m_std.compute(), full.t2m_std, atol=2e-4)


def test_dask_backed_input_gives_lazy_output(small):
    ds, _ = small
    out = ds.chunk({"time": 2}).np.infill("t2m")
    assert out.t2m_mean.chunks[0] == (2, 2)
    assert np.isfinite(out.t2m_mean.compute()).all()


def _recorded(ds: xr.Dataset, read: set) -> xr.Dataset:
    """``ds`` with t2m a dask array of one chunk per frame that records which frames are read."""
    import dask
    import dask.array as da

    values = ds.t2m.values

    def frame(i):
        read.add(i)
        return values[i]

    data = da.stack([da.from_delayed(dask.delayed(frame)(i), shape=values.shape[1:], dtype=values.dtype)
                     for i in range(values.shape[0])])
    return ds.assign(t2m=(ds.t2m.dims, data, ds.t2m.attrs))


def test_planning_a_long_lazy_record_reads_a_sample_of_it():
    """A lazy infill of a long record reads at most PLAN_FRAMES frames before it returns, and equals the eager one."""
    from geonp.planning import PLAN_FRAMES

    ds, _ = field(nlat=5, nlon=6, times=3 * PLAN_FRAMES)
    read = set()
    lazy = _recorded(ds, read).np.infill("t2m", time_window=1)
    assert 0 < len(read) <= PLAN_FRAMES and lazy.t2m_mean.chunks is not None
    np.testing.assert_allclose(lazy.t2m_mean.isel(time=slice(0, 5)).compute(),
                               ds.np.infill("t2m", time_window=1).t2m_mean.isel(time=slice(0, 5)), atol=2e-4)


def test_planning_counts_the_whole_record_before_refusing_it():
    """Where the sample has no gaps, the whole record decides: gaps elsewhere are filled, none at all is refused."""
    from geonp.planning import PLAN_FRAMES

    ds, _ = field(nlat=4, nlon=5, times=2 * PLAN_FRAMES + 1, keep=1.0)
    with pytest.raises(NoDataError, match="no gaps"):
        ds.np.infill("t2m")
    gappy = ds.copy(deep=True)
    gappy.t2m[1, 2, 3] = np.nan  # frame 1 is not in the sample of 32 evenly spaced frames (0, 2, 4, ...)
    read = set()
    out = _recorded(gappy, read).np.infill("t2m", time_window=1)
    assert len(read) == 2 * PLAN_FRAMES + 1  # the sample had no gap: everything was counted
    assert np.isfinite(out.t2m_filled.isel(time=1).values).all()


def test_processes_scheduler(small):
    ds, _ = small
    ref = ds.np.infill("t2m", halo=1000.0)
    lazy = ds.np.infill("t2m", chunks={"time": 2}, halo=1000.0)
    got = lazy.t2m_mean.compute(scheduler="processes", num_workers=2)
    np.testing.assert_allclose(got, ref.t2m_mean, atol=2e-4)


def test_processes_scheduler__calibrated_station_infill():
    """The default calibration of station data is a task of the graph: it pickles and runs in a worker process."""
    st = stations(times=6)
    ref = st.np.infill("tmax", model="te-pt-tnp")
    lazy = st.chunk({"time": 2}).np.infill("tmax", model="te-pt-tnp")
    assert lazy.attrs["geonp_calibrated"] == "on held-out observed values of the input"
    got = lazy.tmax_std.compute(scheduler="processes", num_workers=2)
    np.testing.assert_allclose(got, ref.tmax_std, rtol=1e-5)


def test_descending_latitude_and_0_360_longitude_give_the_same_answer():
    ds, _ = field(lon0=357.0 - 2.5)  # crosses 0° when written 0..360
    ds = ds.assign_coords(longitude=ds.longitude % 360)
    a = ds.np.infill("t2m")
    flipped = ds.isel(latitude=slice(None, None, -1)).assign_coords(longitude=((ds.longitude + 180) % 360) - 180)
    b = flipped.np.infill("t2m").isel(latitude=slice(None, None, -1))
    np.testing.assert_allclose(a.t2m_mean.values, b.t2m_mean.values, atol=2e-4)


def test_extra_dims_are_independent_problems():
    a, _ = field(seed=1)
    b = a.copy()
    # other values, the same gaps (so the same zero-shot units)
    b["t2m"] = a.t2m.dims, 560.0 - np.nan_to_num(a.t2m.values[:, ::-1], nan=280.0)
    b["t2m"] = b.t2m.where(a.t2m.notnull())
    both = xr.concat([a, b], dim="member")
    out = both.np.infill("t2m")
    assert out.t2m_mean.dims == ("member", "time", "latitude", "longitude")
    np.testing.assert_allclose(out.t2m_mean.isel(member=1), b.np.infill("t2m").t2m_mean, atol=2e-4)
    # an empty member (missing, a level below ground) does not change the others (tests/test_members.py)
    with pytest.warns(geonp.NoContextWarning, match="fewer than two observed values"):
        with_empty = xr.concat([a, a.where(a.t2m.isnull())], dim="member").np.infill("t2m")
    np.testing.assert_allclose(with_empty.t2m_mean.isel(member=0), a.np.infill("t2m").t2m_mean, atol=2e-4)


def stations(n=40, times=3, seed=0):
    rng = np.random.default_rng(seed)
    lat, lon = 38 + 3 * rng.random(n), -108 + 5 * rng.random(n)
    elev = 1500 + 1000 * rng.random(n)
    v = np.stack([20 - 0.006 * elev + np.sin(lat) + k for k in range(times)]).astype("float32")
    v[:, ::5] = np.nan
    return xr.Dataset({"tmax": (("time", "station"), v, {"units": "degC"})},
                      coords={"time": pd.date_range("2000-01-01", periods=times, freq="MS"),
                              "station": [f"s{i}" for i in range(n)], "lat": ("station", lat),
                              "lon": ("station", lon), "elevation": ("station", elev)})


def test_station_infill_is_permutation_equivariant():
    st = stations()
    out = st.np.infill("tmax")
    perm = np.random.default_rng(3).permutation(st.sizes["station"])
    out_p = st.isel(station=perm).np.infill("tmax")
    np.testing.assert_allclose(out_p.tmax_mean.values, out.tmax_mean.isel(station=perm).values, atol=2e-4)


def test_station_tiles_group_stations_in_space():
    # 300 stations: squares of `tile` units split them into groups, each with its own window;
    # with a halo covering everything the groups give the one-window answer, in the input's order
    st = stations(n=300, times=3)
    one = st.np.infill("tmax", tile=1000.0, halo=0.0)
    grouped = st.np.infill("tmax", tile=2.0, halo=1000.0)
    np.testing.assert_allclose(grouped.tmax_mean, one.tmax_mean, atol=2e-4)
    np.testing.assert_allclose(grouped.tmax_std, one.tmax_std, atol=2e-4)
    local = st.np.infill("tmax", tile=2.0, halo=1.0)  # small windows: a different, finite answer
    assert np.isfinite(local.tmax_mean.values).all() and np.isfinite(local.tmax_std.values).all()
    assert not np.allclose(local.tmax_mean.values, one.tmax_mean.values, atol=1e-3)
    full = st.fillna(st.tmax.mean()).assign_coords(time=pd.date_range("2000-01-01", periods=3, freq="h"))
    fc_one = full.np.forecast("tmax", hours=2, tile=1000.0, halo=0.0, context_frames=2)
    fc_grouped = full.np.forecast("tmax", hours=2, tile=2.0, halo=1000.0, context_frames=2)
    np.testing.assert_allclose(fc_grouped.tmax_mean, fc_one.tmax_mean, atol=2e-4)
    np.testing.assert_allclose(fc_grouped.tmax_std, fc_one.tmax_std, atol=2e-4)


def test_stations_to_grid_targets():
    st = stations()
    grid = xr.Dataset(coords={"lat": np.linspace(38, 41, 4), "lon": np.linspace(-108, -103, 6)})
    out = st.np.infill("tmax", targets=grid)
    assert out.tmax_mean.dims == ("time", "lat", "lon") and "tmax_filled" not in out
    assert np.isfinite(out.tmax_mean).all()
    # the targets' bare coordinates get CF's attributes in the output (a CF-1.8 file)
    assert out.lat.attrs["units"] == "degrees_north" and out.lon.attrs["standard_name"] == "longitude"
    assert not grid.lat.attrs  # the user's own targets are not modified


def test_projected_grid_with_crs_argument_and_in_attrs():
    ds, _ = field()
    proj = xr.Dataset({"v": (("time", "y", "x"), ds.t2m.values)},
                      coords={"time": ds.time, "y": 5000.0 * np.arange(8), "x": 5000.0 * np.arange(10)})
    with pytest.raises(CRSError, match="no coordinate reference system"):
        proj.np.infill("v")
    out = proj.np.infill("v", crs="EPSG:3035")
    assert pyproj.CRS.from_wkt(out.spatial_ref.attrs["crs_wkt"]).to_epsg() == 3035
    rioxarray = pytest.importorskip("rioxarray")  # noqa: F841  registers .rio
    written = proj.rio.write_crs("EPSG:3035")  # a spatial_ref coordinate, as rioxarray writes it
    again = written.np.infill("v")
    assert again.rio.crs.to_epsg() == 3035
    np.testing.assert_array_equal(again.v_mean.values, out.v_mean.values)


def test_default_tiles_span_tile_model_units():
    # 0.25° cells at 60°N are about twice as tall (28 km) as they are wide (14 km): a tile of
    # `tile` model units holds about twice as many cells along longitude as along latitude
    from geonp.model import resolve_model
    from geonp.planning import plan_problem
    from geonp.tiling import axis_tiles, tile_cells

    ds, _ = field(nlat=24, nlon=48, times=2, keep=0.25, lat0=60.0)
    prepared, layout, _ = geonp.prepare.prepare(ds, "t2m", crs=None, covariates=None, land="auto")
    problem, _ = plan_problem(prepared, layout, resolve_model("bsa-tnp"), "infill")
    cells = {tile: tile_cells(problem, tile) for tile in (4.0, 8.0)}
    for tile, (lat, lon) in cells.items():
        assert abs(lon - 2 * lat) <= 2
        # the default output chunks are the tiles: equal to a cell, at most that size
        out = ds.np.infill("t2m", chunks={"time": 1}, tile=tile)  # lazy; space tiles by default
        for chunks, n, size in zip(out.t2m_mean.data.chunks[1:], (24, 48), (lat, lon)):
            assert chunks == tuple(np.bincount(axis_tiles(n, size))) and max(chunks) <= size
    # twice the units, twice the cells (to rounding)
    assert abs(cells[8.0][0] - 2 * cells[4.0][0]) <= 1 and abs(cells[8.0][1] - 2 * cells[4.0][1]) <= 1
    assert cells[8.0][1] < 48  # the grid is cut: it spans more than one tile
    # chunks= for a space dim overrides the tile
    out = ds.np.infill("t2m", chunks={"time": 1, "longitude": 5}, tile=4.0)
    assert out.t2m_mean.data.chunks[2][0] == 5 and out.t2m_mean.data.chunks[1] == tuple(np.bincount(
        axis_tiles(24, cells[4.0][0])))
    # a grid smaller than one tile is one window, with or without tiles
    small_grid, _ = field()
    whole = small_grid.np.infill("t2m", chunks={"time": 1})
    assert whole.t2m_mean.data.numblocks[1:] == (1, 1)


def test_large_output_blocks_are_predicted_in_tiles():
    # a dask-backed input chunked as one block per frame (as Zarr stores often are), or chunks=
    # larger than a tile, gives the same numbers as the default tiles: blocks set the output
    # chunks, tiles of `tile` units the prediction windows
    ds, _ = field(nlat=24, nlon=48, times=2, keep=0.25, lat0=60.0)
    eager = ds.np.infill("t2m", tile=4.0)
    lazy_input = ds.chunk({"time": 1, "latitude": -1, "longitude": -1}).np.infill("t2m", tile=4.0)
    assert lazy_input.t2m_mean.data.numblocks == (2, 1, 1)
    big_chunks = ds.np.infill("t2m", chunks={"time": 2, "latitude": 24, "longitude": 48}, tile=4.0)
    for out in (lazy_input, big_chunks):
        np.testing.assert_allclose(out.t2m_mean.compute(), eager.t2m_mean, atol=2e-4)
        np.testing.assert_allclose(out.t2m_std.compute(), eager.t2m_std, atol=2e-4)
    assert not np.allclose(ds.np.infill("t2m", tile=1000.0).t2m_mean, eager.t2m_mean, atol=1e-3)


def test_calibrated_forecast_in_a_large_block_equals_the_default_tiles():
    # a calibrated model blends with persistence at the targets' own points: inside a block larger
    # than a tile each group must get its own points' initial values
    ds, _ = field(nlat=24, nlon=48, times=30, keep=1.0, lat0=60.0)
    model = ds.np.fit("t2m", task="forecast", steps=0, progress=False, covariates=[], reference="none")
    assert any(w != 0 for w in model.normaliser.lead_mean_weight)
    eager = ds.np.forecast("t2m", hours=2, model=model, tile=4.0)
    one_block = ds.chunk({"time": -1, "latitude": -1, "longitude": -1}).np.forecast("t2m", hours=2, model=model,
                                                                                  tile=4.0)
    np.testing.assert_allclose(one_block.t2m_mean.compute(), eager.t2m_mean, atol=2e-4)
    np.testing.assert_allclose(one_block.t2m_std.compute(), eager.t2m_std, atol=2e-4)


def test_tiles_with_a_wide_halo_equal_one_window():
    ds, _ = field(nlat=16, nlon=20, times=2, keep=0.3)
    one = ds.np.infill("t2m", tile=1000.0, halo=0.0)
    tiled = ds.np.infill("t2m", tile=2.0, halo=1000.0)
    np.testing.assert_allclose(tiled.t2m_mean, one.t2m_mean, atol=2e-4)
    np.testing.assert_allclose(tiled.t2m_std, one.t2m_std, atol=2e-4)


def test_infill_errors():
    ds, _ = field()
    for kwargs, message in [({"halo": -1}, "halo=-1; expected a finite number >= 0"),
                            ({"halo": float("nan")}, "halo=nan; expected a finite number"),
                            ({"tile": 0}, "tile=0; expected a finite number > 0 of model units"),
                            ({"tile": float("inf")}, "tile=inf; expected a finite number > 0"),
                            ({"tile": True}, "tile=True; expected a finite number > 0"),
                            ({"time_window": -1}, "time_window=-1; expected a whole number of frames >= 0"),
                            ({"time_window": 1.5}, "time_window=1.5; expected a whole number"),
                            ({"batch_size": 0}, "batch_size=0; expected a whole number of tasks")]:
        with pytest.raises(ConfigError, match=message):
            ds.np.infill("t2m", calibrate=True, **kwargs)  # refused before any calibration work
    full = ds.fillna(ds.t2m.mean())
    with pytest.raises(ConfigError, match="context_frames=0; expected a whole number of frames >= 1"):
        full.np.forecast("t2m", hours=1, context_frames=0)
    with pytest.raises(ConfigError, match="tile=-1; expected a finite number > 0"):
        full.np.forecast("t2m", hours=1, tile=-1)
    with pytest.raises(ConfigError, match="time_window=-2; expected a whole number"):
        ds.np.fit("t2m", steps=0, time_window=-2)
    with pytest.raises(NoDataError, match="every value of 't2m' is missing"):
        (ds * np.nan).np.infill("t2m")
    one = ds.t2m.where(ds.t2m.isnull()).copy()
    one[0, 0, 0] = 280.0
    with pytest.raises(NoDataError, match="a single observed value; expected at least two"):
        one.np.infill()
    full = ds.fillna(280.0)
    with pytest.raises(NoDataError, match="no gaps.*targets="):
        full.np.infill("t2m")
    with pytest.raises(VariableNotFoundError, match="'tp' is not in the dataset"):
        ds.np.infill("tp")
    with pytest.raises(UnknownOptionError, match="no shipped weights for 'tnp-d'.*fit it"):
        ds.np.infill("t2m", model="tnp-d")
    with pytest.raises(ConfigError, match="chunks has dim 'level'"):
        ds.np.infill("t2m", chunks={"level": 2})
    infill_dims = r"\['latitude', 'longitude', 'time'\]"
    with pytest.raises(ConfigError, match=r"chunks has dim 'init_time'; expected some of " + infill_dims):
        ds.np.infill("t2m", chunks={"init_time": 1})  # a forecast's dim only
    with pytest.raises(ConfigError, match=r"chunks=-3; expected a positive number of frames"):
        ds.np.infill("t2m", chunks=-3)
    with pytest.raises(VariableTypeError, match="covariates= got ndarray; expected names.*xr.DataArray"):
        ds.np.infill("t2m", covariates=np.zeros(ds.t2m.shape[1:]))
    with pytest.raises(ConfigError, match="device='mps': geonp runs on 'cpu' or 'cuda'"):
        ds.np.infill("t2m", device="mps")


def test_filled_keeps_float64_observations_to_the_last_bit(small):
    ds, _ = small
    wide = ds.astype("float64") + 1e-7  # below float32 resolution at 280 K
    out = wide.np.infill("t2m")
    assert out.t2m_filled.dtype == np.float64 and out.t2m_mean.dtype == np.float32
    seen = np.isfinite(wide.t2m.values)
    np.testing.assert_array_equal(out.t2m_filled.values[seen], wide.t2m.values[seen])
    assert ds.np.infill("t2m").t2m_filled.dtype == np.float32


def test_forecast_contract_and_errors(small):
    ds, _ = small
    full = ds.fillna(ds.t2m.mean())
    fc = full.np.forecast("t2m", hours=2)
    assert fc.t2m_mean.dims == ("init_time", "lead_time", "latitude", "longitude")
    assert fc.valid_time.values[0, 1] == ds.time.values[-1] + np.timedelta64(2, "h")
    assert np.isfinite(fc.t2m_mean).all() and (fc.t2m_std > 0).all()
    two = full.np.forecast("t2m", hours=1, init_time=[ds.time.values[1], ds.time.values[2]])
    assert two.sizes["init_time"] == 2
    sliced = full.np.forecast("t2m", hours=1, init_time=slice(ds.time.values[1], ds.time.values[2]))
    np.testing.assert_array_equal(sliced.t2m_mean.values, two.t2m_mean.values)  # both ends included
    with pytest.raises(TimeAxisError, match="holds no time step of the data"):
        full.np.forecast("t2m", hours=1, init_time=slice("1990-01-01", "1990-01-02"))
    with pytest.raises(TimeAxisError, match="has a step"):
        full.np.forecast("t2m", hours=1, init_time=slice(None, None, 2))
    with pytest.raises(TimeAxisError, match="not a positive multiple of the data's time step \\(1 h\\).*steps=2"):
        full.np.forecast("t2m", hours=1.5)
    by_steps = full.np.forecast("t2m", steps=2)  # the same leads counted in time steps
    np.testing.assert_array_equal(by_steps.t2m_mean.values, fc.t2m_mean.values)
    np.testing.assert_array_equal(full.np.forecast("t2m", steps=2.0).t2m_mean.values, fc.t2m_mean.values)  # as hours=
    with pytest.raises(TimeAxisError, match="hours=True; expected the last lead time in hours"):
        full.np.forecast("t2m", hours=True)  # before: read as 1 h
    np.testing.assert_array_equal(by_steps.valid_time.values, fc.valid_time.values)
    with pytest.raises(ConfigError, match="exactly one of hours=.*or steps=.*got both"):
        full.np.forecast("t2m", hours=2, steps=2)
    with pytest.raises(ConfigError, match="exactly one of hours=.*got neither"):
        full.np.forecast("t2m")
    for bad in (0, 1.5, True):
        with pytest.raises(TimeAxisError, match=f"steps={bad!r}; expected a whole number of time steps >= 1"):
            full.np.forecast("t2m", steps=bad)
    for bad in (float("nan"), float("inf")):  # before: a bare ValueError / OverflowError from round()
        with pytest.raises(TimeAxisError, match="expected a finite positive multiple of the data's time step"):
            full.np.forecast("t2m", hours=bad)
    with pytest.raises(TimeAxisError, match="is not a number of hours; expected e.g. hours=6 or a duration string"):
        full.np.forecast("t2m", hours="six")
    np.testing.assert_array_equal(full.np.forecast("t2m", hours="2h", model="te-pt-tnp").t2m_mean,
                                  full.np.forecast("t2m", hours=2, model="te-pt-tnp").t2m_mean)  # "2h": 2 hours
    for span in (pd.Timedelta("2h"), np.timedelta64(120, "m")):  # before: "is not a number of hours"
        assert full.np.forecast("t2m", hours=span, model="te-pt-tnp").sizes["lead_time"] == 2
    with pytest.raises(TimeAxisError, match="no time axis"):
        full.isel(time=0).np.forecast("t2m", hours=1)
    with pytest.raises(TimeAxisError, match="is not a time step of the data"):
        full.np.forecast("t2m", hours=1, init_time="2030-01-01")
    gappy = full.isel(time=[0, 1, 3])  # steps of 1 h and 2 h
    with pytest.raises(TimeAxisError, match="irregular \\(from 1 h to 2 h\\).*resample\\(time='1h'\\).asfreq"):
        gappy.np.forecast("t2m", hours=1)
    # a reader's scalar time coordinate (cfgrib's step = 0, forecast_period) does not reach the output
    grib_like = full.assign_coords(step=((), np.timedelta64(0, "h"), {"standard_name": "forecast_period"}))
    out = grib_like.np.forecast("t2m", hours=2)
    assert "step" not in out.coords and out.lead_time.attrs["standard_name"] == "forecast_period"
    gaps = grib_like.assign(t2m=grib_like.t2m.where(grib_like.latitude < grib_like.latitude.max()))
    assert "step" not in gaps.np.infill("t2m").coords  # the input's forecast step is no step of an infill either
    assert out.init_time.attrs["standard_name"] == "forecast_reference_time"
    # from the first frame there is one past frame: warned (its std comes out ~10 x too small on ERA5)
    with pytest.warns(geonp.ShortHistoryWarning, match="is the first time step of the data.*later init_time"):
        full.np.forecast("t2m", hours=1, init_time=ds.time.values[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error", geonp.ShortHistoryWarning)
        full.np.forecast("t2m", hours=1, init_time=ds.time.values[1])
    # shipped weights on daily or monthly steps: warned that they are validated on hourly data only
    with warnings.catch_warnings():
        warnings.simplefilter("error", geonp.UnvalidatedStepWarning)
        full.np.forecast("t2m", hours=1, model="te-pt-tnp")  # hourly
    for freq, what in (("D", "1-day"), ("MS", "monthly")):
        coarse = full.assign_coords(time=pd.date_range("2001-01-01", periods=full.sizes["time"], freq=freq))
        with pytest.warns(geonp.UnvalidatedStepWarning, match=f"forecasting {what} steps with the shipped weights and "
                                                              "no annual cycle.*persistence or climatology"):
            coarse.np.forecast("t2m", steps=1, model="te-pt-tnp", reference="none", calibrate=False)


def test_fit_save_load_and_mismatch(tmp_path):
    st = stations(times=6)
    model = st.np.fit("tmax", steps=3, progress=False, seed=0)
    assert model.variables == ("tmax",) and "elevation" in model.normaliser.covariates
    assert model.metadata["steps"] == 3
    path = model.save(tmp_path / "m.geonp")
    with pytest.raises(OutputExistsError, match="m.geonp. exists; expected a new model path; pass overwrite=True"):
        model.save(path)
    assert model.save(path, overwrite=True) == path
    loaded = geonp.load_model(path)
    a = st.np.infill("tmax", model=model)
    b = st.np.infill("tmax", model=path)
    np.testing.assert_array_equal(a.tmax_mean.values, b.tmax_mean.values)
    assert loaded.normaliser == model.normaliser
    with pytest.raises(ModelMismatchError, match="trained on \\['tmax'\\] but was given 'tmin'"):
        st.assign(tmin=st.tmax - 10).np.infill("tmin", model=loaded)
    with pytest.raises(ModelMismatchError, match="elevation as a covariate but the data have none"):
        st.drop_vars("elevation").np.infill("tmax", model=loaded)
    assert (loaded.task, loaded.crs_wkt, loaded.settings, loaded.name) == (
        model.task, model.crs_wkt, model.settings, model.name)
    assert loaded.metadata["steps"] == 3 and loaded.digest == model.digest


def test_covariates_by_name_or_dataarray_equal_the_found_elevation():
    """covariates= names an elevation coordinate geonp would not find itself, or passes it as a DataArray."""
    st = stations(times=2)
    found = st.np.infill("tmax")
    renamed = st.rename({"elevation": "station_msl"})
    by_name = renamed.np.infill("tmax", covariates="station_msl")
    by_array = st.drop_vars("elevation").np.infill("tmax", covariates=st.elevation)
    for other in (by_name, by_array):
        np.testing.assert_allclose(other.tmax_mean.values, found.tmax_mean.values, rtol=1e-6)
        np.testing.assert_allclose(other.tmax_std.values, found.tmax_std.values, rtol=1e-6)
    with pytest.raises(VariableNotFoundError, match="covariate 'orog' is not a variable"):
        st.np.infill("tmax", covariates="orog")


def test_a_dem_that_misses_points_or_dims_is_refused():
    ds, _ = field()
    la, lo = np.meshgrid(ds.latitude, ds.longitude, indexing="ij")
    dem = xr.DataArray(100.0 * la - 40.0 * lo, dims=("latitude", "longitude"),
                       coords={"latitude": ds.latitude, "longitude": ds.longitude})
    ds.np.infill("t2m", covariates=dem)  # the whole grid: used
    with pytest.raises(CoordinateError, match="elevation 'elevation' is missing \\(NaN\\) at 40 of 80 points.*"
                                              "interp_like"):
        ds.np.infill("t2m", covariates=dem.isel(latitude=slice(0, 4)))  # half the grid: was silently ignored
    with pytest.raises(CoordinateError, match="covariates= elevation has dims \\['longitude'\\]; expected the "
                                              "space dims"):
        ds.np.infill("t2m", covariates=dem.isel(latitude=0))  # one row: was xarray's own ValueError


def test_time_covariates_need_time():
    """A model that uses hour of day is refused on data without a time axis."""
    ds, _ = field()
    m = ds.np.fit("t2m", steps=0, progress=False, covariates=["hour"])
    assert m.normaliser.covariates == ("hour",)
    with pytest.raises(ModelMismatchError, match="time-of-day/day-of-year covariates but the data have no time"):
        ds.isel(time=0, drop=True).np.infill("t2m", model=m)


def test_fit_continues_a_fitted_model(tmp_path):
    """fit(model=<Model or path>) trains that model further, keeping its covariates, windows and unit."""
    st = stations(times=6)
    first = st.np.fit("tmax", steps=2, progress=False, seed=0, time_window=1)
    digest = first.digest
    path = first.save(tmp_path / "m.geonp")
    more = st.np.fit("tmax", model=path, steps=2, progress=False, seed=1)
    assert more.name == first.name and more.source.startswith("fitted from")
    assert more.normaliser.covariates == first.normaliser.covariates
    assert more.normaliser.space_unit_km == first.normaliser.space_unit_km
    assert more.settings["half_window"] == 1 and more.metadata["steps"] == 2
    assert more.digest != digest and first.digest == digest  # trained a copy; the first is untouched
    same = st.np.fit("tmax", model=first, steps=0, progress=False)  # recalibrated, weights as they were
    assert same.digest == digest
    shipped = st.np.fit("tmax", model=geonp.Model.pretrained("bsa-tnp"), steps=0, progress=False)
    assert shipped.source == "fitted from pretrained:bsa-tnp"
    with pytest.raises(ModelMismatchError, match=r"cannot continue with \[\]"):
        st.np.fit("tmax", model=first, steps=1, covariates=[], progress=False)
    with pytest.raises(ModelMismatchError, match=r"trained on \['tmax'\] but was given 'tmin'"):
        st.assign(tmin=st.tmax - 10).np.fit("tmin", model=first, steps=1, progress=False)
    with pytest.raises(ModelMismatchError, match="fitted for 'infill' but is used for 'forecast'"):
        st.np.fit("tmax", model=first, task="forecast", steps=1, progress=False)


def test_fit_forecast_and_budget_errors(small):
    ds, _ = small
    full = ds.fillna(280.0)
    m = full.np.fit("t2m", task="forecast", steps=2, progress=False, covariates=[])
    assert m.task == "forecast" and m.normaliser.covariates == ()
    assert full.np.forecast("t2m", hours=1, model=m).t2m_mean.notnull().all()
    with pytest.raises(ConfigError, match="needs a budget"):
        full.np.fit("t2m")
    with pytest.raises(ConfigError, match="task='nowcast'"):
        full.np.fit("t2m", task="nowcast", steps=1)
    with pytest.raises(ConfigError, match="not a duration"):
        full.np.fit("t2m", max_time="ten minutes")
    with pytest.raises(TimeAxisError, match="needs a time axis"):
        full.isel(time=0).np.fit("t2m", task="forecast", steps=1)


def test_model_crs_mismatch():
    ds, _ = field()
    proj = xr.Dataset({"v": (("time", "y", "x"), np.nan_to_num(ds.t2m.values, nan=280.0))},
                      coords={"time": ds.time, "y": 5000.0 * np.arange(8), "x": 5000.0 * np.arange(10)})
    m = proj.np.fit("v", crs="EPSG:3035", steps=1, progress=False, covariates=[])
    gappy = proj.where(np.isfinite(ds.t2m.values))
    with pytest.raises(ModelMismatchError, match="trained on coordinates in"):
        gappy.np.infill("v", model=m, crs="EPSG:27700")
    latlon = ds.np.fit("t2m", steps=0, progress=False, covariates=[])
    with pytest.raises(ModelMismatchError, match="trained on coordinates in 'WGS 84' but the data are in .*reproject"):
        gappy.np.infill("v", model=dataclasses.replace(latlon, variables=("v",)), crs="EPSG:3035")  # before: accepted


def test_model_task_mismatch():
    ds, _ = field()
    full = ds.fillna(ds.t2m.mean())
    forecaster = full.np.fit("t2m", task="forecast", steps=0, progress=False, covariates=[])
    with pytest.raises(ModelMismatchError, match="fitted for 'forecast' but is used for 'infill'.*task='infill'"):
        ds.np.infill("t2m", model=forecaster)
    infiller = ds.np.fit("t2m", task="infill", steps=0, progress=False, covariates=[])
    with pytest.raises(ModelMismatchError, match="fitted for 'infill' but is used for 'forecast'"):
        full.np.forecast("t2m", hours=1, model=infiller)


def test_parse_duration():
    from geonp.api import parse_duration

    assert parse_duration("10min") == 600 and parse_duration("1.5h") == 5400 and parse_duration(30) == 30
    with pytest.raises(ConfigError, match="must be positive"):
        parse_duration(0)


def test_calibration_only_fit_rescales_the_std_and_nothing_else():
    st = stations(times=6)
    model = st.np.fit("tmax", steps=0, progress=False, covariates=[], calibration_tasks=16)
    assert model.metadata["steps"] == 0
    norm = model.normaliser
    assert 0.2 <= norm.std_scale <= 5.0 and not norm.gap_std_scale  # 16 tasks: too few points for gap bins
    assert (norm.infill_std_base, norm.infill_std_extra) != (1.0, 0.0)  # the nugget fit moved
    zero_shot = st.np.infill("tmax", calibrate=False)
    calibrated = st.np.infill("tmax", model=model)
    np.testing.assert_allclose(calibrated.tmax_mean, zero_shot.tmax_mean, rtol=1e-6)
    want = np.sqrt((norm.infill_std_base * zero_shot.tmax_std) ** 2 + norm.infill_std_extra**2) * norm.std_scale
    np.testing.assert_allclose(calibrated.tmax_std, want, rtol=1e-5)


def test_calibration_only_fit_keeps_the_shipped_space_unit():
    """Calibrated on a sparser period, the shipped weights still measure lengths in the predicted data's spacing.

    That is the context spacing of the data they predict: the means equal the zero-shot ones there (a
    trained model keeps its training unit).
    """
    st = stations(times=6)
    sparse = st.copy(deep=True)
    sparse["tmax"][:, ::2] = np.nan  # the fit period observed half the network
    model = sparse.np.fit("tmax", steps=0, progress=False, covariates=[], calibration_tasks=8)
    assert model.normaliser.space_unit_km is None
    zero_shot = st.np.infill("tmax", calibrate=False)
    calibrated = st.np.infill("tmax", model=model)
    np.testing.assert_allclose(calibrated.tmax_mean, zero_shot.tmax_mean, rtol=1e-6)
    trained = sparse.np.fit("tmax", steps=1, progress=False, covariates=[], calibration_tasks=0)
    assert trained.normaliser.space_unit_km > 0


def test_gap_calibration_scales_the_std_by_distance_to_the_data(small):
    from dataclasses import replace

    from geonp.model import resolve_model

    ds, _ = small
    base = resolve_model("bsa-tnp")
    plain = ds.np.infill("t2m", model=base)
    flat = replace(base, normaliser=replace(base.normaliser, gap_distance=(0.1, 10.0), gap_std_scale=(2.0, 2.0)))
    np.testing.assert_allclose(ds.np.infill("t2m", model=flat).t2m_std, 2 * plain.t2m_std, rtol=1e-5)
    rising = replace(base, normaliser=replace(base.normaliser, gap_distance=(0.3, 3.0), gap_std_scale=(1.0, 3.0)))
    ratio = (ds.np.infill("t2m", model=rising).t2m_std / plain.t2m_std).values
    gaps = np.isnan(ds.t2m.values)
    assert ratio[gaps].min() >= 1.0 - 1e-5 and ratio[gaps].max() <= 3.0 + 1e-5
    # cells next to an observed cell get smaller factors than cells far from any
    cells = np.argwhere(gaps)
    dist = np.array([np.abs(np.argwhere(~gaps[t])[:, None] - [y, x]).max(-1).min() for t, y, x in cells])
    near, far = ratio[gaps][dist == 1].mean(), ratio[gaps][dist >= 2].mean()
    assert near < far


def test_infill_calibrate_equals_a_calibration_only_fit_on_the_input(small):
    ds, _ = small
    model = ds.np.fit("t2m", model="te-pt-tnp", steps=0, progress=False, covariates=[])
    by_hand = ds.np.infill("t2m", model=model)
    calibrated = ds.np.infill("t2m", model="te-pt-tnp", calibrate=True)
    np.testing.assert_allclose(calibrated.t2m_std, by_hand.t2m_std, rtol=1e-6)
    np.testing.assert_allclose(calibrated.t2m_mean, ds.np.infill("t2m", model="te-pt-tnp").t2m_mean, rtol=1e-6)
    with pytest.raises(ConfigError, match="calibrated already"):
        ds.np.infill("t2m", model=model, calibrate=True)
    # "auto" leaves grids to the network (calibration widened their intervals more than needed) ...
    assert int(ds.t2m.notnull().sum()) >= AUTO_CALIBRATION_POINTS
    assert ds.np.infill("t2m", model="te-pt-tnp").attrs["geonp_calibrated"] == "no"
    assert ds.np.infill("t2m", model=model).attrs["geonp_calibrated"] == "when fitted"


def test_infill_calibrates_a_grid_rough_from_cell_to_cell_by_default():
    """Noise from cell to cell is what the shipped weights lack: a 1° grid with 0.3 K of it covered 0.69 alone."""
    from geonp.calibrate_input import ROUGH_GRID, grid_roughness

    rng = np.random.default_rng(0)
    lat, lon = 50.0 + 0.25 * np.arange(16), 0.25 * np.arange(20)
    smooth = 280.0 + np.sin(lat / 2.0)[:, None] + np.cos(lon / 3.0)[None, :]
    values = np.stack([smooth + 0.5 * rng.standard_normal(smooth.shape) for _ in range(3)])
    values[rng.random(values.shape) < 0.3] = np.nan
    coords = {"time": pd.date_range("2020-01-01", periods=3, freq="h"), "lat": lat, "lon": lon}
    rough = xr.Dataset({"t": (("time", "lat", "lon"), values, {"units": "K"})}, coords=coords)
    layout = geonp.geo.describe(rough, "t")[1]
    assert grid_roughness(rough, layout) > ROUGH_GRID
    out = rough.np.infill("t")
    assert out.attrs["geonp_calibrated"] == "on held-out observed values of the input"
    np.testing.assert_allclose(out.t_std, rough.np.infill("t", calibrate=True).t_std, rtol=1e-6)
    calm = rough.assign(t=rough.t.copy(data=np.where(np.isnan(values), np.nan, smooth)))
    assert grid_roughness(calm, layout) < 0.3
    assert calm.np.infill("t").attrs["geonp_calibrated"] == "no"


def test_infill_calibrates_station_data_by_default():
    """Station data get the shipped weights calibrated on the input ("auto"): the stations' nugget."""
    st = stations(times=6)
    assert int(st.tmax.notnull().sum()) >= AUTO_CALIBRATION_POINTS
    auto = st.np.infill("tmax", model="te-pt-tnp")
    forced = st.np.infill("tmax", model="te-pt-tnp", calibrate=True)
    raw = st.np.infill("tmax", model="te-pt-tnp", calibrate=False)
    np.testing.assert_allclose(auto.tmax_std, forced.tmax_std, rtol=1e-6)
    np.testing.assert_allclose(auto.tmax_mean, raw.tmax_mean, rtol=1e-6)
    assert not np.allclose(auto.tmax_std, raw.tmax_std)
    assert (auto.attrs["geonp_calibrated"], raw.attrs["geonp_calibrated"]) == (
        "on held-out observed values of the input", "no")
    # ... small networks too (one month of 8 stations) ...
    small = st.isel(time=[0], station=slice(0, 10))
    assert AUTO_CALIBRATION_POINTS <= int(small.tmax.notnull().sum()) < 10
    assert small.np.infill("tmax", model="te-pt-tnp").attrs["geonp_calibrated"] != "no"
    # ... but not two values, too few to hold some out
    few = st.isel(time=[0], station=slice(0, 3))
    assert int(few.tmax.notnull().sum()) < AUTO_CALIBRATION_POINTS
    assert few.np.infill("tmax", model="te-pt-tnp").attrs["geonp_calibrated"] == "no"


def test_forecast_calibration_has_one_factor_per_lead(small):
    ds, _ = small
    full = ds.fillna(280.0)
    model = full.np.fit("t2m", task="forecast", steps=0, progress=False, covariates=[], calibration_tasks=8,
                        context_frames=2)
    scales, extra = model.normaliser.lead_std_scale, model.normaliser.lead_std_extra
    assert len(scales) == 6 and all(0.0 <= s <= 5.0 for s in scales)
    assert len(extra) == 6 and all(b >= 0.0 for b in extra)
    assert model.settings["context_frames"] == 2
    a = full.np.forecast("t2m", hours=2, context_frames=2)
    b = full.np.forecast("t2m", hours=2, model=model)
    want = np.sqrt((np.asarray(scales[:2])[:, None, None] * a.t2m_std.values[0]) ** 2
                   + np.asarray(extra[:2])[:, None, None] ** 2)
    np.testing.assert_allclose(b.t2m_std.values[0], want, rtol=1e-4)


def test_elevation_trend_is_removed_per_task_and_added_back():
    from dataclasses import replace

    rng = np.random.default_rng(5)
    n = 120
    lat, lon = 38 + 3 * rng.random(n), -108 + 5 * rng.random(n)
    elev = 1200 + 2500 * rng.random(n)  # mountain stations: the lapse rate dominates the field
    v = (35 - 0.0065 * elev + 0.3 * np.sin(lat * 2))[None].astype("float32")
    hidden = np.zeros(n, bool)
    hidden[::4] = True
    st = xr.Dataset({"tmax": (("station",), np.where(hidden, np.nan, v[0]))},
                    coords={"station": np.arange(n), "lat": ("station", lat), "lon": ("station", lon),
                            "elevation": ("station", elev)})
    with_trend = st.np.infill("tmax")
    plain = geonp.Model.pretrained("bsa-tnp")
    plain = replace(plain, normaliser=replace(plain.normaliser, elevation_trend=False))
    without = st.np.infill("tmax", model=plain)
    err = lambda out: np.sqrt(np.mean((out.tmax_mean.values[hidden] - v[0][hidden]) ** 2))  # noqa: E731
    assert err(with_trend) < 0.5 * err(without)
    assert err(with_trend) < 0.5


def test_time_held_in_a_non_dimension_coordinate():
    ds, _ = field(times=4)
    renamed = ds.rename({"time": "valid_time"}).swap_dims({"valid_time": "step"})
    renamed = renamed.assign_coords(step=np.arange(4))
    out = renamed.np.infill("t2m")
    assert "valid_time" in out.t2m_mean.dims
    fc = renamed.fillna(280.0).np.forecast("t2m", hours=1)
    assert fc.sizes["lead_time"] == 1


def test_global_grid_uses_local_windows():
    lat = np.linspace(-80, 80, 17)
    lon = np.arange(0, 360, 10.0)
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    v = (np.cos(np.deg2rad(la)) * 30 + np.sin(np.deg2rad(lo))).astype("float32")[None]
    rng = np.random.default_rng(0)
    ds = xr.Dataset({"t": (("time", "lat", "lon"), np.where(rng.random(v.shape) < 0.5, v, np.nan))},
                    coords={"time": pd.date_range("2000-01-01", periods=1), "lat": lat, "lon": lon})
    out = ds.np.infill("t")
    gaps = np.isnan(ds.t.values)
    assert np.isfinite(out.t_mean).all()
    assert np.sqrt(np.mean((out.t_mean.values[gaps] - v[gaps]) ** 2)) < 0.5 * np.nanstd(v)


def test_targets_without_elevation_for_an_elevation_model():
    st = stations(times=3)
    model = st.np.fit("tmax", steps=0, progress=False, calibration_tasks=4)
    grid = xr.Dataset(coords={"lat": np.linspace(38, 41, 3), "lon": np.linspace(-108, -103, 4)})
    with pytest.raises(ModelMismatchError, match="targets= has none"):
        st.np.infill("tmax", model=model, targets=grid)


def test_rotated_pole_grid_reads_2d_lonlat_and_keeps_its_crs():
    crs = pyproj.CRS.from_cf({"grid_mapping_name": "rotated_latitude_longitude", "grid_north_pole_latitude": 39.25,
                              "grid_north_pole_longitude": -162.0})
    rlat, rlon = np.arange(-3, 3, 0.44), np.arange(-4, 4, 0.44)
    RLON, RLAT = np.meshgrid(rlon, rlat)
    lon, lat = pyproj.Transformer.from_crs(crs, "EPSG:4326", always_xy=True).transform(RLON, RLAT)
    truth = 280 + np.sin(RLAT / 2) + np.cos(RLON / 3)
    rng = np.random.default_rng(0)
    v = np.where(rng.random((2, *truth.shape)) < 0.5, truth, np.nan).astype("float32")
    ds = xr.Dataset(
        {"tas": (("time", "rlat", "rlon"), v, {"units": "K", "grid_mapping": "rotated_pole"})},
        coords={"time": pd.date_range("2000-01-01", periods=2, freq="h"),
                "rlat": ("rlat", rlat, {"standard_name": "grid_latitude", "units": "degrees"}),
                "rlon": ("rlon", rlon, {"standard_name": "grid_longitude", "units": "degrees"}),
                "lat": (("rlat", "rlon"), lat, {"standard_name": "latitude", "units": "degrees_north"}),
                "lon": (("rlat", "rlon"), lon, {"standard_name": "longitude", "units": "degrees_east"}),
                "rotated_pole": ((), 0, crs.to_cf())})
    from geonp.geo import describe

    _, layout = describe(ds, "tas")
    assert (layout.x, layout.y, layout.geographic) == ("lon", "lat", True)  # true lon/lat give the distances
    out = ds.np.infill("tas", model="te-pt-tnp")
    written = pyproj.CRS.from_wkt(out.spatial_ref.attrs["crs_wkt"])
    assert written.to_cf()["grid_mapping_name"] == "rotated_latitude_longitude"  # the output's rlat/rlon are in it
    assert float(np.abs(out.tas_filled - truth).mean()) < 0.5


def test_a_window_with_one_observation_gets_a_wide_interval():
    """A chunk whose window holds a single station is scaled by the data's spread, not by ~0 (was std ≈ 3e-4)."""
    rng = np.random.default_rng(0)
    lat = np.r_[40 + rng.random(30), 47.0, 47.05]  # 30 clustered stations, then a lone one and a target beside it
    lon = np.r_[-105 + rng.random(30), -95.0, -95.05]
    values = np.r_[10 + 5 * rng.standard_normal(30), 12.0, np.nan].astype("float32")
    st = xr.Dataset({"tmax": (("station",), values, {"units": "degC"})},
                    coords={"station": np.arange(32), "lat": ("station", lat), "lon": ("station", lon)})
    out = st.np.infill("tmax", model="te-pt-tnp", chunks={"station": 2}, halo=2.0).compute()
    spread = float(np.nanstd(values))
    assert np.isfinite(out.tmax_mean[-1]) and float(out.tmax_std[-1]) > 0.3 * spread


def test_standardise_small_context_takes_the_data_scale():
    from geonp.normalise import SMALL_CONTEXT, Normaliser

    norm = Normaliser(small_context_scale=4.0)
    assert norm.standardise(np.array([280.0]))[1] == 4.0
    assert norm.standardise(np.array([280.0, 280.1]))[1] == 4.0
    many = 280 + 0.1 * np.arange(SMALL_CONTEXT)
    assert norm.standardise(many)[1] == pytest.approx(np.std(many))  # enough values: their own spread
    assert Normaliser().standardise(np.array([280.0]))[1] < 1e-3  # off by default (models saved before it)


def test_a_frame_without_context_is_kriged_from_the_frames_either_side():
    """A frame missing everywhere, predicted alone (time_window=0): NaN before; now kriged along time."""
    ds, truth = field(times=4)
    ds["t2m"][2] = truth[2]  # observed whole
    ds["t2m"][3] = np.nan  # the last frame is missing everywhere: one side only, frame 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", geonp.NoContextWarning)
        out = ds.np.infill("t2m", model="te-pt-tnp", time_window=0)
    assert np.isfinite(out.t2m_mean).all() and np.isfinite(out.t2m_std).all()
    np.testing.assert_allclose(out.t2m_mean[3], truth[2], rtol=0, atol=1e-3)  # one side: weight 1
    ds["t2m"][2] = np.nan  # two frames now: frame 3 lies 2 frames from each point's last observation or more
    far = ds.np.infill("t2m", model="te-pt-tnp", time_window=0)
    ok = ds.t2m[1].notnull()  # observed in frame 1: 1 and 2 frames from it
    np.testing.assert_allclose(far.t2m_mean[3].where(ok), ds.t2m[1].where(ok), rtol=0, atol=1e-3)
    assert (far.t2m_std[3].where(ok, 1) >= far.t2m_std[2].where(ok, 0)).all()  # the std grows with the lag


def test_a_region_of_a_bridged_infill_runs_only_its_own_blocks(monkeypatch):
    """The bridge read the other blocks' means: a region of 6 frames ran 8 times the blocks (to_zarr: 1600 for 200)."""
    import geonp.chunked

    ds, _ = field(times=28, keep=1.0)
    ds["t2m"][[5, 12, 20]] = np.nan  # frames missing whole, in three of the four regions
    calls = []
    real = geonp.chunked.infill_block
    monkeypatch.setattr(geonp.chunked, "infill_block", lambda *a, **k: calls.append(1) or real(*a, **k))
    lazy = ds.np.infill("t2m", time_window=0, chunks={"time": 7}, calibrate=False)
    region = lazy.t2m_mean.isel(time=slice(7, 14)).compute()
    one = len(calls)
    calls.clear()
    whole = lazy.t2m_mean.compute()
    assert one > 0 and 4 * one == len(calls)
    np.testing.assert_array_equal(region.values, whole.values[7:14])
    assert np.isfinite(whole.values).all()


def test_frames_beyond_the_reach_of_the_bridge_are_nan_with_a_warning():
    ds, _ = field(times=12, keep=1.0)
    ds["t2m"][:10] = np.nan  # frames 0 and 1 lie more than bridge.MAX_GAP frames from frame 10
    with pytest.warns(geonp.NoContextWarning, match="no observation within their window.*time_window="):
        out = ds.np.infill("t2m", model="te-pt-tnp", time_window=0)
    assert np.isnan(out.t2m_mean[:2]).all() and np.isfinite(out.t2m_mean[2:]).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error", geonp.NoContextWarning)
        assert np.isfinite(ds.np.infill("t2m", model="te-pt-tnp", time_window=10).t2m_mean).all()


@pytest.mark.parametrize("action", ["default", "always"])  # Python's own (once per text and place), or every one
def test_a_frame_without_context_warns_once_not_once_per_block(action):
    ds, _ = field(nlat=12, nlon=12, times=12)
    ds["t2m"][:10] = np.nan
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter(action)
        out = ds.np.infill("t2m", time_window=0, chunks={"latitude": 4, "longitude": 4}, calibrate=False).compute()
    assert np.isnan(out.t2m_mean[:2]).all()  # 9 blocks, each with frames beyond the bridge's reach
    assert sum(issubclass(w.category, geonp.NoContextWarning) for w in rec) == 1


def test_monthly_forecast_is_regular_enough():
    st = stations(times=14)  # month starts: steps of 28 to 31 days count as one frame each
    step = float(np.median(np.diff(st.time.values).astype("timedelta64[h]").astype(float)))
    fc = st.np.forecast("tmax", hours=step, model="te-pt-tnp")
    assert fc.tmax_mean.shape == (1, 1, st.sizes["station"])


def _grid_without_time(lon):
    lat = np.linspace(-5, 5, 8)
    v = (280 + np.sin(np.arange(8))[:, None] + np.cos(np.arange(len(lon)))[None]).astype("float32")
    v = np.where(np.random.default_rng(1).random(v.shape) < 0.4, np.nan, v)
    return xr.Dataset({"t": (("lat", "lon"), v, {"units": "K"})}, coords={"lat": lat, "lon": np.asarray(lon, float)})


def test_infill_across_the_dateline_without_time():
    """A grid across the dateline, without time: -180..180 and 0..360 longitudes give the same result."""
    lon = [176, 177, 178, 179, 180, -179, -178, -177, -176, -175]
    a = _grid_without_time(lon).np.infill("t")
    b = _grid_without_time(np.asarray(lon) % 360).np.infill("t")
    assert a.t_mean.dims == ("lat", "lon") and np.isfinite(a.t_mean).all() and (a.t_std > 0).all()
    np.testing.assert_allclose(a.t_mean.values, b.t_mean.values, atol=1e-5)
    np.testing.assert_allclose(a.t_std.values, b.t_std.values, rtol=1e-5)


def test_infill_projected_stations_with_elevation():
    """Stations on x/y with crs= and an elevation coordinate: filled, CRS written back, elevation used."""
    rng = np.random.default_rng(0)
    n = 30
    elev = 1000 * rng.random(n)
    st = xr.Dataset({"v": (("station",), (15 - 6.5e-3 * elev + 0.3 * rng.normal(size=n)).astype("float32"))},
                    coords={"station": np.arange(n), "x": ("station", 4e6 + 1e5 * rng.random(n)),
                            "y": ("station", 3e6 + 1e5 * rng.random(n)), "elevation": ("station", elev)})
    st["v"][::4] = np.nan
    out = st.np.infill("v", crs="EPSG:3035")
    gaps = np.isnan(st.v.values)
    assert out.v_mean.dims == ("station",) and np.isfinite(out.v_mean).all()
    assert out.rio.crs.to_epsg() == 3035
    truth = 15 - 6.5e-3 * elev[gaps]
    assert np.sqrt(np.mean((out.v_mean.values[gaps] - truth) ** 2)) < 1.0  # the lapse rate is followed
    np.testing.assert_array_equal(out.v_filled.values[~gaps], st.v.values[~gaps])


def test_infill_coarsens_only_tasks_with_targets_deep_in_a_hole(monkeypatch):
    """A 12 x 12-cell hole is predicted in coarser units (geonp.data.coarsen_far); scattered gaps are not."""
    import geonp.inference

    ds, _ = field(nlat=24, nlon=24, times=1, keep=1.0)
    hole = ds.copy(deep=True)
    hole["t2m"][0, 6:18, 6:18] = np.nan
    scattered, _ = field(nlat=24, nlon=24, times=1, keep=0.7)
    with_coarse = [x.np.infill("t2m", tile=1000.0).t2m_mean.values for x in (hole, scattered)]
    monkeypatch.setattr(geonp.inference, "coarsen_far", lambda task, **_: task)
    without = [x.np.infill("t2m", tile=1000.0).t2m_mean.values for x in (hole, scattered)]
    assert not np.allclose(with_coarse[0], without[0], atol=1e-3)
    np.testing.assert_allclose(with_coarse[1], without[1], rtol=1e-6)


def test_chunked_equals_unchunked_with_a_hole_deep_enough_to_coarsen():
    """Filling gaps, the deepest gap of a whole window decides the coarsening, not how chunks cut its tiles."""
    ds, _ = field(nlat=24, nlon=24, times=2, keep=1.0)
    ds["t2m"][:, 4:16, 2:14] = np.nan
    full = ds.np.infill("t2m", halo=1000.0)
    lazy = ds.np.infill("t2m", halo=1000.0, chunks={"latitude": 7, "longitude": 9})
    np.testing.assert_allclose(lazy.t2m_mean.compute(), full.t2m_mean, atol=2e-4)
    np.testing.assert_allclose(lazy.t2m_std.compute(), full.t2m_std, atol=2e-4)


def test_elevation_missing_at_some_points_is_refused_up_front():
    st = stations(times=2)
    elev = st.elevation.values.copy()
    elev[[3, 7]] = np.nan
    with pytest.raises(geonp.CoordinateError, match="missing \\(NaN\\) at 2 of 40 stations \\(e.g. s3, s7\\).*"
                                                   "drop_vars\\('elevation'\\)"):
        st.assign_coords(elevation=("station", elev)).np.infill("tmax")
    a, _ = field(seed=1)
    dem = xr.full_like(a.t2m.isel(time=0, drop=True), 100.0).rename("elevation").assign_attrs(units="m")
    dem[0, 0] = np.nan
    with pytest.raises(geonp.CoordinateError, match="missing \\(NaN\\) at 1 of .* points.*dem.interp_like"):
        a.assign_coords(elevation=dem).np.infill("t2m")


def test_fit_refuses_options_of_the_other_task():
    a, _ = field(seed=1)
    with pytest.raises(geonp.ConfigError, match="context_frames=3 applies to task='forecast'"):
        a.np.fit("t2m", task="infill", steps=0, context_frames=3, progress=False)
    with pytest.raises(geonp.ConfigError, match="time_window=2 applies to task='infill'"):
        a.np.fit("t2m", task="forecast", steps=0, time_window=2, progress=False)
    with pytest.raises(geonp.ConfigError, match="land='lsm': forecasts use no land-sea trend"):
        a.np.fit("t2m", task="forecast", steps=0, land="lsm", progress=False)


def test_fit__a_time_budget_that_ran_few_steps_warns():
    """How many steps fit in max_time depends on the machine's load: 3 to 145 for one call (a new-user report)."""
    st = stations(times=6)
    with pytest.warns(geonp.ShortFitWarning, match=r"ran only \d+ training steps in max_time=0.3 s.*Pass steps="):
        model = st.np.fit("tmax", max_time=0.3, progress=False, seed=0)
    assert model.metadata["steps"] < 50
    with warnings.catch_warnings():
        warnings.simplefilter("error", geonp.ShortFitWarning)
        st.np.fit("tmax", steps=2, progress=False, seed=0)  # a step budget is reproducible: no warning
