"""Projected x/y in their own units, and rotated-pole grids read from rlat/rlon (geonp.geo, geonp.frames)."""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from geonp import frames, geo
from geonp.errors import CoordinateError, CRSError
from geonp.io import write_crs
from geonp.io.units import is_plain_lonlat

KM = 25.0  # cell size of the synthetic British National Grid field
ROTATED = pyproj.CRS.from_cf({"grid_mapping_name": "rotated_latitude_longitude", "grid_north_pole_latitude": 39.25,
                              "grid_north_pole_longitude": -162.0})  # EURO-CORDEX's pole


def bng_field(units="m", factor=1.0, n=20, times=3):
    """A smooth field with gaps on a ``n`` x ``n`` grid of EPSG:27700 over England, x/y in metres / ``factor``."""
    x = 300_000.0 + KM * 1000 * np.arange(n)
    y = 150_000.0 + KM * 1000 * np.arange(n)
    X, Y = np.meshgrid(x / 1000, y / 1000)
    rng = np.random.default_rng(0)
    truth = 280 + 2 * np.sin(X / 90) + np.cos(Y / 120) + 0.1 * np.arange(times)[:, None, None]
    v = np.where(rng.random(truth.shape) < 0.6, truth, np.nan).astype("float32")
    ds = xr.Dataset({"t2m": (("time", "y", "x"), v, {"units": "K"})},
                    coords={"time": pd.date_range("2020-01-01", periods=times, freq="h"),
                            "y": ("y", y / factor, {"standard_name": "projection_y_coordinate"}),
                            "x": ("x", x / factor, {"standard_name": "projection_x_coordinate"})})
    for c in ("x", "y"):
        if units is not None:
            ds[c].attrs["units"] = units
    return write_crs(ds, "EPSG:27700")


@pytest.fixture(scope="module")
def in_metres():
    return bng_field().np.infill(model="bsa-tnp")


@pytest.mark.parametrize("units, factor", [("km", 1000.0), ("kilometres", 1000.0), ("ft", 0.3048),
                                           ("US survey foot", 1200 / 3937)])
def test_xy_in_other_units_give_the_predictions_of_metres(in_metres, units, factor):
    ds = bng_field(units, factor)
    out = ds.np.infill(model="bsa-tnp")  # before: km read as metres, up to 1.25 K off on ERA5
    np.testing.assert_allclose(out.t2m_mean.values, in_metres.t2m_mean.values, rtol=0, atol=1e-4)
    np.testing.assert_allclose(out.t2m_std.values, in_metres.t2m_std.values, rtol=0, atol=1e-4)
    # the output keeps the input's own coordinates, units and all
    np.testing.assert_array_equal(out.x.values, ds.x.values)
    assert out.x.attrs["units"] == units and out.y.attrs["units"] == units
    # and its CRS counts in those units, so GDAL and rioxarray place it where the input lies (before: the
    # CRS in metres beside x/y in km put the raster 1000 times too close to the projection's origin)
    from geonp.io import read_crs

    crs = read_crs(out)
    assert crs.axis_info[0].unit_conversion_factor == pytest.approx(factor)
    to_lonlat = pyproj.Transformer.from_crs(crs, 4326, always_xy=True)
    truth = pyproj.Transformer.from_crs(27700, 4326, always_xy=True)
    np.testing.assert_allclose(to_lonlat.transform(out.x.values[3], out.y.values[5]),
                               truth.transform(out.x.values[3] * factor, out.y.values[5] * factor), atol=1e-9)
    assert geo.describe(out, "t2m_mean")[1].xy_scale == pytest.approx((1.0, 1.0))  # read back: in the CRS unit


def test_the_input_grid_mapping_gives_way_to_the_one_written():
    """A CF grid-mapping variable of the input (in metres) is not carried beside the output's CRS (in km)."""
    ds = bng_field("km", 1000.0)
    ds = ds.assign_coords(OSGB=xr.Variable((), 0, pyproj.CRS.from_epsg(27700).to_cf())).drop_vars("spatial_ref")
    ds["t2m"].attrs["grid_mapping"] = "OSGB"
    out = ds.np.infill(model="bsa-tnp")
    assert "OSGB" not in out.variables and out.spatial_ref.attrs["crs_wkt"]
    assert {out[v].encoding["grid_mapping"] for v in out.data_vars} == {"spatial_ref"}


def test_a_geotiff_of_km_output_lies_where_the_input_does(tmp_path):
    """Rioxarray writes the coordinates as they are: the CRS beside them must be in km too."""
    rioxarray = pytest.importorskip("rioxarray")
    out = bng_field("km", 1000.0).np.infill(model="bsa-tnp")
    out.t2m_mean.isel(time=0).rio.to_raster(tmp_path / "m.tif")
    back = rioxarray.open_rasterio(tmp_path / "m.tif")
    to_bng = pyproj.Transformer.from_crs(back.rio.crs, 27700, always_xy=True)
    np.testing.assert_allclose(to_bng.transform(float(back.x[0]), float(back.y[0])),
                               (float(out.x[0]) * 1000, float(out.y[0]) * 1000), atol=1e-3)


def test_lonlat_and_projected_targets_against_km_data():
    m, km = bng_field(), bng_field("km", 1000.0)
    lonlat = xr.Dataset(coords={"lat": ("pt", [52.0, 52.5]), "lon": ("pt", [-1.5, -2.0])})
    a = m.np.infill(model="bsa-tnp", targets=lonlat, land="none")
    b = km.np.infill(model="bsa-tnp", targets=lonlat, land="none")  # before: all NaN (NoContextWarning)
    assert np.isfinite(a.t2m_mean).all()
    np.testing.assert_allclose(b.t2m_mean.values, a.t2m_mean.values, rtol=0, atol=1e-4)
    # x/y targets in km against data in metres (the same CRS): the same points as targets in metres
    pts = {"x": ("pt", [420_000.0, 460_000.0]), "y": ("pt", [260_000.0, 300_000.0])}
    in_m = write_crs(xr.Dataset(coords=pts), "EPSG:27700")
    in_km = write_crs(xr.Dataset(coords={k: (d, np.asarray(v) / 1000, {"units": "km"}) for k, (d, v) in pts.items()}),
                      "EPSG:27700")
    c = m.np.infill(model="bsa-tnp", targets=in_m, land="none")
    d = m.np.infill(model="bsa-tnp", targets=in_km, land="none")
    assert np.isfinite(c.t2m_mean).all()
    np.testing.assert_allclose(d.t2m_mean.values, c.t2m_mean.values, rtol=0, atol=1e-4)
    np.testing.assert_array_equal(d.x.values, in_km.x.values)  # the targets' own values come back


@pytest.mark.parametrize("units, scale", [(None, 1.0), ("m", 1.0), ("metre", 1.0), ("meters", 1.0), ("km", 1000.0),
                                          ("kilometre", 1000.0), ("Kilometers", 1000.0), ("ft", 0.3048),
                                          ("feet", 0.3048), ("US survey foot", 1200 / 3937), ("us_survey_foot",
                                                                                             1200 / 3937)])
def test_xy_scale_from_the_units_attribute(units, scale):
    _, layout = geo.describe(bng_field(units))
    assert layout.xy_scale == pytest.approx((scale, scale), rel=1e-12)


def test_units_on_a_crs_in_us_survey_feet():
    ny = pyproj.CRS("EPSG:2263")  # NAD83 / New York Long Island (ftUS)
    x_ft, y_ft = np.array([980_000.0, 1_000_000.0]), np.array([190_000.0, 200_000.0])
    ft = xr.Dataset({"v": (("y", "x"), np.zeros((2, 2)))}, coords={"x": x_ft, "y": y_ft})
    metres = ft.assign_coords(x=("x", x_ft * 1200 / 3937, {"units": "m"}), y=("y", y_ft * 1200 / 3937, {"units": "m"}))
    lonlat = [frames.lonlat_of(*geo.describe(d, crs=ny)) for d in (ft, metres)]
    np.testing.assert_allclose(lonlat[1], lonlat[0], rtol=0, atol=1e-9)
    assert -74.5 < lonlat[0][0].mean() < -73.5 and 40.5 < lonlat[0][1].mean() < 41.0  # New York City


def test_unknown_or_angular_units_on_a_projected_grid_are_refused():
    with pytest.raises(CoordinateError, match="'x' has units 'furlongs', which geonp does not recognise; expected a "
                                              "length.*metre.*attrs\\['units'\\]"):
        geo.describe(bng_field("furlongs"))
    with pytest.raises(CRSError, match="'x' has units 'degrees' \\(an angle\\) but the CRS 'OSGB36 / British National "
                                       "Grid' is projected.*expected a length.*lon/lat"):
        geo.describe(bng_field("degrees"))


def test_plain_lonlat_crs():
    for crs in ("EPSG:4326", "OGC:CRS84", "EPSG:4258", "+proj=longlat +datum=WGS84"):
        assert is_plain_lonlat(pyproj.CRS(crs)), crs
    ob_tran = "+proj=ob_tran +o_proj=longlat +o_lon_p=-162 +o_lat_p=39.25 +lon_0=180 +datum=WGS84 +no_defs"
    for crs in (ROTATED, pyproj.CRS(ob_tran), pyproj.CRS("EPSG:27700"), pyproj.CRS("EPSG:4807")):  # 4807: Paris, grads
        assert not is_plain_lonlat(crs), crs


def rotated_field(two_d=False, n=20, times=3):
    """A field on a EURO-CORDEX-like rotated grid over the North Sea, rlat/rlon only or with real 2-D lat/lon."""
    rlat, rlon = -1.0 + 0.22 * np.arange(n), -10.0 + 0.22 * np.arange(n)
    R, P = np.meshgrid(rlon, rlat)
    lon, lat = pyproj.Transformer.from_crs(ROTATED, "EPSG:4326", always_xy=True).transform(R, P)
    rng = np.random.default_rng(1)
    trend = 0.1 * np.arange(times)[:, None, None]
    truth = 280 + 2 * np.sin(np.deg2rad(lat) * 40) + np.cos(np.deg2rad(lon) * 25) + trend
    v = np.where(rng.random(truth.shape) < 0.6, truth, np.nan).astype("float32")
    ds = xr.Dataset({"tas": (("time", "rlat", "rlon"), v, {"units": "K", "grid_mapping": "rotated_pole"})},
                    coords={"time": pd.date_range("2020-01-01", periods=times, freq="h"),
                            "rlat": ("rlat", rlat, {"standard_name": "grid_latitude", "units": "degrees"}),
                            "rlon": ("rlon", rlon, {"standard_name": "grid_longitude", "units": "degrees"}),
                            "rotated_pole": ((), 0, ROTATED.to_cf())})
    if two_d:
        ds = ds.assign_coords(lat=(("rlat", "rlon"), lat, {"standard_name": "latitude", "units": "degrees_north"}),
                              lon=(("rlat", "rlon"), lon, {"standard_name": "longitude", "units": "degrees_east"}))
    return ds, lon, lat


def test_rotated_pole_rlat_rlon_are_transformed_to_real_positions():
    ds, lon, lat = rotated_field()
    _, layout = geo.describe(ds)
    assert (layout.x, layout.y, layout.geographic, layout.plain_lonlat) == ("rlon", "rlat", True, False)
    got = frames.lonlat_of(ds, layout)
    np.testing.assert_allclose(got[0], lon.ravel(), atol=1e-9)
    np.testing.assert_allclose(got[1], lat.ravel(), atol=1e-9)
    frame = frames.make_frame(ds, layout)
    assert (frame.lon0, frame.lat0) == pytest.approx(frames.centre_of(lon, lat))  # not (-8, 1): the rotated centre


@pytest.mark.parametrize("how", ["grid_mapping", "ob_tran"])
def test_rotated_grid_predicts_like_the_same_grid_with_2d_lonlat(how):
    ds, _, _ = rotated_field()
    ref, _, _ = rotated_field(two_d=True)
    kwargs = {}
    if how == "ob_tran":  # the same rotation as a PROJ string, given with crs=
        ds = ds.drop_vars("rotated_pole")
        del ds.tas.attrs["grid_mapping"]
        kwargs["crs"] = "+proj=ob_tran +o_proj=longlat +o_lon_p=0 +o_lat_p=39.25 +lon_0=18 +datum=WGS84 +no_defs"
    tg = xr.Dataset(coords={"lat": ("station", [51.5, 52.5]), "lon": ("station", [4.0, 6.0])})
    want = ref.np.infill(model="bsa-tnp")  # land fraction, frame and distances from the real positions
    got = ds.np.infill(model="bsa-tnp", **kwargs)  # before: rlat/rlon read as lon/lat (land in the wrong place)
    np.testing.assert_allclose(got.tas_mean.values, want.tas_mean.values, rtol=0, atol=1e-4)
    np.testing.assert_allclose(got.tas_std.values, want.tas_std.values, rtol=0, atol=1e-4)
    np.testing.assert_array_equal(got.rlat.values, ds.rlat.values)
    want_t = ref.np.infill(model="bsa-tnp", targets=tg, land="none")
    got_t = ds.np.infill(model="bsa-tnp", targets=tg, land="none", **kwargs)  # before: NaN
    assert np.isfinite(want_t.tas_mean).all()
    np.testing.assert_allclose(got_t.tas_mean.values, want_t.tas_mean.values, rtol=0, atol=1e-4)


def test_rotated_rlat_rlon_without_units_are_not_labelled_latitude_longitude():
    from geonp.output import space_coords

    ds, _, _ = rotated_field()
    for name in ("rlat", "rlon"):
        ds[name].attrs = {}
    _, layout = geo.describe(ds)
    assert not layout.plain_lonlat
    assert all("units" not in c.attrs for c in space_coords(ds, layout).values())  # not CF latitude/longitude
    plain = xr.Dataset({"t": (("lat", "lon"), np.zeros((2, 3), "float32"))}, coords={"lat": [50.0, 51.0],
                                                                                   "lon": [0.0, 1.0, 2.0]})
    coords = space_coords(plain, geo.describe(plain)[1])  # plain lat/lon without units: CF's
    assert (coords["lat"].attrs["units"], coords["lon"].attrs["units"]) == ("degrees_north", "degrees_east")


def test_2d_lonlat_without_a_grid_mapping_writes_no_crs_on_the_grid_axes(tmp_path):
    """WGS 84 would describe the 2-D lat/lon, not rlat/rlon: rioxarray would put the grid off West Africa."""
    import geonp

    ref, _, _ = rotated_field(two_d=True)
    bare = ref.drop_vars("rotated_pole").copy(deep=True)
    del bare.tas.attrs["grid_mapping"]
    out = bare.np.infill(model="bsa-tnp", land="none")
    assert "spatial_ref" not in out.coords and "grid_mapping" not in out.tas_mean.encoding
    assert out.lat.dims == ("rlat", "rlon")
    geonp.to_zarr(out, tmp_path / "bare.zarr", progress=False)
    back = xr.open_zarr(tmp_path / "bare.zarr", decode_coords="all")
    assert back.rio.crs is None and back.lat.dims == ("rlat", "rlon")
    # with the grid mapping the rotated CRS is the axes' own, and it is written
    kept = ref.np.infill(model="bsa-tnp", land="none")
    gm = kept.spatial_ref.attrs
    assert gm["grid_mapping_name"] == "rotated_latitude_longitude"
    assert (gm["grid_north_pole_latitude"], gm["grid_north_pole_longitude"]) == (39.25, -162.0)
    np.testing.assert_allclose(out.tas_mean.values, kept.tas_mean.values, rtol=0, atol=1e-4)


def test_an_axis_in_radians_labelled_degrees_is_refused():
    """An rlat in radians beside an rlon in degrees steps 180/π times finer: refused, with the conversion as the fix."""
    ds, _, _ = rotated_field()
    radians = ds.assign_coords(rlat=np.deg2rad(ds.rlat).assign_attrs(ds.rlat.attrs))
    with pytest.raises(CoordinateError, match=r"'rlat' steps by 0\.00384 while 'rlon' steps by 0\.22.*180/π.*"
                                              r"radians taken as degrees.*np\.rad2deg"):
        geo.describe(radians)
    # the same values with their true units are fine: axis_scale brings them to degrees
    labelled = radians.assign_coords(rlat=radians.rlat.assign_attrs(units="radians"))
    assert geo.describe(labelled)[1].xy_scale[1] == pytest.approx(np.degrees(1.0))
    # plain latitude/longitude too, and the suggested fix reads as the original grid
    plain = xr.Dataset({"t": (("lat", "lon"), np.zeros((4, 5), "float32"))},
                       coords={"lat": np.deg2rad(50.0 + 0.25 * np.arange(4)), "lon": 0.25 * np.arange(5)})
    with pytest.raises(CoordinateError, match=r"'lat' looks like radians"):
        geo.describe(plain)
    fixed = plain.assign_coords({"lat": np.rad2deg(plain["lat"]).assign_attrs(plain["lat"].attrs)})
    assert geo.describe(fixed)[1].is_grid


def test_a_rotated_grid_out_of_range_names_its_grid_longitude():
    """A rotated pole's rlon past 360 is a 'grid longitude' in the message, not a longitude on the Earth."""
    ds, _, _ = rotated_field()
    far = ds.assign_coords(rlon=(ds.rlon + 400.0).assign_attrs(ds.rlon.attrs))
    with pytest.raises(CoordinateError, match=r"^grid longitude 'rlon' has values from 390 to 394\.18"):
        geo.describe(far)
    plain = xr.Dataset({"t": (("lat", "lon"), np.zeros((2, 3), "float32"))},
                       coords={"lat": [50.0, 51.0], "lon": [400.0, 401.0, 402.0]})
    with pytest.raises(CoordinateError, match=r"^longitude 'lon' has values from 400"):
        geo.describe(plain)
