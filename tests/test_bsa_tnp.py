"""BSA-TNP and its KRBlock relatives (TNP-KR, TNP-D): shapes, invariances, errors."""

import math
from functools import partial

import pytest
import torch
from _helpers import random_batch, shift_batch

from geonp.errors import ConfigError, EmptyContextError, InvalidBatchError, NonFiniteError, UnknownOptionError
from geonp.models import Batch, build_model

TINY = dict(token_dim=16, num_heads=2, head_dim=8, num_layers=2, ff_hidden=(32,), embed_hidden=(32,), head_hidden=(32,))


# 2 space dims + 1 time dim
_batch = partial(random_batch, nc=30, nt=17, dx=3)


@pytest.mark.parametrize("name", ["bsa-tnp", "tnp-kr", "tnp-d"])
@pytest.mark.parametrize(("dz", "dy"), [(0, 1), (2, 3)])
def test_kr_models__output_shapes(name, dz, dy):
    """Loc and scale are [b, nt, y_dims] and scale is positive."""
    model = build_model(name, space_dims=2, time_dims=1, covariate_dims=dz, y_dims=dy, **TINY)
    with torch.no_grad():
        pred = model(_batch(dz=dz, dy=dy))
    assert pred.loc.shape == (2, 17, dy) and pred.scale.shape == (2, 17, dy)
    assert bool((pred.scale > 0).all())


@pytest.mark.parametrize("offset", [1000.0, -12345.0])
def test_bsa_tnp__invariant_to_large_shifts(offset):
    """Shifting every space and time coordinate leaves BSA-TNP's predictions unchanged."""
    model = build_model("bsa-tnp", space_dims=2, time_dims=1, **TINY)
    batch = _batch()
    with torch.no_grad():
        a, b = model(batch), model(shift_batch(batch, offset))
    torch.testing.assert_close(a.loc, b.loc, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(a.scale, b.scale, rtol=1e-5, atol=1e-5)


def test_bsa_tnp__invariant_to_float32_shift():
    """A +100 shift given in float32 changes predictions only at float32 coordinate precision."""
    model = build_model("bsa-tnp", space_dims=2, time_dims=1, **TINY)
    batch = _batch(dtype=torch.float32)
    with torch.no_grad():
        a, b = model(batch), model(shift_batch(batch, 100.0))
    torch.testing.assert_close(a.loc, b.loc, rtol=1e-3, atol=1e-3)


def test_tnp_d__changes_under_shift():
    """TNP-D embeds coordinates, so a shift of +10 changes its predictions (the seeds' failure case)."""
    model = build_model("tnp-d", space_dims=2, time_dims=1, **TINY)
    batch = _batch()
    with torch.no_grad():
        a, b = model(batch), model(shift_batch(batch, 10.0))
    assert float((a.loc - b.loc).abs().max()) > 1e-3


@pytest.mark.parametrize("name", ["bsa-tnp", "tnp-kr", "tnp-d"])
def test_kr_models__invariant_to_context_permutation(name):
    """Reordering the context does not change the predictions."""
    model = build_model(name, space_dims=2, time_dims=1, **TINY).double()
    batch = _batch()
    perm = torch.randperm(batch.xc.shape[1])
    permuted = Batch(xc=batch.xc[:, perm], yc=batch.yc[:, perm], xt=batch.xt)
    with torch.no_grad():
        torch.testing.assert_close(model(batch).loc, model(permuted).loc)


def test_bsa_tnp__targets_are_independent():
    """Decoding targets in slices gives the same predictions as all at once."""
    model = build_model("bsa-tnp", space_dims=2, time_dims=1, max_targets=4, **TINY).double()
    batch = _batch(nt=17)
    with torch.no_grad():
        sliced = model(batch)
        whole = model.decode(model.encode(model.prepare(batch)), model.prepare(batch))
        single = model(batch.select_targets(5, 6))
    torch.testing.assert_close(sliced.loc, whole.loc)
    torch.testing.assert_close(single.loc, whole.loc[:, 5:6])


@pytest.mark.parametrize("name", ["bsa-tnp", "tnp-kr", "tnp-d"])
def test_kr_models__padded_context_is_ignored(name):
    """Context points marked as padding do not change predictions."""
    model = build_model(name, space_dims=2, time_dims=1, **TINY).double()
    batch = _batch(nc=20)
    extra = _batch(nc=5)
    mc = torch.ones(2, 25, dtype=torch.bool)
    mc[:, 20:] = False
    padded = Batch(
        xc=torch.cat([batch.xc, extra.xc], 1), yc=torch.cat([batch.yc, extra.yc], 1), xt=batch.xt, mc=mc
    )
    with torch.no_grad():
        torch.testing.assert_close(model(padded).loc, model(batch).loc)


def _rotate_lonlat(lonlat, rot):
    lon, lat = torch.deg2rad(lonlat[..., 0]), torch.deg2rad(lonlat[..., 1])
    xyz = torch.stack([torch.cos(lat) * torch.cos(lon), torch.cos(lat) * torch.sin(lon), torch.sin(lat)], -1)
    xyz = xyz @ rot.T
    return torch.stack([torch.rad2deg(torch.atan2(xyz[..., 1], xyz[..., 0])),
                        torch.rad2deg(torch.asin(xyz[..., 2]))], -1)


def _rotation(a, b, c):
    def rx(t):
        return torch.tensor([[1, 0, 0], [0, math.cos(t), -math.sin(t)], [0, math.sin(t), math.cos(t)]])

    def ry(t):
        return torch.tensor([[math.cos(t), 0, math.sin(t)], [0, 1, 0], [-math.sin(t), 0, math.cos(t)]])

    def rz(t):
        return torch.tensor([[math.cos(t), -math.sin(t), 0], [math.sin(t), math.cos(t), 0], [0, 0, 1]])

    return (ry(a) @ rx(b) @ rz(c)).double()


@pytest.mark.parametrize("proximity", [False, True])
def test_bsa_tnp_geodesic__invariant_to_rotations(proximity):
    """With the great-circle bias (and great-circle proximity features), rotations change nothing."""
    model = build_model("bsa-tnp", space_dims=2, space_metric="geodesic", space_lengthscales=(1.0, 20.0),
                        proximity_features=proximity, **TINY)
    g = torch.Generator().manual_seed(3)
    xc = (torch.rand(2, 40, 2, generator=g, dtype=torch.float64) * 20 - 10)
    xt = (torch.rand(2, 15, 2, generator=g, dtype=torch.float64) * 20 - 10)
    yc = torch.randn(2, 40, 1, generator=g, dtype=torch.float64)
    rot = _rotation(math.radians(-60), math.radians(30), math.radians(20))
    with torch.no_grad():
        a = model(Batch(xc=xc, yc=yc, xt=xt))
        b = model(Batch(xc=_rotate_lonlat(xc, rot), yc=yc, xt=_rotate_lonlat(xt, rot)))
    torch.testing.assert_close(a.loc, b.loc, rtol=2e-4, atol=2e-4)


def test_bsa_tnp_rbf__not_rotation_invariant_on_sphere():
    """The planar RBF bias on raw lon/lat is distorted by a large sphere rotation (003 Table 7)."""
    model = build_model("bsa-tnp", space_dims=2, space_lengthscales=(1.0, 20.0), **TINY)
    g = torch.Generator().manual_seed(3)
    xc = torch.rand(1, 40, 2, generator=g, dtype=torch.float64) * 20 - 10
    xt = torch.rand(1, 15, 2, generator=g, dtype=torch.float64) * 20 - 10
    yc = torch.randn(1, 40, 1, generator=g, dtype=torch.float64)
    rot = _rotation(math.radians(-60), math.radians(30), 0.0)
    with torch.no_grad():
        a = model(Batch(xc=xc, yc=yc, xt=xt))
        b = model(Batch(xc=_rotate_lonlat(xc, rot), yc=yc, xt=_rotate_lonlat(xt, rot)))
    assert float((a.loc - b.loc).abs().max()) > 1e-4


def test_bsa_tnp__training_steps_reduce_loss():
    """A few AdamW steps on a fixed batch reduce the loss."""
    model = build_model("bsa-tnp", space_dims=2, time_dims=1, **TINY)
    batch = _batch(dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    with torch.no_grad():
        first = float(model.loss(batch))
    for _ in range(15):
        opt.zero_grad()
        model.loss(batch).backward()
        opt.step()
    with torch.no_grad():
        assert float(model.loss(batch)) < first - 0.05


def test_bsa_tnp__gradients_reach_every_parameter():
    """Every parameter (including the RBF bias weights and lengthscales) gets a gradient."""
    model = build_model("bsa-tnp", space_dims=2, time_dims=1, **TINY)
    model.loss(_batch(dtype=torch.float32)).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert missing == []
    assert all(float(p.grad.abs().sum()) > 0 for n, p in model.named_parameters() if n.startswith("biases"))


def test_presets__paper_parameter_count():
    """The paper preset of BSA-TNP has about 478K parameters (003 App. A)."""
    n = build_model("bsa-tnp", preset="paper", space_dims=2).num_parameters()
    assert 430_000 < n < 530_000


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda b: Batch(xc=b.xc[..., :2], yc=b.yc, xt=b.xt), InvalidBatchError, "xc has 2 features.*expects 3"),
        (lambda b: Batch(xc=b.xc[0], yc=b.yc, xt=b.xt), InvalidBatchError, "xc has 2 dimensions"),
        (lambda b: Batch(xc=b.xc, yc=b.yc[:1], xt=b.xt), InvalidBatchError, "yc has leading shape"),
        (lambda b: Batch(xc=b.xc, yc=b.yc.long(), xt=b.xt), InvalidBatchError, "floating dtype"),
        (lambda b: Batch(xc=b.xc[:, :0], yc=b.yc[:, :0], xt=b.xt), EmptyContextError, "no context points"),
        (
            lambda b: Batch(xc=b.xc, yc=b.yc, xt=b.xt, mc=torch.zeros(2, 30, dtype=torch.bool)),
            EmptyContextError,
            "no unmasked context",
        ),
        (lambda b: Batch(xc=b.xc, yc=b.yc * float("nan"), xt=b.xt), NonFiniteError, "yc contains 60 NaN"),
        (lambda b: Batch(xc=b.xc, yc=b.yc, xt=b.xt, zc=b.xc, zt=b.xt), InvalidBatchError, "covariate_dims=0"),
        (lambda b: Batch(xc=b.xc, yc=b.yc, xt=b.xt, mc=torch.ones(2, 30)), InvalidBatchError, "bool mask"),
    ],
)
def test_bsa_tnp__bad_batches_raise_typed_errors(make, error, match):
    """Model-level misuse is caught before any heavy work with a message that says how to fix it."""
    model = build_model("bsa-tnp", space_dims=2, time_dims=1, **TINY)
    batch = _batch()
    bad = make(Batch(xc=batch.xc[:, :30], yc=batch.yc[:, :30], xt=batch.xt))
    with pytest.raises(error, match=match):
        model(bad)


@pytest.mark.parametrize("name", ["bsa-tnp", "tnp-d", "te-pt-tnp"])
@pytest.mark.parametrize(("override", "match"), [
    ({"num_heads": 0}, "num_heads must be >= 1, got 0"),  # before: the process died (SIGFPE in torch's CPU kernel)
    ({"head_dim": 0}, "head_dim must be >= 1"),
    ({"token_dim": 0}, "token_dim must be >= 1"),
    ({"num_layers": 0}, "num_layers must be >= 1"),
    ({"ff_hidden": (-3,)}, "ff_hidden must be a tuple of positive layer widths, got \\(-3,\\)"),
    ({"embed_hidden": (0,)}, "embed_hidden must be a tuple of positive layer widths"),
    ({"max_targets": 0}, "max_targets must be >= 1"),
    ({"backend": "flash"}, "backend must be one of"),
    ({"num_heads": -1}, "num_heads must be >= 0, got -1"),
])
def test_build_model__bad_sizes_are_config_errors(name, override, match):
    """Sizes that would crash, or build a degenerate model, are refused when the model is built."""
    with pytest.raises(ConfigError, match=match):
        build_model(name, space_dims=2, **override)


def test_bsa_tnp__paper_bias_has_5_space_and_3_time_bases_per_head_per_layer():
    """003: an RBF network of F = 5 bases per head on Δspace and F = 3 on Δtime, in every layer."""
    model = build_model("bsa-tnp", preset="paper", space_dims=2, time_dims=1)
    assert len(model.biases) == model.config.num_layers == 6
    for bias in model.biases:
        space, time = bias.parts
        assert (space.num_heads, space.num_bases, space.columns) == (4, 5, (0, 1))
        assert (time.num_heads, time.num_bases, time.columns) == (4, 3, (2,))
        assert space.log_lengthscale.shape == (4, 5) and time.log_lengthscale.shape == (4, 3)


def test_build_model__bias_bases_needed_by_a_biased_model():
    """A biased model needs at least one RBF basis per coordinate kind it has; an unbiased one ignores them."""
    with pytest.raises(ConfigError, match="space_bases must be >= 1 for a biased model"):
        build_model("bsa-tnp", space_dims=2, space_bases=0)
    with pytest.raises(ConfigError, match="time_bases must be >= 1 for a biased model"):
        build_model("bsa-tnp", space_dims=2, time_dims=1, time_bases=0)
    build_model("bsa-tnp", space_dims=2, time_bases=0)  # no time columns: unused
    build_model("tnp-d", space_dims=2, space_bases=0)  # no bias at all


def test_attention__zero_heads_or_queries_give_empty_output():
    """An empty problem returns an empty result (torch's private CPU kernel crashed the process on zero heads)."""
    from geonp.models.attention import tiled_attention

    for shape in ((2, 0, 5, 8), (2, 3, 0, 8), (0, 3, 5, 8)):
        q = torch.randn(*shape, requires_grad=True)
        k = torch.randn(shape[0], shape[1], 4, 8)
        out = tiled_attention(q, k, k)
        assert out.shape == shape
        out.sum().backward()
        assert q.grad.shape == shape


@pytest.mark.parametrize("name", ["bsa-tnp", "te-pt-tnp"])
def test_batch__no_tasks_or_no_targets_are_typed_errors(name):
    """An empty batch or one without targets is refused by name (before: a raw reshape error deep inside)."""
    model = build_model(name, space_dims=2)
    with pytest.raises(InvalidBatchError, match="no target points \\(nt = 0\\)"):
        model(Batch(xc=torch.rand(2, 10, 2), yc=torch.randn(2, 10, 1), xt=torch.rand(2, 0, 2)))
    with pytest.raises(InvalidBatchError, match="no tasks \\(batch size 0\\)"):
        model(Batch(xc=torch.rand(0, 10, 2), yc=torch.randn(0, 10, 1), xt=torch.rand(0, 5, 2)))


def test_loss__nan_in_a_real_target_value_is_refused():
    """A NaN in an unmasked yt is a typed error naming yt; NaN in padded targets stays harmless."""
    model = build_model("bsa-tnp", space_dims=2, time_dims=1, **TINY)
    batch = _batch()
    yt = batch.yt.clone()
    yt[0, 3] = float("nan")
    bad = Batch(xc=batch.xc, yc=batch.yc, xt=batch.xt, yt=yt)
    with pytest.raises(NonFiniteError, match="yt contains 1 NaN"):
        model.loss(bad)
    mt = torch.ones(yt.shape[:2], dtype=torch.bool)
    mt[0, 3] = False
    assert torch.isfinite(model.loss(Batch(xc=batch.xc, yc=batch.yc, xt=batch.xt, yt=yt, mt=mt)))


def test_build_model__unknown_name_and_preset():
    """Unknown names, presets and options raise typed errors listing the valid choices."""
    with pytest.raises(UnknownOptionError, match="unknown model 'bsa'.*expected one of"):
        build_model("bsa")
    with pytest.raises(UnknownOptionError, match="unknown preset 'huge'"):
        build_model("bsa-tnp", preset="huge")
    with pytest.raises(ConfigError, match="unknown option.*'heads'"):
        build_model("bsa-tnp", heads=3)
    with pytest.raises(ConfigError, match="define tnp-d"):
        build_model("tnp-d", attention_bias=True)
    with pytest.raises(ConfigError, match="geodesic.*space_dims=2"):
        build_model("bsa-tnp", space_dims=3, space_metric="geodesic")


def test_loss__needs_targets():
    """loss() without yt is a typed error."""
    model = build_model("bsa-tnp", space_dims=2, time_dims=1, **TINY)
    b = _batch()
    with pytest.raises(InvalidBatchError, match="no target values yt"):
        model.loss(Batch(xc=b.xc, yc=b.yc, xt=b.xt))


def test_bsa_tnp__nan_in_padding_is_harmless():
    """NaN values at padded context and target positions change neither predictions nor the loss."""
    model = build_model("bsa-tnp", space_dims=2, time_dims=1, **TINY).double()
    batch = _batch(nc=20, nt=6)
    xc = torch.cat([batch.xc, torch.full((2, 3, 3), float("nan"), dtype=torch.float64)], 1)
    yc = torch.cat([batch.yc, torch.full((2, 3, 1), float("nan"), dtype=torch.float64)], 1)
    mc = torch.cat([torch.ones(2, 20, dtype=torch.bool), torch.zeros(2, 3, dtype=torch.bool)], 1)
    yt = batch.yt.clone()
    yt[:, -1] = float("nan")
    mt = torch.ones(2, 6, dtype=torch.bool)
    mt[:, -1] = False
    padded = Batch(xc=xc, yc=yc, xt=batch.xt, yt=yt, mc=mc, mt=mt)
    clean = Batch(xc=batch.xc, yc=batch.yc, xt=batch.xt[:, :5], yt=batch.yt[:, :5])
    with torch.no_grad():
        torch.testing.assert_close(model(padded).loc[:, :5], model(clean).loc)
        torch.testing.assert_close(model.loss(padded), model.loss(clean))
