"""Extra dims (ensemble member, pressure level) are separate problems: each index as if selected first."""

import numpy as np
import pytest
import xarray as xr
from test_api import field, stations

import geonp  # noqa: F401  registers ds.np
from geonp.errors import NoContextWarning, NoDataError


def _members(*parts, dim="member"):
    return xr.concat(list(parts), dim=dim).assign_coords({dim: np.arange(len(parts)) + 1})


def test_members_with_other_gap_patterns_get_their_own_units():
    """A sparse and a dense member predict exactly as each would alone (each its own space unit)."""
    sparse, _ = field(seed=1, keep=0.2)
    dense, _ = field(seed=2, keep=0.8)
    out = _members(sparse, dense).assign_coords(number=("member", [5, 7])).np.infill("t2m")
    assert out.t2m_mean.dims == ("member", "time", "latitude", "longitude")
    assert out.number.dims == ("member",) and list(out.number.values) == [5, 7]  # coordinates along the dim kept
    for k, alone in ((1, sparse), (2, dense)):
        ref = alone.np.infill("t2m")
        for v in ("t2m_mean", "t2m_std", "t2m_filled"):
            np.testing.assert_array_equal(out[v].sel(member=k).values, ref[v].values)
    assert out.attrs["geonp_model"] == ref.attrs["geonp_model"]


def test_extra_dim_in_the_middle_keeps_the_input_order():
    a, _ = field(seed=1, keep=0.3)
    b, _ = field(seed=2, keep=0.6)
    both = _members(a, b, dim="level").transpose("time", "level", "latitude", "longitude")
    out = both.np.infill("t2m")
    assert out.t2m_mean.dims == out.t2m_filled.dims == ("time", "level", "latitude", "longitude")
    np.testing.assert_array_equal(out.t2m_mean.sel(level=2).values, b.np.infill("t2m").t2m_mean.values)


def test_a_member_without_gaps_is_predicted_and_one_without_data_is_nan():
    """The whole has gaps: a complete member still gets mean and std; an empty one NaN, with a warning."""
    a, _ = field(seed=1)
    complete = a.fillna(float(a.t2m.mean()))
    empty = a.where(a.t2m.isnull())
    with pytest.warns(NoContextWarning, match=r"1 of 3 indices of 'member' \(member=3\) have fewer than two") as rec:
        out = _members(a, complete, empty).np.infill("t2m")
    assert rec[0].filename == __file__  # attributed to the caller's line, not to geonp's
    np.testing.assert_array_equal(out.t2m_mean.sel(member=1).values, a.np.infill("t2m").t2m_mean.values)
    assert np.isfinite(out.t2m_mean.sel(member=2).values).all() and np.isfinite(out.t2m_std.sel(member=2).values).all()
    np.testing.assert_array_equal(out.t2m_filled.sel(member=2).values, complete.t2m.values)
    assert np.isnan(out.t2m_mean.sel(member=3).values).all() and np.isnan(out.t2m_std.sel(member=3).values).all()
    assert np.isnan(out.t2m_filled.sel(member=3).values).all()
    assert list(out.member.values) == [1, 2, 3]


def test_two_extra_dims_chunked_equal_each_selection():
    """Member × level, chunked one index at a time and lazily: each cell equals its own selection."""
    cells = [[field(seed=s, keep=k)[0] for s, k in ((1, 0.3), (2, 0.7))] for _ in range(2)]
    cells[1] = [c + 5.0 for c in cells[1]]
    ds = xr.concat([_members(*row, dim="level") for row in cells], dim="member").assign_coords(member=[10, 20])
    out = ds.np.infill("t2m", chunks={"member": 1, "level": 1})
    assert out.t2m_mean.chunks is not None
    np.testing.assert_array_equal(out.t2m_mean.sel(member=20, level=2).values,
                                  cells[1][1].np.infill("t2m").t2m_mean.values)


def test_station_members_calibrate_each_on_its_own():
    """Station infill calibrates on the input: each member on its own values."""
    st = stations()
    shifted = st.copy()
    shifted["tmax"] = st.tmax * 3.0
    out = _members(st, shifted).np.infill("tmax")
    np.testing.assert_array_equal(out.tmax_std.sel(member=2).values, shifted.np.infill("tmax").tmax_std.values)


def test_forecast_members_alone_and_empty():
    full, _ = field(seed=3)
    full = full.fillna(float(full.t2m.mean()))
    sparse = full.where(np.random.default_rng(0).random(full.t2m.shape) < 0.3)
    with pytest.warns(NoContextWarning, match="indices of 'member'"):
        out = _members(full, sparse, full * np.nan).np.forecast("t2m", hours=1, calibrate=False)
    assert out.t2m_mean.dims == ("member", "init_time", "lead_time", "latitude", "longitude")
    ref = sparse.np.forecast("t2m", hours=1, calibrate=False)
    np.testing.assert_array_equal(out.t2m_mean.sel(member=2).values, ref.t2m_mean.values)
    assert np.isnan(out.t2m_mean.sel(member=3).values).all()


def test_no_member_with_two_values_is_refused():
    a, _ = field(seed=1)
    one = a.where(a.t2m == a.t2m.max())  # a single observed value
    with pytest.raises(NoDataError, match=r"no index of \['member'\] has two observed values of 't2m'"):
        _members(one, one).np.infill("t2m")

