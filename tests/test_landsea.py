"""The land–sea trend of infill: finding the mask, smoothing it, fitting it, and using it."""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import geonp  # noqa: F401  registers ds.np
from geonp.errors import CoordinateError
from geonp.geo import describe
from geonp.normalise import Normaliser
from geonp.surface import LAND_SMOOTH_CELLS, find_land
from geonp.trend import smooth_grid, static_basis


def coast(times=3, seed=0, keep=0.5, hole=True):
    """A smooth field 3 K warmer over the sea (west) than over the land (east), with a hole at sea."""
    lat = 50.0 + 0.25 * np.arange(16)
    lon = -6.0 + 0.25 * np.arange(20)
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    land = (lo > -4.6).astype(float)  # a straight north-south coast
    rng = np.random.default_rng(seed)
    truth = np.stack([280 + 0.3 * np.sin(la * 1.7 + k / 4) + 0.3 * np.cos(lo * 1.3) + 3.0 * (1 - smooth_grid(land))
                      for k in range(times)])
    observed = np.where(rng.random(truth.shape) < keep, truth, np.nan)
    if hole:
        observed[:, 4:12, 0:6] = np.nan  # at sea, next to the western edge
    coords = {"time": pd.date_range("2019-03-01", periods=times, freq="h"), "latitude": lat, "longitude": lon}
    ds = xr.Dataset({"t2m": (("time", "latitude", "longitude"), observed.astype("float32"), {"units": "K"})},
                    coords=coords)
    return ds, truth, xr.DataArray(land, dims=("latitude", "longitude"))


def test_land_mask_is_found_by_name_or_standard_name_and_not_as_the_variable():
    ds, _, land = coast()
    assert describe(ds.assign_coords(lsm=land), "t2m")[1].land == "lsm"
    other = ds.assign_coords(mask=land.assign_attrs(standard_name="land_area_fraction"))
    assert describe(other, "t2m")[1].land == "mask"
    assert describe(ds, "t2m")[1].land is None
    lsm_only = xr.Dataset({"lsm": land.expand_dims(time=ds.time).assign_coords(latitude=ds.latitude,
                                                                                    longitude=ds.longitude)})
    assert describe(lsm_only, "lsm")[1].land is None  # infilling the mask itself: no trend on itself
    assert describe(ds.assign_coords(lsm=land), "t2m")[1].to_dict()["land"] == "lsm"
    repeated = ds.assign(lsm=land.expand_dims(time=ds.time))  # ERA5's lsm downloaded beside t2m
    layout = describe(repeated, "t2m")[1]
    assert layout.land == "lsm"
    np.testing.assert_allclose(find_land(repeated, layout), smooth_grid(land.values, LAND_SMOOTH_CELLS).ravel())


def test_find_land__percent_smoothed_on_grids_and_bad_values_refused():
    ds, _, land = coast()
    pct = ds.assign_coords(sftlf=(100 * land).assign_attrs(units="%"))
    got = find_land(pct, describe(pct, "t2m")[1]).reshape(land.shape)
    np.testing.assert_allclose(got, smooth_grid(land.values, LAND_SMOOTH_CELLS))
    bad = ds.assign_coords(lsm=land.where(land > 0))  # NaN over the sea
    with pytest.raises(CoordinateError, match="land-sea mask 'lsm' has .* missing or outside 0..1"):
        find_land(bad, describe(bad, "t2m")[1])
    with pytest.raises(CoordinateError, match="units '%' for percentages"):
        ds.assign_coords(lsm=100 * land).np.infill("t2m")


def test_smooth_grid__keeps_constants_and_spreads_a_step():
    step = np.zeros((9, 9))
    step[:, 5:] = 1.0
    out = smooth_grid(step, 1.0)
    np.testing.assert_allclose(smooth_grid(np.full((5, 7), 0.3), 1.5), 0.3)
    np.testing.assert_array_equal(smooth_grid(step, 0.0), step)
    assert 0 < out[4, 4] < 0.5 < out[4, 5] < 1  # the coast is spread over about a cell each side
    np.testing.assert_allclose(out[:, 0], 0.0, atol=1e-4)
    weights = np.exp(-0.5 * np.arange(-4, 5) ** 2)
    np.testing.assert_allclose(out[4, 4], weights[5:].sum() / weights.sum())  # one Gaussian across the coast


def test_static_basis__land_alone_both_or_neither():
    rng = np.random.default_rng(1)
    e, land = rng.uniform(0, 900, 40), rng.uniform(0, 1, 40)
    both = static_basis(e, land)
    assert both.e_powers == both.l_powers == 2 and both.columns(e, land).shape == (40, 4)
    assert static_basis(None, land[:20]).l_powers == 1 and static_basis(None, land[:20]).e0 is None
    assert static_basis(None, np.ones(40)) is None  # all land: nothing to learn
    assert static_basis(None, land[:9]) is None
    assert static_basis(e, land, elevation=False).e0 is None


def test_static_basis__does_not_extrapolate_beyond_the_context_range():
    rng = np.random.default_rng(3)
    e, land = rng.uniform(200, 900, 40), rng.uniform(0.87, 1.0, 40)  # a window almost all on land
    basis = static_basis(e, land)
    np.testing.assert_allclose(basis.columns(e, land), np.stack(  # inside the range: plain powers
        [(e - basis.e0) / 1e3, ((e - basis.e0) / 1e3) ** 2, land - basis.l0, (land - basis.l0) ** 2], 1))
    # at sea the land terms hold their value at the context's lowest land fraction
    sea, lowest = basis.columns(e[:1], np.zeros(1)), basis.columns(e[:1], np.full(1, land.min()))
    np.testing.assert_allclose(sea, lowest)
    # above the highest station the elevation powers go on along their tangent: linear in elevation
    high = np.array([e.max(), e.max() + 500.0, e.max() + 1000.0])
    cols = basis.columns(high, np.full(3, land.mean()))
    np.testing.assert_allclose(np.diff(cols[:, :2], axis=0)[0], np.diff(cols[:, :2], axis=0)[1])
    top = (e.max() - basis.e0) / 1e3
    np.testing.assert_allclose(cols[1, 1], top ** 2 + 2 * top * 0.5)
    # a quadratic land trend fitted on 0.87–1 no longer sends a target at sea far off
    y = 280.0 + 30.0 * (land - 0.93) ** 2 + 0.1 * rng.standard_normal(40)
    fit = Normaliser(elevation_trend=False).elevation_fit(y, None, land)
    assert abs(float(Normaliser().elevation_offset(fit, None, np.zeros(1))[0])) < 1.0


def test_elevation_fit__recovers_a_land_sea_contrast_beside_a_lapse_rate():
    rng = np.random.default_rng(2)
    e, land = rng.uniform(0, 900, 60), rng.uniform(0, 1, 60)
    y = 285 - 6.5 * e / 1000 - 2.0 * land
    norm = Normaliser()
    fit = norm.elevation_fit(y, e, land)
    e2, land2 = rng.uniform(0, 900, 5), rng.uniform(0, 1, 5)
    got = norm.elevation_offset(fit, e2, land2) - norm.elevation_offset(fit, e, land).mean()
    want = (-6.5 * e2 / 1000 - 2.0 * land2) - (-6.5 * e / 1000 - 2.0 * land).mean()
    np.testing.assert_allclose(got, want, atol=1e-9)


def test_infill__a_land_sea_mask_fills_a_hole_at_sea_with_sea_temperatures():
    ds, truth, land = coast()
    gaps = ds.t2m.isnull().values
    hole = np.zeros_like(gaps)
    hole[:, 4:12, 0:6] = True
    plain = ds.np.infill("t2m", calibrate=False, land="none")
    with_mask = ds.assign_coords(lsm=land).np.infill("t2m", calibrate=False)

    def rmse(out, where):
        return float(np.sqrt(np.mean((out.t2m_mean.values[where] - truth[where]) ** 2)))

    assert rmse(with_mask, hole) < 0.7 * rmse(plain, hole)
    assert rmse(with_mask, gaps) < rmse(plain, gaps)


def test_infill__land_trend_chunked_equals_unchunked_and_needs_the_mask_at_targets():
    ds, _, land = coast(times=4)
    ds = ds.assign_coords(lsm=land)
    full = ds.np.infill("t2m", halo=1000.0, calibrate=False)
    lazy = ds.np.infill("t2m", halo=1000.0, calibrate=False, chunks={"time": 1, "latitude": 8, "longitude": 10})
    np.testing.assert_allclose(lazy.t2m_mean.compute(), full.t2m_mean, atol=2e-4)
    # targets= without a mask: the trend cannot be evaluated there, so it is not fitted at all
    targets = xr.Dataset(coords={"latitude": ds.latitude[::2], "longitude": ds.longitude[::2]})
    at = ds.np.infill("t2m", targets=targets, calibrate=False, land="data")
    plain = ds.drop_vars("lsm").np.infill("t2m", targets=targets, calibrate=False, land="data")
    np.testing.assert_allclose(at.t2m_mean.values, plain.t2m_mean.values, atol=1e-5)


def test_forecast__ignores_the_land_sea_mask():
    ds, _, land = coast(times=8, keep=1.0, hole=False)
    a = ds.np.forecast("t2m", hours=2, calibrate=False)
    b = ds.assign_coords(lsm=land).np.forecast("t2m", hours=2, calibrate=False)
    np.testing.assert_array_equal(a.t2m_mean.values, b.t2m_mean.values)


def test_a_model_fitted_with_a_mask_needs_one(tmp_path):
    """Its tasks removed a land-sea trend: data without a mask are refused, before and after a save."""
    from geonp.errors import ModelMismatchError
    from geonp.model import load_model

    ds, _, land = coast(times=3)
    model = ds.assign_coords(lsm=land).np.fit("t2m", steps=0, progress=False)
    assert model.metadata["land_trend"]
    model.save(tmp_path / "m.geonp")
    for m in (model, load_model(tmp_path / "m.geonp")):
        with pytest.raises(ModelMismatchError, match="fitted with a land-sea mask .* but the data have none"):
            ds.np.infill("t2m", model=m, land="none")
    assert np.isfinite(ds.assign_coords(lsm=land).np.infill("t2m", model=model).t2m_mean.values).all()
    plain = ds.np.fit("t2m", steps=0, progress=False, land="none")
    assert not plain.metadata["land_trend"]
    assert np.isfinite(ds.assign_coords(lsm=land).np.infill("t2m", model=plain).t2m_mean.values).all()


def _coast_points(n=24, seed=0):
    """Points of an n × n grid (one unit apart) with a smoothed straight coast; land to the east."""
    yy, xx = np.meshgrid(np.arange(n, dtype=float), np.arange(n, dtype=float), indexing="ij")
    land = smooth_grid((xx > n / 2).astype(float), LAND_SMOOTH_CELLS)
    keep = np.random.default_rng(seed).random(xx.shape) < 0.6
    return np.stack([xx[keep], yy[keep]], 1), land[keep]


def test_covariate_contrast__a_step_at_the_coast_counts_a_smooth_gradient_does_not():
    from geonp.trend import LAND_CONTRAST_R2, covariate_contrast

    xy, land = _coast_points()
    rng = np.random.default_rng(3)
    noise = 0.05 * rng.standard_normal(len(land))
    gradient = 0.3 * xy[:, 0] + 0.1 * xy[:, 1]  # correlates with the land fraction over the task, no step
    assert np.corrcoef(gradient, land)[0, 1] > 0.7
    assert covariate_contrast(xy, None, gradient + noise, land) < LAND_CONTRAST_R2
    assert covariate_contrast(xy, None, gradient + 3.0 * land + noise, land) > 0.5
    # frames pooled, neighbours taken within each frame: a jump of 100 K between frames changes nothing
    two = np.concatenate([xy, xy]), np.repeat([0.0, 1.0], len(land))
    y2 = np.concatenate([3.0 * land + noise, 100.0 + 3.0 * land - noise])
    assert covariate_contrast(*two, y2, np.concatenate([land, land])) > 0.5
    assert covariate_contrast(xy[:4], None, land[:4], land[:4]) == 0.0  # no frame with more than k points
    assert covariate_contrast(xy, None, gradient, np.ones(len(land))) == 0.0  # all land: nothing to explain


def test_make_task__fits_the_land_trend_only_where_the_values_follow_the_coast():
    from geonp.data.tasks import make_task

    xy, land = _coast_points()
    xt, lt = np.array([[2.0, 2.0], [20.0, 20.0]]), np.array([0.0, 1.0])
    gradient = 280.0 + 0.3 * xy[:, 0]
    norm = Normaliser()
    plain = make_task(norm, xy, gradient, None, None, xt, None, None, lc=land, lt=lt)
    assert plain.offset is None  # a gradient alone: no land trend, the network follows it
    coast_task = make_task(norm, xy, gradient + 3.0 * land, None, None, xt, None, None, lc=land, lt=lt)
    assert coast_task.offset is not None and coast_task.offset[1] - coast_task.offset[0] > 2.0


def test_targets_get_the_bundled_land_fraction_as_the_source_did():
    """A target point's land fraction (and so its prediction) does not depend on the other targets.

    Measured over the target grid's own cells, (0°, 90°E) in the Indian Ocean got the land of a cell
    90° wide when a second target sat at 0° (0.33), and its prediction moved by 2.4 K.
    """
    from geonp.surface import land_like_source

    lat, lon = np.arange(-87.5, 90.0, 5.0), np.arange(0.0, 360.0, 5.0)
    la, lo = np.deg2rad(np.meshgrid(lat, lon, indexing="ij"))
    truth = 280.0 + 3.0 * np.cos(la) * np.cos(lo) + np.sin(la)
    observed = np.where(np.random.default_rng(0).random(truth.shape) < 0.5, truth, np.nan)
    ds = xr.Dataset({"tas": (("lat", "lon"), observed, {"units": "K"})}, coords={"lat": lat, "lon": lon})
    shape = truth.shape
    src_lon, src_lat = np.broadcast_to(lon, shape).reshape(-1), np.broadcast_to(lat[:, None], shape).reshape(-1)
    alone = land_like_source(np.array([90.0]), np.array([0.0]), src_lon, src_lat, shape)
    both = land_like_source(np.array([0.0, 90.0]), np.array([0.0, 0.0]), src_lon, src_lat, shape)
    assert alone[0] == both[1] < 0.05  # open sea, whatever the other targets
    one = ds.np.infill("tas", targets=xr.Dataset(coords={"lat": [0.0], "lon": [90.0]}))
    two = ds.np.infill("tas", targets=xr.Dataset(coords={"lat": [0.0], "lon": [0.0, 90.0]}))
    np.testing.assert_allclose(one.tas_mean.values[0, 0], two.tas_mean.values[0, 1], atol=2e-3)
