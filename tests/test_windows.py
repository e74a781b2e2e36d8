"""Prediction in windows (geonp.models.windows): equal to the model on each window, invariances, errors."""

import pytest
import torch
from _helpers import random_batch, shift_batch

from geonp.errors import ConfigError, EmptyContextError
from geonp.models import Batch, build_model
from geonp.models.windows import plan_windows, predict_in_windows

TINY_KR = dict(token_dim=16, num_heads=2, head_dim=8, num_layers=2, ff_hidden=(16,), embed_hidden=(16,),
               head_hidden=(16,))
TINY_TE = dict(token_dim=16, num_heads=2, head_dim=4, num_layers=2, ff_hidden=(16,), embed_hidden=(16,),
               head_hidden=(16,), rho_hidden=(16,), phi_hidden=(16,), num_pseudo=4)


def _model(name="bsa-tnp", **kw):
    cfg = TINY_TE if name == "te-pt-tnp" else TINY_KR
    return build_model(name, **{"space_dims": 2, **cfg, **kw}).double().eval()


def _wide(nc=60, nt=50, seed=1, **kw):
    """Tasks on [-4, 4)²: four tiles of edge 4."""
    b = random_batch(nc=nc, nt=nt, dx=2, seed=seed, **kw)
    return Batch(xc=b.xc * 2, yc=b.yc, xt=b.xt * 2, yt=b.yt, zc=b.zc, zt=b.zt)


def test_windows__one_window_is_the_model():
    """A tile and halo covering the whole domain give exactly the model's prediction."""
    model, batch = _model(), _wide()
    with torch.no_grad():
        ref = model(batch)
        got = predict_in_windows(model, batch, tile=100.0, halo=100.0)
    torch.testing.assert_close(got.loc, ref.loc, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(got.scale, ref.scale, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["bsa-tnp", "te-pt-tnp"])
def test_windows__each_target_from_its_own_window(name):
    """Every target equals the model run on its window alone (tile + halo box of context)."""
    model, batch = _model(name, covariate_dims=1), _wide(dz=1)
    tile, halo = 3.0, 1.0
    with torch.no_grad():
        got = predict_in_windows(model, batch, tile=tile, halo=halo, windows_per_call=3)
        windows = plan_windows(batch, 2, tile, halo)
        assert len(windows) > 4  # several windows per task, several calls
        seen = torch.zeros(batch.xt.shape[:2], dtype=torch.int64)
        for w in windows:
            t, c = w.targets, w.context
            sub = Batch(xc=batch.xc[w.task, c][None], yc=batch.yc[w.task, c][None], xt=batch.xt[w.task, t][None],
                        zc=batch.zc[w.task, c][None], zt=batch.zt[w.task, t][None])
            ref = model(sub)
            torch.testing.assert_close(got.loc[w.task, t], ref.loc[0], rtol=1e-10, atol=1e-10)
            torch.testing.assert_close(got.scale[w.task, t], ref.scale[0], rtol=1e-10, atol=1e-10)
            xc = batch.xc[w.task, c]
            lo = batch.xt[w.task, :, :2].min(0).values
            outside = torch.ones(batch.xc.shape[1], dtype=torch.bool)
            outside[c] = False
            xt = batch.xt[w.task, t]
            # the context is exactly the points within halo of the tile holding the targets
            cell_lo = lo + torch.floor((xt[0] - lo) / tile) * tile
            assert bool(((xt >= cell_lo - 1e-12) & (xt <= cell_lo + tile)).all())
            assert bool(((xc >= cell_lo - halo) & (xc <= cell_lo + tile + halo)).all())
            others = batch.xc[w.task, outside]
            assert not bool(((others >= cell_lo - halo) & (others <= cell_lo + tile + halo)).all(1).any())
            seen[w.task, t] += 1
    assert bool((seen == 1).all())  # every target in exactly one window


@pytest.mark.parametrize("name", ["bsa-tnp", "te-pt-tnp"])
def test_windows__shift_and_permutation_invariant(name):
    """Windows follow the data: a shift of +1000 and a permutation of targets and context change nothing."""
    model, batch = _model(name), _wide()
    with torch.no_grad():
        ref = predict_in_windows(model, batch, tile=2.5, halo=1.0)
        moved = predict_in_windows(model, shift_batch(batch, 1000.0), tile=2.5, halo=1.0)
        pc, pt = torch.randperm(batch.xc.shape[1]), torch.randperm(batch.xt.shape[1])
        perm = Batch(xc=batch.xc[:, pc], yc=batch.yc[:, pc], xt=batch.xt[:, pt])
        permuted = predict_in_windows(model, perm, tile=2.5, halo=1.0)
    torch.testing.assert_close(moved.loc, ref.loc, rtol=1e-7, atol=1e-7)
    torch.testing.assert_close(permuted.loc, ref.loc[:, pt], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(permuted.scale, ref.scale[:, pt], rtol=1e-10, atol=1e-10)


def test_windows__padding_is_ignored_and_stays_padding():
    """Padded context and targets (even NaN) change no real prediction; padded targets get loc 0, scale 1."""
    model, batch = _model(), _wide(nc=40, nt=30)
    nan_c = torch.full((2, 5, 2), float("nan"), dtype=torch.float64)
    nan_t = torch.full((2, 4, 2), float("nan"), dtype=torch.float64)
    padded = Batch(xc=torch.cat([batch.xc, nan_c], 1), yc=torch.cat([batch.yc, torch.zeros(2, 5, 1).double()], 1),
                   xt=torch.cat([batch.xt, nan_t], 1),
                   mc=torch.arange(45)[None].expand(2, -1) < 40, mt=torch.arange(34)[None].expand(2, -1) < 30)
    with torch.no_grad():
        ref = predict_in_windows(model, batch, tile=2.0, halo=1.5)
        got = predict_in_windows(model, padded, tile=2.0, halo=1.5)
    torch.testing.assert_close(got.loc[:, :30], ref.loc, rtol=1e-10, atol=1e-10)
    assert bool((got.loc[:, 30:] == 0).all()) and bool((got.scale[:, 30:] == 1).all())


def test_windows__time_columns_are_not_cut():
    """With a time column, every context time stays in each window (only space is tiled)."""
    model = build_model("bsa-tnp", space_dims=2, time_dims=1, **TINY_KR).double().eval()
    b = random_batch(nc=50, nt=20, dx=3, seed=3)
    batch = Batch(xc=b.xc * torch.tensor([2.0, 2.0, 50.0]).double(), yc=b.yc, xt=b.xt * 2)
    windows = plan_windows(batch, 2, 4.0, 0.5)
    times = {round(float(t), 9) for w in windows for t in batch.xc[w.task, w.context, 2]}
    assert len(windows) >= 2 and max(abs(t) for t in times) > 50  # far times kept
    with torch.no_grad():
        assert predict_in_windows(model, batch, tile=4.0, halo=0.5).loc.shape == (2, 20, 1)


def test_windows__bad_arguments():
    """Typed errors that name the fix."""
    model, batch = _model(), _wide()
    with pytest.raises(ConfigError, match="tile=0.0; expected a positive"):
        predict_in_windows(model, batch, tile=0.0, halo=1.0)
    with pytest.raises(ConfigError, match="halo=-1.0; expected a non-negative"):
        predict_in_windows(model, batch, tile=1.0, halo=-1.0)
    with pytest.raises(ConfigError, match="halo=inf; expected a non-negative, finite distance"):
        predict_in_windows(model, batch, tile=1.0, halo=float("inf"))
    with pytest.raises(ConfigError, match="tile=nan; expected a positive, finite"):
        predict_in_windows(model, batch, tile=float("nan"), halo=1.0)
    with pytest.raises(ConfigError, match="metric='manhattan'"):
        plan_windows(batch, 2, 1.0, 1.0, metric="manhattan")
    with pytest.raises(ConfigError, match="windows_per_call=0"):
        predict_in_windows(model, batch, tile=1.0, halo=1.0, windows_per_call=0)
    with pytest.raises(ConfigError, match="no space columns"):
        plan_windows(batch, 0, 1.0, 1.0)
    far = Batch(xc=batch.xc, yc=batch.yc, xt=torch.cat([batch.xt, batch.xt[:, :1] + 100], 1))
    with pytest.raises(EmptyContextError, match="has no context point within halo=1.0; pass a larger halo"):
        predict_in_windows(model, far, tile=1.0, halo=1.0)


def _sphere(lon_c, lat_c, lon_t, lat_t):
    xc = torch.tensor([[[lo, la] for lo, la in zip(lon_c, lat_c)]], dtype=torch.float64)
    xt = torch.tensor([[[lo, la] for lo, la in zip(lon_t, lat_t)]], dtype=torch.float64)
    return Batch(xc=xc, yc=torch.randn(1, xc.shape[1], 1, dtype=torch.float64), xt=xt)


@pytest.mark.parametrize("lon_t, lat_t, lon_c, lat_c", [
    ([179.5, 179.8], [10.0, 10.5], [-179.5, -179.2, -179.8], [10.0, 10.4, 9.7]),  # across the dateline
    ([180.0, 90.0], [89.0, 89.5], [0.0, -90.0, 45.0], [89.0, 89.2, 88.8]),  # over the pole
])
def test_windows__geodesic_windows_see_across_the_dateline_and_the_pole(lon_t, lat_t, lon_c, lat_c):
    """A geodesic model's windows measure great-circle arcs: context 1–2° away counts, whatever its longitude."""
    model = _model(space_metric="geodesic")
    batch = _sphere(lon_c, lat_c, lon_t, lat_t)
    with torch.no_grad():
        got = predict_in_windows(model, batch, tile=1.0, halo=3.0)
        ref = model(batch)
    torch.testing.assert_close(got.loc, ref.loc, rtol=1e-12, atol=1e-12)
    assert all(w.context.tolist() == [0, 1, 2] for w in plan_windows(batch, 2, 1.0, 3.0, metric="geodesic"))


def test_windows__geodesic_halo_is_an_arc_from_the_targets():
    """Context beyond ``halo`` degrees of arc from every target of a tile is left out."""
    batch = _sphere([-179.5, 0.0], [0.0, 0.0], [179.5], [0.0])
    (window,) = plan_windows(batch, 2, 1.0, 2.0, metric="geodesic")
    assert window.context.tolist() == [0]
