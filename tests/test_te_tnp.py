"""TE-TNP and TE-PT-TNP: TE attention layer, location update, invariances, padding, training, errors."""

from functools import partial

import pytest
import torch
from _helpers import random_batch, shift_batch

from geonp.errors import ConfigError, EmptyContextError, InvalidBatchError
from geonp.models import TEPTTNP, TETNP, Batch, build_model, model_from_config
from geonp.models.te_layers import PseudoLocations, TEAttention

TINY = dict(
    token_dim=16, num_heads=2, head_dim=4, num_layers=2, ff_hidden=(16,), embed_hidden=(16,), head_hidden=(16,),
    rho_hidden=(16,), phi_hidden=(16,),
)
MODELS = [("te-tnp", {}), ("te-pt-tnp", {"num_pseudo": 4})]
NAMES = [name for name, _ in MODELS]


def _model(name, **overrides):
    extra = dict(MODELS)[name]
    return build_model(name, space_dims=2, **{**TINY, **extra, **overrides})


_batch = partial(random_batch, nc=12, nt=9, dx=2)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("dz", "dy"), [(0, 1), (2, 2)])
def test_te_models__output_shapes(name, dz, dy):
    """Loc and scale are [b, nt, y_dims], finite, scale positive, also with padding masks."""
    model = build_model(name, space_dims=2, covariate_dims=dz, y_dims=dy, **{**TINY, **dict(MODELS)[name]})
    batch = _batch(dz=dz, dy=dy)
    mc, mt = torch.ones(2, 12, dtype=torch.bool), torch.ones(2, 9, dtype=torch.bool)
    mc[1, 8:], mt[0, 5:] = False, False
    with torch.no_grad():
        for b in (batch, Batch(**{**batch.__dict__, "mc": mc, "mt": mt})):
            pred = model(b)
            assert pred.loc.shape == (2, 9, dy) and pred.scale.shape == (2, 9, dy)
            assert bool(torch.isfinite(pred.loc).all()) and bool((pred.scale > 0).all())


@pytest.mark.parametrize("name", NAMES)
def test_te_models__padded_context_is_ignored(name):
    """Context points marked as padding (even NaN ones) do not change predictions."""
    model = build_model(name, space_dims=2, covariate_dims=1, **{**TINY, **dict(MODELS)[name]}).double()
    batch, extra = _batch(nc=10, dz=1), _batch(nc=4, dz=1, seed=2)
    extra_x = extra.xc.clone()
    extra_x[0, 0] = float("nan")  # padding need not be finite
    mc = torch.ones(2, 14, dtype=torch.bool)
    mc[:, 10:] = False
    mc[1, 3] = False  # padding between real points too
    keep = [i for i in range(10) if i != 3]
    cat = lambda a, e: torch.cat([a, e], 1)  # noqa: E731
    padded = Batch(xc=cat(batch.xc, extra_x * 1e6), yc=cat(batch.yc, extra.yc), xt=batch.xt,
                   zc=cat(batch.zc, extra.zc), zt=batch.zt, mc=mc)
    with torch.no_grad():
        torch.testing.assert_close(model(padded).loc[0], model(batch).loc[0])
        reduced = Batch(xc=batch.xc[1:, keep], yc=batch.yc[1:, keep], xt=batch.xt[1:], zc=batch.zc[1:, keep],
                        zt=batch.zt[1:])
        torch.testing.assert_close(model(padded).loc[1:], model(reduced).loc)


@pytest.mark.parametrize("name", NAMES)
def test_te_models__invariant_to_large_float64_shift(name):
    """Shifting every coordinate by +1000 (given in float64) leaves loc and scale unchanged."""
    model = _model(name)
    batch = _batch()
    with torch.no_grad():
        a, b = model(batch), model(shift_batch(batch, 1000.0))
    torch.testing.assert_close(a.loc, b.loc, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(a.scale, b.scale, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_te_models__equivariant_without_centring(name):
    """Bypassing prepare's centring, a shift leaves predictions unchanged and moves every carried location by it."""
    model = _model(name).double()
    batch = _batch()
    shifted = shift_batch(batch, 37.5)
    with torch.no_grad():
        s0, s1 = model.encode(batch), model.encode(shifted)
        torch.testing.assert_close(model.decode(s1, shifted).loc, model.decode(s0, batch).loc)
    locs = [(a[1], b[1]) for a, b in zip(s0, s1)]  # context locations (TE-TNP) or pseudo-locations V (TE-PT-TNP)
    for a, b in locs:
        torch.testing.assert_close(b - 37.5, a, rtol=0, atol=1e-9)
    assert float((locs[-1][0] - locs[0][0]).abs().max()) > 1e-3  # eq. 10 moved them between layers


@pytest.mark.parametrize("name", NAMES)
def test_te_models__invariant_to_float32_shift(name):
    """A +10 shift given in float32 changes predictions only at float32 coordinate precision."""
    model = _model(name)
    batch = _batch(dtype=torch.float32)
    with torch.no_grad():
        a, b = model(batch), model(shift_batch(batch, 10.0))
    torch.testing.assert_close(a.loc, b.loc, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(a.scale, b.scale, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("name", NAMES)
def test_te_models__invariant_to_context_permutation(name):
    """Reordering the context does not change the predictions."""
    model = _model(name).double()
    batch = _batch()
    perm = torch.randperm(batch.xc.shape[1])
    with torch.no_grad():
        a = model(batch)
        b = model(Batch(xc=batch.xc[:, perm], yc=batch.yc[:, perm], xt=batch.xt))
    torch.testing.assert_close(a.loc, b.loc)
    torch.testing.assert_close(a.scale, b.scale)


@pytest.mark.parametrize("name", NAMES)
def test_te_models__targets_are_independent(name):
    """Decoding targets in slices of max_targets gives the same predictions as all at once."""
    model = _model(name, max_targets=4).double()
    batch = _batch(nt=11)
    with torch.no_grad():
        sliced = model(batch)
        whole = model.decode(model.encode(model.prepare(batch)), model.prepare(batch))
        single = model(batch.select_targets(6, 7))
    torch.testing.assert_close(sliced.loc, whole.loc)
    torch.testing.assert_close(sliced.scale, whole.scale)
    torch.testing.assert_close(single.loc, whole.loc[:, 6:7])


def _layer(phi=True, dx=2):
    torch.manual_seed(0)
    return TEAttention(16, 2, 4, dx, (16,), (16,) if phi else None).double()


def _dense_reference(layer, zq, zk, xq, xk, mask):
    """Materialise all logits: softmax attention plus eq. 10 written out directly."""
    a = layer.attn
    q, (k, v) = a.split(a.to_q(zq)), a.keys_values(zk)
    logits = layer.score(q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5, xq, xk)
    alpha = torch.softmax(logits.masked_fill(~mask[:, None, None, :], float("-inf")), -1)  # [b, h, nq, nk]
    out = a.out((alpha @ v).transpose(1, 2).reshape(zq.shape[0], zq.shape[1], -1))
    w = layer.phi(alpha.permute(0, 2, 3, 1)).sum(-1) * mask[:, None, :]  # [b, nq, nk]
    step = (w[..., None] * (xq[:, :, None] - xk[:, None])).sum(2) / mask.sum(1)[:, None, None]
    return out, xq + step


@pytest.mark.parametrize("tiled", [False, True])
def test_te_attention__matches_dense_reference(tiled):
    """Tokens, updated locations and all their gradients equal a dense softmax reference (one tile or many)."""
    layer = _layer()
    if tiled:
        layer.tile_elements = 2 * 16 * 3  # [b=2, 1, 3, width=16]: 1 query × 3 keys per tile
        layer.one_tile_elements = 0  # never one tile for the whole problem
    g = torch.Generator().manual_seed(4)
    zq, zk = torch.randn(2, 5, 16, generator=g, dtype=torch.float64), torch.randn(2, 7, 16, generator=g,
                                                                                   dtype=torch.float64)
    xq = torch.randn(2, 5, 2, generator=g, dtype=torch.float64).requires_grad_()
    xk = torch.randn(2, 7, 2, generator=g, dtype=torch.float64).requires_grad_()
    mask = torch.ones(2, 7, dtype=torch.bool)
    mask[1, 4:] = False
    results = []
    for fn in (lambda: layer(zq, layer.attn.keys_values(zk), xq, xk, mask),
               lambda: _dense_reference(layer, zq, zk, xq, xk, mask)):
        layer.zero_grad()
        out, x_new = fn()
        (out.square().sum() + (x_new * torch.linspace(-1, 2, 10, dtype=torch.float64).view(1, 5, 2)).sum()).backward()
        grads = [p.grad.clone() for p in layer.parameters()] + [xq.grad.clone(), xk.grad.clone()]
        xq.grad = xk.grad = None
        results.append((out.detach(), x_new.detach(), grads))
    (o1, x1, g1), (o2, x2, g2) = results
    torch.testing.assert_close(o1, o2)
    torch.testing.assert_close(x1, x2)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b)


def test_te_attention__inference_is_tiled_and_equals_the_one_tile_training_path():
    """Without autograd a problem above tile_elements is tiled (bounded memory) and gives the one-tile result."""
    layer = _layer()
    layer.tile_elements = 2 * 16 * 4  # far below the problem; one_tile_elements keeps its default
    g = torch.Generator().manual_seed(6)
    zq, zk = (torch.randn(2, n, 16, generator=g, dtype=torch.float64) for n in (6, 9))
    xq, xk = (torch.randn(2, n, 2, generator=g, dtype=torch.float64) for n in (6, 9))
    assert layer.tiles(2, 6, 9) == (6, 9)  # autograd on: one tile
    training = [t.detach() for t in layer(zq, layer.attn.keys_values(zk), xq, xk)]
    with torch.no_grad():
        assert layer.tiles(2, 6, 9) != (6, 9)
        inference = layer(zq, layer.attn.keys_values(zk), xq, xk)
    for a, b in zip(inference, training):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_te_attention__one_key_tile_inference_evaluates_rho_once_with_the_same_bits(dtype, monkeypatch):
    """With one key tile, inference takes attention and eq. 10 from one ρ pass: the two-pass result, bit for bit."""
    layer = _layer().to(dtype)
    layer.tile_elements = 2 * 3 * 9 * 16  # query tiles of 3 rows, one key tile of all 9 keys
    g = torch.Generator().manual_seed(7)
    zq, zk = (torch.randn(2, n, 16, generator=g, dtype=dtype) for n in (8, 9))
    xq, xk = (torch.randn(2, n, 2, generator=g, dtype=dtype) for n in (8, 9))
    mask = torch.ones(2, 9, dtype=torch.bool)
    mask[0, 6:] = False
    calls = []
    rho = layer.score.forward
    monkeypatch.setattr(layer.score, "forward", lambda *a: calls.append(1) or rho(*a))
    with torch.no_grad():
        assert layer.tiles(2, 8, 9) == (3, 9)
        kv = layer.attn.keys_values(zk)
        one = layer(zq, kv, xq, xk, mask)
        assert len(calls) == 3  # one ρ pass per query tile (the two passes took 6)
        monkeypatch.setattr(TEAttention, "_one_pass", staticmethod(lambda *a: False))
        two = layer(zq, kv, xq, xk, mask)
        assert len(calls) == 9
    for a, b in zip(one, two):
        assert torch.equal(a, b)
    dense = _dense_reference(layer, zq, zk, xq, xk, mask)
    for a, b in zip(one, dense):
        torch.testing.assert_close(a, b.detach())


def test_te_attention__location_update_is_translation_equivariant():
    """Shifting query and key locations shifts the updated locations by exactly the shift; tokens are unchanged."""
    layer = _layer()
    layer.tile_elements = 2 * 16 * 4
    layer.one_tile_elements = 0
    g = torch.Generator().manual_seed(5)
    zq, zk = torch.randn(2, 6, 16, generator=g, dtype=torch.float64), torch.randn(2, 9, 16, generator=g,
                                                                                   dtype=torch.float64)
    xq, xk = torch.randn(2, 6, 2, generator=g, dtype=torch.float64), torch.randn(2, 9, 2, generator=g,
                                                                                  dtype=torch.float64)
    shift = torch.tensor([123.25, -40.5], dtype=torch.float64)
    with torch.no_grad():
        kv = layer.attn.keys_values(zk)
        out, x_new = layer(zq, kv, xq, xk)
        out_s, x_new_s = layer(zq, kv, xq + shift, xk + shift)
    assert float((x_new - xq).abs().max()) > 1e-3  # the update does move the locations
    torch.testing.assert_close(x_new_s - shift, x_new, rtol=0, atol=1e-10)
    torch.testing.assert_close(out_s, out)


def test_te_attention__location_update_switch():
    """Without φ the locations pass through unchanged; update_locations=False builds no φ at all."""
    layer = _layer(phi=False)
    zq, xq, xk = torch.randn(1, 3, 16, dtype=torch.float64), torch.randn(1, 3, 2, dtype=torch.float64), torch.randn(
        1, 4, 2, dtype=torch.float64)
    _, x_new = layer(zq, layer.attn.keys_values(torch.randn(1, 4, 16, dtype=torch.float64)), xq, xk)
    assert x_new is xq
    for name, extra in MODELS:
        model = build_model(name, space_dims=2, update_locations=False, **{**TINY, **extra})
        assert not [n for n, _ in model.named_parameters() if ".phi." in n]


def test_pseudo_locations__translation_equivariant():
    """Eq. 11 initial pseudo-locations move with the context: v(x + s) = v(x) + s."""
    init = PseudoLocations(16, 4, 2, 8).double()
    g = torch.Generator().manual_seed(6)
    u, zc = torch.randn(2, 4, 16, generator=g, dtype=torch.float64), torch.randn(2, 10, 16, generator=g,
                                                                                  dtype=torch.float64)
    xc = torch.randn(2, 10, 2, generator=g, dtype=torch.float64)
    shift = torch.tensor([7.0, -3.0], dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(init(u, zc, xc + shift), init(u, zc, xc) + shift)


@pytest.mark.parametrize("name", NAMES)
def test_te_models__training_steps_reduce_loss(name):
    """A few AdamW steps on one fixed tiny batch reduce the loss."""
    model = _model(name)
    batch = _batch(dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    with torch.no_grad():
        first = float(model.loss(batch))
    for _ in range(12):
        opt.zero_grad()
        model.loss(batch).backward()
        opt.step()
    with torch.no_grad():
        assert float(model.loss(batch)) < first - 0.05


@pytest.mark.parametrize("name", NAMES)
def test_te_models__gradients_reach_every_parameter(name):
    """Every parameter (pseudo-tokens, eq. 11 offsets, every ρ and φ) gets a finite, non-zero gradient.

    Except the output bias of each ρ: it shifts every logit of a head alike, which softmax ignores, so
    its gradient is zero up to rounding (it must be, or the logits are not normalised per head).
    """
    model = build_model(name, space_dims=2, covariate_dims=1, **{**TINY, **dict(MODELS)[name]})
    model.loss(_batch(dz=1, dtype=torch.float32)).backward()
    bad = [n for n, p in model.named_parameters() if p.grad is None or not bool(torch.isfinite(p.grad).all())]
    assert bad == []
    shift = [n for n, _ in model.named_parameters() if n.endswith("attn.score.mlp.2.bias")]
    assert shift and all(float(dict(model.named_parameters())[n].grad.abs().max()) < 1e-6 for n in shift)
    assert [n for n, p in model.named_parameters() if n not in shift and float(p.grad.abs().sum()) == 0] == []


def test_te_pt_tnp__paper_parameter_count():
    """The paper preset of TE-PT-TNP has about 1.8M parameters (003 App. A, §5)."""
    n = build_model("te-pt-tnp", preset="paper", space_dims=2).num_parameters()
    assert 1_500_000 < n < 2_200_000


def test_te_models__registered_with_presets():
    """Both names build from the registry (forgiving '_'), and rebuild from their saved config dicts."""
    assert isinstance(build_model("te_tnp", preset="small", space_dims=1), TETNP)
    model = build_model("te-pt-tnp", preset="small", space_dims=2, time_dims=1)
    assert isinstance(model, TEPTTNP) and model.config.num_pseudo >= 16 and model.config.x_dims == 3
    rebuilt = model_from_config("te-pt-tnp", model.config.to_dict())
    assert rebuilt.config == model.config and rebuilt.num_parameters() == model.num_parameters()


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda b: Batch(xc=b.xc[..., :1], yc=b.yc, xt=b.xt), InvalidBatchError, "xc has 1 features.*expects 2"),
        (lambda b: Batch(xc=b.xc, yc=b.yc, xt=b.xt[0]), InvalidBatchError, "xt has 2 dimensions"),
        (lambda b: Batch(xc=b.xc, yc=b.yc, xt=b.xt, zc=b.xc, zt=b.xt), InvalidBatchError, "covariate_dims=0"),
        (lambda b: Batch(xc=b.xc, yc=b.yc, xt=b.xt, mc=torch.ones(2, 3, dtype=torch.bool)), InvalidBatchError,
         "mc has shape"),
        (lambda b: Batch(xc=b.xc, yc=b.yc, xt=b.xt, mc=torch.zeros(2, 12, dtype=torch.bool)), EmptyContextError,
         "no unmasked context"),
    ],
)
@pytest.mark.parametrize("name", NAMES)
def test_te_models__bad_input_raises_typed_errors(name, make, error, match):
    """Malformed batches raise the typed errors of Batch.validate with a helpful message."""
    model = _model(name)
    with pytest.raises(error, match=match):
        model(make(_batch()))


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        (dict(num_pseudo=0), "num_pseudo must be >= 1"),
        (dict(rho_hidden=(16, 0)), "rho_hidden must be a tuple of positive"),
        (dict(num_heads=0), "num_heads must be >= 1"),
        (dict(backend="flash"), "backend must be one of"),
    ],
)
def test_te_config__rejects_bad_values(overrides, match):
    """Out-of-range architecture values raise ConfigError naming the field."""
    with pytest.raises(ConfigError, match=match):
        build_model("te-pt-tnp", space_dims=2, **overrides)


@pytest.mark.parametrize("name", NAMES)
def test_te_models__fitted_from_weights_without_covariates_predict_as_the_source(name):
    """init_from switches the new covariate inputs off: the target embedding the source lacks adds nothing."""
    from geonp.fitting import init_from

    torch.manual_seed(0)
    source = _model(name).double()
    net = _model(name, covariate_dims=2).double()
    assert net.target_embed is not None and source.target_embed is None
    init_from(net, source)
    batch = _batch(dz=0)
    zc, zt = torch.randn(2, 12, 2, dtype=torch.float64), torch.randn(2, 9, 2, dtype=torch.float64)
    with torch.no_grad():
        got = net(Batch(xc=batch.xc, yc=batch.yc, xt=batch.xt, zc=zc, zt=zt))
        want = source(batch)
    torch.testing.assert_close(got.loc, want.loc)
    torch.testing.assert_close(got.scale, want.scale)
