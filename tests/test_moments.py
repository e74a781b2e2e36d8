"""Position moments of BSA-TNP (``position_moments=p``): the local-linear features, invariances, upgrade."""

import copy
from functools import partial

import numpy as np
import pytest
import torch
from _helpers import random_batch
from test_bsa_tnp import TINY

from geonp.errors import ConfigError
from geonp.models import Batch, build_model
from geonp.models.attention import attention
from geonp.models.bsa_tnp import with_position_moments
from geonp.models.layers import PositionMoments

_batch = partial(random_batch, nc=30, nt=17, dx=3)


def _model(**kw):
    """A tiny BSA-TNP with moments whose (zero-initialised) output projections are switched on."""
    model = build_model("bsa-tnp", space_dims=2, time_dims=1, position_moments=3, **TINY, **kw).double()
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, PositionMoments):
                m.out.weight.copy_(0.3 * torch.randn(m.out.weight.shape, generator=g, dtype=torch.float64))
    return model


def _local_linear(a, x, u, xi, ridge):
    """Weighted local-linear regression of ``u`` on ``x`` at ``xi``, from its definition (numpy)."""
    mbar = a @ x
    cxx = (a[:, None] * (x - mbar)).T @ (x - mbar)
    cux = (a[:, None] * (u - a @ u)).T @ (x - mbar)
    var = np.trace(cxx) / x.shape[1]
    lam = ridge(var)
    beta = np.linalg.solve(cxx + lam * np.eye(x.shape[1]), cux.T)  # [s, p]
    return (a @ u) + (xi - mbar) @ beta - (a @ u), (mbar - xi) / np.sqrt(var + 1e-4), np.log(var + 1e-4)


@pytest.mark.parametrize("space_dims", [1, 2, 3])
def test_moment_features__equal_weighted_local_linear_regression(space_dims):
    """The features computed from attention-weighted channels equal the regression done directly."""
    torch.manual_seed(0)
    h, p, nk, nq = 2, 3, 25, 7
    mom = PositionMoments(16, h, space_dims, p).double()  # 16 >= h·(p + s + 1): the identity reads every feature
    z = torch.randn(1, nk, 16, dtype=torch.float64)
    xk = torch.randn(1, nk, space_dims + 1, dtype=torch.float64) * 3
    xq = torch.randn(1, nq, space_dims + 1, dtype=torch.float64) * 3
    a = torch.softmax(torch.randn(1, h, nq, nk, dtype=torch.float64), -1)
    ch = mom.key_channels(z, xk, None)
    assert ch.shape == (1, h, nk, mom.num_channels)
    o = a @ ch
    with torch.no_grad():
        mom.out.weight.copy_(torch.eye(mom.out.weight.shape[0], mom.out.weight.shape[1], dtype=torch.float64))
        got = mom.features(o, xq)[0].numpy()  # [nq, dim]: the first h·(p+s+1) rows are the features
    u = mom.to_u(z).detach().view(nk, h, p).numpy()
    width = p + space_dims + 1
    for head in range(h):
        for i in range(nq):
            corr, off, logv = _local_linear(a[0, head, i].numpy(), xk[0, :, :space_dims].numpy(), u[:, head],
                                            xq[0, i, :space_dims].numpy(), lambda v: 1e-3 * v + 1e-4)
            want = np.concatenate([corr, off, [logv]])
            np.testing.assert_allclose(got[i, head * width:(head + 1) * width], want, rtol=1e-7, atol=1e-9)


def test_moment_features__exact_for_a_linear_field():
    """A channel linear in position is reproduced at the query, whatever the weights (up to the small ridge)."""
    torch.manual_seed(1)
    mom = PositionMoments(4, 1, 2, 1).double()
    xk = torch.randn(1, 40, 2, dtype=torch.float64) * 2
    xq = torch.randn(1, 5, 2, dtype=torch.float64) * 2
    with torch.no_grad():  # u = 1.5 x0 - 2 x1 + 0.7, written into the tokens and read back by to_u
        mom.to_u.weight.zero_()
        mom.to_u.weight[0, :2] = torch.tensor([1.5, -2.0])
        mom.to_u.bias.fill_(0.7)
    z = torch.cat([xk, torch.zeros(1, 40, 2, dtype=torch.float64)], -1)
    a = torch.softmax(torch.randn(1, 1, 5, 40, dtype=torch.float64) * 3, -1)
    o = a @ mom.key_channels(z, xk, None)
    ubar = (a[0, 0] @ (xk[0] @ torch.tensor([1.5, -2.0], dtype=torch.float64) + 0.7))
    truth = xq[0] @ torch.tensor([1.5, -2.0], dtype=torch.float64) + 0.7
    with torch.no_grad():
        mom.out.weight.zero_()
        mom.out.weight[0, 0] = 1.0  # read out the correction of the channel
        corr = mom.features(o, xq)[0, :, 0]
    gap = (truth - ubar).abs()  # what the kernel smoother alone misses: up to several units
    assert float(gap.max()) > 3.0
    assert float((ubar + corr - truth).abs().max()) < 0.01 * float(gap.max())  # the ridge shrinks slopes by < 1 %


def test_bsa_tnp_moments__invariant_to_context_permutation_and_nan_padding():
    """Weighted sums ignore the context's order; padded points (NaN coordinates) get no weight."""
    model, batch = _model(), _batch()
    perm = torch.randperm(batch.xc.shape[1])
    mc = torch.ones(2, 34, dtype=torch.bool)
    mc[:, 30:] = False
    pad_x = torch.full((2, 4, 3), float("nan"), dtype=torch.float64)
    padded = Batch(xc=torch.cat([batch.xc, pad_x], 1), yc=torch.cat([batch.yc, torch.zeros(2, 4, 1).double()], 1),
                   xt=batch.xt, mc=mc)
    with torch.no_grad():
        ref = model(batch).loc
        torch.testing.assert_close(model(Batch(xc=batch.xc[:, perm], yc=batch.yc[:, perm], xt=batch.xt)).loc, ref)
        torch.testing.assert_close(model(padded).loc, ref)


def test_bsa_tnp_moments__tiled_equals_dense_values_and_gradients():
    """The wider values take the tiled kernel's padded path; it matches the dense reference, gradients too."""
    tiled = _model()
    dense = copy.deepcopy(tiled)
    for m in dense.modules():
        if hasattr(m, "backend"):
            m.backend = "dense"
    batch = _batch()
    lt, ld = tiled.loss(batch), dense.loss(batch)
    torch.testing.assert_close(lt, ld, rtol=1e-9, atol=1e-9)
    lt.backward()
    ld.backward()
    for (name, p), q in zip(tiled.named_parameters(), dense.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-7, atol=1e-9, msg=name)


def test_tiled_attention__wider_values_equal_dense():
    """Values wider than queries and keys: tiled (zero-padded q, k) equals dense, with small tiles."""
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 3, 37, 8, generator=g), torch.randn(2, 3, 50, 8, generator=g)
    v = torch.randn(2, 3, 50, 13, generator=g)
    for t in (q, k, v):
        t.requires_grad_(True)
    ref = attention(q, k, v, backend="dense")
    out = attention(q, k, v, backend="tiled", q_tile=16, k_tile=16)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    gr = torch.autograd.grad(ref.square().sum(), (q, k, v))
    go = torch.autograd.grad(out.square().sum(), (q, k, v))
    for a, b in zip(go, gr):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_with_position_moments__same_predictions_then_trainable():
    """The upgrade keeps predictions (to rounding: the wider values change the kernel's summation order)."""
    old = build_model("bsa-tnp", space_dims=2, time_dims=1, proximity_features=True, **TINY).double()
    new = with_position_moments(old, 2)
    assert new.config.position_moments == 2 and old.config.position_moments == 0
    batch = _batch()
    with torch.no_grad():
        torch.testing.assert_close(new(batch).loc, old(batch).loc, rtol=0, atol=1e-13)
        torch.testing.assert_close(new(batch).scale, old(batch).scale, rtol=0, atol=1e-13)
    new.loss(batch).backward()
    assert float(new.blocks[0].attn.moments.out.weight.grad.abs().sum()) > 0
    assert with_position_moments(new, 2) is new
    with pytest.raises(ConfigError, match="already has position_moments=2"):
        with_position_moments(new, 4)
    with pytest.raises(ConfigError, match="position moments need a KRBlock model"):
        with_position_moments(build_model("te-pt-tnp", space_dims=2, time_dims=1))
    odd = build_model("bsa-tnp", space_dims=2, time_dims=1, **TINY)
    odd.register_buffer("extra", torch.zeros(1))  # weights that are not the architecture's
    with pytest.raises(ConfigError, match="weights do not match the architecture.*unexpected \\['extra'\\]"):
        with_position_moments(odd, 2)


def test_bsa_tnp_moments__checkpoint_round_trip(tmp_path):
    """The setting travels in the checkpoint: the loaded model predicts identically."""
    from geonp.checkpoint import load_model, save_model

    model, batch = _model().float().eval(), _batch(dtype=torch.float32)
    loaded = load_model(save_model(model, tmp_path / "m.pt"), expected_name="bsa-tnp")
    assert loaded.config.position_moments == 3
    with torch.no_grad():
        torch.testing.assert_close(loaded(batch).loc, model(batch).loc, rtol=0, atol=0)


@pytest.mark.parametrize(("kw", "phrase"), [
    (dict(position_moments=-1), "position_moments must be >= 0"),
    (dict(position_moments=2, space_metric="geodesic"), "needs planar space coordinates"),
])
def test_position_moments__bad_settings(kw, phrase):
    """Negative channel counts and lon/lat coordinates are refused with a fix."""
    with pytest.raises(ConfigError, match=phrase):
        build_model("bsa-tnp", space_dims=2, time_dims=1, **kw)


def test_position_moments__need_space_columns():
    """A time-only model has no positions to take moments of."""
    with pytest.raises(ConfigError, match="space_dims=0"):
        build_model("bsa-tnp", space_dims=0, time_dims=1, position_moments=2)
