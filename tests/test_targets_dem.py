"""targets= a DEM: its elevation is used, its dims kept in raster order, its nodata heights refused."""

import numpy as np
import pytest
import xarray as xr
from test_api import stations

import geonp  # noqa: F401  registers ds.np


def _dem_targets(elev):
    lat, lon = np.linspace(38.5, 40.5, 4), np.linspace(-107.5, -104.0, 5)
    # coordinates listed x before y, as a GeoTIFF gives them; the DEM itself is (y, x)
    return xr.Dataset({"elevation": (("lat", "lon"), elev(lat, lon), {"units": "m"})},
                      coords={"lon": lon, "lat": lat})


def test_a_dem_as_targets_gives_its_elevation_and_its_dim_order():
    """targets= a DEM Dataset (elevation a data variable, coordinates x first): the elevation is used, dims (y, x)."""
    st = stations()
    dem = _dem_targets(lambda lat, lon: 1500.0 + 300.0 * np.add.outer(lat - 38.5, lon + 107.5))
    out = st.np.infill("tmax", targets=dem)
    assert out.tmax_mean.dims == ("time", "lat", "lon")
    flat = st.np.infill("tmax", targets=dem.assign(elevation=dem.elevation * 0 + 1500.0))
    assert not np.allclose(out.tmax_mean.values, flat.tmax_mean.values, atol=0.1)  # the DEM's heights count


def test_targets_without_the_data_elevation_warn_and_nodata_heights_are_refused():
    from geonp.errors import CoordinateError, MissingCovariateWarning

    st = stations()
    bare = xr.Dataset(coords={"lat": np.linspace(38.5, 40.5, 3), "lon": np.linspace(-107.5, -104.0, 3)})
    with pytest.warns(MissingCovariateWarning, match="'tmax' has an elevation .* but targets= has none"):
        st.np.infill("tmax", targets=bare)
    holes = _dem_targets(lambda lat, lon: np.where(np.add.outer(lat, lon) > -66.0, -9999.0, 2000.0))
    with pytest.raises(CoordinateError, match=r"of targets= runs from -9999 to 2000 m.*nodata"):
        st.np.infill("tmax", targets=holes)



def test_calibrated_std_keeps_growing_far_beyond_the_calibrated_gaps():
    """Targets far from the stations keep at least the network's own std.

    The calibration measured gaps between stations; beyond twice its farthest gap bin it cannot say
    that the std stops growing (a DEM grid 100–250 km from the stations got a smaller std than next
    to them).
    """
    st = stations(n=60, times=1)
    far = xr.Dataset(coords={"lat": ("pt", [39.5, 41.0, 42.0, 42.4]), "lon": ("pt", [-105.5, -103.0, -102.0, -101.6]),
                             "elevation": ("pt", [2000.0, 1500.0, 1300.0, 1250.0])})
    cal = st.np.infill("tmax", targets=far, calibrate=True).tmax_std.values[0]
    raw = st.np.infill("tmax", targets=far, calibrate=False).tmax_std.values[0]
    assert np.all(cal[2:] >= raw[2:] - 1e-6)  # the two farthest, 2-3 station spacings beyond the network
    assert cal[3] > cal[0]  # the std grows from among the stations to far beyond them


def test_an_elevation_repeated_in_time_is_one_per_station():
    """An elevation on (time, station), as a long table's to_xarray() gives it (NaN where a station has no row).

    It was silently ignored: Colorado summer 1990, 3.188 against 1.213 °C with the elevation on the stations.
    """
    from geonp.errors import CoordinateError

    st = stations()
    ref = st.np.infill("tmax")
    rows = st.elevation.expand_dims(time=st.time).copy()
    rows[0, 3] = np.nan  # a station without a row at the first time
    long = st.drop_vars("elevation").assign(elevation=rows)  # a data variable on (time, station)
    for kwargs in ({}, {"covariates": "elevation"}):
        np.testing.assert_allclose(long.np.infill("tmax", **kwargs).tmax_mean.values, ref.tmax_mean.values, atol=1e-5)
    np.testing.assert_allclose(st.drop_vars("elevation").np.infill("tmax", covariates=rows).tmax_mean.values,
                               ref.tmax_mean.values, atol=1e-5)
    moving = long.assign(elevation=rows + 100.0 * np.arange(st.sizes["time"])[:, None])
    bare = st.drop_vars("elevation").np.infill("tmax").tmax_mean.values
    np.testing.assert_allclose(moving.np.infill("tmax").tmax_mean.values, bare, atol=1e-5)  # by name: none
    with pytest.raises(CoordinateError, match=r"'hoehe' has dims \('time', 'station'\) and changes along"):
        moving.rename(elevation="hoehe").np.infill("tmax", covariates="hoehe")  # named: refused


def test_targets_take_the_elevation_by_the_data_name_and_a_dem_variable_is_one():
    """covariates="hoehe" on the data finds 'hoehe' on targets= too; a variable named 'dem' is an elevation."""
    st = stations()
    dem = _dem_targets(lambda lat, lon: 1500.0 + 300.0 * np.add.outer(lat - 38.5, lon + 107.5))
    ref = st.np.infill("tmax", targets=dem).tmax_mean.values
    own = st.rename(elevation="hoehe").np.infill("tmax", covariates="hoehe", targets=dem.rename(elevation="hoehe"))
    np.testing.assert_allclose(own.tmax_mean.values, ref, atol=1e-5)
    tif = st.rename(elevation="dem").np.infill("tmax", targets=dem.rename(elevation="dem"))  # a GeoTIFF "dem.tif"
    np.testing.assert_allclose(tif.tmax_mean.values, ref, atol=1e-5)


def test_an_elevation_with_too_little_relief_for_a_trend_warns_with_the_km_hint():
    """Kilometres read as metres drop the elevation trend (Colorado: 2.61 against 0.95 °C): now with a warning."""
    import warnings

    from geonp.errors import MissingCovariateWarning

    st = stations(n=60)
    km = st.assign_coords(elevation=("station", st.elevation.values / 1000.0, {"units": "m"}))
    with pytest.warns(MissingCovariateWarning, match=r"has units 'm' and spreads by only 0\.\d+ m .* 'km'"):
        km.np.infill("tmax")
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingCovariateWarning)
        fixed = km.assign_coords(elevation=km.elevation.assign_attrs(units="km")).np.infill("tmax")
    np.testing.assert_allclose(fixed.tmax_mean.values, st.np.infill("tmax").tmax_mean.values, atol=1e-4)


def test_geopotential_aloft_is_no_elevation_and_outputs_name_the_covariates():
    """ERA5 pressure-level z (500 hPa, ~5,500 m) was taken as terrain height: predictions moved by 2.2 K."""
    from test_api import field

    from geonp import geo

    ds, _ = field(times=3)
    z = xr.DataArray(9.80665 * (5500 + 50 * np.random.default_rng(1).random(ds.t2m.shape[1:])),
                     dims=("latitude", "longitude"), attrs={"units": "m**2 s**-2", "standard_name": "geopotential"})
    surface = ds.assign(z=z.assign_attrs(GRIB_typeOfLevel="surface") / 3)  # ERA5 single levels: orography
    assert geo.describe(surface, "t2m")[1].elevation == "z"
    for aloft in (ds.assign(z=z.assign_coords(isobaricInhPa=500.0)),  # cfgrib's scalar level
                  ds.assign(z=z.assign_attrs(GRIB_typeOfLevel="isobaricInhPa")),
                  ds.assign(z=z).assign_coords(level=("level", [500], {"units": "hPa"})),  # a level in the dataset
                  ds.assign(z=z.expand_dims(time=ds.time, level=[500]).copy() * (1 + ds.time.dt.hour * 0.01))):
        assert geo.describe(aloft, "t2m")[1].elevation is None
    out = surface.np.infill("t2m")
    assert out.attrs["geonp_elevation"] == "z" and ds.np.infill("t2m").attrs["geonp_elevation"] == "none"
