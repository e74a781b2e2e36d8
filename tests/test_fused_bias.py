"""Space and time biases in one pass of the compiled kernel (BSA-TNP's SumBias): the same bits as apart."""

from __future__ import annotations

import importlib

import pytest
import torch

from geonp.models.attention import dense_attention, tiled_attention
from geonp.models.bias import RBFBias, SumBias
from geonp.models.score import MASKED

attn_mod = importlib.import_module("geonp.models.attention")  # the package exports a function of that name


def _space_time(b: int, n: int, g: torch.Generator, frames: int = 4) -> torch.Tensor:
    """``[b, n, 3]`` points: space uniform on a few units, time on a few frames, each task centred apart."""
    t = torch.randint(-frames + 1, 1, (b, n, 1), generator=g).float() + 0.01 * torch.arange(b)[:, None, None]
    return torch.cat([torch.rand(b, n, 2, generator=g) * 6, t], -1)


def _sum_bias(heads: int = 4) -> SumBias:
    bias = SumBias([RBFBias(heads, 5, (0, 1), lengthscales=(0.1, 10.0)), RBFBias(heads, 3, (2,))])
    with torch.no_grad():  # weights of both signs, as trained ones may have
        for part in bias.parts:
            part.weight.normal_(generator=torch.Generator().manual_seed(3))
    return bias


def test_kernel_adds_a_table_in_the_same_pass_with_the_same_bits(kernel):
    g = torch.Generator().manual_seed(0)
    xq, xk = torch.rand(37, 2, generator=g) * 5, torch.rand(300, 2, generator=g) * 5
    rate, weight, heads = -torch.rand(7, generator=g) * 4, torch.randn(7, generator=g), torch.tensor([0, 3, 3, 7])
    iq = torch.randint(0, 4, (37,), generator=g, dtype=torch.int32)
    ik = torch.randint(0, 6, (300,), generator=g, dtype=torch.int32)
    table = torch.randn(3, 4, 6, generator=g)
    fused, apart, looked = torch.empty(3, 37, 300), torch.empty(3, 37, 300), torch.empty(3, 37, 300)
    kernel(xq, xk, rate, weight, heads, -100.0, fused, (iq, ik, table))
    kernel(xq, xk, rate, weight, heads, -100.0, apart)
    kernel.table(iq, ik, table, looked)
    assert torch.equal(fused, apart + looked)
    assert torch.equal(fused[1], looked[1])  # a head without terms is its table


def test_kernel_refuses_a_table_it_would_misread(kernel):
    xq, xk, out = torch.rand(4, 2), torch.rand(5, 2), torch.empty(2, 4, 5)
    rate, weight, heads = -torch.rand(3), torch.rand(3), torch.tensor([0, 1, 3])
    iq, ik, table = torch.zeros(4, dtype=torch.int32), torch.zeros(5, dtype=torch.int32), torch.rand(2, 1, 1)
    kernel(xq, xk, rate, weight, heads, -100.0, out, (iq, ik, table))
    with pytest.raises(ValueError, match="outside the 1 x 1 table"):
        kernel(xq, xk, rate, weight, heads, -100.0, out, (iq, ik + 1, table))
    with pytest.raises(ValueError, match=r"expected int32 indices \[4\] and \[5\], a float32 table \[2, uq, uk\]"):
        kernel(xq, xk, rate, weight, heads, -100.0, out, (iq, ik, torch.rand(3, 1, 1)))
    with pytest.raises(ValueError, match="expected int32 indices"):
        kernel(xq, xk, rate, weight, heads, -100.0, out, (iq.long(), ik, table))


def test_sum_bias_fused_equals_its_parts_added(kernel, monkeypatch):
    """One kernel pass per task, with the time table; tasks centred apart share one table of the batch's values."""
    g = torch.Generator().manual_seed(1)
    bias = _sum_bias()
    xq, xk = _space_time(3, 200, g), _space_time(3, 150, g)
    calls = []
    call = type(kernel).__call__
    monkeypatch.setattr(type(kernel), "__call__", lambda self, *a: calls.append(a[7] is not None) or call(self, *a))
    fused = bias.fast_bias(xq, xk)
    assert calls.count(True) == 3  # one call with a table per task (and one building the table)
    monkeypatch.setattr(SumBias, "_fused", lambda self, a, c: None)
    apart = bias.fast_bias(xq, xk)
    assert torch.equal(fused, apart)
    torch.testing.assert_close(fused, bias.bias(xq, xk).detach(), rtol=1e-5, atol=1e-5)


def test_sum_bias_not_fused_where_the_table_does_not_pay(kernel, monkeypatch):
    """Every point at its own time: no table, the parts are added as before."""
    g = torch.Generator().manual_seed(2)
    bias = _sum_bias()
    xq, xk = torch.rand(2, 100, 3, generator=g), torch.rand(2, 80, 3, generator=g)
    assert bias.parts[1].lookup(xq, xk) is None
    torch.testing.assert_close(bias.fast_bias(xq, xk), bias.bias(xq, xk).detach(), rtol=1e-5, atol=1e-5)


def test_one_key_tile_is_not_reordered(monkeypatch):
    """Several query tiles but one key tile: no sorting (it would only cost), the result equal to dense."""
    g = torch.Generator().manual_seed(4)
    bias = _sum_bias(2)
    q, k, v = (torch.randn(2, 2, n, 8, generator=g) for n in (300, 120, 120))
    xq, xk = _space_time(2, 300, g), _space_time(2, 120, g)
    sorted_calls = []
    real = attn_mod._sorted_forward
    monkeypatch.setattr(attn_mod, "_sorted_forward", lambda *a: sorted_calls.append(1) or real(*a))
    with torch.no_grad():
        out = tiled_attention(q, k, v, bias, xq, xk, q_tile=64, k_tile=128)
        assert not sorted_calls
        several = tiled_attention(q, k, v, bias, xq, xk, q_tile=64, k_tile=32)
        assert sorted_calls
        ref = dense_attention(q, k, v, bias, xq, xk)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(several, ref, rtol=1e-5, atol=1e-6)


def test_padding_in_the_same_pass_gives_the_same_mask(kernel, monkeypatch):
    """SDPA's float mask (bias plus MASKED at padded keys) from one kernel pass: the bits of adding it after."""
    g = torch.Generator().manual_seed(5)
    bias = _sum_bias()
    xq, xk = _space_time(3, 120, g), _space_time(3, 90, g)
    key_mask = torch.rand(3, 90, generator=g) > 0.3
    fused = bias.fast_mask(xq, xk, key_mask, torch.float32)
    monkeypatch.setattr(SumBias, "_fused", lambda self, *a: None)
    apart = bias.fast_mask(xq, xk, key_mask, torch.float32)
    assert torch.equal(fused, apart)
    assert bool((fused[..., ~key_mask[0]][0] == MASKED).all())
    with pytest.raises(ValueError, match=r"key_add must be float32 \[5\]"):
        kernel(torch.rand(4, 2), torch.rand(5, 2), -torch.rand(1), torch.rand(1), torch.tensor([0, 1]), -100.0,
               torch.empty(1, 4, 5), None, torch.zeros(4))


def test_a_table_without_the_compiled_kernel_is_refused(monkeypatch):
    from geonp.errors import ConfigError

    bias = _sum_bias()
    xq, xk = _space_time(1, 20, torch.Generator().manual_seed(6)), _space_time(1, 10, torch.Generator().manual_seed(7))
    monkeypatch.setattr(RBFBias, "_kernel", lambda self, x: None)
    with pytest.raises(ConfigError, match="needs the compiled kernel"):
        bias.parts[0]._rbf_sum(xq, xk, bias.parts[0].active_bases(xq, xk), key_add=torch.zeros(1, 10))
    assert bias._fused(xq, xk) is None  # the fused path is not taken without it
