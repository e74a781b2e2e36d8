"""The fused RBF bias kernel in C, compiled on first use; the torch path stands in when it cannot be.

:class:`~geonp.models.bias.RBFBias` evaluates ``Σ_f a_hf 2^(r_hf d²)`` for every query–key pair of
an attention tile. In torch that is several passes over a ``[terms, pairs]`` buffer (distances,
multiply, clamp, ``exp2``, a small product per head); ``_rbf_bias.c`` beside this file does it in one
pass per block of keys, with ``2^x`` computed inline so that the compiler vectorises the loop
(about 1.7 × faster per pair on the benchmark machine; ``docs/benchmarks.md``, "Fused RBF bias").

The source is plain C99 with no torch headers. The first call compiles it with the system C
compiler (``$CC``, else ``cc``, ``gcc`` or ``clang``; ``-O3 -march=native``, retried without
``-march=native``) into a cache folder (``$GEONP_CACHE_DIR``, else ``$XDG_CACHE_HOME/geonp`` or
``~/.cache/geonp``), under a name that hashes the source, the compiler, the flags and the CPU, so
nodes of a cluster sharing a home folder each get a build for their own CPU. The library is written
to a temporary name and renamed into place, so concurrent first uses never load a half-written file.
It is then checked against a float64 evaluation of the same sum before it is used.

No compiler, a failed build or a failed check: :func:`rbf_bias_kernel` returns ``None`` and geonp
uses the torch path (same results to float rounding; :func:`status` says why). ``GEONP_NATIVE=0``
turns the kernel off. Only float32 tensors on the CPU use it.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from torch import Tensor

__all__ = ["rbf_bias_kernel", "status", "ENV", "CACHE_ENV"]

#: environment variable: ``0`` turns the compiled kernel off (the torch path is used)
ENV = "GEONP_NATIVE"
#: environment variable: folder for the compiled library
CACHE_ENV = "GEONP_CACHE_DIR"
SOURCE = Path(__file__).with_name("_rbf_bias.c")
FLAGS = ("-O3", "-ffp-contract=fast", "-fPIC", "-shared", "-std=c99")
#: tried first: this CPU's instruction set, and vectorised float sums (``omp simd`` pragmas; no OpenMP runtime)
BEST_FLAGS = ("-march=native", "-fopenmp-simd")
#: pairs per call below which splitting the rows over threads costs more than it saves
PARALLEL_PAIRS = 2**18

_lock = threading.Lock()
_state: dict = {"tried": False, "kernel": None, "why": "not built yet"}
_pool: ThreadPoolExecutor | None = None


def _after_fork_in_child() -> None:
    """Start afresh in a forked child: it has none of the parent's pool threads, and the lock may be held."""
    global _pool, _lock
    _pool, _lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def status() -> str:
    """Return why the kernel is or is not in use (``"ready: <path>"`` when it is)."""
    if os.environ.get(ENV, "1").strip() == "0":
        return f"disabled by {ENV}=0 (the torch path is used); unset {ENV} to use the compiled kernel"
    return _state["why"]


def rbf_bias_kernel() -> _Kernel | None:
    """Return the compiled kernel, building it on first use; ``None`` when it is off or cannot be built."""
    if os.environ.get(ENV, "1").strip() == "0":
        return None
    if not _state["tried"]:
        with _lock:
            if not _state["tried"]:
                _state["kernel"], _state["why"] = _load()
                _state["tried"] = True
    return _state["kernel"]


def _reset() -> None:
    """Forget the loaded kernel (tests)."""
    with _lock:
        _state.update(tried=False, kernel=None, why="not built yet")


class _Kernel:
    """Callable wrapper of ``geonp_rbf_bias_f32`` (see ``_rbf_bias.c``)."""

    def __init__(self, lib: ctypes.CDLL, path: Path) -> None:
        fn = lib.geonp_rbf_bias_f32
        ptr, i64 = ctypes.c_void_p, ctypes.c_int64
        fn.argtypes = [ptr, i64, ptr, i64, i64, ptr, ptr, ptr, i64, ctypes.c_float, ptr, ptr, ptr, i64, i64, ptr, ptr,
                       i64, i64]
        fn.restype = None
        grad = lib.geonp_rbf_bias_grad_f32
        grad.argtypes = [ptr, i64, ptr, i64, i64, ptr, ptr, i64, ctypes.c_float, ptr, i64, i64, ptr, ptr]
        grad.restype = None
        table = lib.geonp_table_bias_f32
        table.argtypes = [ptr, i64, ptr, i64, ptr, i64, i64, i64, ptr, i64, i64]
        table.restype = None
        self._fn, self._grad, self._table, self._lib, self.path = fn, grad, table, lib, path

    def __call__(self, xq: Tensor, xk: Tensor, rate: Tensor, weight: Tensor, head_start: Tensor,
                 min_exp: float, out: Tensor, table: tuple[Tensor, Tensor, Tensor] | None = None,
                 key_add: Tensor | None = None) -> None:
        """Write ``out[h, i, j] = Σ_t weight[t] 2^max(rate[t] |xq_i − xk_j|², min_exp)`` over head h's terms.

        Parameters
        ----------
        xq, xk : Tensor
            ``[nq, c]`` and ``[nk, c]`` float32 coordinates.
        rate, weight : Tensor
            ``[terms]`` float32: base-2 rates (negative) and weights, ordered by head.
        head_start : Tensor
            ``[h + 1]`` int64: head ``h`` owns terms ``head_start[h]:head_start[h + 1]``.
        min_exp : float
            Lower clamp of the exponents (keeps ``2^x`` a normal float).
        out : Tensor
            ``[h, nq, nk]`` float32 whose last dim is contiguous; written in place.
        table : (Tensor, Tensor, Tensor), optional
            ``(iq [nq], ik [nk], values [h, uq, uk])``: int32 indices and a float32 table whose value
            ``values[h, iq[i], ik[j]]`` is added to each sum in the same pass (a second bias on a coordinate
            with few distinct values), rounded as the sum and the table added apart would be.
        key_add : Tensor, optional
            ``[nk]`` float32 added last to every row, the same way (padding: 0 or ``MASKED``).
        """
        rows = _rows(xq, xk, out, "out")
        if rows is None:
            return
        xq, xk_t, bounds = rows
        weight, rate, head_start = _terms(weight), _terms(rate), _heads(head_start, out, rate)
        hs, rs, item = out.stride(0), out.stride(1), out.element_size()
        iq = ik = values = None
        if table is not None:
            iq, ik, values = _check_table(*table, out)
        if key_add is not None:
            if key_add.dtype != torch.float32 or tuple(key_add.shape) != (xk.shape[0],):
                raise ValueError(f"key_add must be float32 [{xk.shape[0]}], got {key_add.dtype} {tuple(key_add.shape)}")
            key_add = key_add.contiguous()
        args = (xk_t.data_ptr(), xk.shape[0], xq.shape[1], rate.data_ptr(), weight.data_ptr(), head_start.data_ptr(),
                out.shape[0], float(min_exp))
        uq, uk = (values.shape[1], values.shape[2]) if values is not None else (0, 0)
        _run([(self._fn, xq[r0].data_ptr(), r1 - r0, *args,
               None if iq is None else iq.data_ptr() + r0 * iq.element_size(),
               None if ik is None else ik.data_ptr(), None if values is None else values.data_ptr(), uq, uk,
               None if key_add is None else key_add.data_ptr(), out.data_ptr() + r0 * rs * item, hs, rs)
              for r0, r1 in zip(bounds[:-1], bounds[1:])])

    def table(self, iq: Tensor, ik: Tensor, table: Tensor, out: Tensor) -> None:
        """Write ``out[h, i, j] = table[h, iq[i], ik[j]]``: ``iq [nq]``, ``ik [nk]`` int32, ``table [h, uq, uk]``."""
        _lookup(self, iq, ik, table, out)

    def grad(self, xq: Tensor, xk: Tensor, rate: Tensor, head_start: Tensor, min_exp: float, grad: Tensor,
             g_weight: Tensor, g_decay: Tensor) -> None:
        """Add the gradient sums of the same bias for ``grad [h, nq, nk]`` to ``g_weight`` and ``g_decay``.

        ``g_weight[t] += Σ grad · 2^e`` and ``g_decay[t] += Σ grad · d² · 2^e`` over head t's pairs, with
        ``e = max(rate[t] d², min_exp)``; both ``[terms]`` float64 (see ``RBFBias.bias_grad``).
        """
        rows = _rows(xq, xk, grad, "grad")
        if rows is None:
            return
        xq, xk_t, bounds = rows
        rate, head_start = _terms(rate), _heads(head_start, grad, rate)
        if g_weight.dtype != torch.float64 or g_decay.dtype != torch.float64 or not (
                g_weight.is_contiguous() and g_decay.is_contiguous() and len(g_weight) == len(g_decay) == len(rate)):
            raise ValueError("g_weight and g_decay must be contiguous float64 tensors of one value per term")
        hs, rs, item = grad.stride(0), grad.stride(1), grad.element_size()
        args = (xk_t.data_ptr(), xk.shape[0], xq.shape[1], rate.data_ptr(), head_start.data_ptr(), grad.shape[0],
                float(min_exp))
        sums = [(g_weight, g_decay)] + [(torch.zeros_like(g_weight), torch.zeros_like(g_decay)) for _ in bounds[2:]]
        calls = [(self._grad, xq[r0].data_ptr(), r1 - r0, *args, grad.data_ptr() + r0 * rs * item, hs, rs,
                  gw.data_ptr(), gd.data_ptr()) for (r0, r1), (gw, gd) in zip(zip(bounds[:-1], bounds[1:]), sums)]
        _run(calls)
        for gw, gd in sums[1:]:
            g_weight += gw
            g_decay += gd


def _lookup(kernel: _Kernel, iq: Tensor, ik: Tensor, table: Tensor, out: Tensor) -> None:
    """Write ``out[h, i, j] = table[h, iq[i], ik[j]]`` (``iq``, ``ik`` int32 indices into ``table [h, uq, uk]``)."""
    iq, ik, table = _check_table(iq, ik, table, out)
    h, uq, uk = table.shape
    nq, nk = len(iq), len(ik)
    if out.dtype != torch.float32:
        raise ValueError(f"out must be float32, got {out.dtype}")
    if nq == 0 or nk == 0:
        return
    parts = min(torch.get_num_threads(), nq, max(1, (nq * nk) // PARALLEL_PAIRS))
    bounds = [nq * p // parts for p in range(parts + 1)]
    hs, rs, item = out.stride(0), out.stride(1), out.element_size()
    _run([(kernel._table, iq.data_ptr() + r0 * iq.element_size(), r1 - r0, ik.data_ptr(), nk, table.data_ptr(),
           uq, uk, h, out.data_ptr() + r0 * rs * item, hs, rs) for r0, r1 in zip(bounds[:-1], bounds[1:])])


def _check_table(iq: Tensor, ik: Tensor, table: Tensor, out: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Check a table and its indices (C trusts them); return them contiguous.

    ``iq [nq]``, ``ik [nk]``: int32 indices into the float32 ``table [h, uq, uk]``, for ``out [h, nq, nk]``
    with a contiguous last dim.
    """
    h, nq, nk = out.shape
    if table.dim() != 3 or table.dtype != torch.float32 or out.stride(-1) != 1 or table.shape[0] != h \
            or tuple(iq.shape) != (nq,) or tuple(ik.shape) != (nk,) or iq.dtype != torch.int32 \
            or ik.dtype != torch.int32:
        raise ValueError(f"expected int32 indices [{nq}] and [{nk}], a float32 table [{h}, uq, uk] and out "
                         f"[{h}, {nq}, {nk}] with a contiguous last dim, got {iq.dtype} {tuple(iq.shape)}, {ik.dtype} "
                         f"{tuple(ik.shape)}, {table.dtype} {tuple(table.shape)}, out {tuple(out.shape)}")
    uq, uk = table.shape[1], table.shape[2]
    if (nq and (int(iq.min()) < 0 or int(iq.max()) >= uq)) or (nk and (int(ik.min()) < 0 or int(ik.max()) >= uk)):
        raise ValueError(f"indices outside the {uq} x {uk} table")
    return iq.contiguous(), ik.contiguous(), table.contiguous()


def _rows(xq: Tensor, xk: Tensor, pairs: Tensor, name: str) -> tuple[Tensor, Tensor, list[int]] | None:
    """Contiguous ``xq``, transposed ``xk`` and the row bounds of the parallel parts; ``None`` when empty.

    ``pairs`` is the ``[h, nq, nk]`` tensor the kernel writes or reads (float32, last dim contiguous).
    """
    nq, nk = xq.shape[0], xk.shape[0]
    if xq.dtype != torch.float32 or xk.dtype != torch.float32 or xq.dim() != 2 or xk.shape[1:] != xq.shape[1:] \
            or pairs.dim() != 3 or tuple(pairs.shape[1:]) != (nq, nk):
        raise ValueError(f"expected float32 xq [nq, c], xk [nk, c] and {name} [h, nq, nk], got {xq.dtype} "
                         f"{tuple(xq.shape)}, {xk.dtype} {tuple(xk.shape)} and {tuple(pairs.shape)}")
    if nq == 0 or nk == 0:
        return None
    if pairs.stride(-1) != 1 or pairs.dtype != torch.float32:
        raise ValueError(f"{name} must be float32 with a contiguous last dimension")
    # ctypes releases the GIL during the call, so row blocks run in parallel, as torch's own ops would
    parts = min(torch.get_num_threads(), nq, max(1, (nq * nk) // PARALLEL_PAIRS))
    return xq.contiguous(), xk.t().contiguous(), [nq * p // parts for p in range(parts + 1)]


def _terms(values: Tensor) -> Tensor:
    if values.dtype != torch.float32 or values.dim() != 1:
        raise ValueError(
            f"term rates and weights must be 1-D float32, got {values.dtype} of shape {tuple(values.shape)}")
    return values.contiguous()


def _heads(head_start: Tensor, pairs: Tensor, rate: Tensor) -> Tensor:
    """Check ``head_start`` (``[h + 1]`` int64, rising from 0 to at most the number of terms): C trusts it."""
    starts, h = head_start.tolist(), pairs.shape[0]
    ok = head_start.dtype == torch.int64 and len(starts) == h + 1 and starts[0] == 0 and starts[-1] <= len(rate)
    if not ok or any(a > b for a, b in zip(starts, starts[1:])):
        raise ValueError(f"head_start must rise from 0 to at most {len(rate)} terms in {h} heads, got {starts}")
    return head_start.contiguous()


def _run(calls: list[tuple]) -> None:
    """Run ``fn(*args)`` for each ``(fn, *args)``: the first here, the others on the pool, all at once."""
    jobs = [_executor().submit(*call) for call in calls[1:]]
    calls[0][0](*calls[0][1:])
    for job in jobs:
        job.result()


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="geonp-rbf")
    return _pool


def _cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "geonp"


def _compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _cpu_id() -> str:
    """Return what identifies this CPU's instruction set (the flags line of /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return line
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _build(cc: str, flags: tuple[str, ...], folder: Path) -> Path:
    """Compile the source with these flags into ``folder`` (atomically); return the library's path."""
    version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    parts = (SOURCE.read_text(), cc, version, " ".join(flags), platform.machine(), _cpu_id())
    key = hashlib.sha256(b"\0".join(s.encode() for s in parts)).hexdigest()[:16]
    path = folder / f"rbf_bias-{key}.so"
    if path.exists():
        return path
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".rbf_bias-", suffix=".so", dir=folder)
    os.close(fd)
    try:
        done = subprocess.run([cc, *flags, "-o", tmp, str(SOURCE)], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"{cc} failed: {done.stderr.strip()[:500]}")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _load() -> tuple[_Kernel | None, str]:
    cc = _compiler()
    if cc is None:
        return None, "no C compiler found (set CC); using the torch path"
    errors = []
    for folder in (_cache_dir(), Path(tempfile.gettempdir()) / f"geonp-{os.getuid() if hasattr(os, 'getuid') else 0}"):
        for flags in ((*BEST_FLAGS, *FLAGS), FLAGS):
            try:
                path = _build(cc, flags, folder)
                kernel = _Kernel(ctypes.CDLL(str(path)), path)
            except (OSError, RuntimeError, subprocess.SubprocessError) as err:
                errors.append(f"{' '.join(flags[:1])} in {folder}: {err}")
                continue
            problem = _self_check(kernel)
            if problem is None:
                return kernel, f"ready: {path}"
            errors.append(f"{path}: {problem}")
    return None, "the fused RBF kernel is not used (" + "; ".join(errors) + "); using the torch path"


def _self_check(kernel: _Kernel) -> str | None:
    """Compare the kernel with a float64 evaluation of the same sum; ``None`` when it agrees."""
    g = torch.Generator().manual_seed(0)
    xq, xk = torch.rand(37, 2, generator=g) * 8, torch.rand(300, 2, generator=g) * 8
    rate = -torch.rand(7, generator=g) * 4 - 0.01
    weight = torch.randn(7, generator=g)
    head_start = torch.tensor([0, 3, 3, 7])
    out = torch.empty(3, 37, 300)
    kernel(xq, xk, rate, weight, head_start, -115.0, out)
    d2 = (xq.double()[:, None, :] - xk.double()[None, :, :]).square().sum(-1)
    ref = torch.zeros(3, 37, 300, dtype=torch.float64)
    for h in range(3):
        for t in range(int(head_start[h]), int(head_start[h + 1])):
            ref[h] += weight[t].double() * torch.exp2(torch.clamp(rate[t].double() * d2, min=-115.0))
    err = float((out.double() - ref).abs().max())
    return None if err <= 1e-5 else f"self-check error {err:.2e} > 1e-5"
