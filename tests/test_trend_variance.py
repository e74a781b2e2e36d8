"""The static trend's estimation variance in the predictive std (geonp.trend.fit_variance)."""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pytest

from geonp.data import tasks
from geonp.data.tasks import make_task
from geonp.normalise import Normaliser
from geonp.trend import fit_variance, nearest_indices, neighbour_mean


def _line(n=40, seed=0):
    rng = np.random.default_rng(seed)
    e = rng.uniform(1000, 3000, n)
    y = 20 - 0.0065 * e + rng.normal(0, 0.5, n)
    return e, y


def test_fit_variance__is_the_textbook_slope_term_of_a_straight_line():
    e, y = _line()
    design = np.c_[np.ones_like(e), e]
    coef = np.linalg.lstsq(design, y, rcond=None)[0]
    resid = y - design @ coef
    e_t = np.array([e.mean(), 500.0, 2000.0, 4500.0])
    got = fit_variance(design, np.c_[np.ones_like(e_t), e_t], resid)
    s2 = resid @ resid / (len(e) - 2)
    want = s2 * (e_t - e.mean()) ** 2 / np.sum((e - e.mean()) ** 2)  # σ² (h − 1/n) for y = a + b e
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-15)
    assert got[0] == pytest.approx(0.0, abs=1e-12) and got[3] > got[1] > got[2] > 0


def test_fit_variance__no_residual_degrees_of_freedom_gives_zero():
    design = np.c_[np.ones(2), [1.0, 2.0]]
    assert np.all(fit_variance(design, np.c_[np.ones(3), [0.0, 5.0, 9.0]], np.zeros(2)) == 0)


def test_fit_variance__does_not_depend_on_the_columns_offset_or_units():
    e, y = _line()
    e_t = np.array([800.0, 3500.0])

    def var(shift, unit):
        d = np.c_[np.ones_like(e), (e - shift) / unit, ((e - shift) / unit) ** 2]
        dt = np.c_[np.ones_like(e_t), (e_t - shift) / unit, ((e_t - shift) / unit) ** 2]
        coef = np.linalg.lstsq(d, y, rcond=None)[0]
        return fit_variance(d, dt, y - d @ coef)

    np.testing.assert_allclose(var(0.0, 1.0), var(2000.0, 1000.0), rtol=1e-6)


def test_make_task__adds_the_trend_variance_to_the_std_in_data_units():
    e, y = _line(n=60)
    rng = np.random.default_rng(1)
    xc = np.c_[rng.uniform(0, 10, (60, 2)), np.zeros(60)]
    xt = np.array([[5.0, 5.0, 0.0], [5.0, 5.0, 0.0]])
    et = np.array([e.mean(), 4500.0])  # at the context's mean elevation, and far above its highest station
    task = make_task(Normaliser(), xc, y, None, e, xt, None, et)
    assert task.offset_var is not None and task.offset_var[1] > 10 * max(task.offset_var[0], 1e-12)
    mean, std = task.to_data(np.zeros(2), np.ones(2))
    np.testing.assert_allclose(std, np.sqrt(task.scale**2 + task.offset_var))
    np.testing.assert_allclose(task.select_targets(np.array([1])).offset_var, task.offset_var[1:])


def test_make_task__frame_trend_variance_too_and_switch_off(monkeypatch):
    rng = np.random.default_rng(2)
    n = 3 * 40
    e = rng.uniform(1000, 3000, n)
    t = np.repeat([0.0, 1.0, 2.0], 40)
    y = 10 * t - 0.0065 * e + rng.normal(0, 0.3, n)  # frame means far apart: one intercept per frame
    xc = np.c_[rng.uniform(0, 10, (n, 2)), t]
    xt = np.array([[5.0, 5.0, 1.0], [5.0, 5.0, 1.0]])
    et = np.array([2000.0, 5000.0])
    task = make_task(Normaliser(), xc, y, None, e, xt, None, et)
    assert task.offset_var is not None and task.offset_var[1] > task.offset_var[0] >= 0
    monkeypatch.setattr(tasks, "TREND_VARIANCE", False)
    assert make_task(Normaliser(), xc, y, None, e, xt, None, et).offset_var is None


def test_make_task__no_trend_no_variance():
    rng = np.random.default_rng(3)
    xc = np.c_[rng.uniform(0, 10, (30, 2)), np.zeros(30)]
    task = make_task(Normaliser(), xc, rng.normal(size=30), None, None, xc[:3], None, None)
    assert task.offset_var is None
    _, std = task.to_data(np.zeros(3), np.ones(3))
    np.testing.assert_allclose(std, task.scale)


def test_fit_variance__with_neighbours_is_the_contrast_to_them():
    e, y = _line()
    design = np.c_[np.ones_like(e), e / 1000]
    coef = np.linalg.lstsq(design, y, rcond=None)[0]
    resid = y - design @ coef
    nb = np.array([[0, 1, 2, 3], [4, 5, 6, 7]])
    e_t = np.array([e[:4].mean(), 4500.0])  # the first target shares its neighbours' mean elevation
    got = fit_variance(design, np.c_[np.ones(2), e_t / 1000], resid, neighbours=nb)
    s2 = resid @ resid / (len(e) - 2)
    contrast = e_t / 1000 - (e / 1000)[nb].mean(1)
    want = s2 * contrast**2 / np.sum((e / 1000 - e.mean() / 1000) ** 2)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-15)
    assert got[0] == pytest.approx(0.0, abs=1e-12) and got[1] > 0


def test_nearest_indices__match_a_sort():
    rng = np.random.default_rng(4)
    xref, xq = rng.uniform(0, 10, (300, 2)) + 1e6, rng.uniform(0, 10, (600, 2)) + 1e6  # far from the origin
    got = nearest_indices(xq, xref, 4)
    d = ((xq[:, None] - xref[None]) ** 2).sum(-1)
    np.testing.assert_array_equal(np.sort(got, 1), np.sort(np.argsort(d, 1)[:, :4], 1))
    assert nearest_indices(xq[:3], xref[:2], 4).shape == (3, 2)


def test_nearest_indices__exclude_drops_each_querys_own_point():
    rng = np.random.default_rng(5)
    xy = rng.uniform(0, 10, (200, 2))
    q = np.arange(0, 200, 7)
    got = nearest_indices(xy[q], xy, 3, exclude=q)
    assert not (got == q[:, None]).any()
    d = ((xy[q][:, None] - xy[None]) ** 2).sum(-1)
    d[np.arange(len(q)), q] = np.inf
    np.testing.assert_array_equal(np.sort(got, 1), np.sort(np.argsort(d, 1)[:, :3], 1))
    assert nearest_indices(xy[:1], xy[:1], 3, exclude=np.array([0])).shape == (1, 0)


def test_neighbour_mean__averages_ties_whatever_the_order():
    # a station's copies on several frames lie at one distance with different frame columns: which of
    # them made the k-th neighbour depended on the order of the stations (the std moved by up to 11 %)
    rng = np.random.default_rng(6)
    xy = np.repeat(rng.uniform(0, 10, (40, 2)), 3, axis=0)  # each point on 3 frames
    values = np.c_[np.tile(np.eye(3), (40, 1)), rng.normal(size=120)]
    q = xy[::9] + 0.0
    got = neighbour_mean(values, q, xy, 4)
    perm = rng.permutation(120)
    np.testing.assert_allclose(neighbour_mean(values[perm], q, xy[perm], 4), got, atol=1e-12)
    # the query's own 3 copies and a third of the next point's 3 copies each
    d = ((q[:, None] - xy[None]) ** 2).sum(-1)
    order = np.argsort(d, 1, kind="stable")
    second = order[:, 3:6]
    want = (values[order[:, :3]].sum(1) + values[second].mean(1)) / 4
    np.testing.assert_allclose(got, want, atol=1e-12)
    distinct = rng.uniform(0, 10, (50, 2))  # no ties: the plain mean of the k nearest
    v = rng.normal(size=(50, 2))
    idx = nearest_indices(distinct[:7], distinct, 4)
    np.testing.assert_allclose(neighbour_mean(v, distinct[:7], distinct, 4), v[idx].mean(1), atol=1e-12)
