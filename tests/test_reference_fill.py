"""A gappy history's diurnal reference is infilled (geonp.reference_fill)."""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pytest
from test_reference import hourly

import geonp  # noqa: F401  registers ds.np
from geonp import reference_fill
from geonp.geo import describe
from geonp.model import resolve_model


def _blobs(ds, seed=0):
    """Squares of 3 x 3 cells missing for 5 hours each, moving about: about 20 % of the values."""
    rng = np.random.default_rng(seed)
    v = ds.t2m.values.copy()
    for start in range(0, v.shape[0] - 4, 2):
        for _ in range(2):
            i, j = rng.integers(0, v.shape[1] - 2), rng.integers(0, v.shape[2] - 2)
            v[start:start + 5, i:i + 3, j:j + 3] = np.nan
    return ds.assign(t2m=(ds.t2m.dims, v, ds.t2m.attrs))


@pytest.fixture(scope="module")
def days():
    return hourly(times=60, nlat=9, nlon=10)


def test_filled_reference__observed_values_kept_gaps_filled_with_their_variance(days):
    gappy = _blobs(days)
    layout = describe(gappy, "t2m")[1]
    inits = np.array([50, 54])
    ref, var = reference_fill.filled_reference(gappy, layout, resolve_model("bsa-tnp"), inits, 24, 4, 3)
    seen = gappy.t2m.notnull().values
    np.testing.assert_array_equal(ref.values[seen], gappy.t2m.values[seen])
    assert (var.values[seen] == 0).all()
    filled = ~seen & np.isfinite(ref.values)
    assert np.isfinite(ref.values[40:55]).all() and (var.values[filled] > 0).all()  # the frames up to the last init
    assert np.isnan(ref.values[55:][~seen[55:]]).all()  # nothing after it is read
    err = ref.values[filled] - days.t2m.values[filled]
    assert np.sqrt(np.mean(err**2)) < 0.5 * days.t2m.std().item()
    assert reference_fill.filled_reference(days, layout, resolve_model("bsa-tnp"), inits, 24, 4, 3) is None


def test_filled_reference__frames_with_nothing_to_fill_from_are_left_out(days, monkeypatch):
    """Each frame is filled from itself: a whole hour missing cost a fill for nothing (73 CPU-s, 28th test)."""
    layout, inits, model = describe(days, "t2m")[1], np.array([50, 54]), resolve_model("bsa-tnp")
    hour = days.assign(t2m=days.t2m.where(days.time != days.time[45]))  # 1.1 % of the frames read
    calls = []
    real = geonp.api.infill

    def counted(part, *args, **kwargs):
        calls.append(part.sizes["time"])
        return real(part, *args, **kwargs)

    monkeypatch.setattr(geonp.api, "infill", counted)
    assert reference_fill.filled_reference(hour, layout, model, inits, 24, 4, 3) is None and not calls
    gappy = _blobs(days)
    gappy["t2m"] = gappy.t2m.where(days.time != days.time[45])
    ref, var = reference_fill.filled_reference(gappy, layout, model, inits, 24, 4, 3)
    assert calls == [np.count_nonzero(gappy.t2m.isnull().any(("latitude", "longitude")).values[:55]) - 1]
    assert np.isnan(ref.values[45]).all() and (var.values[45] == 0).all()  # left to the stand-ins
    seen, gap = gappy.t2m.notnull().values, gappy.t2m.isnull().values
    gap[45] = False
    gap[55:] = False
    np.testing.assert_array_equal(ref.values[seen], gappy.t2m.values[seen])
    assert np.isfinite(ref.values[gap]).all() and (var.values[gap] > 0).all()


def test_a_gappy_history_keeps_a_diurnal_forecast_that_beats_the_variable_itself(days):
    """Before, a value missing a day before left a stand-in days old (RMSE at +1 h 0.28 -> 0.76 K on ERA5)."""
    gappy = _blobs(days)
    history = slice(0, 51)
    inits = days.time.values[[48, 50]]
    complete = days.isel(time=history).np.forecast("t2m", hours=3, init_time=inits, calibrate=False)
    fc = gappy.isel(time=history).np.forecast("t2m", hours=3, init_time=inits, calibrate=False)
    assert fc.attrs["geonp_reference"] == "diurnal"
    assert np.isfinite(fc.t2m_mean.values).all() and np.isfinite(fc.t2m_std.values).all()
    truth = np.stack([days.t2m.values[i + 1:i + 4] for i in (48, 50)])

    def rmse(f):
        return float(np.sqrt(np.mean((f.t2m_mean.values - truth) ** 2)))

    # between the complete history and the stand-ins before, which scored as forecasting the variable itself does
    none = gappy.isel(time=history).np.forecast("t2m", hours=3, init_time=inits, calibrate=False, reference="none")
    assert rmse(complete) < rmse(fc) < 0.7 * rmse(none)
    missing = gappy.t2m.isnull().values[[48, 50]]  # where the forecast starts from a filled value: wider
    assert fc.t2m_std.values[:, 0][missing].mean() > complete.t2m_std.values[:, 0][missing].mean()


def test_the_trend_term_reads_the_filled_history(days):
    """Raw, the last step's trend was 0 wherever y(t0) or y(t0 - 1) was missing (a twenty-eighth new-user test)."""
    import dataclasses

    rng = np.random.default_rng(3)
    gappy = days.assign(t2m=days.t2m.where(rng.random(days.t2m.shape) > 0.3))  # scattered: no late region
    base, history, init = resolve_model("bsa-tnp"), slice(0, 51), days.time.values[[50]]

    def mean(weight):
        model = dataclasses.replace(base, normaliser=dataclasses.replace(base.normaliser, lead_trend_weight=(weight,)))
        return gappy.isel(time=history).np.forecast("t2m", hours=1, init_time=init, model=model,
                                                    calibrate=False).t2m_mean.values[0, 0]

    term = mean(1.0) - mean(0.0)
    g, v = gappy.t2m.isnull().values, days.t2m.values
    missing = g[49] | g[50] | g[26] | g[27]  # a value of the last step, or of the reference's step, missing
    truth = (v[50] - v[49]) - (v[27] - v[26])  # the last step's change less that of the reference y(t - 24 h)
    assert missing.sum() > 30
    np.testing.assert_allclose(term[~missing], truth[~missing], atol=1e-4)  # observed: the term itself
    assert np.abs(term[missing]).min() > 0  # a term wherever a value is missing (raw: 0 there)
    err = np.sqrt(np.mean((term - truth)[missing] ** 2))
    assert err < 0.8 * np.sqrt(np.mean(truth[missing] ** 2))  # closer than the 0 of before (0.108 against 0.151)


def test_the_fill_does_not_warn_of_its_own_subset(days):
    """Its NeverObservedWarning counted the frames it filled (3.3 % for 0.87 % over the input, 29th test)."""
    import warnings

    from geonp.errors import NeverObservedWarning

    gappy = _blobs(days)
    v = gappy.t2m.values.copy()
    v[:55, :3, :3] = np.nan  # a corner observed only after the initial time: never in the frames the fill reads
    gappy["t2m"] = (gappy.t2m.dims, v, gappy.t2m.attrs)
    layout = describe(gappy, "t2m")[1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert reference_fill.filled_reference(gappy, layout, resolve_model("bsa-tnp"), np.array([54]), 24, 4, 3)
    assert not [w for w in caught if issubclass(w.category, NeverObservedWarning)]
