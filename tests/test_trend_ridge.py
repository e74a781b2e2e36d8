"""The trend's position columns shrunk by a ridge chosen by leave-one-out, and the infill mean weight."""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pytest
import torch

from geonp.calibration import infill_mean_weight
from geonp.data import Task
from geonp.inference import predict_tasks
from geonp.models import build_model
from geonp.normalise import Normaliser
from geonp.ridge import RIDGE_GRID, fit_trend, ridge_penalty
from geonp.trend import fit_variance, static_basis


def _stations(n=120, seed=0, signal=0.0):
    """Stations with a lapse rate, station noise and (``signal``) a lapse rate that changes across the region."""
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 500, (n, 2))
    e = rng.uniform(1000, 3500, n)
    u = (e - e.mean()) / 1000
    y = 15 - (6.5 + signal * (xy[:, 0] - 250) / 100) * u + rng.normal(0, 1.0, n)
    return xy, e, y


def _design(xy, e):
    basis = static_basis(e, None, xyc=xy)
    return basis, np.c_[np.ones(len(e)), basis.columns(e, None, xy)]


def _brute_loo(design, y, penalty):
    """Leave-one-out mean squared error by refitting without each point in turn."""
    errors = []
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        d = design[keep]
        a = d.T @ d + (0.0 if penalty is None else np.diag(penalty))
        coef = np.linalg.solve(a, d.T @ y[keep])
        errors.append(y[i] - design[i] @ coef)
    return float(np.mean(np.square(errors)))


def test_fit_trend__without_penalised_columns_is_least_squares():
    xy, e, y = _stations()
    _, design = _design(xy, e)
    coef, ridge = fit_trend(design, y)
    np.testing.assert_allclose(coef, np.linalg.lstsq(design, y, rcond=None)[0], rtol=1e-10, atol=1e-12)
    assert ridge == 0.0
    coef2, ridge2 = fit_trend(design, y, np.zeros(design.shape[1], dtype=bool))
    np.testing.assert_array_equal(coef2, coef)
    assert ridge2 == 0.0


def test_fit_trend__large_contexts_are_fitted_by_least_squares(monkeypatch):
    """Beyond RIDGE_MAX_POINTS the few trend parameters are well determined: no selection is paid for."""
    import geonp.ridge

    xy, e, y = _stations(seed=2)
    basis, design = _design(xy, e)
    penalised = np.r_[False, basis.penalised]
    assert fit_trend(design, y, penalised)[1] > 0
    monkeypatch.setattr(geonp.ridge, "RIDGE_MAX_POINTS", len(y) - 1)
    coef, ridge = fit_trend(design, y, penalised)
    assert ridge == 0.0
    np.testing.assert_allclose(coef, np.linalg.lstsq(design, y, rcond=None)[0], rtol=1e-10, atol=1e-12)


def test_fit_trend__keeps_the_ridge_with_the_smallest_leave_one_out_error():
    """The hat-matrix shortcut picks what refitting without each point would pick."""
    xy, e, y = _stations(n=60, seed=1)
    basis, design = _design(xy, e)
    penalised = np.r_[False, basis.penalised]
    coef, ridge = fit_trend(design, y, penalised)
    grid = RIDGE_GRID[::4] + (ridge,)  # a sample of the grid, and the kept one
    loo = {r: _brute_loo(design, y, ridge_penalty(design, penalised, r)) for r in grid}
    assert loo[ridge] <= min(loo.values()) + 1e-9
    pen = ridge_penalty(design, penalised, ridge)
    want = np.linalg.solve(design.T @ design + np.diag(0.0 if pen is None else pen), design.T @ y)
    np.testing.assert_allclose(coef, want, rtol=1e-6, atol=1e-8)


def test_fit_trend__shrinks_position_columns_that_follow_noise_and_keeps_a_real_signal():
    xy, e, y = _stations(seed=2)  # one lapse rate everywhere: the position columns only see noise
    basis, design = _design(xy, e)
    assert basis.size == 11 and basis.penalised.sum() == 9 and not basis.penalised[:2].any()
    penalised = np.r_[False, basis.penalised]
    coef, ridge = fit_trend(design, y, penalised)
    ls = np.linalg.lstsq(design, y, rcond=None)[0]
    assert ridge > 0
    assert np.linalg.norm(coef[penalised]) < 0.5 * np.linalg.norm(ls[penalised])
    assert coef[1] == pytest.approx(-6.5, abs=0.3)  # the lapse rate is not penalised
    xy, e, y = _stations(seed=2, signal=3.0)  # a lapse rate from 14 to -1.0 °C/km across the region
    basis, design = _design(xy, e)
    coef, ridge = fit_trend(design, y, penalised)
    assert ridge <= 1e-2
    x_u = 1 + basis.e_powers + 2  # the X·u column
    assert coef[x_u] / (basis.xy_scale / 100) == pytest.approx(-3.0, rel=0.15)


def test_fit_variance__with_a_penalty_is_the_bayesian_variance_and_zero_penalty_is_least_squares():
    xy, e, y = _stations(seed=3)
    basis, design = _design(xy, e)
    penalised = np.r_[False, basis.penalised]
    targets = design[:5] + 0.3
    resid = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
    plain = fit_variance(design, targets, resid)
    zero = fit_variance(design, targets, resid, penalty=np.zeros(design.shape[1]))
    np.testing.assert_allclose(zero, plain, rtol=1e-6)
    pen = ridge_penalty(design, penalised, 1.0)
    shrunk = fit_variance(design, targets, resid, penalty=pen)
    a = design.T @ design + np.diag(pen)
    h = np.einsum("ij,jk,ik->i", targets, np.linalg.inv(a), targets)
    dof = len(y) - np.trace(np.linalg.solve(a, design.T @ design))
    np.testing.assert_allclose(shrunk, resid @ resid / dof * h - resid @ resid / dof / len(y), rtol=1e-6)
    assert np.all(shrunk < plain)
    assert ridge_penalty(design, penalised, 0.0) is None
    assert ridge_penalty(design, np.zeros(design.shape[1], dtype=bool), 1.0) is None


def test_infill_mean_weight__recovers_the_shrinkage_and_stays_in_zero_to_one():
    rng = np.random.default_rng(0)
    trend = rng.normal(0, 3, 500)
    signal = rng.normal(0, 1, 500)
    y = trend + 0.6 * signal + rng.normal(0, 0.05, 500)
    assert infill_mean_weight(y, trend + signal, trend) == pytest.approx(0.6, abs=0.02)
    assert infill_mean_weight(trend + 2 * signal, trend + signal, trend) == 1.0  # never amplified
    assert infill_mean_weight(trend - signal, trend + signal, trend) == 0.0
    assert infill_mean_weight(y, trend, trend) == 1.0  # no departure to weigh
    weights = np.r_[np.ones(250), np.zeros(250)]  # only the first half counts
    y2 = np.r_[y[:250], trend[250:] + signal[250:]]
    assert infill_mean_weight(y2, trend + signal, trend, weights) == pytest.approx(0.6, abs=0.03)
    y2[300] = np.nan
    assert np.isfinite(infill_mean_weight(y2, trend + signal, trend))


def test_infill_mean_weight__round_trips_and_old_models_keep_the_network_mean():
    d = Normaliser(infill_mean_weight=0.4).to_dict()
    assert Normaliser.from_dict(d).infill_mean_weight == 0.4
    del d["infill_mean_weight"]
    assert Normaliser.from_dict(d).infill_mean_weight == 1.0


def test_predict_tasks__mean_weight_moves_the_mean_towards_the_trend_only():
    rng = np.random.default_rng(1)
    torch.manual_seed(0)
    net = build_model("bsa-tnp", preset="small", space_dims=2, time_dims=0).eval()
    xc, xt = rng.uniform(0, 5, (40, 2)), rng.uniform(0, 5, (7, 2))
    task = Task(xc=xc, yc=rng.normal(size=(40, 1)), xt=xt, shift=3.0, scale=2.0, offset=rng.normal(size=7))
    (m1, s1), = predict_tasks(net, [task])
    (m0, s0), = predict_tasks(net, [task], mean_weight=0.0)
    (mh, sh), = predict_tasks(net, [task], mean_weight=0.5)
    np.testing.assert_allclose(m0, 3.0 + task.offset, rtol=1e-12)
    np.testing.assert_allclose(mh, 0.5 * (m0 + m1), rtol=1e-6)
    np.testing.assert_array_equal(s0, s1)
    np.testing.assert_array_equal(sh, s1)


def _terrain(n=120, seed=0):
    """Stations whose elevation rises westward (mountains on one side) with local relief."""
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 10, (n, 2))
    e = 3000 - 200 * xy[:, 0] + rng.normal(0, 300, n)
    smooth = np.sin(xy[:, 0] / 2) + 0.5 * np.cos(xy[:, 1] / 3)  # a field of position alone
    return xy, e, smooth, rng


def test_follows_ground__a_lapse_rate_does_and_a_field_of_position_alone_does_not():
    from geonp.trend import follows_ground, local_contrasts

    xy, e, smooth, rng = _terrain()
    lapse = smooth - 0.0065 * e + rng.normal(0, 0.1, len(e))
    share, count = local_contrasts(xy, None, lapse, e[:, None])
    assert follows_ground(share[0], count) and share[0] > 0.5 and count == len(e)
    unrelated = smooth + rng.normal(0, 0.1, len(e))
    assert abs(np.corrcoef(unrelated, e)[0, 1]) > 0.5  # elevation and the field correlate over the task
    share, count = local_contrasts(xy, None, unrelated, e[:, None])
    assert not follows_ground(share[0], count)
    share, count = local_contrasts(xy[:3], None, lapse[:3], e[:3, None])
    assert count == 0 and share[0] == 0.0 and not follows_ground(share[0], count)  # no frame with more than k points
    # two covariates at once are each one's own contrast
    land = (xy[:, 1] > 5).astype(float)
    both, _ = local_contrasts(xy, None, lapse, np.c_[land, e])
    np.testing.assert_allclose(both, [local_contrasts(xy, None, lapse, c[:, None])[0][0] for c in (land, e)])


def test_make_task__no_elevation_trend_for_values_that_do_not_follow_the_ground():
    """A target's trend does not change with its elevation, but still follows the position surface."""
    from geonp.data.tasks import make_task
    from geonp.normalise import Normaliser

    xy, e, smooth, rng = _terrain()
    xc, xt = np.c_[xy, np.zeros(len(e))], np.array([[5.0, 5.0, 0.0]] * 2)
    et = np.array([1500.0, 3500.0])
    for y, follows in ((smooth + rng.normal(0, 0.1, len(e)), False), (smooth - 0.0065 * e, True)):
        task = make_task(Normaliser(), xc, y, None, e, xt, None, et)
        change = task.offset[1] - task.offset[0]
        if follows:
            assert change == pytest.approx(-0.0065 * 2000, rel=0.2)
        else:
            assert change == pytest.approx(0.0, abs=1e-9) and task.offset is not None
