"""Edges of the tensor-level API: flex on CPU, fully masked rows, tile sizes, double backward, config types."""

import pytest
import torch

from geonp.checkpoint import save_model
from geonp.errors import ConfigError, OutputExistsError
from geonp.models import Batch, build_model, native
from geonp.models.attention import attention, default_tiles, dense_attention, tiled_attention
from geonp.models.bias import RBFBias, SumBias
from geonp.train import TrainConfig, train


def _score(h, dtype=torch.float64):
    return SumBias([RBFBias(h, 5, (0, 1)), RBFBias(h, 3, (2,), lengthscales=(0.5, 5.0))]).to(dtype)


def _inputs(b, h, nq, nk, d, e, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(b, h, n, d, generator=g, dtype=dtype).requires_grad_() for n in (nq, nk))
    v = torch.randn(b, h, nk, e, generator=g, dtype=dtype).requires_grad_()
    xq, xk = (torch.randn(b, n, 3, generator=g, dtype=dtype) for n in (nq, nk))
    return q, k, v, xq, xk


# 1. backend="flex" is CUDA only


def test_flex_backend__refuses_cpu_tensors_before_compiling():
    """CPU flex_attention returns NaN at some sizes: CPU tensors get a ConfigError pointing to 'tiled'."""
    q, k, v, xq, xk = (t.detach().float() for t in _inputs(1, 2, 15, 40, 4, 4, torch.float32))
    with torch.no_grad():
        with pytest.raises(ConfigError, match=r"flex' runs on CUDA only, got tensors on cpu.*backend='tiled'"):
            attention(q, k, v, _score(2, torch.float32), xq, xk, backend="flex")
        with pytest.raises(ConfigError, match="CUDA only"):
            attention(q, k, v, backend="flex")


def test_flex_backend__model_on_cpu_is_refused():
    """A model built with backend='flex' and run on the CPU raises instead of predicting NaN."""
    model = build_model("bsa-tnp", backend="flex", num_layers=1).eval()
    batch = Batch(xc=torch.rand(2, 40, 2), yc=torch.randn(2, 40, 1), xt=torch.rand(2, 15, 2))
    with torch.no_grad(), pytest.raises(ConfigError, match="CUDA only.*backend='tiled'"):
        model(batch)


# 2. a query whose keys are all masked


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("with_score", [False, True], ids=["plain", "biased"])
@pytest.mark.parametrize(("e", "q_tile", "k_tile"), [(1, None, None), (4, None, None), (4, 3, 2), (6, 1, 5), (4, 7, 1)])
def test_tiled_attention__all_masked_rows_equal_dense(dtype, with_score, e, q_tile, k_tile):
    """A task without real keys gets dense's uniform average of v (values and gradients), any tile size."""
    b, h, nq, nk, d = 3, 2, 7, 9, 4
    q, k, v, xq, xk = _inputs(b, h, nq, nk, d, e, dtype)
    score = _score(h, dtype) if with_score else None
    key_mask = torch.rand(b, nk, generator=torch.Generator().manual_seed(1)) > 0.4
    key_mask[0] = False  # every key of task 0 masked
    key_mask[1, 0] = True
    key_mask[2] = True
    ref = dense_attention(q, k, v, score, xq, xk, key_mask)
    out = tiled_attention(q, k, v, score, xq, xk, key_mask, q_tile=q_tile, k_tile=k_tile)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-12)  # f32: summed
    torch.testing.assert_close(out, ref, **tol)
    torch.testing.assert_close(out[0], v[0].mean(1, keepdim=True).expand(h, nq, e), **tol)
    params = [q, k, v] + (list(score.parameters()) if score is not None else [])
    go = torch.randn(out.shape, generator=torch.Generator().manual_seed(2), dtype=dtype)
    for g_tiled, g_ref in zip(torch.autograd.grad(out, params, go), torch.autograd.grad(ref, params, go)):
        torch.testing.assert_close(g_tiled, g_ref, **tol)


def test_tiled_attention__all_masked_rows_inference_over_several_tiles():
    """The sorted inference path (no gradients, several tiles) also gives the uniform average."""
    q, k, v, xq, xk = (t.detach() for t in _inputs(2, 2, 30, 25, 4, 4, torch.float64))
    key_mask = torch.ones(2, 25, dtype=torch.bool)
    key_mask[1] = False
    score = _score(2)
    with torch.no_grad():
        out = tiled_attention(q, k, v, score, xq, xk, key_mask, q_tile=4, k_tile=6)
        ref = dense_attention(q, k, v, score, xq, xk, key_mask)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-12)


# 3. tile sizes


@pytest.mark.parametrize("bad", [-1, 0, 2.5, True, "4"])
@pytest.mark.parametrize("name", ["q_tile", "k_tile"])
@pytest.mark.parametrize("fn", [attention, tiled_attention], ids=["attention", "tiled_attention"])
def test_tile_sizes__must_be_positive_integers(fn, name, bad):
    """Negative, zero, fractional, boolean or string tile sizes raise a ConfigError naming the argument."""
    q, k, v, xq, xk = (t.detach() for t in _inputs(1, 2, 10, 12, 4, 3, torch.float32))
    with pytest.raises(ConfigError, match=rf"{name} must be a positive integer .*got {bad!r}.*{name}=256"):
        fn(q, k, v, _score(2, torch.float32), xq, xk, **{name: bad})


@pytest.mark.parametrize(("name", "bad"), [("elements", 0), ("key_tile", -3), ("key_tile", 1.5)])
def test_default_tiles__must_be_positive_integers(name, bad):
    """default_tiles' own size arguments are checked the same way."""
    with pytest.raises(ConfigError, match=rf"{name} must be a positive integer"):
        default_tiles(1, 2, 10, 12, **{name: bad})


def test_tile_sizes__valid_ones_still_match_dense():
    """Small valid tiles give the dense result (the check does not reject good values)."""
    q, k, v, xq, xk = (t.detach() for t in _inputs(1, 2, 10, 12, 4, 3, torch.float64))
    with torch.no_grad():
        out = attention(q, k, v, _score(2), xq, xk, q_tile=3, k_tile=5)
        torch.testing.assert_close(out, dense_attention(q, k, v, _score(2), xq, xk), rtol=1e-10, atol=1e-12)


# 4. second-order gradients


def test_tiled_attention__double_backward_raises_naming_dense():
    """Differentiating the tiled kernel's gradients again fails loudly; backend='dense' supports it."""
    q, k, v, xq, xk = _inputs(1, 2, 5, 6, 4, 4, torch.float64)
    score = _score(2)
    (gq,) = torch.autograd.grad(attention(q, k, v, score, xq, xk).pow(2).sum(), q, create_graph=True)
    assert gq.requires_grad
    with pytest.raises(ConfigError, match=r"second-order gradients .* backend='dense'"):
        gq.pow(2).sum().backward()
    (gd,) = torch.autograd.grad(attention(q, k, v, score, xq, xk, backend="dense").pow(2).sum(), q, create_graph=True)
    torch.testing.assert_close(gq.detach(), gd.detach(), rtol=1e-9, atol=1e-11)  # first order still exact
    gd.pow(2).sum().backward()
    assert q.grad is not None and torch.isfinite(q.grad).all()


def test_model__double_backward_through_coordinates_raises():
    """A model's gradient with respect to target coordinates cannot be differentiated again silently."""
    torch.manual_seed(1)
    model = build_model("bsa-tnp", num_layers=1).eval()
    xt = torch.rand(1, 4, 2, requires_grad=True)
    out = model(Batch(xc=torch.rand(1, 15, 2), yc=torch.randn(1, 15, 1), xt=xt))
    (g,) = torch.autograd.grad(out.loc.sum(), xt, create_graph=True)
    with pytest.raises(ConfigError, match="backend='dense'"):
        g.pow(2).sum().backward()


# 6. checkpoint paths


def test_save_model__to_a_directory_raises_naming_it(tmp_path):
    """save_model onto an existing directory raises OutputExistsError naming the path, not a temp file."""
    model = build_model("bsa-tnp", num_layers=1)
    with pytest.raises(OutputExistsError, match=rf"{tmp_path}: it is an existing directory.*model\.pt"):
        save_model(model, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_train__checkpoint_directory_refused_before_training(tmp_path):
    """train(checkpoint=<directory>) raises at once, before any update."""
    model = build_model("bsa-tnp", num_layers=1)
    before = [p.detach().clone() for p in model.parameters()]

    class Never:
        def sample(self, batch_size, generator):
            raise AssertionError("no batch should be drawn")

    with pytest.raises(OutputExistsError, match="existing directory"):
        train(model, Never(), TrainConfig(steps=1, progress=False), checkpoint=tmp_path)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


# 7. integer config fields


@pytest.mark.parametrize("field", ["num_heads", "space_dims", "num_layers", "head_dim"])
@pytest.mark.parametrize("bad", [2.5, "2", True])
def test_build_model__integer_fields_must_be_integers(field, bad):
    """Fractional, string or boolean values of integer fields raise a ConfigError, not a torch TypeError."""
    with pytest.raises(ConfigError, match=rf"{field} must be an integer, got {bad!r}.*whole number"):
        build_model("bsa-tnp", **{field: bad})


def test_build_model__float_fields_must_be_numbers():
    """A float field given a string raises a ConfigError; an int for a float field is fine."""
    with pytest.raises(ConfigError, match=r"min_std must be a number, got 'x'"):
        build_model("bsa-tnp", min_std="x")
    assert build_model("te-tnp", min_std=1, num_layers=1).config.min_std == 1


# 10. native kernel status


def test_native_status__says_when_disabled(monkeypatch):
    """GEONP_NATIVE=0 is reported as such, not as 'not built yet'."""
    monkeypatch.setenv(native.ENV, "0")
    assert native.rbf_bias_kernel() is None
    assert native.status().startswith("disabled by GEONP_NATIVE=0")


# 11. the loss with several output variables


def test_loss__mean_over_points_and_output_variables():
    """The loss is the mean NLL over tasks, real target points and y_dims (as its docstring says)."""
    torch.manual_seed(0)
    model = build_model("bsa-tnp", y_dims=2, num_layers=1).eval()
    batch = Batch(xc=torch.rand(2, 10, 2), yc=torch.randn(2, 10, 2), xt=torch.rand(2, 6, 2), yt=torch.randn(2, 6, 2),
                  mt=torch.tensor([[True] * 6, [True] * 4 + [False] * 2]))
    with torch.no_grad():
        nll = -model(batch).log_prob(batch.yt)  # [b, nt, 2]
        expected = nll[batch.mt].sum() / (10 * 2)
        torch.testing.assert_close(model.loss(batch), expected)


def test_misused_models_and_batches_get_typed_errors():
    """A new-user report: a meta-device target tensor crashed in .item(); geodesic TNP-D ignored the metric."""
    from geonp.errors import InvalidBatchError

    model = build_model("bsa-tnp", "small", space_dims=2)
    batch = Batch(xc=torch.rand(2, 10, 2), yc=torch.randn(2, 10, 1), xt=torch.rand(2, 5, 2, device="meta"))
    with pytest.raises(InvalidBatchError, match=r"different devices \(xc on cpu, yc on cpu, xt on meta\).*batch.to"):
        model(batch)
    with pytest.raises(ConfigError, match="space_metric='geodesic' acts through the attention bias"):
        build_model("tnp-d", "small", space_dims=2, space_metric="geodesic")


# 12. values the float32 models cannot compute on, a loss with nothing to average, seeded weights


def test_values_too_large_for_float32_are_refused_by_name():
    """Values of 1e25 in yc gave non-finite predictions without a word (a new-user report); 1e18 still computes."""
    from geonp.errors import NonFiniteError

    torch.manual_seed(0)
    model = build_model("bsa-tnp", "small", space_dims=2, num_layers=1).eval()
    xc, xt = torch.rand(2, 10, 2), torch.rand(2, 5, 2)
    with torch.no_grad():
        out = model(Batch(xc=xc, yc=torch.rand(2, 10, 1) * 1e18, xt=xt))
    assert torch.isfinite(out.loc).all() and torch.isfinite(out.scale).all()
    with pytest.raises(NonFiniteError, match=r"yc contains 20 values beyond ±1e\+18 \(largest \d\.\d+e\+25\).*order 1"):
        model(Batch(xc=xc, yc=torch.randn(2, 10, 1) * 1e25, xt=xt))
    with pytest.raises(NonFiniteError, match=r"xt contains 2 values beyond"):
        model(Batch(xc=xc, yc=torch.randn(2, 10, 1), xt=torch.cat([xt[:, :4], torch.full((2, 1, 2), 1e30)], 1),
                    mt=torch.tensor([[True] * 5, [True] * 4 + [False]])))
    with pytest.raises(NonFiniteError, match="2 NaN or infinite values"):
        model(Batch(xc=xc, yc=torch.randn(2, 10, 1), xt=torch.cat([xt[:, :4], torch.full((2, 1, 2), 1e30)], 1),
                    mt=torch.tensor([[True] * 5, [True] * 4 + [False]])).to(dtype=torch.float16))


def test_loss__refuses_a_batch_whose_targets_are_all_masked():
    """It returned 0 (no gradient, a silent step) when mt was all False."""
    from geonp.errors import InvalidBatchError

    model = build_model("bsa-tnp", "small", space_dims=2, num_layers=1)
    batch = Batch(xc=torch.rand(2, 10, 2), yc=torch.randn(2, 10, 1), xt=torch.rand(2, 5, 2), yt=torch.randn(2, 5, 1),
                  mt=torch.zeros(2, 5, dtype=torch.bool))
    with pytest.raises(InvalidBatchError, match=r"every target point of the batch is masked \(mt all False\)"):
        model.loss(batch)
    one_real = Batch(**{**batch.__dict__, "mt": torch.tensor([[False] * 5, [True] + [False] * 4])})
    assert torch.isfinite(model.loss(one_real))


def test_build_model__seed_gives_repeatable_weights_and_keeps_the_global_state():
    """TrainConfig.seed seeds the batches only; the README's 'seeded' needed the weights seeded too."""
    state = torch.random.get_rng_state()
    a, b, c = (build_model("te-pt-tnp", "small", space_dims=2, seed=s) for s in (3, 3, 4))
    assert torch.equal(state, torch.random.get_rng_state())
    same = [torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values())]
    other = [torch.equal(x, y) for x, y in zip(a.state_dict().values(), c.state_dict().values())]
    assert all(same) and not all(other)
    with pytest.raises(ConfigError, match=r"seed must be an integer in \[-2\*\*63, 2\*\*64\) or None, got 1.5"):
        build_model("bsa-tnp", seed=1.5)
    with pytest.raises(ConfigError, match="got 1180591620717411303424"):
        build_model("bsa-tnp", seed=2**70)
    import numpy as np

    same = build_model("te-pt-tnp", "small", space_dims=2, seed=np.int64(3))  # numpy integers too
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), same.state_dict().values()))
