"""The broadcast fast path of RBFBias equals the direct computation."""

import torch

from geonp.models.attention import attention, dense_attention
from geonp.models.bias import RBFBias, SumBias


def _coords(nq, nk, same_time=True):
    g = torch.Generator().manual_seed(0)
    tq = torch.zeros(2, nq, 1) if same_time else torch.randint(-1, 2, (2, nq, 1), generator=g).float()
    xq = torch.cat([torch.rand(2, nq, 2, generator=g) * 5, tq + 0.25], -1)
    xk = torch.cat([torch.rand(2, nk, 2, generator=g) * 5, torch.randint(-2, 3, (2, nk, 1), generator=g).float()], -1)
    return xq, xk


def test_shared_query_time_uses_a_broadcast_row_and_matches_direct():
    bias = RBFBias(4, 3, (2,), lengthscales=(0.5, 30.0))
    xq, xk = _coords(300, 70)
    fast = bias.fast_bias(xq, xk)
    assert fast.stride(2) == 0  # a broadcast view: nk exponentials per basis, not nq * nk
    torch.testing.assert_close(fast, bias.bias(xq, xk).detach(), rtol=0, atol=1e-6)
    xq2, _ = _coords(300, 70, same_time=False)
    assert bias.fast_bias(xq2, xk).is_contiguous()


def test_sum_bias_and_attention_with_the_broadcast_path():
    score = SumBias([RBFBias(4, 5, (0, 1), lengthscales=(0.1, 10.0)), RBFBias(4, 3, (2,), lengthscales=(0.5, 30.0))])
    xq, xk = _coords(200, 90)
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 4, n, 8, generator=g) for n in (200, 90, 90))
    km = torch.ones(2, 90, dtype=torch.bool)
    km[1, 60:] = False
    with torch.no_grad():
        fast = attention(q, k, v, score=score, xq=xq, xk=xk, key_mask=km, backend="tiled")
        ref = dense_attention(q, k, v, score=score, xq=xq, xk=xk, key_mask=km)
    torch.testing.assert_close(fast, ref, rtol=1e-5, atol=1e-5)
    time_only = RBFBias(4, 3, (2,), lengthscales=(0.5, 30.0))
    with torch.no_grad():
        fast = attention(q, k, v, score=time_only, xq=xq, xk=xk, key_mask=km, backend="tiled")
        ref = dense_attention(q, k, v, score=time_only, xq=xq, xk=xk, key_mask=km)
    torch.testing.assert_close(fast, ref, rtol=1e-5, atol=1e-5)
