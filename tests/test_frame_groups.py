"""Frame groups (``frames_per_task=``): consecutive infill frames predicted from one shared context."""

import pyproj  # noqa: F401  isort: skip

import numpy as np
import pytest
import torch
from test_api import field, stations

import geonp  # noqa: F401  registers ds.np
from geonp.data import Window, frame_groups, infill_tasks
from geonp.errors import ConfigError
from geonp.inference import predict_tasks
from geonp.models import build_model
from geonp.normalise import Normaliser


def _window(frames=7, points=12, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((frames, points))
    values[rng.random(values.shape) < 0.3] = np.nan
    xy = rng.random((points, 2)) * 4
    t = np.arange(frames, dtype=float)
    return Window(values=values, xy=xy, t=t, hours=t, lon=np.zeros(points))


def test_frame_groups__cut_by_absolute_index_whatever_the_frames_asked():
    """The groups of a block depend only on absolute frame indices: a chunk cuts the same groups."""
    got = frame_groups(np.array([4, 5, 6, 7]), 3, 10)
    assert [g.tolist() for g in got] == [[3, 4, 5], [6, 7, 8]]
    assert [g.tolist() for g in frame_groups(np.array([9]), 3, 10)] == [[9]]  # the last group is clipped
    assert [g.tolist() for g in frame_groups(np.arange(3), 1, 3)] == [[0], [1], [2]]
    # counted from a fixed time: the input's first frame is number 7, so groups hold numbers 6-8, 9-11, ...
    numbers = np.arange(10) + 7  # the first frame is number 7: groups hold numbers 6-8, 9-11, ...
    assert [g.tolist() for g in frame_groups(np.array([0, 1, 2, 5]), 3, 10, numbers)] == [[0, 1], [2, 3, 4], [5, 6, 7]]
    assert [g.tolist() for g in frame_groups(np.array([0, 1]), 3, 10, np.arange(10) - 4)] == [[0], [1, 2, 3]]  # < 1970


def test_frame_groups__an_input_that_starts_an_hour_later_gives_the_same_values():
    """Groups were counted from the input's first frame: inputs starting an hour apart moved a day up to 3.15 K."""
    ds, truth = field(times=14)
    rng = np.random.default_rng(1)  # as many observed cells in every frame: every input has one space unit
    hidden = np.stack([rng.permutation(truth[0].size) < 0.6 * truth[0].size for _ in truth]).reshape(truth.shape)
    ds["t2m"] = ds.t2m.where(~hidden)
    full = ds.np.infill("t2m", time_window=3)  # auto: three frames per task
    for start in (1, 2, 3):
        late = ds.isel(time=slice(start, None)).np.infill("t2m", time_window=3)
        keep = slice(7, None)  # frames whose windows and groups lie inside both inputs
        # as one frame per task agrees (the spread planning counts differs with the input: 2e-3); 0.1-0.35 before
        np.testing.assert_allclose(late.t2m_mean.sel(time=ds.time[keep]).values,
                                   full.t2m_mean.isel(time=keep).values, atol=5e-3)


def test_frame_groups__an_axis_missing_an_hour_keeps_the_later_groups():
    """Numbered by index, every group after a missing hour moved an hour (0.17-0.51 K, 28th new-user test)."""
    ds, truth = field(times=16)
    rng = np.random.default_rng(2)
    hidden = np.stack([rng.permutation(truth[0].size) < 0.6 * truth[0].size for _ in truth]).reshape(truth.shape)
    ds["t2m"] = ds.t2m.where(~hidden)
    full = ds.np.infill("t2m", time_window=3)  # auto: three frames per task
    gappy = ds.drop_isel(time=4).np.infill("t2m", time_window=3)
    keep = slice(9, None)  # groups and windows beyond the missing hour's reach
    np.testing.assert_allclose(gappy.t2m_mean.sel(time=ds.time[keep]).values, full.t2m_mean.isel(time=keep).values,
                               atol=5e-3)
    # by numbers: frames 0-3 then 5-8 of the axis are numbers 3k..; a missing number leaves a short group
    got = frame_groups(np.array([2, 3, 4]), 3, 8, numbers=np.array([0, 1, 2, 4, 5, 6, 7, 8]))
    assert [g.tolist() for g in got] == [[0, 1, 2], [3, 4]]


def test_frame_numbers__steps_from_1970_and_calendar_months():
    import cftime
    import pandas as pd

    from geonp.timeaxis import frame_numbers

    assert frame_numbers(pd.date_range("1970-01-01T05:00", periods=3, freq="h").values, 1.0).tolist() == [5, 6, 7]
    assert frame_numbers(pd.date_range("1969-12-31T21:00", periods=2, freq="3h").values, 3.0).tolist() == [-1, 0]
    assert frame_numbers(pd.date_range("1971-03-01", periods=3, freq="MS").values, 730.0).tolist() == [14, 15, 16]
    months = np.array([cftime.DatetimeNoLeap(1971, m, 15) for m in (3, 4, 5)])
    assert frame_numbers(months, 730.0).tolist() == [14, 15, 16]
    assert frame_numbers(None, 1.0).tolist() == []
    hours = pd.DatetimeIndex(["1970-01-01T05:00", "1970-01-01T06:00", "1970-01-01T08:00"]).values
    assert frame_numbers(hours, 1.0).tolist() == [5, 6, 8]  # each time its own number, past a gap


def test_infill_tasks__a_group_shares_the_context_around_its_centre():
    """Context: the frames within the window of the group's centre time; targets: each frame's points in turn."""
    w, targets, norm = _window(), np.array([0, 3, 5]), Normaliser(frame_means=False)
    (task,) = infill_tasks(w, [np.array([2, 3, 4])], targets, norm, 1.0)
    assert sorted(np.unique(task.xc[:, 2]).tolist()) == [2.0, 3.0, 4.0]  # within 1 of the centre, frame 3
    np.testing.assert_array_equal(task.xt[:, 2], np.repeat([2.0, 3.0, 4.0], 3))
    np.testing.assert_array_equal(task.xt[:3, :2], w.xy[targets])
    (alone,) = infill_tasks(w, [3], targets, norm, 1.0)  # the centre frame alone: the same context
    np.testing.assert_array_equal(alone.xc, task.xc)
    (single,) = infill_tasks(w, [np.array([5])], targets, norm, 1.0)  # a group of one is a frame
    (plain,) = infill_tasks(w, [5], targets, norm, 1.0)
    np.testing.assert_array_equal(single.xc, plain.xc)
    np.testing.assert_array_equal(single.xt, plain.xt)


def test_predictions_of_a_target_do_not_depend_on_the_other_targets():
    """What frame groups rely on: a block keeps only its own frames of a group task."""
    w, targets, norm = _window(), np.arange(12), Normaliser(frame_means=False)
    torch.manual_seed(0)
    net = build_model("bsa-tnp", preset="small", space_dims=2, time_dims=1).eval()
    (group,) = infill_tasks(w, [np.array([2, 3, 4])], targets, norm, 1.0)
    (mean, std), = predict_tasks(net, [group])
    part = type(group)(xc=group.xc, yc=group.yc, xt=group.xt[12:24], shift=group.shift, scale=group.scale)
    (m1, s1), = predict_tasks(net, [part])
    np.testing.assert_allclose(m1, mean[12:24], atol=1e-5)
    np.testing.assert_allclose(s1, std[12:24], atol=1e-5)


@pytest.mark.parametrize("chunks", [{"time": 1}, {"time": 2, "latitude": 4}, {"time": 4}])
def test_frame_groups__chunked_equals_unchunked(chunks):
    """Blocks that cut a group in two still predict it from the group's whole context."""
    ds, _ = field(times=7)
    full = ds.np.infill("t2m", halo=1000.0, time_window=2, frames_per_task=3)
    lazy = ds.np.infill("t2m", halo=1000.0, time_window=2, frames_per_task=3, chunks=chunks)
    np.testing.assert_allclose(lazy.t2m_mean.compute(), full.t2m_mean, atol=2e-4)
    np.testing.assert_allclose(lazy.t2m_std.compute(), full.t2m_std, atol=2e-4)


def test_frame_groups__change_only_the_context_windows():
    """One frame per task is the per-frame infill; groups give close, not identical, answers."""
    ds, truth = field(times=6)
    one = ds.np.infill("t2m", time_window=2, frames_per_task=1)
    default = ds.np.infill("t2m", time_window=2)
    np.testing.assert_array_equal(one.t2m_mean.values, default.t2m_mean.values)
    grouped = ds.np.infill("t2m", time_window=2, frames_per_task=3)
    gaps = ds.t2m.isnull().values
    diff = np.abs(grouped.t2m_mean.values - one.t2m_mean.values)[gaps]
    assert 0 < diff.max() < 0.5 * np.nanstd(ds.t2m.values)
    rmse = np.sqrt(np.mean((grouped.t2m_mean.values[gaps] - truth[gaps]) ** 2))
    assert rmse < 0.5 * np.nanstd(ds.t2m.values)


def test_frame_groups__stations_with_frame_means():
    """Station groups keep each frame's own mean (Normaliser.frame_offsets on several target frames)."""
    st = stations(times=6)
    out = st.np.infill("tmax", time_window=2, frames_per_task=3, calibrate=False)
    gaps = st.tmax.isnull().values
    assert np.isfinite(out.tmax_mean.values[gaps]).all()
    # the frames rise by 1 °C each month: each frame's predictions follow its own level
    means = np.nanmean(np.where(gaps, out.tmax_mean.values, np.nan), axis=1)
    assert (np.diff(means) > 0.5).all()


def test_frame_groups__no_time_axis_is_one_frame():
    ds, _ = field(times=1)
    a = ds.isel(time=0).np.infill("t2m", frames_per_task=4)
    b = ds.isel(time=0).np.infill("t2m")
    np.testing.assert_array_equal(a.t2m_mean.values, b.t2m_mean.values)


@pytest.mark.parametrize("bad", [0, 1.5, True, "3"])
def test_frame_groups__bad_size(small_field, bad):
    with pytest.raises(ConfigError, match="frames_per_task=.*expected a whole number of frames >= 1"):
        small_field.np.infill("t2m", frames_per_task=bad)


@pytest.fixture(scope="module")
def small_field():
    return field(times=2)[0]


def test_frames_per_task__auto_groups_three_frames_from_a_window_of_three():
    from geonp.model import frames_per_task

    assert [frames_per_task("auto", h) for h in (0, 1, 2, 3, 6)] == [1, 1, 1, 3, 3]
    assert frames_per_task(5, 1) == 3  # never beyond the window: every frame stays in its group's context
    assert frames_per_task(4, 0) == 1
    assert frames_per_task("auto", 3, "te-pt-tnp") == 1 and frames_per_task(3, 3, "te-pt-tnp") == 3
    ds, _ = field(times=8)
    auto = ds.np.infill("t2m", time_window=3)
    three = ds.np.infill("t2m", time_window=3, frames_per_task=3)
    np.testing.assert_array_equal(auto.t2m_mean.values, three.t2m_mean.values)


def test_cli__frames_per_task(tmp_path, capsys):
    from geonp.cli import main

    ds, _ = field(times=4)
    src = tmp_path / "in.nc"
    ds.to_netcdf(src)
    main(["infill", str(src), "--out", str(tmp_path / "a.zarr"), "--frames-per-task", "2", "--quiet"])
    main(["infill", str(src), "--out", str(tmp_path / "b.zarr"), "--frames-per-task", "auto", "--quiet"])
    ref = ds.np.infill("t2m", frames_per_task=2)
    import xarray as xr

    np.testing.assert_allclose(xr.open_zarr(tmp_path / "a.zarr").t2m_mean, ref.t2m_mean, atol=1e-5)
    with pytest.raises(SystemExit) as exc:
        main(["infill", str(src), "--out", str(tmp_path / "c.zarr"), "--frames-per-task", "two"])
    assert exc.value.code != 0
    assert "geonp: error:" in capsys.readouterr().err and not (tmp_path / "c.zarr").exists()


def test_frame_groups__a_block_predicts_only_its_own_frames(monkeypatch):
    """Time chunks that cut a group: each block encodes the group's context but predicts only its frames."""
    import geonp.inference

    sizes = []
    real = geonp.inference.predict_tasks

    def spy(net, tasks, **kw):
        sizes.extend(t.num_targets for t in tasks)
        return real(net, tasks, **kw)

    monkeypatch.setattr(geonp.inference, "predict_tasks", spy)
    ds, _ = field(times=6)
    points = ds.sizes["latitude"] * ds.sizes["longitude"]
    ds.np.infill("t2m", halo=1000.0, time_window=3, chunks={"time": 1}).compute(scheduler="synchronous")
    assert sizes == [points] * 6
    sizes.clear()
    ds.np.infill("t2m", halo=1000.0, time_window=3, chunks={"time": 3}).compute(scheduler="synchronous")
    assert sizes == [3 * points] * 2
