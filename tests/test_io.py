"""Tests of geonp.io: opening every supported format, CRS handling and the safe, resumable Zarr writer."""

import pyproj  # noqa: F401  isort: skip  (before anything loads eccodes; see geonp/__init__.py)

import os
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

from geonp.errors import (
    ConfigError,
    CRSError,
    DataFormatError,
    InputNotFoundError,
    NoDataError,
    OutputExistsError,
    VariableTypeError,
)
from geonp.io import open_dataset, read_crs, to_zarr, write_crs
from geonp.io.open import grib_valid_time

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GEONP_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
ERA5 = DATA / "era5-2mt-2019-03-uk.grib"
COLORADO = DATA / "colorado_monthly_met_1895_1997.nc"
LAEA = "+proj=laea +lat_0=52 +lon_0=10 +x_0=4321000 +y_0=3210000 +ellps=GRS80 +units=m +no_defs"


def _grid(nt=6, ny=3, nx=4, seed=0):
    """Return a small in-memory (time, y, x) dataset."""
    rng = np.random.default_rng(seed)
    return xr.Dataset(
        {"t2m": (("time", "y", "x"), rng.normal(280, 5, (nt, ny, nx)).astype("float32"), {"units": "K"})},
        coords={
            "time": pd.date_range("2019-03-01", periods=nt, freq="h"),
            "y": np.arange(ny) * 1000.0,
            "x": np.arange(nx) * 1000.0,
        },
        attrs={"title": "synthetic"},
    )


def _need(path: Path) -> Path:
    """Skip when the shared real-data folder (or file) is absent."""
    if not path.exists():
        pytest.skip(f"real data not found at {path} (set GEONP_DATA)")
    return path


# ------------------------------------------------------------------------------------------- open


def test_open_netcdf_and_chunks(tmp_path):
    """NetCDF opens unchanged (upper-case suffix too); chunks= gives dask arrays."""
    ds = _grid()
    path = tmp_path / "grid.NC"  # suffix matching is case-insensitive
    ds.to_netcdf(path)
    opened = open_dataset(path)
    xr.testing.assert_identical(opened.load(), ds)
    chunked = open_dataset(path, chunks={"time": 2})
    assert isinstance(chunked.t2m.data, da.Array) and chunked.t2m.chunks[0] == (2, 2, 2)


@pytest.mark.parametrize(("suffix", "engine"), [(".nc4", "netcdf4"), (".h5", "netcdf4"), (".cdf", "scipy")])
def test_open_netcdf_suffixes(tmp_path, suffix, engine):
    """Every NetCDF/HDF5 suffix opens, whichever library wrote the file."""
    if engine == "scipy":
        pytest.importorskip("scipy")
    path = tmp_path / f"grid{suffix}"
    _grid().to_netcdf(path, engine=engine)
    xr.testing.assert_identical(open_dataset(path).load(), _grid())


def test_open_netcdf_with_crs(tmp_path):
    """crs= attaches the CRS rioxarray-style."""
    path = tmp_path / "grid.nc"
    _grid().to_netcdf(path)
    opened = open_dataset(path, crs="EPSG:27700")
    assert read_crs(opened) == pyproj.CRS("EPSG:27700")
    assert opened.t2m.encoding["grid_mapping"] == "spatial_ref"


@pytest.mark.parametrize("consolidated", [True, False])
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_open_zarr(tmp_path, consolidated, zarr_format):
    """Zarr stores of either format, consolidated or not, open without fallback warnings."""
    ds = _grid()
    path = tmp_path / "grid.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # format 3 consolidated metadata warns that it is not in the spec
        ds.to_zarr(path, consolidated=consolidated, zarr_format=zarr_format)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no "failed to open consolidated metadata" fallback
        opened = open_dataset(path, chunks={"time": 3})
    assert opened.t2m.chunks[0] == (3, 3)
    xr.testing.assert_identical(opened.load(), ds)


def test_open_zarr_that_is_a_file(tmp_path):
    """A .zarr path that is a plain file is refused with a clear message."""
    path = tmp_path / "not-a-store.zarr"
    path.write_text("hello")
    with pytest.raises(DataFormatError, match="is a file.*directory"):
        open_dataset(path)


def _write_tif(path, bands, descriptions=None):
    """Write a (band, y, x) GeoTIFF in EPSG:27700 with nodata -9999 at [0, 0]; return its values."""
    rio = pytest.importorskip("rioxarray")
    assert rio
    values = np.arange(bands * 12, dtype="float32").reshape(bands, 3, 4) + 1
    values[:, 0, 0] = -9999
    raster = xr.DataArray(
        values,
        dims=("band", "y", "x"),
        coords={"band": np.arange(1, bands + 1), "y": [2500.0, 1500.0, 500.0], "x": [500.0, 1500, 2500, 3500]},
    )
    if descriptions:
        raster.attrs["long_name"] = tuple(descriptions) if bands > 1 else descriptions[0]
    raster = raster.rio.write_crs("EPSG:27700").rio.write_nodata(-9999.0)
    raster.rio.to_raster(path)
    return values


def test_open_geotiff_single_band(tmp_path):
    """One band becomes a 2-D variable named after the file; nodata becomes NaN; CRS kept."""
    values = _write_tif(tmp_path / "dem.tif", 1)
    ds = open_dataset(tmp_path / "dem.tif")
    assert list(ds.data_vars) == ["dem"] and ds.dem.dims == ("y", "x")
    assert "spatial_ref" in ds.coords and read_crs(ds) == pyproj.CRS("EPSG:27700")
    assert np.isnan(ds.dem.values[0, 0]) and ds.dem.values[1, 1] == values[0, 1, 1]


def test_open_geotiff_single_band_description_names_it_only_when_it_reads_as_a_name(tmp_path):
    _write_tif(tmp_path / "era5.tif", 1, ["t2m"])
    assert list(open_dataset(tmp_path / "era5.tif").data_vars) == ["t2m"]
    _write_tif(tmp_path / "era5.tif", 1, ["2 metre temperature"])  # rioxarray writes long_name as the description
    ds = open_dataset(tmp_path / "era5.tif")
    assert list(ds.data_vars) == ["era5"] and ds.era5.attrs["long_name"] == "2 metre temperature"


def test_open_geotiff_bands_named_by_description(tmp_path):
    """Bands with distinct descriptions become one variable each."""
    _write_tif(tmp_path / "met.TIFF", 2, ["tmax", "tmin"])
    ds = open_dataset(tmp_path / "met.TIFF", chunks={"y": 2})
    assert sorted(ds.data_vars) == ["tmax", "tmin"] and ds.tmax.dims == ("y", "x")
    assert isinstance(ds.tmin.data, da.Array)
    assert read_crs(ds) == pyproj.CRS("EPSG:27700")


def test_open_geotiff_bands_without_descriptions(tmp_path):
    """Bands without descriptions stay one variable with a band dimension."""
    _write_tif(tmp_path / "b.tif", 2)
    ds = open_dataset(tmp_path / "b.tif")
    assert list(ds.data_vars) == ["b"] and ds.b.dims == ("band", "y", "x")


def test_open_station_csv_with_time(tmp_path):
    """A station table pivots to (time, station), NaN where a station has no row."""
    path = tmp_path / "obs.csv"
    path.write_text(
        "Station,LAT,Longitude,Date,Elev,tmax,name_long,flag\n"
        "A,50.0,-1.0,2019-03-02,10,5.0,Alpha,x\n"
        "B,51.0,-2.0,2019-03-01,20,6.0,Beta,y\n"
        "A,50.0,-1.0,2019-03-01,10,4.0,Alpha,z\n"
    )
    ds = open_dataset(path)
    assert ds.tmax.dims == ("time", "station")
    assert list(ds.station.values) == ["A", "B"]
    assert list(ds.time.values) == list(pd.to_datetime(["2019-03-01", "2019-03-02"]))
    np.testing.assert_array_equal(ds.tmax.values, [[4.0, 6.0], [5.0, np.nan]])  # B has no row on 03-02
    np.testing.assert_array_equal(ds.lat.values, [50.0, 51.0])
    np.testing.assert_array_equal(ds.lon.values, [-1.0, -2.0])
    np.testing.assert_array_equal(ds.elevation.values, [10.0, 20.0])
    assert list(ds.name_long.values) == ["Alpha", "Beta"] and "flag" not in ds.variables  # per-station text kept
    assert read_crs(ds) is None


def test_open_station_csv_without_time(tmp_path):
    """Without a time column the result has only a station dimension."""
    path = tmp_path / "stations.csv"
    path.write_text("id,latitude,lon,altitude,ppt\n7,50,-1,3,1.5\n9,51,-2,4,\n")
    ds = open_dataset(path, chunks={})
    assert ds.ppt.dims == ("station",) and list(ds.station.values) == [7, 9]
    np.testing.assert_array_equal(ds.ppt.values, [1.5, np.nan])
    np.testing.assert_array_equal(ds.elevation.values, [3.0, 4.0])


def test_open_station_csv_xy_with_crs(tmp_path):
    """Projected x/y columns with crs= give x/y station coordinates and a CRS."""
    path = tmp_path / "osgb.csv"
    path.write_text("station,x,y,time,wind\ns1,400000,300000,2019-01-01,3\ns2,410000,310000,2019-01-01,4\n")
    ds = open_dataset(path, crs="EPSG:27700")
    assert ds.wind.dims == ("time", "station")
    np.testing.assert_array_equal(ds.x.values, [400000.0, 410000.0])
    assert "lat" not in ds.coords and read_crs(ds) == pyproj.CRS("EPSG:27700")


def test_open_station_csv_xy_without_crs(tmp_path):
    """Projected x/y columns without crs= are refused."""
    path = tmp_path / "osgb.csv"
    path.write_text("station,x,y,wind\ns1,400000,300000,3\n")
    with pytest.raises(CRSError, match="no crs was given.*pass crs="):
        open_dataset(path)


def test_open_station_csv_latlon_with_projected_crs(tmp_path):
    """lat/lon columns with a projected crs= are refused."""
    path = tmp_path / "s.csv"
    path.write_text("station,lat,lon,v\na,50,1,2\n")
    with pytest.raises(CRSError, match="projected"):
        open_dataset(path, crs="EPSG:27700")


def test_open_station_csv_missing_columns(tmp_path):
    """A table without coordinates is refused, naming the columns found."""
    path = tmp_path / "bad.csv"
    path.write_text("station,northing,temp\na,1,2\n")
    with pytest.raises(DataFormatError, match=r"columns \['station', 'northing', 'temp'\].*lat"):
        open_dataset(path)


def test_open_station_csv_duplicate_rows(tmp_path):
    """Two rows for one station and time are refused."""
    path = tmp_path / "dup.csv"
    path.write_text("station,lat,lon,time,v\na,50,1,2019-01-01,1\n\nb,51,1,2019-01-01,3\na,50,1,2019-01-01,2\n")
    with pytest.raises(DataFormatError, match=r"2 rows for station 'a' at time='2019-01-01'.*per station and time"):
        open_dataset(path)
    path.write_text("lat,lon,v\n50,1,1\n51,1,3\n50,1,2\n")
    with pytest.raises(DataFormatError, match=r"2 rows for the station at lat=50, lon=1.*add a time column"):
        open_dataset(path)


def test_open_station_csv_moving_station(tmp_path):
    """A station whose position changes is refused."""
    path = tmp_path / "moving.csv"
    path.write_text("station,lat,lon,time,v\na,50,1,2019-01-01,1\na,51,1,2019-01-02,2\n")
    with pytest.raises(DataFormatError, match="several values for station"):
        open_dataset(path)


def test_open_missing_file(tmp_path):
    """A missing input raises InputNotFoundError."""
    with pytest.raises(InputNotFoundError, match="no file or directory.*check the path"):
        open_dataset(tmp_path / "nothing.nc")


def test_open_unknown_suffix(tmp_path):
    """An unknown suffix raises DataFormatError listing the supported ones."""
    path = tmp_path / "data.xlsx"
    path.write_text("")
    with pytest.raises(DataFormatError, match=r"'\.xlsx'.*\.grib.*\.nc.*\.zarr.*\.tif.*\.csv"):
        open_dataset(path)


def test_open_bad_crs(tmp_path):
    """An unparseable crs= raises CRSError with examples."""
    path = tmp_path / "grid.nc"
    _grid().to_netcdf(path)
    with pytest.raises(CRSError, match="could not read the coordinate reference system.*EPSG:4326"):
        open_dataset(path, crs="EPSG:999999")


@pytest.mark.parametrize(("module", "suffix", "extra"), [("cfgrib", ".grib", "grib"), ("rioxarray", ".tif", "geotiff")])
def test_open_missing_optional_dependency(tmp_path, monkeypatch, module, suffix, extra):
    """A missing optional reader names the pip extra to install."""
    path = tmp_path / f"f{suffix}"
    path.write_bytes(b"")
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    with pytest.raises(DataFormatError, match=rf'pip install "geonp\[{extra}\]"'):
        open_dataset(path)


# ------------------------------------------------------------------------------------------- GRIB


def _write_grib(path, fields):
    """Write a tiny 3 x 4 GRIB1 2 m temperature file: one message per (reference hour, step hours)."""
    eccodes = pytest.importorskip("eccodes")
    with open(path, "wb") as out:
        for ref, step in fields:
            handle = eccodes.codes_grib_new_from_samples("regular_ll_sfc_grib1")
            keys = {
                "Ni": 4, "Nj": 3, "latitudeOfFirstGridPointInDegrees": 52.0, "latitudeOfLastGridPointInDegrees": 50.0,
                "longitudeOfFirstGridPointInDegrees": 0.0, "longitudeOfLastGridPointInDegrees": 3.0,
                "iDirectionIncrementInDegrees": 1.0, "jDirectionIncrementInDegrees": 1.0,
                "dataDate": 20190301, "dataTime": ref * 100, "step": step, "shortName": "2t",
            }  # fmt: skip
            for key, value in keys.items():
                eccodes.codes_set(handle, key, value)
            eccodes.codes_set_values(handle, np.full(12, 270.0 + ref + step))
            eccodes.codes_write(handle, out)
            eccodes.codes_release(handle)


def test_open_grib_forecast_uses_valid_time(tmp_path):
    """A time x step forecast file is flattened onto valid times."""
    path = tmp_path / "fc.grb2"  # a GRIB1 file with a GRIB2 suffix: cfgrib reads either
    _write_grib(path, [(0, 0), (0, 6), (12, 0), (12, 6)])
    ds = open_dataset(path, chunks={"time": 1})  # dask through the flattening
    assert ds.t2m.dims == ("time", "latitude", "longitude") and "step" not in ds.dims
    hours = (ds.time.values - np.datetime64("2019-03-01")) / np.timedelta64(1, "h")
    np.testing.assert_array_equal(hours, [0, 6, 12, 18])
    np.testing.assert_array_equal(ds.valid_time.values, ds.time.values)
    np.testing.assert_array_equal(ds.t2m.values[:, 0, 0], [270, 276, 282, 288])  # value = 270 + ref + step
    np.testing.assert_array_equal(ds.step.values / np.timedelta64(1, "h"), [0, 6, 0, 6])
    assert isinstance(ds.t2m.data, da.Array)
    assert ds.time.attrs["standard_name"] == "time"


def test_open_grib_single_step_analysis_is_shifted(tmp_path):
    """With one non-zero step, time holds reference time + step."""
    path = tmp_path / "step6.grib"
    _write_grib(path, [(0, 6), (12, 6)])
    ds = open_dataset(path)
    hours = (ds.time.values - np.datetime64("2019-03-01")) / np.timedelta64(1, "h")
    np.testing.assert_array_equal(hours, [6, 18])
    np.testing.assert_array_equal(ds.forecast_reference_time.values, pd.to_datetime(["2019-03-01T00", "2019-03-01T12"]))
    assert ds.time.attrs["standard_name"] == "time"
    assert ds.forecast_reference_time.attrs["standard_name"] == "forecast_reference_time"


def test_open_grib_reads_small_files_when_opened_and_keeps_chunks_lazy(tmp_path, monkeypatch):
    """GRIB fields decode whole, so chunked runs re-decoded them per block: small files are read at once."""
    import geonp.io.open as io_open

    path = tmp_path / "small.grib"
    _write_grib(path, [(0, 0), (12, 0)])
    assert open_dataset(path).t2m.variable._in_memory
    assert open_dataset(path, chunks={}).t2m.variable._in_memory  # the reader's chunks: cfgrib has none
    assert isinstance(open_dataset(path, chunks={"time": 1}).t2m.data, da.Array)  # asked for dask: stays lazy
    monkeypatch.setattr(io_open, "GRIB_LOAD_BYTES", 8)  # a file larger than the limit stays lazy
    lazy = open_dataset(path).t2m
    assert not lazy.variable._in_memory and not isinstance(lazy.data, da.Array)
    np.testing.assert_array_equal(lazy.values, open_dataset(path, chunks={}).t2m.values)


def test_open_grib_truncated_is_a_format_error(tmp_path):
    """A partial download was read as a shorter record, silently (a forecast from the wrong time, exit 0)."""
    pytest.importorskip("cfgrib")
    path = tmp_path / "whole.grib"
    _write_grib(path, [(0, 0), (6, 0), (12, 0)])
    cut = tmp_path / "cut.grib"
    cut.write_bytes(path.read_bytes()[: int(path.stat().st_size * 0.8)])
    with pytest.raises(DataFormatError, match=r"'cut.grib' holds a corrupt or truncated GRIB message.*Download"):
        open_dataset(cut)
    assert open_dataset(cut, backend_kwargs={"errors": "ignore"}).sizes["time"] == 2  # asked for: what is whole
    assert open_dataset(path).sizes["time"] == 3


def test_open_grib_overlapping_forecasts(tmp_path):
    """Two fields at one valid time are refused with a way out."""
    path = tmp_path / "overlap.grib"
    _write_grib(path, [(0, 0), (0, 12), (12, 0), (12, 12)])
    with pytest.raises(DataFormatError, match="share a valid time.*sel\\(step="):
        open_dataset(path)


def test_grib_valid_time_without_time_dimension():
    """One reference time with several steps gives a time dimension of valid times."""
    ds = xr.Dataset(
        {"t": (("step", "y"), np.arange(4.0).reshape(2, 2))},
        coords={"time": np.datetime64("2019-03-01T00", "ns"), "step": pd.to_timedelta([3, 6], unit="h")},
    )
    out = grib_valid_time(ds)
    assert out.t.dims == ("time", "y")
    np.testing.assert_array_equal(out.time.values, pd.to_datetime(["2019-03-01T03", "2019-03-01T06"]))


@pytest.fixture(scope="module")
def era5():
    """Open the real ERA5 GRIB file once for the module, in weekly chunks."""
    return open_dataset(_need(ERA5), chunks={"time": 168})


def test_open_real_grib(era5):
    """The ERA5 file opens as (time, latitude, longitude), 744 hourly steps, dask-backed, no .idx."""
    assert era5.t2m.dims == ("time", "latitude", "longitude")
    assert era5.sizes == {"time": 744, "latitude": 33, "longitude": 49}
    assert (np.diff(era5.time.values) == np.timedelta64(1, "h")).all()
    np.testing.assert_array_equal(era5.valid_time.values, era5.time.values)
    # labelled as the valid times it holds, not as cfgrib's forecast_reference_time
    assert era5.time.attrs == {"standard_name": "time", "long_name": "time"}
    assert era5.latitude.values[0] == 58.0 and era5.latitude.values[-1] == 50.0
    assert isinstance(era5.t2m.data, da.Array) and era5.t2m.chunks[0][0] == 168
    assert not list(ERA5.parent.glob("*.idx"))


def test_real_grib_to_zarr(era5, tmp_path):
    """Real GRIB data round-trip through to_zarr with their CRS and chunks."""
    ds = write_crs(era5.isel(time=slice(0, 48)), "EPSG:4326")
    path = to_zarr(ds, tmp_path / "era5.zarr", progress=False)
    back = xr.open_zarr(path, decode_coords="all")
    assert back.t2m.encoding["chunks"] == (48, 33, 49)
    assert back.rio.crs == pyproj.CRS("EPSG:4326")
    np.testing.assert_array_equal(back.t2m.values, ds.t2m.values)
    np.testing.assert_array_equal(back.time.values, ds.time.values)


def test_real_station_netcdf_to_zarr(tmp_path):
    """Real station NetCDF (compressed, with text coordinates) round-trips through to_zarr."""
    ds = open_dataset(_need(COLORADO))
    assert ds.tmax.dims == ("time", "station") and ds.sizes["station"] == 376
    path = to_zarr(ds, tmp_path / "co.zarr", progress=False)  # NetCDF zlib/chunksizes encodings must not leak
    back = open_dataset(path)
    np.testing.assert_array_equal(back.tmax.values, ds.tmax.values)
    assert list(back.station_name.values[:2]) == list(ds.station_name.values[:2])


# -------------------------------------------------------------------------------------------- CRS


@pytest.mark.parametrize("crs", ["EPSG:4326", "EPSG:27700", LAEA])
def test_crs_round_trip_through_zarr(tmp_path, crs):
    """write_crs matches rioxarray's layout, and the CRS survives to_zarr for rioxarray and read_crs."""
    rioxarray = pytest.importorskip("rioxarray")
    assert rioxarray
    expected = pyproj.CRS.from_user_input(crs)
    ds = write_crs(_grid(), crs)
    reference = _grid().rio.write_crs(crs)  # rioxarray's own layout
    assert set(ds.spatial_ref.attrs) == set(reference.spatial_ref.attrs)
    assert ds.t2m.encoding["grid_mapping"] == reference.t2m.encoding["grid_mapping"] == "spatial_ref"
    assert "grid_mapping" not in ds.t2m.attrs and ds.spatial_ref.dtype == np.int64
    path = to_zarr(ds, tmp_path / "crs.zarr", progress=False)
    back = xr.open_zarr(path, decode_coords="all")
    assert back.rio.crs == expected
    assert read_crs(back) == expected
    assert read_crs(open_dataset(path)) == expected


def test_read_crs_sources():
    """read_crs finds explicit, grid_mapping (WKT or CF), crs-coordinate and DataArray CRSs."""
    base = _grid()
    assert read_crs(base) is None
    assert read_crs(base, crs=27700) == pyproj.CRS("EPSG:27700")
    cf = {k: v for k, v in pyproj.CRS("EPSG:27700").to_cf().items() if k != "crs_wkt"}
    by_attr = base.assign_coords(osgb=xr.Variable((), 0, cf))
    by_attr.t2m.attrs["grid_mapping"] = "osgb"
    assert read_crs(by_attr).to_epsg() == 27700  # CF parameters only -> CRS.from_cf (loses the datum's name)
    named = base.assign_coords(crs=xr.Variable((), 0, {"crs_wkt": pyproj.CRS("EPSG:4326").to_wkt()}))
    assert read_crs(named) == pyproj.CRS("EPSG:4326")
    assert read_crs(write_crs(base, "EPSG:4326"), crs="EPSG:27700") == pyproj.CRS("EPSG:27700")  # explicit wins
    assert read_crs(write_crs(base.t2m, LAEA)) == pyproj.CRS(LAEA)  # DataArray
    broken = base.assign_coords(spatial_ref=xr.Variable((), 0, {"crs_wkt": "not a crs"}))
    with pytest.raises(CRSError, match="'crs_wkt' attribute that is not a valid CRS"):
        read_crs(broken)
    with pytest.raises(CRSError, match="could not read"):
        read_crs(base, crs="nonsense")


def test_write_crs_leaves_input_alone():
    """write_crs returns a copy and replaces an earlier CRS."""
    ds = _grid()
    ds.t2m.attrs["grid_mapping"] = "old"
    out = write_crs(ds, "EPSG:4326")
    assert ds.t2m.attrs["grid_mapping"] == "old" and "grid_mapping" not in ds.t2m.encoding
    assert "spatial_ref" not in ds.coords and out.spatial_ref.attrs["crs_wkt"]
    assert write_crs(out, "EPSG:27700").spatial_ref.attrs["crs_wkt"] == pyproj.CRS("EPSG:27700").to_wkt()


# ------------------------------------------------------------------------------------------- Zarr


def test_to_zarr_metadata_and_attrs(tmp_path):
    """The store is consolidated and carries Conventions, history and the caller's attributes."""
    ds = _grid()
    path = to_zarr(ds, tmp_path / "out.zarr", attrs={"model": "bsa-tnp", "checkpoint_sha256": "abc"},
                   history="geonp infill in.nc out.zarr", progress=False)
    assert path == tmp_path / "out.zarr"
    assert (path / ".zmetadata").is_file()  # consolidated
    assert not (tmp_path / "out.zarr.partial").exists()
    back = xr.open_zarr(path, consolidated=True)
    assert back.attrs["Conventions"] == "CF-1.8" and back.attrs["title"] == "synthetic"
    assert back.attrs["model"] == "bsa-tnp" and back.attrs["checkpoint_sha256"] == "abc"
    assert " geonp " in back.attrs["history"] and back.attrs["history"].endswith(": geonp infill in.nc out.zarr")
    assert "_geonp_write_progress" not in back.attrs
    xr.testing.assert_allclose(back.load(), ds)
    assert ds.attrs == {"title": "synthetic"}  # input untouched


def test_to_zarr_refuses_xarray_options_with_a_typed_error(tmp_path):
    from geonp.errors import UnknownOptionError

    with pytest.raises(UnknownOptionError, match=r"got mode=, append_dim=; it takes path, overwrite=.*mode='a'"):
        to_zarr(_grid(), tmp_path / "out.zarr", mode="a", append_dim="time", progress=False)  # before: TypeError
    assert not (tmp_path / "out.zarr").exists()


def test_to_zarr_appends_history(tmp_path):
    """An existing history is kept and extended by one line; Conventions is not overridden."""
    ds = _grid().assign_attrs(history="made by hand", Conventions="CF-1.6")
    back = xr.open_zarr(to_zarr(ds, tmp_path / "h.zarr", progress=False))
    lines = back.attrs["history"].splitlines()
    assert lines[0] == "made by hand" and lines[1].endswith(f"wrote {tmp_path / 'h.zarr'}") and len(lines) == 2
    assert back.attrs["Conventions"] == "CF-1.6"
    # a history passed in attrs= is added to the dataset's own, not put in its place
    mine = xr.open_zarr(to_zarr(ds, tmp_path / "m.zarr", progress=False, attrs={"history": "my step"}))
    lines = mine.attrs["history"].splitlines()
    assert lines[:2] == ["made by hand", "my step"] and len(lines) == 3
    assert lines[2].endswith(f"wrote {tmp_path / 'm.zarr'}")
    whole = ds.attrs["history"] + "\nmy step"  # or the whole history, extended by the caller
    again = xr.open_zarr(to_zarr(ds, tmp_path / "w.zarr", progress=False, attrs={"history": whole}))
    assert again.attrs["history"].splitlines()[:2] == ["made by hand", "my step"]


def test_to_zarr_refuses_existing_then_overwrites(tmp_path):
    """An existing store is refused, then replaced with overwrite=True, leaving nothing behind."""
    path = tmp_path / "out.zarr"
    to_zarr(_grid(seed=1), path, progress=False)
    with pytest.raises(OutputExistsError, match=r"exists; .*pass overwrite=True \(CLI: --overwrite\)"):
        to_zarr(_grid(seed=2), path, progress=False)
    to_zarr(_grid(seed=2), path, overwrite=True, progress=False)
    xr.testing.assert_allclose(xr.open_zarr(path).load(), _grid(seed=2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.zarr"]  # no .partial or .old left


def test_to_zarr_refuses_what_is_not_xarray(tmp_path):
    with pytest.raises(VariableTypeError, match="to_zarr got a ndarray; expected an xarray Dataset or DataArray"):
        to_zarr(np.zeros(3), tmp_path / "x.zarr", progress=False)
    with pytest.raises(ConfigError, match="ends in '.nc', but geonp writes Zarr stores; expected a path ending in "
                                          "'.zarr'"):
        to_zarr(_grid(), tmp_path / "out.nc", progress=False)
    assert not any(tmp_path.iterdir())  # nothing written


def test_to_zarr_chunks_follow_dask(tmp_path):
    """Zarr chunks equal the dask chunks, also for a variable without the region dimension."""
    ds = _grid(nt=10).chunk({"time": 4})
    ds["static"] = (("y", "x"), da.ones((3, 4), chunks=(2, 4)))  # no time: written apart from the regions
    back = xr.open_zarr(to_zarr(ds, tmp_path / "c.zarr", progress=False))
    assert back.t2m.encoding["chunks"] == (4, 3, 4)
    assert back.static.encoding["chunks"] == (2, 4)
    assert zarr.open_group(tmp_path / "c.zarr", mode="r")["t2m"].chunks == (4, 3, 4)
    xr.testing.assert_allclose(back.load(), ds.load())


def test_to_zarr_chunks_coordinates_like_the_data(tmp_path):
    """A valid_time coordinate written whole made the store's ds.chunks raise "inconsistent chunks"."""
    ds = _grid(nt=10).chunk({"time": 4})
    ds = ds.assign_coords(valid_time=("time", ds.time.values + np.timedelta64(1, "h")))
    back = xr.open_zarr(to_zarr(ds, tmp_path / "c.zarr", progress=False))
    assert back.valid_time.chunks == ((4, 4, 2),) and back.chunks["time"] == (4, 4, 2)
    np.testing.assert_array_equal(back.valid_time.values, ds.valid_time.values)


def test_to_zarr_region_dim_shares_chunks(tmp_path):
    """Along the region dimension every variable gets the chunks of the first one that splits it."""
    ds = _grid(nt=8)
    ds["whole"] = ds.t2m.chunk({"time": 8}) + 1  # one chunk along time
    ds["split"] = ds.t2m.chunk({"time": 2}) + 2
    ds["t2m"] = ds.t2m.chunk({"time": 4})  # the first variable chunking time: regions of 4 time steps
    back = xr.open_zarr(to_zarr(ds, tmp_path / "c.zarr", progress=False))
    assert {back[v].encoding["chunks"][0] for v in ("whole", "split", "t2m")} == {4}  # t2m comes first
    xr.testing.assert_allclose(back.load(), ds.load())


def test_to_zarr_rechunks_irregular_dask_chunks(tmp_path):
    """Irregular dask chunks are made regular (the largest chunk) before writing."""
    ds = _grid(nt=10).chunk({"time": (3, 5, 2)})  # zarr needs equal chunks but the last
    back = xr.open_zarr(to_zarr(ds, tmp_path / "c.zarr", progress=False))
    assert back.t2m.encoding["chunks"][0] == 5
    xr.testing.assert_allclose(back.load(), ds.load())


def test_to_zarr_drops_stale_encodings(tmp_path):
    """Encodings inherited from Zarr or NetCDF sources do not stop the write."""
    source = tmp_path / "src.zarr"
    _grid(nt=8).chunk({"time": 8}).to_zarr(source, zarr_format=2)
    ds = xr.open_zarr(source).chunk({"time": 2})  # encoding still says chunks=(8, 3, 4), compressors, ...
    back = xr.open_zarr(to_zarr(ds, tmp_path / "c.zarr", progress=False))
    assert back.t2m.encoding["chunks"] == (2, 3, 4)
    nc = tmp_path / "src.nc"
    _grid().to_netcdf(nc, encoding={"t2m": {"zlib": True, "complevel": 4, "chunksizes": (1, 3, 4)}})
    to_zarr(open_dataset(nc), tmp_path / "n.zarr", progress=False)
    packed = tmp_path / "packed.nc"  # int16 packing chosen for the source's range must not clip new values
    _grid().to_netcdf(packed, encoding={"t2m": {"dtype": "int16", "scale_factor": 0.01, "add_offset": 280.0}})
    wider = open_dataset(packed)
    wider["t2m"] = wider.t2m.copy(data=wider.t2m.values * 100)  # copy() keeps the int16 encoding
    assert wider.t2m.encoding["dtype"] == np.int16
    back = xr.open_zarr(to_zarr(wider, tmp_path / "p.zarr", progress=False))
    np.testing.assert_allclose(back.t2m.values, wider.t2m.values)


def test_to_zarr_progress_bar(tmp_path, capsys):
    """progress=True shows a bar on stderr."""
    to_zarr(_grid().chunk({"time": 2}), tmp_path / "p.zarr")
    assert f"writing {tmp_path / 'p.zarr'}" in capsys.readouterr().err


def _counted(nt, fail_at=None, calls=None, error=RuntimeError, computation="counted"):
    """Return a dask-backed dataset whose block function counts its calls per time block and can fail on one.

    ``computation`` names its graph: the same name stands for the same computation (the counting and
    the simulated crash aside), as a rerun of the same command builds it; another for other options.
    """

    def block(x, block_info=None):
        start = block_info[None]["array-location"][0][0]
        if calls is not None:
            calls[start] += 1
        if start == fail_at:
            raise error(f"simulated crash in the block at time {start}")
        return np.broadcast_to(np.arange(start, start + x.shape[0], dtype="float64")[:, None, None], x.shape) * 10

    base = da.zeros((nt, 3, 4), chunks=(2, 3, 4))
    ds = _grid(nt=nt)
    ds["t2m"] = (("time", "y", "x"), da.map_blocks(block, base, dtype="float64", meta=np.array((), "float64"),
                                                          name=f"{computation}-{nt}"))
    return ds


def test_to_zarr_interrupted_then_resumed(tmp_path, capfd):
    """A failed write leaves no store at path; rerunning writes only the missing regions."""
    path = tmp_path / "run.zarr"
    first = Counter()
    with dask.config.set(scheduler="synchronous"):
        with pytest.raises(RuntimeError, match="simulated crash in the block at time 4"):
            to_zarr(_counted(8, fail_at=4, calls=first), path, progress=False)
    assert not path.exists() and (tmp_path / "run.zarr.partial").is_dir()
    with pytest.raises((FileNotFoundError, ValueError, KeyError)):
        xr.open_zarr(path)
    with pytest.raises(InputNotFoundError):
        open_dataset(path)
    assert first[0] == first[2] == 1 and 6 not in first  # stopped at the failing region
    second = Counter()
    to_zarr(_counted(8, calls=second), path, progress=True)
    assert set(second) == {4, 6}  # the regions finished by the first run were skipped
    assert f"geonp: resuming the write of {path}: 2 of 4 regions already written" in capfd.readouterr().err
    back = xr.open_zarr(path)
    np.testing.assert_array_equal(back.t2m.values[:, 0, 0], np.arange(8) * 10.0)
    assert not (tmp_path / "run.zarr.partial").exists()


def test_to_zarr_bad_input_found_while_computing_leaves_nothing(tmp_path):
    """A geonp error raised while computing (bad input found late) removes the store the call began."""
    path = tmp_path / "run.zarr"
    with dask.config.set(scheduler="synchronous"), pytest.raises(NoDataError, match="at time 4"):
        to_zarr(_counted(8, fail_at=4, error=NoDataError), path, progress=False)
    assert list(tmp_path.iterdir()) == []
    # a partial store left by an earlier, interrupted run is kept: it holds that run's finished regions
    with dask.config.set(scheduler="synchronous"), pytest.raises(RuntimeError):
        to_zarr(_counted(8, fail_at=4), path, progress=False)
    with dask.config.set(scheduler="synchronous"), pytest.raises(NoDataError):
        to_zarr(_counted(8, fail_at=4, error=NoDataError), path, progress=False)
    assert (tmp_path / "run.zarr.partial").is_dir() and not path.exists()


def test_to_zarr_discards_mismatching_partial(tmp_path):
    """A partial store of another dataset is discarded and the write restarts."""
    path = tmp_path / "run.zarr"
    with pytest.raises(RuntimeError):
        to_zarr(_counted(8, fail_at=4), path, progress=False)
    calls = Counter()
    with pytest.warns(UserWarning, match=r"run.zarr.partial' holds the unfinished write of another run.*discarded"):
        to_zarr(_counted(10, calls=calls), path, progress=False)  # another shape: start again
    assert set(calls) == {0, 2, 4, 6, 8}
    np.testing.assert_array_equal(xr.open_zarr(path).t2m.values[:, 0, 0], np.arange(10) * 10.0)


@pytest.mark.parametrize("change", ["global attribute", "variable attribute", "in-memory values", "computation"])
def test_to_zarr_partial_of_another_run_restarts(tmp_path, change):
    """A partial store of the same layout but another run (model, options, inputs) is not mixed in."""
    path = tmp_path / "run.zarr"
    first = _counted(8, fail_at=4)
    first.attrs["geonp_model"] = "bsa-tnp"
    with dask.config.set(scheduler="synchronous"), pytest.raises(RuntimeError):
        to_zarr(first, path, progress=False)
    second = _counted(8, calls=(calls := Counter()), computation="other" if change == "computation" else "counted")
    second.attrs["geonp_model"] = "te-pt-tnp" if change == "global attribute" else "bsa-tnp"
    if change == "variable attribute":
        second["t2m"].attrs["long_name"] = "another quantity"
    if change == "in-memory values":
        second["elev"] = (("y", "x"), np.ones((3, 4)))
        first_elev = _counted(8, fail_at=4)
        first_elev.attrs["geonp_model"] = "bsa-tnp"
        first_elev["elev"] = (("y", "x"), np.zeros((3, 4)))
        with dask.config.set(scheduler="synchronous"), pytest.raises(RuntimeError):
            to_zarr(first_elev, path, progress=False)
    to_zarr(second, path, progress=False)
    assert set(calls) == {0, 2, 4, 6}  # every region written by this run
    back = xr.open_zarr(path)
    assert back.attrs["geonp_model"] == second.attrs["geonp_model"]
    np.testing.assert_array_equal(back.t2m.values[:, 0, 0], np.arange(8) * 10.0)


def test_to_zarr_resume_ignores_the_history_time_stamp(tmp_path):
    """Only ``history`` may differ between the interrupted run and its rerun (it holds a time stamp)."""
    path = tmp_path / "run.zarr"
    with dask.config.set(scheduler="synchronous"), pytest.raises(RuntimeError):
        to_zarr(_counted(8, fail_at=4), path, progress=False, history="first try")
    to_zarr(_counted(8, calls=(calls := Counter())), path, progress=False, history="second try")
    assert set(calls) == {4, 6}


def test_to_zarr_overwrite_keeps_old_store_until_new_is_complete(tmp_path):
    """A failed overwrite leaves the old store intact."""
    path = tmp_path / "out.zarr"
    to_zarr(_grid(seed=1), path, progress=False)
    with pytest.raises(RuntimeError):
        to_zarr(_counted(6, fail_at=2), path, overwrite=True, progress=False)
    xr.testing.assert_allclose(xr.open_zarr(path).load(), _grid(seed=1))  # old store intact
    to_zarr(_counted(6), path, overwrite=True, progress=False)
    np.testing.assert_array_equal(xr.open_zarr(path).t2m.values[:, 0, 0], np.arange(6) * 10.0)


def test_to_zarr_with_distributed_client(tmp_path):
    """Regions are computed by an active dask.distributed Client."""
    distributed = pytest.importorskip("distributed")
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None):
        path = to_zarr(_grid(nt=8).chunk({"time": 2}), tmp_path / "d.zarr", progress=False)
    xr.testing.assert_allclose(xr.open_zarr(path).load(), _grid(nt=8))


# ------------------------------------------------------------------------------------------ hygiene


def test_io_does_not_import_torch():
    """geonp.io loads without torch."""
    code = "import geonp.io.open, geonp.io.zarr, geonp.io.crs, sys; assert 'torch' not in sys.modules, 'torch'"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    for source in (ROOT / "geonp" / "io").glob("*.py"):
        assert "import torch" not in source.read_text() and "from torch" not in source.read_text(), source


def test_to_zarr_overwrite_replaces_only_a_zarr_store(tmp_path):
    """overwrite=True never replaces a regular file or a directory that is not a Zarr store; nothing is deleted."""
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "notes.txt").write_text("my notes")
    with pytest.raises(OutputExistsError, match=r"'.*precious.txt' exists and is a file of 7 bytes, not a Zarr "
                                                r"store; overwrite=True .* replaces only a Zarr store"):
        to_zarr(_grid(), precious, overwrite=True, progress=False)
    with pytest.raises(OutputExistsError, match=r"is a directory of 1 entry \('notes.txt'\), not a Zarr store"):
        to_zarr(_grid(), folder, overwrite=True, progress=False)
    assert precious.read_text() == "keep me" and (folder / "notes.txt").read_text() == "my notes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "precious.txt"]  # no partial store, no lock
    store = tmp_path / "o.zarr"
    for seed in (1, 2):  # a store geonp wrote (.zgroup, .zmetadata) is replaced
        to_zarr(_grid(seed=seed), store, overwrite=True, progress=False)
    np.testing.assert_array_equal(xr.open_zarr(store).t2m.values, _grid(seed=2).t2m.values)


def test_to_zarr_never_replaces_the_file_it_reads_from(tmp_path):
    """A store that holds (or is inside) the file the data were opened from is refused, even with overwrite."""
    folder = tmp_path / "data.zarr"
    _grid().to_zarr(folder / "in.zarr")
    (folder / ".zgroup").write_text('{"zarr_format": 2}')  # the folder reads as a store itself
    before = sorted(str(p) for p in folder.rglob("*"))
    ds = open_dataset(folder / "in.zarr")
    with pytest.raises(OutputExistsError, match=r"contains the file the data were read from .*in.zarr"):
        to_zarr(ds, folder, overwrite=True, progress=False)
    with pytest.raises(OutputExistsError, match=r"is inside the file the data were read from"):
        to_zarr(ds, folder / "in.zarr" / "out.zarr", progress=False)
    assert sorted(str(p) for p in folder.rglob("*")) == before


def test_an_unnamed_dataarray_is_written_under_the_name_predictions_give_it(tmp_path):
    """Predictions named an unnamed DataArray's outputs value_mean, ..., while to_zarr wrote it as 'data'."""
    back = xr.open_zarr(to_zarr(xr.DataArray(np.ones((2, 3)), dims=("y", "x")), tmp_path / "v.zarr", progress=False))
    assert list(back.data_vars) == ["value"]


def test_a_forecast_store_takes_appended_initial_times_at_their_own_times(tmp_path):
    """init_time was written as days since its first value: an appended 2019-03-07T22 read back as 03-29T23."""
    inits = np.array(["2019-03-06T23:00"], dtype="datetime64[ns]")
    valid = inits[:, None] + np.array([1, 2], "timedelta64[h]")
    fc = xr.Dataset({"t2m_mean": (("init_time", "lead_time"), np.zeros((1, 2), dtype="float32"))},
                    coords={"init_time": inits, "lead_time": pd.to_timedelta([1, 2], unit="h").values,
                            "valid_time": (("init_time", "lead_time"), valid)})
    path = to_zarr(fc, tmp_path / "fc.zarr", progress=False)
    night = fc.assign_coords(init_time=fc.init_time + np.timedelta64(23, "h"),
                             valid_time=fc.valid_time + np.timedelta64(23, "h"))
    night.to_zarr(path, append_dim="init_time")
    back = xr.open_zarr(path)
    np.testing.assert_array_equal(back.init_time.values, np.concatenate([inits, inits + np.timedelta64(23, "h")]))
    np.testing.assert_array_equal(back.valid_time.values[1], night.valid_time.values[0])
    assert xr.open_zarr(path, decode_times=False).init_time.attrs["units"] == "seconds since 1970-01-01"


@pytest.mark.parametrize("kind", ["cftime", "subsecond"])
def test_cftime_and_subsecond_initial_times_are_appended_at_their_own_times(tmp_path, kind):
    """Only whole-second datetime64 got fixed units: cftime and sub-second init_times still read back shifted."""
    import cftime

    if kind == "cftime":
        inits = np.array([cftime.DatetimeNoLeap(1990, 1, 15, 12)])
        later = np.array([cftime.DatetimeNoLeap(1990, 2, 14, 3)])
    else:
        inits = np.array(["2019-03-06T23:00:00.250"], dtype="datetime64[ns]")
        later = inits + np.timedelta64(1500, "ms")
    fc = xr.Dataset({"t2m_mean": (("init_time", "lead_time"), np.zeros((1, 2), dtype="float32"))},
                    coords={"init_time": inits, "lead_time": pd.to_timedelta([1, 2], unit="h").values})
    path = to_zarr(fc, tmp_path / "fc.zarr", progress=False)
    fc.assign_coords(init_time=later).to_zarr(path, append_dim="init_time")
    back = xr.open_zarr(path, use_cftime=kind == "cftime")
    assert list(back.init_time.values) == [*inits, *later]
    units = xr.open_zarr(path, decode_times=False).init_time.attrs["units"]
    assert units == ("seconds" if kind == "cftime" else "milliseconds") + " since 1970-01-01"
