"""geonp on the real data in ../shared/data (skipped when the folder is absent)."""

import pyproj  # noqa: F401  isort: skip

import os
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import geonp

DATA = Path(os.environ.get("GEONP_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
ERA5 = DATA / "era5-2mt-2019-03-uk.grib"
COLORADO = DATA / "colorado_monthly_met_1895_1997.nc"


@pytest.mark.skipif(not ERA5.exists(), reason="shared ERA5 data not available")
def test_era5_zero_shot_infill_beats_nearest_neighbour_scale(tmp_path):
    ds = geonp.open_dataset(ERA5).isel(time=slice(300, 305)).load()
    rng = np.random.default_rng(0)
    hidden = rng.random(ds.t2m.shape) < 0.9
    out = ds.where(~hidden).np.infill("t2m", time_window=1)
    err = (out.t2m_mean - ds.t2m).values[hidden]
    rmse = float(np.sqrt(np.mean(err**2)))
    assert rmse < 1.2  # K; classical baselines on this task: 0.69 (GP) to 0.90 (nearest)
    z = (err / out.t2m_std.values[hidden])
    assert 0.85 < np.mean(np.abs(z) < 1.96) <= 1.0
    path = geonp.to_zarr(out, tmp_path / "t2m.zarr", progress=False)
    back = xr.open_zarr(path, decode_coords="all")
    assert back.rio.crs.to_epsg() == 4326
    assert "standard_name" not in back.t2m_std.attrs  # cfgrib says standard_name "unknown": no CF name to modify
    assert not any(k.startswith("GRIB_") for k in back.t2m_filled.attrs)  # only the output's own attributes
    assert back.t2m_mean.attrs["units"] == "K"


@pytest.mark.skipif(not COLORADO.exists(), reason="shared Colorado data not available")
def test_colorado_stations_use_elevation_when_fitting():
    ds = geonp.open_dataset(COLORADO)[["tmax"]].sel(time=slice("1960-01", "1960-12")).load()
    model = ds.np.fit("tmax", steps=2, progress=False)
    assert "elevation" in model.normaliser.covariates and "doy" in model.normaliser.covariates
    out = ds.np.infill("tmax", model=model)
    filled = out.tmax_filled.values
    assert np.isfinite(filled).all()
    obs = np.isfinite(ds.tmax.values)
    np.testing.assert_array_equal(filled[obs], ds.tmax.values[obs])
