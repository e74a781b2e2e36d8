"""The tiled biased attention kernel against its dense reference."""

import pytest
import torch

from geonp.errors import ConfigError, UnknownOptionError
from geonp.models.attention import attention, default_tiles, dense_attention, tiled_attention
from geonp.models.bias import RBFBias, SumBias, great_circle_sqdist, pairwise_sqdist
from geonp.models.packing import spatial_order
from geonp.models.te_layers import TEScore

SCORES = {
    "none": lambda h: None,
    "rbf-space-time": lambda h: SumBias([RBFBias(h, 5, (0, 1)), RBFBias(h, 3, (2,), lengthscales=(0.5, 5.0))]),
    "geodesic": lambda h: RBFBias(h, 4, (0, 1), metric="geodesic", lengthscales=(1.0, 30.0)),
    "te-post": lambda h: TEScore(h, 3, hidden=(8,)),
}


def _inputs(b, h, nq, nk, d, dtype, coord_grad):
    q = torch.randn(b, h, nq, d, dtype=dtype, requires_grad=True)
    k = torch.randn(b, h, nk, d, dtype=dtype, requires_grad=True)
    v = torch.randn(b, h, nk, d, dtype=dtype, requires_grad=True)
    xq = (torch.randn(b, nq, 3, dtype=dtype) * 3).requires_grad_(coord_grad)
    xk = (torch.randn(b, nk, 3, dtype=dtype) * 3).requires_grad_(coord_grad)
    return q, k, v, xq, xk


def _grads(out, inputs, seed):
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=out.dtype)
    wanted = [t for t in inputs if t.requires_grad]
    return torch.autograd.grad(out, wanted, g, allow_unused=True)


@pytest.mark.parametrize("name", list(SCORES))
@pytest.mark.parametrize("coord_grad", [False, True], ids=["coords-fixed", "coords-grad"])
@pytest.mark.parametrize(
    ("b", "nq", "nk", "q_tile", "k_tile"),
    [(2, 37, 29, 5, 7), (1, 20, 6, 64, 64), (3, 9, 50, 4, 1), (2, 33, 17, 33, 16)],
    ids=["ragged-tiles", "nk-below-tile", "key-tile-1", "one-query-tile"],
)
def test_tiled_attention__matches_dense_values_and_gradients(name, coord_grad, b, nq, nk, q_tile, k_tile):
    """Tiled == dense in float64 for values and every gradient, with padding masks."""
    h, d = 3, 8
    score = SCORES[name](h)
    if score is not None:
        score = score.double()
    q, k, v, xq, xk = _inputs(b, h, nq, nk, d, torch.float64, coord_grad)
    key_mask = torch.rand(b, nk) > 0.3
    key_mask[:, 0] = True
    params = [q, k, v, xq, xk] + (list(score.parameters()) if score is not None else [])
    ref = dense_attention(q, k, v, score, xq, xk, key_mask)
    out = tiled_attention(q, k, v, score, xq, xk, key_mask, q_tile=q_tile, k_tile=k_tile)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-12)
    for g_tiled, g_ref in zip(_grads(out, params, 1), _grads(ref, params, 1)):
        if g_ref is None:
            assert g_tiled is None or float(g_tiled.abs().max()) < 1e-12
        else:
            torch.testing.assert_close(g_tiled, g_ref, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("seed", range(12))
def test_tiled_attention__matches_dense_on_random_shapes(seed):
    """Shapes, tile sizes, score and mask drawn at random (seeded): tiled == dense, values and gradients."""
    rng = torch.Generator().manual_seed(seed)

    def draw(lo, hi):
        return int(torch.randint(lo, hi + 1, (1,), generator=rng))

    b, h, nq, nk, d = draw(1, 3), draw(1, 4), draw(1, 70), draw(1, 70), draw(1, 12)
    q_tile, k_tile = draw(1, nq + 8), draw(1, nk + 8)
    name = list(SCORES)[seed % len(SCORES)]
    score = SCORES[name](h)
    score = score.double() if score is not None else None
    q, k, v, xq, xk = _inputs(b, h, nq, nk, d, torch.float64, bool(seed % 2))
    key_mask = torch.rand(b, nk, generator=rng) > 0.3
    key_mask[:, draw(0, nk - 1)] = True
    params = [q, k, v, xq, xk] + (list(score.parameters()) if score is not None else [])
    ref = dense_attention(q, k, v, score, xq, xk, key_mask)
    out = tiled_attention(q, k, v, score, xq, xk, key_mask, q_tile=q_tile, k_tile=k_tile)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-12)
    for g_tiled, g_ref in zip(_grads(out, params, seed), _grads(ref, params, seed)):
        if g_ref is None:
            assert g_tiled is None or float(g_tiled.abs().max()) < 1e-12
        else:
            torch.testing.assert_close(g_tiled, g_ref, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("bias_path", ["compiled", "torch"])
@pytest.mark.parametrize("name", ["rbf-space-time", "geodesic"])
def test_tiled_attention__float32_within_1e5_relative(name, bias_path, monkeypatch):
    """In float32 the tiled kernel (fast CPU path) stays within 1e-5 relative of the dense reference.

    With the compiled RBF bias kernel (where this machine can build it) and with the torch path.
    """
    if bias_path == "torch":
        monkeypatch.setenv("GEONP_NATIVE", "0")
    h = 4
    score = SCORES[name](h)
    q, k, v, xq, xk = (t.detach() for t in _inputs(2, h, 300, 700, 16, torch.float32, False))
    ref = dense_attention(q.double(), k.double(), v.double(), score.double(), xq.double(), xk.double())
    score.float()
    out = tiled_attention(q, k, v, score, xq, xk, q_tile=64, k_tile=128)
    rel = (out.double() - ref).norm() / ref.norm()
    assert rel < 1e-5


def test_tiled_attention__padding_keys_are_ignored():
    """Masked keys give the same output as dropping them."""
    h = 2
    score = SCORES["rbf-space-time"](h)
    q, k, v, xq, xk = (t.detach() for t in _inputs(1, h, 10, 12, 4, torch.float32, False))
    mask = torch.ones(1, 12, dtype=torch.bool)
    mask[:, 7:] = False
    out = tiled_attention(q, k, v, score, xq, xk, mask, k_tile=5)
    ref = tiled_attention(q, k[:, :, :7], v[:, :, :7], score, xq, xk[:, :7])
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)


def test_tiled_attention__return_lse_matches_logsumexp():
    """The returned log-sum-exp equals logsumexp of the dense logits."""
    h = 2
    score = SCORES["rbf-space-time"](h).double()
    q, k, v, xq, xk = (t.detach() for t in _inputs(2, h, 11, 13, 4, torch.float64, False))
    _, lse = tiled_attention(q, k, v, score, xq, xk, q_tile=4, k_tile=5, return_lse=True)
    logits = q @ k.transpose(-1, -2) / 2.0 + score.bias(xq, xk)
    torch.testing.assert_close(lse, torch.logsumexp(logits, -1))


def test_rbf_bias__fast_and_analytic_paths_match_autograd():
    """fast_bias == bias and bias_grad == autograd gradients."""
    bias = SumBias([RBFBias(3, 5, (0, 1)), RBFBias(3, 3, (2,), lengthscales=(0.5, 5.0))]).double()
    xq, xk = torch.randn(2, 9, 3, dtype=torch.float64) * 2, torch.randn(2, 11, 3, dtype=torch.float64) * 2
    torch.testing.assert_close(bias.fast_bias(xq, xk), bias.bias(xq, xk))
    grad = torch.randn(2, 3, 9, 11, dtype=torch.float64)
    auto = torch.autograd.grad((bias.bias(xq, xk) * grad).sum(), list(bias.parameters()))
    for a, b in zip(bias.bias_grad(xq, xk, grad), auto):
        torch.testing.assert_close(a, b)


def test_pairwise_sqdist__exact_far_from_origin():
    """Distances use exact differences, so a +1e4 offset changes nothing in float64."""
    x, y = torch.randn(1, 5, 2, dtype=torch.float64), torch.randn(1, 6, 2, dtype=torch.float64)
    torch.testing.assert_close(pairwise_sqdist(x + 1e4, y + 1e4), pairwise_sqdist(x, y), rtol=1e-9, atol=1e-9)


def test_great_circle_sqdist__known_distances_and_wrap():
    """Quarter circle along the equator is 90°, the poles are 180° apart, and ±180° longitude coincide."""
    pts = torch.tensor([[[0.0, 0.0], [90.0, 0.0], [0.0, 90.0], [0.0, -90.0], [180.0, 10.0], [-180.0, 10.0]]])
    d = great_circle_sqdist(pts, pts).sqrt()[0]
    assert abs(float(d[0, 1]) - 90.0) < 1e-3
    assert abs(float(d[2, 3]) - 180.0) < 1e-3
    assert float(d[4, 5]) < 1e-3


def test_default_tiles__bounded_by_budget():
    """A 1,000,000 × 10,000 problem gets tiles of at most the element budget."""
    q_tile, k_tile = default_tiles(1, 4, 1_000_000, 10_000)
    assert 1 * 4 * q_tile * k_tile <= 2**24
    assert k_tile <= 10_000 and q_tile >= 1


def test_attention__unknown_backend_raises():
    """An unknown backend name is a typed error listing the valid ones."""
    q = torch.randn(1, 1, 2, 4)
    with pytest.raises(UnknownOptionError, match="unknown attention backend 'flash9'.*expected one of"):
        attention(q, q, q, backend="flash9")


def test_attention__dense_backend_is_reference():
    """backend='dense' returns the reference result."""
    q, k, v, xq, xk = (t.detach() for t in _inputs(1, 2, 5, 6, 4, torch.float32, False))
    score = SCORES["rbf-space-time"](2)
    torch.testing.assert_close(
        attention(q, k, v, score, xq, xk, backend="dense"), dense_attention(q, k, v, score, xq, xk)
    )


@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="backend='flex' runs on CUDA only")
@pytest.mark.parametrize("name", ["rbf-space-time", "geodesic"])
def test_flex_backend__matches_dense(name):
    """Compiled flex_attention with the fused bias equals the dense reference (inference, CUDA)."""
    h = 2
    score = SCORES[name](h).cuda()
    q, k, v, xq, xk = (t.detach().cuda() for t in _inputs(2, h, 64, 48, 16, torch.float32, False))
    key_mask = torch.rand(2, 48, device="cuda") > 0.2
    with torch.no_grad():
        out = attention(q, k, v, score, xq, xk, key_mask, backend="flex")
        ref = dense_attention(q, k, v, score, xq, xk, key_mask)
    torch.testing.assert_close(out, ref, rtol=1e-4, atol=1e-5)


def test_flex_backend__refuses_gradients_and_te_scores():
    """Flex is inference-only and only for additive biases: typed errors say what to use instead."""
    from geonp.errors import ConfigError

    q, k, v, xq, xk = _inputs(1, 2, 4, 5, 4, torch.float32, False)
    with pytest.raises(ConfigError, match="inference-only.*backend='tiled'"):
        attention(q, k, v, SCORES["rbf-space-time"](2), xq, xk, backend="flex")
    with torch.no_grad(), pytest.raises(ConfigError, match="TEScore has no flex_attention form"):
        attention(q, k, v, SCORES["te-post"](2), xq, xk, backend="flex")


def _far_apart_inputs(b, nq, nk, dtype=torch.float64, seed=0):
    """Points spread over a domain much wider than the bias' reach (far tile pairs prune their bias)."""
    g = torch.Generator().manual_seed(seed)
    h, d = 3, 8
    q, k, v = (torch.randn(b, h, n, d, generator=g, dtype=dtype) for n in (nq, nk, nk))
    xq = torch.cat([torch.rand(b, nq, 2, generator=g, dtype=dtype) * 400, torch.zeros(b, nq, 1, dtype=dtype)], -1)
    xk = torch.cat([torch.rand(b, nk, 2, generator=g, dtype=dtype) * 400, torch.randn(b, nk, 1, generator=g)], -1)
    score = SumBias([RBFBias(h, 5, (0, 1), lengthscales=(0.1, 3.0)), RBFBias(h, 3, (2,), lengthscales=(0.5, 5.0))])
    return q, k, v, xq, xk, score.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_tiled_attention__sorted_tiles_with_pruned_bias_match_dense(dtype):
    """Inference over many tiles sorts the points and skips far bias terms: same result as dense and as unsorted."""
    q, k, v, xq, xk, score = _far_apart_inputs(2, 700, 300, dtype)
    key_mask = torch.rand(2, 300, generator=torch.Generator().manual_seed(1)) > 0.2
    with torch.no_grad():
        ref = dense_attention(q.double(), k.double(), v.double(), score.double(), xq.double(), xk.double(), key_mask)
        score.to(dtype)
        calls = []
        active_bases = RBFBias.active_bases

        def spy(self, a, c):
            out = active_bases(self, a, c)
            if self.columns == (0, 1):
                calls.append(not any(map(any, out)))
            return out

        RBFBias.active_bases = spy
        try:
            out = tiled_attention(q, k, v, score, xq, xk, key_mask, q_tile=64, k_tile=32)
        finally:
            RBFBias.active_bases = active_bases
        unsorted = tiled_attention(q, k, v, score, xq, xk, key_mask, q_tile=64, k_tile=32, reorder=False)
    assert sum(calls) > len(calls) / 2  # most space tile pairs were far enough to skip every term
    tol = 1e-12 if dtype == torch.float64 else 1e-6
    assert float((out.double() - ref).norm() / ref.norm()) < tol
    assert float((unsorted.double() - ref).norm() / ref.norm()) < tol


def test_tiled_attention__reorder_only_at_inference():
    """With gradients the points keep their order (the backward pass recomputes the same tiles)."""
    q, k, v, xq, xk, score = _far_apart_inputs(1, 90, 40)
    q.requires_grad_(True)
    out = tiled_attention(q, k, v, score, xq, xk, q_tile=16, k_tile=8)
    ref = dense_attention(q, k, v, score, xq, xk)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-12)
    (g,) = torch.autograd.grad(out.sum(), [q])
    (g_ref,) = torch.autograd.grad(ref.sum(), [q])
    torch.testing.assert_close(g, g_ref, rtol=1e-9, atol=1e-11)


def test_rbf_bias__active_bases_prune_far_tiles_below_resolution():
    """Skipped terms are below eps / 10 of the logits everywhere on the tile; zero weights are always skipped."""
    bias = RBFBias(2, 4, (0, 1), lengthscales=(0.5, 4.0)).double()
    with torch.no_grad():
        bias.weight[1, 0] = 0.0
    xq = torch.rand(1, 30, 2, dtype=torch.float64)
    for shift, expect_none in ((100.0, True), (12.0, False), (0.0, False)):
        xk = torch.rand(1, 20, 2, dtype=torch.float64) + torch.tensor([shift, 0.0], dtype=torch.float64)
        active = bias.active_bases(xq, xk)
        assert not active[1][0]
        fast = bias.fast_bias(xq, xk)
        full = bias.bias(xq, xk).detach()
        if expect_none:
            assert fast is None and float(full.abs().max()) < torch.finfo(torch.float64).eps
            continue
        assert not all(all(row) for row in active) if shift else sum(map(sum, active)) == 7
        # skipped terms are below eps / 10; the fast path's base-2 exponentials differ by a few ulps
        torch.testing.assert_close(fast, full, rtol=0, atol=16 * torch.finfo(torch.float64).eps)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_rbf_bias__fast_path_mixes_each_head_with_its_own_terms(dtype):
    """Heads with different numbers of active terms, and one with none, match the reference bias."""
    bias = RBFBias(3, 5, (0, 1), lengthscales=(0.2, 3.0)).to(dtype)
    with torch.no_grad():
        bias.weight.copy_(torch.randn(3, 5, generator=torch.Generator().manual_seed(0)))
        bias.weight[0, 1:3] = 0.0  # head 0: three terms
        bias.weight[1] = 0.0  # head 1: none
    g = torch.Generator().manual_seed(1)
    xq, xk = torch.rand(2, 40, 2, generator=g, dtype=dtype) * 4, torch.rand(2, 300, 2, generator=g, dtype=dtype) * 4
    active = bias.active_bases(xq, xk)
    assert [sum(row) for row in active] == [3, 0, 5]
    fast, ref = bias.fast_bias(xq, xk), bias.bias(xq, xk).detach()
    assert bool((fast[:, 1] == 0).all())
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(fast, ref, rtol=64 * eps, atol=64 * eps)


def test_order_columns__euclidean_parts_only():
    space, time = RBFBias(2, 5, (0, 1)), RBFBias(2, 3, (2,))
    assert SumBias([space, time]).order_columns == (0, 1)
    geodesic = RBFBias(2, 5, (0, 1), metric="geodesic")
    assert geodesic.order_columns == () and SumBias([geodesic, time]).order_columns == ()
    assert TEScore(2, 3).order_columns == ()


def test_spatial_order__permutation_with_compact_tiles():
    """Packing a shuffled 32 × 32 grid into tiles of 64 puts every tile in one 8 × 8 block."""
    yy, xx = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
    grid = torch.stack([xx.flatten(), yy.flatten()], -1)
    perm = torch.randperm(1024, generator=torch.Generator().manual_seed(0))
    x = torch.stack([grid[perm], grid]).double()  # two rows, packed independently
    order = spatial_order(x, 64)
    assert order.shape == (2, 1024)
    for row in range(2):
        assert torch.equal(order[row].sort().values, torch.arange(1024))
        pts = x[row, order[row]]
        for run in pts.view(16, 64, 2):
            assert (run.amax(0) - run.amin(0)).tolist() == [7.0, 7.0]


def test_spatial_order__ragged_sizes_and_one_column():
    x = torch.rand(3, 101, 1, generator=torch.Generator().manual_seed(2))
    order = spatial_order(x, 10)
    for row in range(3):
        assert torch.equal(x[row, order[row], 0], x[row, :, 0].sort().values)  # 1-D: a plain sort
    order = spatial_order(torch.rand(2, 7, 3), 100)  # one tile
    assert all(torch.equal(o.sort().values, torch.arange(7)) for o in order)


def test_sum_bias__only_broadcast_views_are_summed_once():
    """When every part is a broadcast row (shared query time), the copy that holds the sum counts each part once."""
    score = SumBias([RBFBias(2, 3, (2,)), RBFBias(2, 2, (2,), lengthscales=(1.0, 4.0))]).double()
    xq = torch.cat([torch.rand(1, 6, 2), torch.full((1, 6, 1), 3.0)], -1).double()
    xk = torch.randn(1, 5, 3).double()
    torch.testing.assert_close(score.fast_bias(xq, xk), score.bias(xq, xk).detach())


def test_tiled_attention__one_tile_reuses_its_bias_in_backward(monkeypatch):
    """A problem of one tile evaluates the RBF terms once for the logits (forward), not again in backward."""
    h = 2
    score = SCORES["rbf-space-time"](h).double()
    q, k, v, xq, xk = _inputs(2, h, 12, 9, 4, torch.float64, False)
    key_mask = torch.rand(2, 9) > 0.3
    key_mask[:, 0] = True
    calls = []
    fast_bias = RBFBias.fast_bias
    monkeypatch.setattr(RBFBias, "fast_bias", lambda self, a, c: calls.append(1) or fast_bias(self, a, c))
    out = tiled_attention(q, k, v, score, xq, xk, key_mask)
    params = [q, k, v, *score.parameters()]
    grads = _grads(out, params, 3)
    assert len(calls) == 2  # one per bias part, in the forward pass only
    ref = dense_attention(q, k, v, score, xq, xk, key_mask)
    for g, g_ref in zip(grads, _grads(ref, params, 3)):
        torch.testing.assert_close(g, g_ref, rtol=1e-9, atol=1e-11)


def test_default_tiles__small_problems_stay_one_tile_large_ones_use_smaller_tiles():
    """Under autograd one tile up to ONE_TILE_ELEMENTS; beyond, and in inference, tiles of about TILE_ELEMENTS."""
    import sys

    at = sys.modules["geonp.models.attention"]
    assert at.default_tiles(8, 4, 1024, 512) == (1024, 512)  # the seeds' GP shape: 2**24 elements, one tile
    q_tile, k_tile = at.default_tiles(4, 4, 4096, 2400)
    assert k_tile == at.K_TILE and q_tile * 4 * 4 * k_tile == at.TILE_ELEMENTS
    assert at.default_tiles(1, 4, 10, 5000) == (10, at.K_TILE)  # more keys than K_TILE: tiled along keys
    with torch.no_grad():
        q_tile, k_tile = at.default_tiles(8, 4, 1024, 512)
    assert k_tile == 512 and q_tile * 8 * 4 * k_tile == at.TILE_ELEMENTS


def test_tiled_attention__inference_tiles_equal_training_tiles():
    """The same problem run as one tile (autograd on) and as TILE_ELEMENTS tiles (no_grad) gives the same output."""
    h = 4
    score = SCORES["rbf-space-time"](h)
    q, k, v, xq, xk = _inputs(8, h, 512, 512, 8, torch.float32, False)  # 2**23 elements
    with torch.no_grad():
        assert default_tiles(8, h, 512, 512)[0] < 512  # tiled along queries without autograd
        inference = tiled_attention(q, k, v, score, xq, xk)
    assert default_tiles(8, h, 512, 512) == (512, 512)  # one tile under autograd
    training = tiled_attention(q, k, v, score, xq, xk)
    torch.testing.assert_close(inference, training.detach(), rtol=1e-5, atol=1e-6)


def _bias_tile(metric="euclidean", heads=3):
    """A float64 RBF bias with random weights and a 70 × 90 tile of points spread over 20 units."""
    lengthscales = (1.0, 30.0) if metric == "geodesic" else (0.3, 3.0)
    bias = RBFBias(heads, 5, (0, 1), metric=metric, lengthscales=lengthscales).double()
    with torch.no_grad():
        bias.weight.normal_(generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(1)
    xq = torch.rand(2, 70, 2, generator=g, dtype=torch.float64) * 20
    xk = torch.rand(2, 90, 2, generator=g, dtype=torch.float64) * 20
    return bias, xq, xk, g


@pytest.mark.parametrize("metric", ["euclidean", "geodesic"])
def test_rbf_bias__whole_tile_path_equals_chunked(metric, monkeypatch):
    """The GPU form of the bias (whole tile, a basis at a time) equals the CPU's chunked form, gradients too."""
    import geonp.models.bias as bias_module

    bias, xq, xk, g = _bias_tile(metric)
    active = bias.active_bases(xq, xk)
    active[1][2] = False  # a skipped term is skipped on both paths
    grad = torch.randn(2, 3, 70, 90, generator=g, dtype=torch.float64)
    chunked, chunked_grads = bias._rbf_sum(xq, xk, active), bias.bias_grad(xq, xk, grad)
    monkeypatch.setattr(bias_module, "whole_tiles", lambda x: True)
    torch.testing.assert_close(bias._rbf_sum(xq, xk, active), chunked, rtol=1e-12, atol=1e-14)
    for a, b in zip(bias.bias_grad(xq, xk, grad), chunked_grads):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_tiled_attention__whole_tile_bias_matches_dense(monkeypatch):
    """With the GPU form of the bias, the tiled kernel still equals the dense reference, gradients included."""
    import geonp.models.bias as bias_module

    monkeypatch.setattr(bias_module, "whole_tiles", lambda x: True)
    score = SCORES["rbf-space-time"](3).double()
    q, k, v, xq, xk = _inputs(2, 3, 37, 29, 8, torch.float64, False)
    params = [q, k, v, *score.parameters()]
    ref = dense_attention(q, k, v, score, xq, xk)
    out = tiled_attention(q, k, v, score, xq, xk, q_tile=5, k_tile=7)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-12)
    for a, b in zip(_grads(out, params, 1), _grads(ref, params, 1)):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)


@pytest.mark.slow
def test_rbf_bias__fused_whole_tile_bias_equals_chunked(monkeypatch):
    """GEONP_FUSED_BIAS=1: the compiled whole-tile bias (torch.compile; here on the CPU) equals the chunked one."""
    import geonp.models.bias as bias_module
    from geonp.models import whole_tile

    bias, xq, xk, _ = _bias_tile(heads=4)
    active = bias.active_bases(xq, xk)
    chunked = bias._rbf_sum(xq, xk, active)
    monkeypatch.setattr(bias_module, "whole_tiles", lambda x: True)
    monkeypatch.setenv("GEONP_FUSED_BIAS", "1")
    monkeypatch.setattr(whole_tile, "_FUSED", {})
    fused = bias._rbf_sum(xq, xk, active)
    if whole_tile._FUSED.get("kernel") is None:
        pytest.skip("torch.compile does not work on this machine")
    torch.testing.assert_close(fused, chunked, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(bias._rbf_sum(xq[:, :33], xk[:, :41], active), chunked[:, :, :33, :41],
                               rtol=1e-12, atol=1e-14)  # another shape: no recompilation needed


@pytest.mark.parametrize("name", ["rbf-space-time", "geodesic", "te-post"])
def test_tiled_attention__backward_keeps_nothing_of_pair_size(name):
    """What autograd keeps for the backward pass is linear in the points, and the gradients equal dense ones.

    No tile of logits or bias survives the forward pass (the backward recomputes them tile by tile).
    """
    b, h, nq, nk, d = 1, 2, 300, 200, 8
    q, k, v, xq, xk = _inputs(b, h, nq, nk, d, torch.float64, True)
    score = SCORES[name](h).double()
    saved = []

    def pack(t):
        saved.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = tiled_attention(q, k, v, score, xq, xk, q_tile=32, k_tile=16)
    pairs = b * h * nq * nk
    assert saved and max(saved) < pairs / 8, (max(saved), pairs)
    grads = torch.autograd.grad(out.square().sum(), (q, k, v, xq, xk))
    ref = torch.autograd.grad(dense_attention(q, k, v, score, xq, xk).square().sum(), (q, k, v, xq, xk))
    for g, r in zip(grads, ref):
        torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("fn", [tiled_attention, dense_attention])
def test_inputs_that_do_not_fit_together_are_refused(fn):
    """The tiled kernel read past k when it had fewer heads than q, and gave other values call after call."""
    from geonp.errors import InvalidBatchError

    q, k, v = torch.randn(1, 4, 10, 8), torch.randn(1, 4, 20, 8), torch.randn(1, 4, 20, 8)
    xq, xk = torch.rand(1, 10, 2), torch.rand(1, 20, 2)
    with pytest.raises(InvalidBatchError, match=r"same b and h.*got q \(1, 4, 10, 8\), k \(1, 3, 20, 8\)"):
        fn(q, k[:, :3], v)
    with pytest.raises(InvalidBatchError, match="no broadcasting"):
        fn(torch.randn(2, 4, 10, 8), k, v)
    with pytest.raises(InvalidBatchError, match="same nk in k and v"):
        fn(q, k, v[:, :, :19])
    with pytest.raises(InvalidBatchError, match="rank 4"):
        fn(q[0], k, v)
    score = RBFBias(4, 5, (0, 1))
    with pytest.raises(InvalidBatchError, match=r"coordinates xk \[1, 20, columns\].*got None"):
        fn(q, k, v, score, xq, None)
    with pytest.raises(InvalidBatchError, match=r"key_mask must be boolean \[1, 20\].*torch.float32"):
        fn(q, k, v, score, xq, xk, torch.ones(1, 20))
    with pytest.raises(InvalidBatchError, match=r"key_mask must be boolean \[1, 20\].*\(1, 19\)"):
        fn(q, k, v, score, xq, xk, torch.ones(1, 19, dtype=torch.bool))
    with pytest.raises(InvalidBatchError, match="RBFBias does not fit.*the bias has 3 heads, the attention 4"):
        fn(q, k, v, RBFBias(3, 5, (0, 1)), xq, xk)
    with pytest.raises(InvalidBatchError, match=r"SumBias does not fit.*reads coordinate columns \(5,\) of 2"):
        fn(q, k, v, SumBias([score, RBFBias(4, 3, (5,))]), xq, xk)
    with pytest.raises(InvalidBatchError, match="TEScore does not fit.*TEScore\\(4, 2\\)"):
        fn(q, k, v, TEScore(4, 3), xq, xk)
    with pytest.raises(InvalidBatchError, match="xq and xk need q's dtype torch.float32; got torch.float64"):
        fn(q, k, v, score, xq.double(), xk.double())
    with pytest.raises(ConfigError, match="at least one coordinate column"):
        RBFBias(4, 5, ())
    with pytest.raises(InvalidBatchError, match="xq and xk need the same coordinate columns"):
        fn(q, k, v, score, xq, torch.rand(1, 20, 3))
    with pytest.raises(InvalidBatchError, match="one floating dtype; got torch.float64, torch.float32"):
        fn(q.double(), k, v)
    with pytest.raises(InvalidBatchError, match="one floating dtype; got torch.int64"):
        fn(*(torch.ones(1, 4, 10, 8, dtype=torch.long) for _ in range(3)))


def test_tiled_attention_with_no_keys_is_dense_attentions_zeros():
    """Zero keys raised a TypeError in the tiled kernel, where dense gave zeros (a new-user report)."""
    q = torch.randn(1, 4, 10, 8, requires_grad=True)
    k, v = torch.randn(1, 4, 0, 8), torch.randn(1, 4, 0, 8)
    score, xq, xk = RBFBias(4, 5, (0, 1)), torch.rand(1, 10, 2), torch.rand(1, 0, 2)
    out = tiled_attention(q, k, v, score, xq, xk)
    torch.testing.assert_close(out, dense_attention(q, k, v, score, xq, xk))
    out.sum().backward()
    assert q.grad is not None and not q.grad.any()
    assert torch.isneginf(tiled_attention(q, k, v, return_lse=True)[1]).all()
