"""Axes, CRS and model-space geometry (geonp.geo, geonp.normalise)."""

import pyproj  # isort: skip

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from geonp import frames, geo
from geonp.errors import CoordinateError, CRSError, TimeAxisError, VariableNotFoundError, VariableTypeError
from geonp.normalise import Normaliser, context_spacing_km, grid_spacing_km, station_spacing_km
from geonp.targets import describe_targets


def grid(lat=None, lon=None, times=3, name="t2m", lat_name="latitude", lon_name="longitude"):
    lat = np.linspace(50, 52, 5) if lat is None else np.asarray(lat, float)
    lon = np.linspace(-2, 1, 7) if lon is None else np.asarray(lon, float)
    rng = np.random.default_rng(0)
    values = rng.normal(size=(times, len(lat), len(lon))).astype("float32")
    return xr.Dataset(
        {name: (("time", lat_name, lon_name), values, {"units": "K"})},
        coords={"time": pd.date_range("2020-01-01", periods=times, freq="h"), lat_name: lat, lon_name: lon},
    )


def test_finds_lat_lon_grid_and_time():
    ds, layout = geo.describe(grid(), "t2m")
    assert layout.space_dims == ("latitude", "longitude")
    assert (layout.x, layout.y, layout.time, layout.geographic) == ("longitude", "latitude", "time", True)
    assert layout.is_grid and layout.extra_dims == ()


@pytest.mark.parametrize("names", [("lat", "lon"), ("nav_lat", "nav_lon"), ("a", "b")])
def test_lat_lon_by_name_or_cf_attributes(names):
    ds = grid(lat_name=names[0], lon_name=names[1])
    ds[names[0]].attrs["standard_name"] = "latitude"
    ds[names[1]].attrs["units"] = "degrees_east"
    _, layout = geo.describe(ds)
    assert (layout.y, layout.x) == names


def test_var_may_be_omitted_with_one_variable_but_not_two():
    assert geo.describe(grid())[1].var == "t2m"
    ds = grid().assign(other=grid()["t2m"] * 2)
    with pytest.raises(VariableNotFoundError, match="2 numeric data variables"):
        geo.describe(ds)


def test_unknown_and_non_numeric_variables():
    with pytest.raises(VariableNotFoundError, match="'tp' is not in the dataset.*'t2m'"):
        geo.describe(grid(), "tp")
    ds = grid().assign(label=(("latitude",), np.array(list("abcde"))))
    with pytest.raises(VariableTypeError, match="dtype <U1; expected a real numeric"):
        geo.describe(ds, "label")
    with pytest.raises(VariableTypeError, match="expected an xarray Dataset"):
        geo.describe(np.zeros(3))


def test_no_space_coordinates():
    ds = xr.Dataset({"v": (("a", "b"), np.zeros((2, 3)))})
    with pytest.raises(CoordinateError, match="no recognisable space coordinates.*latitude/longitude"):
        geo.describe(ds)


def test_latitude_out_of_range():
    with pytest.raises(CoordinateError, match="latitude 'latitude' has values from 50.0 to 95.0"):
        geo.describe(grid(lat=[50, 60, 70, 80, 95]))


def test_missing_station_coordinates():
    st = xr.Dataset({"t": (("station",), np.zeros(3))},
                    coords={"lat": ("station", [40.0, np.nan, 41.0]), "lon": ("station", [-105.0, -104.0, -103.0])})
    with pytest.raises(CoordinateError, match="'lat' has 1 missing \\(NaN or infinite\\) value.*notnull"):
        geo.describe(st)
    projected = xr.Dataset({"t": (("station",), np.zeros(3))},
                           coords={"x": ("station", [4e6, np.inf, 4.1e6]), "y": ("station", [3e6, 3.1e6, 3.2e6])})
    with pytest.raises(CoordinateError, match="'x' has 1 missing \\(NaN or infinite\\) value.*notnull"):
        geo.describe(projected, crs="EPSG:3035")  # before: accepted, and every prediction came out NaN


def test_missing_times():
    ds = grid()
    ds = ds.assign_coords(time=[ds.time.values[0], np.datetime64("NaT"), ds.time.values[2]])
    with pytest.raises(CoordinateError, match="'time' has 1 missing \\(NaT\\) value.*notnull"):
        geo.describe(ds)


def test_longitude_out_of_range():
    with pytest.raises(CoordinateError, match="longitude.*expected degrees in \\[-180, 360\\]"):
        geo.describe(grid(lon=[100, 200, 300, 400, 500, 600, 700]))
    with pytest.raises(CoordinateError, match=r"from -1000 to 2000.*Convert radians or projected metres"):
        geo.describe(grid(lon=[-1000, 0, 500, 1000, 1500, 1800, 2000]))
    with pytest.raises(CoordinateError, match=r"from -280 to 80.*counted from another meridian.*tripolar"):
        geo.describe(grid(lon=[-280, -220, -160, -100, -40, 20, 80]))


def test_longitudes_running_past_360_are_named_as_such():
    """Degrees 355..367 (wrap-around columns) are not radians or metres: the advice is to wrap or drop them."""
    with pytest.raises(CoordinateError, match=r"from 355 to 367; .*run past 360.*"
                                              r"ds.assign_coords\(longitude=\(ds.longitude \+ 180\) % 360 - 180\)"
                                              r"\.sortby\('longitude'\).*ds.sel\(longitude=ds.longitude < 360\)"):
        geo.describe(grid(lon=[355, 357, 359, 361, 363, 365, 367]))
    fixed = grid(lon=[355, 357, 359, 361, 363, 365, 367])
    fixed = fixed.assign_coords(longitude=(fixed.longitude + 180) % 360 - 180).sortby("longitude")
    assert geo.describe(fixed)[1].x == "longitude"


def test_non_monotonic_and_duplicate_grid_coordinates():
    with pytest.raises(CoordinateError, match="neither increasing nor decreasing.*sortby"):
        geo.describe(grid(lat=[50, 52, 51, 53, 54]))
    with pytest.raises(CoordinateError, match="duplicate values.*drop_duplicates"):
        geo.describe(grid(lat=[50, 51, 51, 52, 53]))


def test_sorted_longitudes_whose_ends_meet_in_the_middle():
    # what ds.where((lon <= 1) | (lon >= 358), drop=True) leaves of a global 0..360 grid: sorted,
    # but its two halves swapped, so that neighbouring columns are 357 degrees apart
    with pytest.raises(CoordinateError, match="jumps from 1 to 358 between two neighbouring columns.*"
                                              "ds.roll\\(longitude=-3, roll_coords=True\\)"):
        geo.describe(grid(lon=[0, 0.5, 1, 358, 358.5, 359, 359.5]))
    geo.describe(grid(lon=[358, 358.5, 359, 359.5, 0, 0.5, 1]))  # the same region in geographic order
    geo.describe(grid(lon=[0, 60, 120, 180, 240, 300, 359]))  # a coarse global grid has no such jump


@pytest.mark.parametrize("lon, twice", [(list(range(0, 361, 60)), "0, 360"), ([-180, -120, -60, 0, 60, 120, 180],
                                                                              "-180, 180")])
def test_a_meridian_held_twice_is_refused(lon, twice):
    """A cyclic column (0 and 360, -180 and 180) is one meridian twice: its two copies were predicted apart."""
    with pytest.raises(CoordinateError, match=f"holds the meridian .* twice \\({twice}\\).*isel\\(longitude=slice"):
        geo.describe(grid(lon=lon))
    targets = xr.Dataset(coords={"latitude": [50.0, 51.0], "longitude": np.asarray(lon, dtype=float)})
    assert describe_targets(targets)[1].x == "longitude"  # targets may: a cyclic column to plot


def test_duplicate_times():
    ds = grid()
    ds = ds.assign_coords(time=[ds.time.values[0]] * 3)
    with pytest.raises(CoordinateError, match="duplicate values; expected strictly increasing"):
        geo.describe(ds)


def test_grid_across_the_dateline_is_monotonic():
    _, layout = geo.describe(grid(lon=[178, 179, 180, -179, -178, -177, -176]))
    assert layout.geographic


def test_projected_grid_needs_a_crs():
    ds = xr.Dataset({"v": (("y", "x"), np.zeros((3, 4)))}, coords={"y": [0.0, 1e3, 2e3], "x": np.arange(4) * 1e3})
    with pytest.raises(CRSError, match="no coordinate reference system.*crs="):
        geo.describe(ds)
    _, layout = geo.describe(ds, crs="EPSG:27700")
    assert not layout.geographic and pyproj.CRS.from_wkt(layout.crs_wkt).to_epsg() == 27700
    frame = frames.make_frame(ds, layout)
    assert frame.kind == "projected" and frame.km_per_unit == pytest.approx(1e-3)


def test_stations_and_elevation_by_name_and_geopotential():
    st = xr.Dataset(
        {"tmax": (("time", "station"), np.zeros((2, 3)))},
        coords={"time": pd.date_range("2000-01", periods=2, freq="MS"), "station": ["a", "b", "c"],
                "lat": ("station", [39.0, 40.0, 41.0]), "lon": ("station", [-105.0, -104.0, -106.0]),
                "altitude": ("station", [1500.0, 2000.0, 2500.0])},
    )
    ds, layout = geo.describe(st)
    assert layout.space_dims == ("station",) and not layout.is_grid and layout.elevation == "altitude"
    np.testing.assert_allclose(geo.find_elevation(ds, layout), [1500, 2000, 2500])
    z = st.drop_vars("altitude").assign_coords(z_sfc=("station", [9806.65, 0.0, 19613.3]))
    z["z_sfc"].attrs["standard_name"] = "surface_geopotential"
    ds, layout = geo.describe(z)
    np.testing.assert_allclose(geo.find_elevation(ds, layout), [1000, 0, 2000])


@pytest.mark.parametrize("name, attrs", [
    ("orography", {}), ("orog", {}), ("height", {}), ("hsurf", {"standard_name": "surface_altitude"}),
    ("zs", {"standard_name": "height_above_mean_sea_level", "units": "km"}),
])
def test_elevation_found_by_name_or_cf_standard_name(name, attrs):
    """Elevation is found under the names users give it, or by its CF standard_name (km converted to m)."""
    elev = xr.DataArray(np.arange(35.0).reshape(5, 7) / 10, dims=("latitude", "longitude"), attrs=attrs)  # ≤ 3.4 km
    ds, layout = geo.describe(grid(times=1).assign_coords({name: elev}))
    assert layout.elevation == name
    factor = 1000.0 if attrs.get("units") == "km" else 1.0
    np.testing.assert_allclose(geo.find_elevation(ds, layout), factor * elev.values)


def test_duplicate_station_labels():
    st = xr.Dataset({"tmax": (("station",), np.zeros(3))},
                    coords={"station": ["a", "b", "a"], "lat": ("station", [39.0, 40.0, 41.0]),
                            "lon": ("station", [-105.0, -104.0, -106.0])})
    with pytest.raises(CoordinateError, match=r"repeats 1 label\(s\), e.g. \['a'\].*drop_duplicates\('station'\)"):
        geo.describe(st)
    _, layout = geo.describe(st.assign_coords(station=["a", "b", "c"]))  # co-located is fine, labels distinct
    assert layout.space_dims == ("station",)


@pytest.mark.parametrize("dim", ["member", "pressure_level", "level"])
def test_extra_dims_are_separate_problems(dim):
    ds = grid().expand_dims({dim: [850, 500, 250]})
    _, layout = geo.describe(ds)
    assert layout.extra_dims == (dim,) and layout.time == "time"


def test_aeqd_frame_is_metric_and_wraps_the_dateline():
    f = frames.Frame("aeqd", 180.0, 0.0)
    km = f.to_km(np.array([179.0, -179.0]), np.array([0.0, 0.0]))
    assert np.linalg.norm(km[0] - km[1]) == pytest.approx(222.6, rel=1e-3)  # 2° of equator, across the dateline
    pole = frames.Frame("aeqd", 0.0, 90.0).to_km(np.array([0.0, 180.0]), np.array([89.0, 89.0]))
    assert np.linalg.norm(pole[0] - pole[1]) == pytest.approx(222.4, rel=1e-2)


def test_spacings():
    xy = np.stack(np.meshgrid(np.arange(4) * 10.0, np.arange(3) * 10.0, indexing="xy"), -1).reshape(-1, 2)
    assert grid_spacing_km(xy, (3, 4)) == pytest.approx(10.0)
    assert station_spacing_km(np.array([[0, 0], [100, 0], [0, 100], [100, 100.0]])) == pytest.approx(50.0)
    assert context_spacing_km(10.0, 0.25) == pytest.approx(20.0)


def test_normaliser_round_trip_and_covariates():
    n = Normaliser(space_unit_km=12.5, time_unit_hours=1.0, covariates=("elevation", "hour", "doy"),
                   elevation_mean=1000.0, elevation_std=500.0)
    assert Normaliser.from_dict(n.to_dict()) == n
    z = n.covariate_columns(np.array([1000.0, 1500.0]), np.array([0.0, 90.0]), np.array([0.0, 6.0]))
    assert z.shape == (2, 2, 5)
    np.testing.assert_allclose(z[0, :, 0], [0.0, 1.0])
    np.testing.assert_allclose(z[0, 1, 1:3], z[1, 0, 1:3], atol=1e-12)  # 06 UTC at 0° = 00 UTC at 90°E (solar time)
    shift, scale = n.standardise(np.array([5.0, 5.0]))
    assert shift == 5.0 and scale > 0


def test_grid_steps_km_measure_each_axis():
    from geonp.frames import grid_steps_km

    lon, lat = np.meshgrid(np.arange(0, 5, 0.25), 60 + 0.25 * np.arange(8))
    dy, dx = grid_steps_km(lon, lat)
    # median neighbour distances: 0.25° of latitude, and of longitude at the grid's middle latitude
    assert dy == pytest.approx(27.8, abs=0.1) and dx == pytest.approx(27.8 * np.cos(np.deg2rad(60.875)), abs=0.1)
    assert grid_steps_km(lon[:1], lat[:1])[0] is None


def test_select_variable__lists_coordinates_and_packed_integers_are_named():
    select_variable = geo.select_variable
    ds = xr.Dataset({"t2m": (("y", "x"), np.ones((2, 3), "float32")), "d2m": (("y", "x"), np.ones((2, 3)))},
                    coords={"y": [0.0, 1.0], "x": [0.0, 1.0, 2.0]})
    with pytest.raises(VariableNotFoundError, match="var=\\['t2m', 'd2m'\\]; expected the name of one variable"):
        select_variable(ds, ["t2m", "d2m"])
    with pytest.raises(VariableNotFoundError, match="'x' is a coordinate, not a data variable"):
        select_variable(ds, "x")
    packed = ds.assign(t2m=ds.t2m.astype("int16").assign_attrs(scale_factor=0.01, _FillValue=-32767))
    with pytest.raises(VariableTypeError, match="raw packed integers \\(int16 with \\['_FillValue', 'scale_factor'\\].*"
                                                "xr.decode_cf"):
        select_variable(packed, "t2m")
    plain_ints = ds.assign(t2m=ds.t2m.astype("int16"))  # integers without packing attributes are values
    assert select_variable(plain_ints, "t2m")[1] == "t2m"


def _rotated_grid(pole_lat=39.25, flip_lat=False):
    """A EURO-CORDEX-like rotated grid: rlat/rlon dims, 2-D lat/lon from the pole, a rotated_pole grid mapping."""
    pole = {"grid_mapping_name": "rotated_latitude_longitude", "grid_north_pole_latitude": 39.25,
            "grid_north_pole_longitude": -162.0}
    rlat, rlon = np.arange(-10, 7.6, 0.44), np.arange(-12, 10, 0.44)
    lon, lat = pyproj.Transformer.from_crs(pyproj.CRS.from_cf(pole), 4326, always_xy=True).transform(
        *np.meshgrid(rlon, rlat))
    lat = lat[::-1] if flip_lat else lat
    truth = 280 + 5 * np.cos(np.deg2rad(lat)) + 2 * np.sin(np.deg2rad(2 * lon))
    observed = np.where(np.random.default_rng(0).random(truth.shape) < 0.3, truth, np.nan)
    return xr.Dataset(
        {"tas": (("rlat", "rlon"), observed, {"units": "K", "grid_mapping": "rotated_pole"}),
         "rotated_pole": ((), 0, {**pole, "grid_north_pole_latitude": pole_lat})},
        coords={"rlat": ("rlat", rlat, {"standard_name": "grid_latitude", "units": "degrees", "axis": "Y"}),
                "rlon": ("rlon", rlon, {"standard_name": "grid_longitude", "units": "degrees", "axis": "X"}),
                "lat": (("rlat", "rlon"), lat, {"standard_name": "latitude", "units": "degrees_north"}),
                "lon": (("rlat", "rlon"), lon, {"standard_name": "longitude", "units": "degrees_east"})}), truth


def test_rotated_grid__a_grid_mapping_that_contradicts_the_2d_coordinates_is_refused():
    """Points are read from the 2-D lat/lon and the grid mapping is written out: they must agree."""
    ds, truth = _rotated_grid()
    _, layout = geo.describe(ds, "tas")
    assert layout.space_dims == ("rlat", "rlon") and layout.x == "lon"
    for bad in (_rotated_grid(pole_lat=30.0)[0], _rotated_grid(flip_lat=True)[0]):
        with pytest.raises(CRSError, match=r"'rotated_latitude_longitude'.*disagree.*cell .* by the grid mapping.*"
                                           r"expected the same place.*drop it"):
            geo.describe(bad, "tas")
    no_axes = ds.assign_coords(rlat=ds.rlat.assign_attrs(standard_name="", axis=""))
    # dims without axis metadata cannot be checked against a grid mapping: the 2-D lat/lon are read as they are
    plain = geo.describe(no_axes.drop_vars("rotated_pole").assign(tas=ds.tas.assign_attrs(grid_mapping="")), "tas")[1]
    assert (plain.x, plain.y, plain.space_dims) == ("lon", "lat", ("rlat", "rlon"))


def test_rotated_grid__a_missing_or_unlinked_grid_mapping_is_named_in_the_error():
    ds = _rotated_grid()[0].drop_vars(["lat", "lon"])  # rlat/rlon alone need their grid mapping
    with pytest.raises(CRSError, match=r"grid_mapping attribute names 'rotated_pole', which is not in the dataset"):
        geo.describe(ds.drop_vars("rotated_pole"), "tas")
    unlinked = ds.assign(tas=ds.tas.assign_attrs(grid_mapping=""))
    with pytest.raises(CRSError, match=r"'rotated_pole' holds a grid mapping that no attribute links.*"
                                       r"attrs\['grid_mapping'\] = 'rotated_pole'.*\+proj=ob_tran"):
        geo.describe(unlinked, "tas")
    hinted = "+proj=ob_tran +o_proj=longlat +o_lat_p=39.25 +o_lon_p=0 +lon_0=18"  # the hint, filled in
    a = ds.np.infill("tas", land="none")
    b = unlinked.np.infill("tas", land="none", crs=hinted)
    np.testing.assert_allclose(b.tas_mean.values, a.tas_mean.values, atol=1e-4)


def test_rotated_grid__a_pole_latitude_stored_as_text_is_named_with_its_number():
    """A CF parameter stored as text ('39.25') gets its own message, not pyproj's PROJJSON dump."""
    ds = _rotated_grid()[0].drop_vars(["lat", "lon"])
    ds["rotated_pole"].attrs["grid_north_pole_latitude"] = "39.25"
    with pytest.raises(CRSError, match=r"'rotated_pole' has grid_north_pole_latitude='39\.25', text; expected a "
                                       r"number\. Fix it \(ds\['rotated_pole'\]\.attrs\['grid_north_pole_latitude'\] "
                                       r"= 39\.25\)"):
        geo.describe(ds, "tas")
    ds["rotated_pole"].attrs["grid_north_pole_latitude"] = "north"
    with pytest.raises(CRSError, match=r"grid_north_pole_latitude='north', text; expected a number.*to its number"):
        geo.describe(ds, "tas")
    ds["rotated_pole"].attrs["grid_north_pole_latitude"] = 39.25  # the fix
    assert geo.describe(ds, "tas")[1].crs.to_cf()["grid_north_pole_latitude"] == 39.25


@pytest.mark.parametrize("kind", ["iso strings", "integers", "periods"])
def test_a_time_dim_that_holds_no_dates_is_refused(kind):
    """Read as an extra dim each frame would be infilled alone (+49 % RMSE on ERA5, silently)."""
    ds = grid(times=3)
    times = pd.date_range("2020-01-01", periods=3, freq="h")
    values = {"iso strings": times.strftime("%Y-%m-%dT%H:%M").values, "integers": np.arange(3),
              "periods": times.to_period("h").values}[kind]
    bad = ds.assign_coords(time=values)
    with pytest.raises(TimeAxisError, match=r"'time' holds .* not dates; geonp would predict each of its steps alone"):
        geo.describe(bad)
    renamed = bad.rename(time="member")
    assert geo.describe(renamed)[1].extra_dims == ("member",)


def test_an_empty_selection_is_named():
    ds = grid()
    with pytest.raises(CoordinateError, match=r"no values along \['latitude'\] \(size 0\).*reverse it"):
        geo.describe(ds.sel(latitude=slice(ds.latitude.values.max() + 1, ds.latitude.values.max() + 2)))
    with pytest.raises(CoordinateError, match=r"no values along \['time'\]"):
        geo.describe(ds.isel(time=slice(0, 0)))


def test_time_units_that_did_not_decode_are_named():
    """'hours after 2019-03-04' is not CF: the values stayed numbers, and the error did not say why."""
    ds = grid(times=3).assign_coords(time=("time", np.arange(3.0), {"units": "hours after 2019-03-04"}))
    with pytest.raises(TimeAxisError, match=r"not dates \(its units 'hours after 2019-03-04' are not CF time units"):
        geo.describe(ds)
