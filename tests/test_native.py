"""The compiled RBF bias kernel (geonp/models/native.py): exact to float32 rounding, and optional."""

from __future__ import annotations

import pytest
import torch

from geonp.models import native
from geonp.models.bias import RBFBias
from geonp.models.score import LOG2E, MIN_EXPONENT


@pytest.fixture
def fresh_state(monkeypatch, tmp_path):
    """Give the test a kernel state of its own, built into tmp_path; restore the shared one afterwards."""
    saved = dict(native._state)
    monkeypatch.delenv(native.ENV, raising=False)
    monkeypatch.setenv(native.CACHE_ENV, str(tmp_path))
    native._reset()
    yield tmp_path
    native._state.update(saved)


def _reference(xq, xk, rate, weight, head_start, nheads):
    d2 = (xq.double()[:, None, :] - xk.double()[None, :, :]).square().sum(-1)
    ref = torch.zeros(nheads, *d2.shape, dtype=torch.float64)
    for h in range(nheads):
        for t in range(int(head_start[h]), int(head_start[h + 1])):
            ref[h] += weight[t].double() * torch.exp2(torch.clamp(rate[t].double() * d2, min=LOG2E * MIN_EXPONENT))
    return ref


def test_exp2_within_float32_rounding_over_the_whole_range(kernel):
    """One term with rate -1 gives 2^(-d²) for d² from 0 to past the clamp: within 2 float32 eps (relative)."""
    d2 = torch.cat([torch.linspace(0, 2, 20001), torch.linspace(2, 130, 20001)]).float()
    xk = d2.sqrt()[:, None]
    out = torch.empty(1, 1, len(d2))
    kernel(torch.zeros(1, 1), xk, torch.tensor([-1.0]), torch.tensor([1.0]), torch.tensor([0, 1]),
           LOG2E * MIN_EXPONENT, out)
    d2_used = (xk[:, 0] * xk[:, 0]).double()  # what the kernel squares, rounded as float32
    ref = torch.exp2(torch.clamp(-d2_used, min=LOG2E * MIN_EXPONENT))
    rel = ((out[0, 0].double() - ref) / ref).abs()
    assert float(rel.max()) < 4 * torch.finfo(torch.float32).eps / 2


@pytest.mark.parametrize("ncol", [1, 2, 3])
def test_kernel_matches_float64_sum(kernel, ncol):
    """Heads with 0, 3, 5 and 7 terms, keys not a multiple of the block, a strided output."""
    g = torch.Generator().manual_seed(ncol)
    nq, nk = 9, 700
    xq, xk = torch.rand(nq, ncol, generator=g) * 6, torch.rand(nk, ncol, generator=g) * 6
    head_start = torch.tensor([0, 3, 3, 8, 15])
    rate = -torch.rand(15, generator=g) * 3 - 1e-3
    weight = torch.randn(15, generator=g)
    big = torch.full((2, 4, nq + 2, nk), float("nan"))
    out = big[1, :, 1 : nq + 1]  # [h, nq, nk]: head and row strides of the larger buffer
    kernel(xq, xk, rate, weight, head_start, LOG2E * MIN_EXPONENT, out)
    ref = _reference(xq, xk, rate, weight, head_start, 4)
    assert bool((out[1] == 0).all())
    torch.testing.assert_close(out.double(), ref, rtol=0, atol=1e-6 * float(ref.abs().max()))
    assert bool(big[0].isnan().all()) and bool(big[1, :, 0].isnan().all()) and bool(big[1, :, -1].isnan().all())


def test_rows_split_over_threads_give_the_same_bits(kernel, monkeypatch):
    g = torch.Generator().manual_seed(3)
    xq, xk = torch.rand(301, 2, generator=g) * 20, torch.rand(257, 2, generator=g) * 20
    args = (xq, xk, -torch.rand(5, generator=g), torch.randn(5, generator=g), torch.tensor([0, 5]), -100.0)
    monkeypatch.setattr(native, "PARALLEL_PAIRS", 1000)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = torch.empty(1, 301, 257)
        kernel(*args, one)
        torch.set_num_threads(3)
        split = torch.empty(1, 301, 257)
        kernel(*args, split)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, split)


def test_rbf_bias_uses_the_kernel_for_float32_euclidean_only(kernel, monkeypatch):
    calls = []
    call = type(kernel).__call__

    def spy(self, *args):
        calls.append(args[0].dtype)
        return call(self, *args)

    monkeypatch.setattr(type(kernel), "__call__", spy)
    xq, xk = torch.rand(2, 30, 2) * 4, torch.rand(2, 40, 2) * 4
    for bias, dtype, used in ((RBFBias(2, 5, (0, 1)), torch.float32, True),
                              (RBFBias(2, 5, (0, 1)), torch.float64, False),
                              (RBFBias(2, 5, (0, 1), metric="geodesic"), torch.float32, False)):
        bias = bias.to(dtype)
        calls.clear()
        fast = bias.fast_bias(xq.to(dtype), xk.to(dtype))
        assert bool(calls) == used
        eps = torch.finfo(dtype).eps
        torch.testing.assert_close(fast, bias.bias(xq.to(dtype), xk.to(dtype)).detach(), rtol=64 * eps, atol=64 * eps)


def test_turned_off_by_the_environment(fresh_state, monkeypatch):
    monkeypatch.setenv(native.ENV, "0")
    assert native.rbf_bias_kernel() is None
    bias = RBFBias(2, 5, (0, 1))
    xq, xk = torch.rand(1, 20, 2), torch.rand(1, 30, 2)
    torch.testing.assert_close(bias.fast_bias(xq, xk), bias.bias(xq, xk).detach(), rtol=1e-6, atol=1e-6)


def test_a_failed_build_falls_back_to_torch_and_says_why(fresh_state, monkeypatch):
    monkeypatch.setenv("CC", "false")  # a "compiler" that always fails
    assert native.rbf_bias_kernel() is None
    assert "not used" in native.status() and "failed" in native.status()
    assert not list(fresh_state.glob("*.so"))  # nothing half-written is left behind
    bias = RBFBias(2, 5, (0, 1))
    xq, xk = torch.rand(1, 20, 2), torch.rand(1, 30, 2)
    torch.testing.assert_close(bias.fast_bias(xq, xk), bias.bias(xq, xk).detach(), rtol=1e-6, atol=1e-6)


def test_a_kernel_failing_its_self_check_is_not_used(fresh_state, monkeypatch):
    if native._compiler() is None:
        pytest.skip("no C compiler here")
    monkeypatch.setattr(native, "_self_check", lambda kernel: "self-check error 1.00e+00 > 1e-5")
    assert native.rbf_bias_kernel() is None
    assert "self-check error" in native.status()


def test_no_compiler_found(fresh_state, monkeypatch):
    monkeypatch.setattr(native.shutil, "which", lambda name: None)
    assert native.rbf_bias_kernel() is None
    assert native.status().startswith("no C compiler found")


def test_built_once_into_the_cache_folder(fresh_state):
    if native._compiler() is None:
        pytest.skip("no C compiler here")
    k = native.rbf_bias_kernel()
    assert k is not None and native.status() == f"ready: {k.path}"
    assert k.path.parent == fresh_state and [p.name for p in fresh_state.iterdir()] == [k.path.name]
    native._reset()
    again = native.rbf_bias_kernel()
    assert again.path == k.path  # the cached library is loaded, not rebuilt


def test_gradient_sums_match_float64(kernel, monkeypatch):
    """``grad`` adds Σ g 2^e and Σ g d² 2^e per term, split over threads or not."""
    g = torch.Generator().manual_seed(5)
    xq, xk = torch.rand(300, 2, generator=g) * 5, torch.rand(520, 2, generator=g) * 5
    head_start = torch.tensor([0, 5, 10])
    rate = -torch.rand(10, generator=g) * 2 - 1e-3
    big = torch.randn(2, 300, 530, generator=g)
    grad = big[:, :, 5:525]  # strided rows
    d2 = (xq.double()[:, None] - xk.double()[None]).square().sum(-1)
    monkeypatch.setattr(native, "PARALLEL_PAIRS", 4096)
    threads = torch.get_num_threads()
    try:
        for n in (1, 2):
            torch.set_num_threads(n)
            gw, gd = torch.full((10,), 1.0, dtype=torch.float64), torch.zeros(10, dtype=torch.float64)
            kernel.grad(xq, xk, rate, head_start, LOG2E * MIN_EXPONENT, grad, gw, gd)
            for t in range(10):
                e = torch.exp2(torch.clamp(rate[t].double() * d2, min=LOG2E * MIN_EXPONENT)) * grad[t // 5].double()
                torch.testing.assert_close(gw[t], 1.0 + e.sum(), rtol=1e-5, atol=1e-5)
                torch.testing.assert_close(gd[t], (e * d2).sum(), rtol=1e-5, atol=1e-5)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("bias_path", ["compiled", "torch"])
def test_rbf_bias_gradients_in_float32_match_float64_autograd(bias_path, monkeypatch):
    if bias_path == "torch":
        monkeypatch.setenv(native.ENV, "0")
    elif native.rbf_bias_kernel() is None:
        pytest.skip(f"no compiled kernel here: {native.status()}")
    bias = RBFBias(3, 5, (0, 1), lengthscales=(0.2, 3.0))
    g = torch.Generator().manual_seed(6)
    xq, xk = torch.randn(2, 40, 2, generator=g) * 2, torch.randn(2, 60, 2, generator=g) * 2
    grad = torch.randn(2, 3, 40, 60, generator=g)
    fast = bias.bias_grad(xq, xk, grad)
    ref = bias.double()
    auto = torch.autograd.grad((ref.bias(xq.double(), xk.double()) * grad.double()).sum(), list(ref.parameters()))
    for a, b in zip(fast, auto):
        torch.testing.assert_close(a.double(), b, rtol=1e-5, atol=1e-5 * float(b.abs().max()))


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_forked_child_splits_rows_over_threads_without_hanging(kernel, monkeypatch):
    """The parent's pool threads do not exist in a forked child: the child starts its own."""
    import os
    import signal

    monkeypatch.setattr(native, "PARALLEL_PAIRS", 1000)
    g = torch.Generator().manual_seed(8)
    args = (torch.rand(64, 2, generator=g), torch.rand(200, 2, generator=g), -torch.rand(3, generator=g),
            torch.randn(3, generator=g), torch.tensor([0, 3]), -100.0)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        parent = torch.empty(1, 64, 200)
        kernel(*args, parent)  # the pool now has threads in this process
        pid = os.fork()
        if pid == 0:  # child: exit 0 only if the split call finishes and agrees
            signal.alarm(30)
            code = 1
            try:
                child = torch.empty(1, 64, 200)
                kernel(*args, child)
                code = 0 if torch.equal(child, parent) else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        torch.set_num_threads(threads)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_inputs_the_c_code_would_misread_are_refused(kernel):
    xq, xk, out = torch.rand(4, 2), torch.rand(5, 2), torch.empty(2, 4, 5)
    rate, weight, heads = -torch.rand(3), torch.rand(3), torch.tensor([0, 1, 3])
    with pytest.raises(ValueError, match="expected float32 xq"):
        kernel(xq.double(), xk, rate, weight, heads, -100.0, out)
    with pytest.raises(ValueError, match=r"out \[h, nq, nk\]"):
        kernel(xq, xk, rate, weight, heads, -100.0, torch.empty(2, 5, 4))
    with pytest.raises(ValueError, match="1-D float32"):
        kernel(xq, xk, rate.double(), weight, heads, -100.0, out)
    with pytest.raises(ValueError, match=r"rise from 0 to at most 3 terms in 2 heads, got \[0, 2, 4\]"):
        kernel(xq, xk, rate, weight, torch.tensor([0, 2, 4]), -100.0, out)
    with pytest.raises(ValueError, match="contiguous last dimension"):
        kernel(xq, xk, rate, weight, heads, -100.0, torch.empty(2, 5, 4).transpose(1, 2))
    gw = torch.zeros(3, dtype=torch.float64)
    with pytest.raises(ValueError, match="float64 tensors of one value per term"):
        kernel.grad(xq, xk, rate, heads, -100.0, out, gw, torch.zeros(2, dtype=torch.float64))


def test_time_bias_looked_up_from_a_table_equals_the_direct_sum(kernel, monkeypatch):
    """A 1-D coordinate with few distinct values (frames) is looked up: the same bits as evaluating every pair."""
    bias = RBFBias(4, 3, (2,), lengthscales=(0.5, 30.0))
    g = torch.Generator().manual_seed(9)
    frames = lambda n: torch.randint(-3, 1, (2, n, 1), generator=g).float()  # noqa: E731
    xq = torch.cat([torch.rand(2, 500, 2, generator=g), frames(500)], -1)
    xk = torch.cat([torch.rand(2, 300, 2, generator=g), frames(300)], -1)
    looked_up = []
    call = type(kernel).table
    monkeypatch.setattr(type(kernel), "table", lambda self, *a: looked_up.append(1) or call(self, *a))
    fast = bias.fast_bias(xq, xk)
    assert len(looked_up) == 2 and fast.is_contiguous()
    assert torch.equal(fast, bias._rbf_sum(xq, xk, bias.active_bases(xq, xk)))
    looked_up.clear()
    xq[..., 2] = torch.rand(2, 500, generator=g)  # every point at its own time: no table
    xk[..., 2] = torch.rand(2, 300, generator=g)
    bias.fast_bias(xq, xk)
    assert not looked_up


def test_table_lookup_refuses_what_it_would_misread(kernel):
    table, out = torch.rand(2, 3, 4), torch.empty(2, 5, 6)
    iq, ik = torch.zeros(5, dtype=torch.int32), torch.zeros(6, dtype=torch.int32)
    kernel.table(iq, ik, table, out)
    assert torch.equal(out, table[:, :1, :1].expand(2, 5, 6))
    with pytest.raises(ValueError, match="expected int32 indices"):
        kernel.table(iq.long(), ik, table, out)
    with pytest.raises(ValueError, match="outside the 3 x 4 table"):
        kernel.table(iq, ik + 4, table, out)
