"""What an output records of how it was made, and what it keeps of its input (geonp.output, geonp.io)."""

import pyproj  # noqa: F401  isort: skip

import json

import numpy as np
import pytest
import xarray as xr
from test_api import field, stations

import geonp
from geonp.errors import OutputExistsError


def test_to_zarr_never_writes_over_the_store_a_prediction_read(tmp_path):
    """A prediction carries no encoding of its input: it records the files it read instead."""
    ds, _ = field()
    path = tmp_path / "in.zarr"
    ds.to_zarr(path)
    src = xr.open_zarr(path)
    out = src.np.infill("t2m")
    assert out.attrs["geonp_input"] == str(path)
    with pytest.raises(OutputExistsError, match="is the file the data were read from"):
        geonp.to_zarr(out, path, overwrite=True, progress=False)  # before: replaced the input with the outputs
    assert list(xr.open_zarr(path).data_vars) == ["t2m"]
    # and what is computed from a geonp output read back names the first input too
    geonp.to_zarr(out, tmp_path / "out.zarr", progress=False)
    back = xr.open_zarr(tmp_path / "out.zarr")
    again = back.assign(v=back.t2m_filled.where(ds.t2m.notnull())).np.infill("v")
    assert again.attrs["geonp_input"].splitlines() == [str(tmp_path / "out.zarr"), str(path)]
    with pytest.raises(OutputExistsError, match="is the file the data were read from"):
        geonp.to_zarr(again, path, overwrite=True, progress=False)


def test_the_settings_that_change_the_numbers_are_recorded():
    ds, _ = field()
    plain = ds.np.infill("t2m")
    tuned = ds.np.infill("t2m", time_window=1, tile=4, halo=2, mask="observed")
    first, second = json.loads(plain.attrs["geonp_settings"]), json.loads(tuned.attrs["geonp_settings"])
    assert (second["half_window"], second["tile"], second["halo"]) == (1, 4.0, 2.0)
    assert first != second
    assert tuned.attrs["geonp_mask"].startswith("mask='observed': ") and "geonp_mask" not in plain.attrs
    assert plain.attrs["geonp_input"] == "in memory" and plain.attrs["geonp_targets"] == "the input's own points"
    assert "torch " in plain.attrs["geonp_environment"] and "compiled bias kernel" in plain.attrs["geonp_environment"]
    assert "where it builds" not in plain.attrs["geonp_environment"]  # an eager result says whether it ran


def test_targets_without_an_elevation_record_none():
    st = stations()
    grid = xr.Dataset(coords={"lat": np.linspace(38.5, 40.5, 3), "lon": np.linspace(-107.5, -104, 4)})
    with pytest.warns(geonp.MissingCovariateWarning):
        out = st.np.infill("tmax", targets=grid)
    assert out.attrs["geonp_elevation"] == "none"  # before: "elevation", which the prediction left out
    assert out.attrs["geonp_targets"] == "targets= (lat, lon): 12 points, lon -107.5..-104, lat 38.5..40.5"
    assert st.np.infill("tmax").attrs["geonp_elevation"] == "elevation"


def test_the_model_digest_tells_calibrations_apart():
    """The checkpoint's hash covers the weights; the model's covers its scales and calibration too."""
    st = stations(times=4)
    a = st.np.fit("tmax", steps=0, progress=False, calibration_tasks=4, seed=0)
    b = st.isel(station=slice(0, 30)).np.fit("tmax", steps=0, progress=False, calibration_tasks=4, seed=1)
    out_a, out_b = st.np.infill("tmax", model=a), st.np.infill("tmax", model=b)
    assert out_a.attrs["geonp_checkpoint_sha256"] == out_b.attrs["geonp_checkpoint_sha256"]
    assert out_a.attrs["geonp_model_sha256"] != out_b.attrs["geonp_model_sha256"]
    again = st.np.fit("tmax", steps=0, progress=False, calibration_tasks=4, seed=0)  # run times differ
    assert st.np.infill("tmax", model=again).attrs["geonp_model_sha256"] == out_a.attrs["geonp_model_sha256"]


def test_the_input_global_attributes_and_history_carry_over():
    ds, _ = field()
    ds.attrs.update(license="Contains modified Copernicus Climate Change Service information", institution="ECMWF",
                    history="2024-01-01 downloaded", title="ERA5", Conventions="CF-1.6", geonp_task="stale")
    ds.t2m.attrs["cell_methods"] = "time: point"
    out = ds.np.infill("t2m")
    assert out.attrs["license"].startswith("Contains modified Copernicus") and out.attrs["institution"] == "ECMWF"
    lines = out.attrs["history"].splitlines()
    assert lines[0] == "2024-01-01 downloaded" and " geonp " in lines[1] and len(lines) == 2
    assert out.attrs["title"] == "geonp infill of t2m" and out.attrs["Conventions"] == "CF-1.8"
    assert out.attrs["geonp_task"] == "infill"
    assert out.t2m_mean.attrs["cell_methods"] == "time: point" and out.t2m_filled.attrs["cell_methods"] == "time: point"
    assert "cell_methods" not in out.t2m_std.attrs


def test_the_files_a_lazy_input_still_reads_are_found_after_everyday_operations(tmp_path):
    """.where, .astype, a DataArray, concat and open_mfdataset drop the encoding; the graph still reads the stores."""
    ds, _ = field(times=4)
    for name, part in (("a.zarr", ds.isel(time=slice(0, 2))), ("b.zarr", ds.isel(time=slice(2, 4)))):
        part.to_zarr(tmp_path / name)
    a = xr.open_zarr(tmp_path / "a.zarr")
    for derived in (a.where(a.t2m > 0), a.astype("float64"), a.t2m):
        out = derived.np.infill("t2m") if isinstance(derived, xr.Dataset) else derived.np.infill()
        assert out.attrs["geonp_input"] == str(tmp_path / "a.zarr")
        with pytest.raises(OutputExistsError, match="is the file the data were read from"):
            geonp.to_zarr(out, tmp_path / "a.zarr", overwrite=True, progress=False)  # before: written over
    both = xr.concat([a, xr.open_zarr(tmp_path / "b.zarr")], "time").np.infill("t2m")
    assert both.attrs["geonp_input"].splitlines() == [str(tmp_path / "a.zarr"), str(tmp_path / "b.zarr")]
    with pytest.raises(OutputExistsError, match="is the file the data were read from"):
        geonp.to_zarr(both, tmp_path / "b.zarr", overwrite=True, progress=False)
    assert list(xr.open_zarr(tmp_path / "b.zarr").data_vars) == ["t2m"]


def test_input_attributes_netcdf_cannot_hold_are_written_as_text(tmp_path):
    ds, _ = field()
    ds.attrs.update(meta={"a": 1}, flag=True, nothing=None, history=["first", "second"], levels=[1, 2])
    out = ds.np.infill("t2m")
    assert out.attrs["meta"] == '{"a": 1}' and out.attrs["flag"] == 1 and out.attrs["nothing"] == ""
    assert out.attrs["levels"] == [1, 2] and out.attrs["history"].splitlines()[:2] == ["first", "second"]
    out.to_netcdf(tmp_path / "out.nc")  # before: TypeError, invalid value for attr 'meta'


def test_a_single_point_given_as_scalars_says_how_to_give_it_a_dim():
    from geonp.errors import CoordinateError

    st = stations()
    with pytest.raises(CoordinateError, match=r"space coordinates \['lat', 'lon'\] as scalars.*expand_dims"):
        st.np.infill("tmax", targets=xr.Dataset(coords={"lat": 39.5, "lon": -105.0}))


def _as_cfgrib(ds, total_number=0, level=("surface", 0.0)):
    """``ds`` with what cfgrib adds to a field: scalar ``number`` and level coordinates, ``GRIB_*`` attributes."""
    name, value = level
    level_attrs = ({"long_name": f"original GRIB coordinate for key: level({name})", "units": "1"} if name == "surface"
                   else {"long_name": "height above the surface", "units": "m", "standard_name": "height"})
    ds = ds.assign_coords(number=((), 3 if total_number else 0, {"standard_name": "realization", "units": "1"}),
                          **{name: ((), value, level_attrs)})
    ds["t2m"].attrs.update(GRIB_typeOfLevel=name, GRIB_totalNumber=total_number, GRIB_shortName="2t")
    ds.attrs.update(GRIB_edition=1, GRIB_centre="ecmf",
                    institution="European Centre for Medium-Range Weather Forecasts")
    return ds


def test_cfgrib_placeholders_stay_out_of_the_outputs():
    """A thirtieth new-user test: ERA5 from GRIB gave infills a ``number`` 0, a ``surface`` 0 and GRIB_* attributes."""
    ds, _ = field()
    grib = _as_cfgrib(ds)
    forecast = grib.np.forecast("t2m", hours=1, init_time=grib.time[-1].values, calibrate=False)
    for out in (grib.np.infill("t2m"), forecast):
        assert "number" not in out.coords and "surface" not in out.coords
        assert not [k for k in out.attrs if k.startswith("GRIB_")]
        assert out.attrs["institution"] == "European Centre for Medium-Range Weather Forecasts"  # the input's own
        assert not [k for v in out.variables.values() for k in v.attrs if k.startswith("GRIB_")]
    # a chosen ensemble member and a real level are information: they stay
    member = _as_cfgrib(ds, total_number=51, level=("heightAboveGround", 2.0)).np.infill("t2m")
    assert int(member["number"]) == 3 and float(member["heightAboveGround"]) == 2.0
    # data that are not from GRIB keep a scalar coordinate called `surface` or `number`
    plain = ds.assign_coords(number=0, surface=0.0).np.infill("t2m")
    assert "number" in plain.coords and "surface" in plain.coords
