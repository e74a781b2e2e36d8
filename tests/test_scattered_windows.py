"""Small windows for TE-PT-TNP where every gap lies near an observation (scattered gaps), not in holes."""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import geonp  # noqa: F401  registers ds.np
from geonp.model import resolve_model
from geonp.planning import plan_problem
from geonp.prepare import prepare
from geonp.pretrained import SCATTERED_REACH, SCATTERED_WINDOWS, has_scattered_windows, scattered_windows
from geonp.tiling import gap_reach


def field(nlat=24, nlon=30, times=3, keep=0.3, hole=0, seed=4):
    """A smooth field on a regional grid, ``keep`` of the cells observed, and a ``hole`` × ``hole`` hole."""
    lat = 50.0 + 0.25 * np.arange(nlat)
    lon = -6.0 + 0.25 * np.arange(nlon)
    la, lo = np.meshgrid(lat, lon, indexing="ij")
    truth = np.stack([np.sin(la * 2.0 + k / 3) + np.cos(lo * 1.5) for k in range(times)]) + 280.0
    seen = np.random.default_rng(seed).random(truth.shape) < keep
    if hole:
        r, c = (nlat - hole) // 2, (nlon - hole) // 2
        seen[:, r:r + hole, c:c + hole] = False
    coords = {"time": pd.date_range("2019-03-01", periods=times, freq="h"), "latitude": lat, "longitude": lon}
    data = np.where(seen, truth, np.nan).astype("float32")
    return xr.Dataset({"t2m": (("time", "latitude", "longitude"), data, {"units": "K"})}, coords=coords)


def stations(n=150, times=3, keep=0.8, hole=0.0, seed=5):
    """A smooth field at ``n`` stations, ``keep`` observed per frame; none within ``hole`` degrees of the middle."""
    rng = np.random.default_rng(seed)
    lat, lon = 38.0 + 3.0 * rng.random(n), -108.0 + 4.0 * rng.random(n)
    truth = np.stack([np.sin(lat * 2.0 + k / 3) + np.cos(lon * 1.5) for k in range(times)]) + 280.0
    seen = rng.random(truth.shape) < keep
    seen[:, np.hypot(lat - 39.5, lon + 106.0) < hole] = False
    coords = {"time": pd.date_range("2019-03-01", periods=times, freq="MS"), "lat": ("station", lat),
              "lon": ("station", lon)}
    return xr.Dataset({"t2m": (("time", "station"), np.where(seen, truth, np.nan), {"units": "K"})}, coords=coords)


def problem_of(ds, model="te-pt-tnp"):
    prepared, layout, _ = prepare(ds, "t2m", crs=None, covariates=None, land="none")
    return plan_problem(prepared, layout, resolve_model(model), "infill")[0]


def test_gap_reach__scattered_gaps_stay_near_the_data_and_a_hole_reaches_far():
    scattered, holed = problem_of(field()), problem_of(field(keep=0.6, hole=10))
    assert gap_reach(scattered) < SCATTERED_REACH * SCATTERED_WINDOWS["te-pt-tnp"]["halo"]
    assert gap_reach(holed) > 2.0
    # the quantile is of distances to the nearest observation of the same frame, in model units
    xy = scattered.source.km / scattered.unit_km
    values = np.asarray(scattered.data.compute()).reshape(scattered.data.shape[0], -1)
    brute = np.concatenate([np.sqrt(((xy[~np.isfinite(v)][:, None] - xy[np.isfinite(v)][None]) ** 2).sum(-1)).min(1)
                            for v in values])
    assert gap_reach(scattered, quantile=1.0) == pytest.approx(brute.max(), rel=1e-6)
    assert gap_reach(scattered, quantile=0.5) == pytest.approx(np.quantile(brute, 0.5), rel=1e-6)


def test_scattered_windows__only_for_te_pt_tnp_on_scattered_grid_gaps_with_no_windows_set():
    scattered, holed = problem_of(field()), problem_of(field(keep=0.6, hole=10))
    unset = {"tile": None, "halo": None}
    assert scattered_windows("te-pt-tnp", scattered, unset) == SCATTERED_WINDOWS["te-pt-tnp"]
    assert scattered_windows("TE_PT_TNP", scattered, unset) == SCATTERED_WINDOWS["te-pt-tnp"]
    assert scattered_windows("te-pt-tnp", holed, unset) == unset
    assert scattered_windows("bsa-tnp", scattered, unset) == unset
    assert scattered_windows(resolve_model("te-pt-tnp"), scattered, unset) == unset  # a fitted model keeps its own
    assert scattered_windows("te-pt-tnp", scattered, {"tile": 8.0, "halo": None}) == {"tile": 8.0, "halo": None}


def test_infill__te_pt_tnp_takes_small_windows_for_scattered_gaps_and_the_default_ones_for_a_hole():
    ds = field(times=2)
    small = SCATTERED_WINDOWS["te-pt-tnp"]
    auto = ds.np.infill("t2m", model="te-pt-tnp", calibrate=False)
    np.testing.assert_array_equal(auto.t2m_mean, ds.np.infill("t2m", model="te-pt-tnp", calibrate=False,
                                                              **small).t2m_mean)
    assert not np.allclose(auto.t2m_mean, ds.np.infill("t2m", model="te-pt-tnp", calibrate=False, tile=8.0,
                                                       halo=3.0).t2m_mean)
    holed = field(times=2, keep=0.6, hole=10)
    np.testing.assert_array_equal(holed.np.infill("t2m", model="te-pt-tnp", calibrate=False).t2m_mean,
                                  holed.np.infill("t2m", model="te-pt-tnp", calibrate=False, tile=8.0,
                                                  halo=3.0).t2m_mean)


def test_fit__a_calibration_of_te_pt_tnp_keeps_the_windows_infill_would_choose():
    scattered, holed = field(times=2), field(times=2, keep=0.6, hole=10)
    assert has_scattered_windows("te-pt-tnp") and not has_scattered_windows("bsa-tnp")
    fitted = scattered.np.fit("t2m", model="te-pt-tnp", steps=0, progress=False)
    assert (fitted.settings["tile"], fitted.settings["halo"]) == (2.0, 2.0)
    assert holed.np.fit("t2m", model="te-pt-tnp", steps=0, progress=False).settings["tile"] == 8.0
    assert scattered.np.fit("t2m", model="te-pt-tnp", steps=0, progress=False, tile=4.0).settings["tile"] == 4.0
    # data without gaps say nothing about the gaps to come: the default windows
    whole = scattered.fillna(280.0)
    assert whole.np.fit("t2m", model="te-pt-tnp", steps=0, progress=False).settings["tile"] == 8.0


def test_scattered_windows__a_station_network_with_scattered_gaps_takes_them_and_a_missing_region_does_not():
    unset = {"tile": None, "halo": None}
    scattered, holed = problem_of(stations()), problem_of(stations(hole=1.2))
    assert not scattered.source.is_grid
    assert gap_reach(scattered) < SCATTERED_REACH * SCATTERED_WINDOWS["te-pt-tnp"]["halo"] < gap_reach(holed)
    assert scattered_windows("te-pt-tnp", scattered, unset) == SCATTERED_WINDOWS["te-pt-tnp"]
    assert scattered_windows("te-pt-tnp", holed, unset) == unset
    ds = stations(times=2)
    auto = ds.np.infill("t2m", model="te-pt-tnp", calibrate=False)
    np.testing.assert_array_equal(auto.t2m_mean, ds.np.infill("t2m", model="te-pt-tnp", calibrate=False,
                                                              **SCATTERED_WINDOWS["te-pt-tnp"]).t2m_mean)
    assert not np.allclose(auto.t2m_mean, ds.np.infill("t2m", model="te-pt-tnp", calibrate=False, tile=8.0,
                                                       halo=3.0).t2m_mean)
    # predictions at other targets (stations -> grid) fill no gaps: the default windows
    grid = xr.Dataset(coords={"lat": np.linspace(38.5, 40.5, 5), "lon": np.linspace(-107.5, -104.5, 6)})
    at_grid = ds.np.infill("t2m", model="te-pt-tnp", calibrate=False, targets=grid)
    np.testing.assert_array_equal(at_grid.t2m_mean, ds.np.infill("t2m", model="te-pt-tnp", calibrate=False,
                                                                 targets=grid, tile=8.0, halo=3.0).t2m_mean)


def test_fit__te_pt_tnp_with_covariates_is_reproducible_whatever_the_global_random_state():
    """fit(seed=...) seeds the new weights too: the same calibration after any global torch draws."""
    import torch

    ds = stations(times=4).assign_coords(elevation=("station", np.linspace(1500.0, 3000.0, 150)))
    fits = []
    for state in (123, 7):
        torch.manual_seed(state)
        fitted = ds.np.fit("t2m", model="te-pt-tnp", steps=0, progress=False, seed=0)
        assert fitted.normaliser.covariates  # elevation (and time covariates): the target embedding exists
        fits.append(fitted)
    assert fits[0].metadata["calibration"] == fits[1].metadata["calibration"]
    a, b = (f.net.state_dict() for f in fits)
    assert all(torch.equal(a[k], b[k]) for k in a)
