"""Distance-to-data features of BSA-TNP (``proximity_features=True``): values, invariances, upgrade."""

import copy
import math
from functools import partial

import numpy as np
import pytest
import torch
from _helpers import random_batch, shift_batch
from test_bsa_tnp import TINY

from geonp.errors import ConfigError
from geonp.models import Batch, build_model
from geonp.models.bias import pairwise_sqdist
from geonp.models.bsa_tnp import with_proximity_features
from geonp.models.proximity import num_proximity_features, proximity_features

_batch = partial(random_batch, nc=30, nt=17, dx=3)


def _brute(xt, xc, mc, space_dims, time_dims):
    """The features from their definition, one target at a time, in numpy."""
    xt, xc = xt.numpy(), xc.numpy()
    out = np.zeros((*xt.shape[:2], num_proximity_features(space_dims, time_dims)))
    for b in range(xt.shape[0]):
        keep = np.ones(xc.shape[1], bool) if mc is None else mc[b].numpy()
        c = xc[b, keep]
        for i, q in enumerate(xt[b]):
            ds = np.sqrt(((c[:, :space_dims] - q[:space_dims]) ** 2).sum(-1))
            dt = np.abs(c[:, space_dims:] - q[space_dims:]).sum(-1)
            if space_dims and time_dims:
                near = dt <= dt.min() + 1e-9
                row = [dt.min(), ds.min(), ds[near].min()]
            else:
                row = [ds.min() if space_dims else dt.min()]
            out[b, i] = np.log1p(row)
    return torch.from_numpy(out)


@pytest.mark.parametrize(("space_dims", "time_dims"), [(2, 1), (2, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("chunk", [1, 5, 4096])
def test_proximity_features__equal_brute_force(space_dims, time_dims, chunk):
    """Chunked features equal the definition, with padded context points ignored."""
    g = torch.Generator().manual_seed(0)
    dx = space_dims + time_dims
    xc = torch.rand(2, 25, dx, generator=g, dtype=torch.float64) * 10
    xc[..., space_dims:] = xc[..., space_dims:].round()  # frames at integer times, several points each
    xt = torch.rand(2, 13, dx, generator=g, dtype=torch.float64) * 10
    mc = torch.rand(2, 25, generator=g) > 0.3
    got = proximity_features(xt, xc, mc, space_dims, time_dims, chunk=chunk)
    torch.testing.assert_close(got, _brute(xt, xc, mc, space_dims, time_dims))


@pytest.mark.parametrize("metric", ["euclidean", "geodesic"])
def test_proximity_features__slices_bounded_by_pairs(monkeypatch, metric):
    """By default no distance matrix holds more than PAIRS query-context pairs, and the result is unchanged."""
    import geonp.models.proximity as prox

    monkeypatch.setattr(prox, "PAIRS", 600)
    sizes = []

    def spy(xq, xk):
        sizes.append(xq.shape[0] * xq.shape[1] * xk.shape[1])
        return pairwise_sqdist(xq, xk)

    monkeypatch.setattr(prox, "pairwise_sqdist", spy)
    g = torch.Generator().manual_seed(1)
    xc = torch.rand(2, 40, 3, generator=g, dtype=torch.float64) * 10
    xt = torch.rand(2, 50, 3, generator=g, dtype=torch.float64) * 10
    got = proximity_features(xt, xc, None, 2, 1, metric)
    assert len(sizes) > 1 and max(sizes) <= 600
    torch.testing.assert_close(got, proximity_features(xt, xc, None, 2, 1, metric, chunk=50))


def test_proximity_features__own_frame_distance_for_a_persistent_hole():
    """A target in a hole missing from every frame is far in space; a target observed at another time is not."""
    grid = torch.stack(torch.meshgrid(torch.arange(10.0), torch.arange(10.0), indexing="ij"), -1).reshape(-1, 2)
    frames = []
    for t in (-1.0, 0.0, 1.0):
        # a 5 × 5 hole; its cell (4, 4) is seen at t = -1
        keep = ((grid - 5.0).abs().amax(-1) > 2) | ((grid == 4.0).all(-1) & (t == -1.0))
        pts = grid[keep]
        frames.append(torch.cat([pts, torch.full_like(pts[:, :1], t)], -1))
    xc = torch.cat(frames)[None].double()
    xt = torch.tensor([[[5.0, 5.0, 0.0], [4.0, 4.0, 0.0]]], dtype=torch.float64)
    f = torch.expm1(proximity_features(xt, xc, None, 2, 1))[0]
    # the hole's centre: 3 cells from its frame's data, √2 from the cell seen an hour before
    torch.testing.assert_close(f[0], torch.tensor([0.0, math.sqrt(2.0), 3.0], dtype=torch.float64))
    torch.testing.assert_close(f[1], torch.tensor([0.0, 0.0, 2.0], dtype=torch.float64))  # seen an hour before


def test_proximity_features__lead_of_a_forecast():
    """Targets one frame after the context see d_t = 1; six frames after, d_t = 6."""
    xc = torch.tensor([[[0.0, 0.0, -1.0], [1.0, 0.0, 0.0]]], dtype=torch.float64)
    xt = torch.tensor([[[0.0, 0.0, 1.0], [0.0, 0.0, 6.0]]], dtype=torch.float64)
    f = torch.expm1(proximity_features(xt, xc, None, 2, 1))[0]
    torch.testing.assert_close(f[:, 0], torch.tensor([1.0, 6.0], dtype=torch.float64))
    torch.testing.assert_close(f[:, 2], torch.tensor([1.0, 1.0], dtype=torch.float64))  # nearest in time: t = 0


def _model(**kw):
    return build_model("bsa-tnp", space_dims=2, time_dims=1, proximity_features=True, **TINY, **kw).double()


def _with_moments():
    from test_moments import _model as moments_model

    return moments_model()


@pytest.mark.parametrize("offset", [1000.0, -12345.0])
@pytest.mark.parametrize("make", [_model, _with_moments], ids=["proximity", "moments"])
def test_bsa_tnp_geonp_features__invariant_to_large_shifts(offset, make):
    """Proximity features and position moments depend on differences only: shifts change nothing."""
    model, batch = make(), _batch()
    with torch.no_grad():
        a, b = model(batch), model(shift_batch(batch, offset))
    torch.testing.assert_close(a.loc, b.loc, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(a.scale, b.scale, rtol=1e-5, atol=1e-5)


def test_bsa_tnp_proximity__invariant_to_context_permutation_and_padding():
    """Minima over the context ignore its order and its padded points."""
    model, batch = _model(), _batch()
    perm = torch.randperm(batch.xc.shape[1])
    extra = _batch(nc=4)
    mc = torch.ones(2, 34, dtype=torch.bool)
    mc[:, 30:] = False
    padded = Batch(xc=torch.cat([batch.xc, extra.xc + 0.01], 1), yc=torch.cat([batch.yc, extra.yc], 1),
                   xt=batch.xt, mc=mc)
    with torch.no_grad():
        ref = model(batch).loc
        torch.testing.assert_close(model(Batch(xc=batch.xc[:, perm], yc=batch.yc[:, perm], xt=batch.xt)).loc, ref)
        torch.testing.assert_close(model(padded).loc, ref)


def test_bsa_tnp_proximity__targets_decoded_in_slices():
    """Slicing the targets (max_targets) gives the same predictions as decoding them at once."""
    model, batch = _model(max_targets=4), _batch()
    with torch.no_grad():
        sliced = model(batch)
        prepared = model.prepare(batch)
        whole = model.decode(model.encode(prepared), prepared)
    torch.testing.assert_close(sliced.loc, whole.loc)
    torch.testing.assert_close(sliced.scale, whole.scale)


def test_bsa_tnp_proximity__features_change_predictions():
    """The targets read the features: zeroing their embedding weights changes the predictions."""
    model, batch = _model(), _batch()
    blind = copy.deepcopy(model)
    with torch.no_grad():
        blind.embed[0].weight[:, 2:5] = 0.0  # the three feature columns, after the value and the flag
        assert float((model(batch).scale - blind(batch).scale).abs().max()) > 1e-4
        assert float((model(batch).loc - blind(batch).loc).abs().max()) > 1e-4


def test_with_proximity_features__same_predictions_then_trainable():
    """The upgrade keeps predictions exactly, and the new inputs get gradients."""
    old = build_model("bsa-tnp", space_dims=2, time_dims=1, **TINY).double()
    new = with_proximity_features(old)
    assert new.config.proximity_features and not old.config.proximity_features
    batch = _batch()
    with torch.no_grad():
        torch.testing.assert_close(new(batch).loc, old(batch).loc, rtol=0, atol=0)
        torch.testing.assert_close(new(batch).scale, old(batch).scale, rtol=0, atol=0)
    new.loss(batch).backward()
    assert float(new.embed[0].weight.grad[:, -3:].abs().sum()) > 0
    assert with_proximity_features(new) is new


def test_with_proximity_features__rejects_other_models():
    """Only KRBlock models take the features."""
    model = build_model("te-pt-tnp", space_dims=2, time_dims=1)
    with pytest.raises(ConfigError, match="proximity features need a KRBlock model"):
        with_proximity_features(model)


def test_bsa_tnp_proximity__checkpoint_round_trip(tmp_path):
    """The flag travels in the checkpoint: the loaded model predicts identically."""
    from geonp.checkpoint import load_model, save_model

    model, batch = _model().float().eval(), _batch(dtype=torch.float32)
    path = save_model(model, tmp_path / "m.pt")
    loaded = load_model(path, expected_name="bsa-tnp")
    assert loaded.config.proximity_features
    with torch.no_grad():
        torch.testing.assert_close(loaded(batch).loc, model(batch).loc, rtol=0, atol=0)


def test_with_proximity_features__keeps_covariate_weights():
    """With covariates, the upgrade inserts the new inputs before them: predictions stay exact."""
    old = build_model("bsa-tnp", space_dims=2, time_dims=1, covariate_dims=2, **TINY).double()
    batch = _batch(dz=2)
    with torch.no_grad():
        torch.testing.assert_close(with_proximity_features(old)(batch).loc, old(batch).loc)


def test_fit_init__pretrained_with_proximity_into_a_model_with_covariates():
    """Fitting from proximity weights appends covariate columns after the features (zero-initialised)."""
    from geonp.fitting import init_from

    source = _model()
    net = build_model("bsa-tnp", space_dims=2, time_dims=1, covariate_dims=2, proximity_features=True,
                      **TINY).double()
    init_from(net, source)
    batch = _batch()
    z = torch.randn(2, 30, 2, dtype=torch.float64), torch.randn(2, 17, 2, dtype=torch.float64)
    with torch.no_grad():
        got = net(Batch(xc=batch.xc, yc=batch.yc, xt=batch.xt, zc=z[0], zt=z[1])).loc
        torch.testing.assert_close(got, source(batch).loc)


def test_fit_init__weights_without_proximity_into_a_model_with_them():
    """Fitting a proximity model from weights without the features (and with covariates) predicts as the source."""
    from geonp.fitting import init_from

    source = build_model("bsa-tnp", space_dims=2, time_dims=1, **TINY).double()
    net = build_model("bsa-tnp", space_dims=2, time_dims=1, covariate_dims=2, proximity_features=True,
                      **TINY).double()
    init_from(net, source)
    batch = _batch()
    zc, zt = torch.randn(2, 30, 2, dtype=torch.float64), torch.randn(2, 17, 2, dtype=torch.float64)
    with torch.no_grad():
        got = net(Batch(xc=batch.xc, yc=batch.yc, xt=batch.xt, zc=zc, zt=zt)).loc
        torch.testing.assert_close(got, source(batch).loc)


# ------------------------------------------------------------------ bias on covariates (elevation)


def test_bias_covariates__start_switched_off_then_act():
    """A Δcovariate bias starts at zero weight (predictions as without it); weighted, it reads only Δz."""
    from geonp.fitting import init_from

    base = build_model("bsa-tnp", space_dims=2, time_dims=1, covariate_dims=2, **TINY).double()
    biased = build_model("bsa-tnp", space_dims=2, time_dims=1, covariate_dims=2, bias_covariates=(1,),
                         **TINY).double()
    init_from(biased, base)
    batch = _batch(dz=2)
    flat = Batch(xc=batch.xc, yc=batch.yc, xt=batch.xt, zc=batch.zc.clone(), zt=batch.zt.clone())
    flat.zc[..., 1], flat.zt[..., 1] = 0.7, 0.7  # Δz = 0 for every pair
    with torch.no_grad():
        torch.testing.assert_close(biased(batch).loc, base(batch).loc)
        for layer in biased.biases:
            layer.parts[-1].weight.fill_(2.0)
        # the same bias for every key cancels in the softmax; different z do not
        torch.testing.assert_close(biased(flat).loc, base(flat).loc)
        assert float((biased(batch).loc - base(batch).loc).abs().max()) > 1e-4


def test_bias_covariates__invariant_to_shifting_coordinates():
    """The covariate columns are not coordinates: shifting space and time still changes nothing."""
    model = build_model("bsa-tnp", space_dims=2, time_dims=1, covariate_dims=2, bias_covariates=(0,),
                        proximity_features=True, **TINY).double()
    for layer in model.biases:
        torch.nn.init.normal_(layer.parts[-1].weight)
    batch = _batch(dz=2)
    with torch.no_grad():
        torch.testing.assert_close(model(batch).loc, model(shift_batch(batch, 1000.0)).loc, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("kw", "phrase"),
    [
        (dict(covariate_dims=1, bias_covariates=(1,)), "covariate columns \\[1\\] that do not exist"),
        (dict(covariate_dims=0, bias_covariates=(0,)), "covariate_dims=0"),
    ],
)
def test_bias_covariates__bad_columns(kw, phrase):
    """Columns outside the covariates are refused with a typed error."""
    with pytest.raises(ConfigError, match=phrase):
        build_model("bsa-tnp", space_dims=2, time_dims=1, **kw)


def test_fit_elevation_bias_on_stations_and_errors():
    """fit(elevation_bias=True) adds a Δelevation bias to BSA-TNP; without elevation it says what is missing."""
    from test_api import stations

    st = stations(times=4)
    model = st.np.fit("tmax", steps=2, progress=False, elevation_bias=True, calibration_tasks=4)
    assert model.net.config.bias_covariates == (0,) and model.normaliser.covariates[0] == "elevation"
    assert np.isfinite(st.np.infill("tmax", model=model).tmax_mean.values).all()
    with pytest.raises(ConfigError, match="the data have no elevation covariate"):
        st.drop_vars("elevation").np.fit("tmax", steps=1, progress=False, elevation_bias=True)
    with pytest.raises(ConfigError, match="needs model='bsa-tnp'"):
        st.np.fit("tmax", model="te-pt-tnp", steps=1, progress=False, elevation_bias=True)
