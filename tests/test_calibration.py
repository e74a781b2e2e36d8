"""Calibration helpers: gap-matched weights for the infill std scale."""

import numpy as np
import pytest

from geonp.calibration import gap_distances, match_weights


def grid_xy(n=20):
    g = np.stack(np.meshgrid(np.arange(n, dtype=float), np.arange(n, dtype=float), indexing="ij"), -1)
    return g.reshape(-1, 2)


def test_gap_distances_see_the_size_of_the_gaps():
    xy = grid_xy()
    values = np.ones((1, 3, len(xy)))
    block = (np.abs(xy[:, 0] - 10) <= 3) & (np.abs(xy[:, 1] - 10) <= 3)  # a 7 x 7 hole
    values[:, :, block] = np.nan
    d = gap_distances(values, xy, np.random.default_rng(0))
    assert len(d) == 3 * 49
    assert d.min() == 1.0 and d.max() == 4.0  # the centre of the hole is 4 cells from the nearest data
    scattered = np.ones((1, 3, len(xy)))
    scattered[:, :, ::7] = np.nan
    assert gap_distances(scattered, xy, np.random.default_rng(0)).max() == 1.0
    assert len(gap_distances(np.ones((1, 2, len(xy))), xy, np.random.default_rng(0))) == 0  # no gaps


def test_gap_distances_cost_is_bounded_by_the_region():
    xy = grid_xy(100)
    values = np.ones((1, 1, len(xy)))
    values[0, 0, ::3] = np.nan
    d = gap_distances(values, xy, np.random.default_rng(1), region=500)
    assert 0 < len(d) <= 500 and d.max() == 1.0


def test_match_weights_reproduce_the_wanted_histogram():
    rng = np.random.default_rng(0)
    have = np.exp(rng.uniform(np.log(0.1), np.log(10), 20000))
    wanted = np.exp(rng.normal(np.log(3.0), 0.3, 5000))
    w = match_weights(have, wanted)
    assert np.average(np.log(have), weights=w) == pytest.approx(np.log(3.0), abs=0.05)
    assert (w[have < 0.5] == 0).all()  # distances the gaps never show count for nothing
    np.testing.assert_array_equal(match_weights(have, np.zeros(0)), np.ones(len(have)))

