"""Additive attention biases of raw coordinates (TE attention's logit function is ``te_layers.TEScore``).

* :class:`RBFBias` – BSA-TNP's RBF network, ``Σ_f a_hf exp(-b_hf d²)`` per head (003 eq. 4), on
  Euclidean distance or on great-circle distance (``metric="geodesic"``, 003 App. B).
* :class:`SumBias` – the sum of several biases (space + time, eq. 3).

All of them depend on coordinates only through differences (or great-circle
distances), which is what makes the models translation (rotation) invariant.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..errors import ConfigError, UnknownOptionError
from . import whole_tile
from .distances import great_circle_sqdist, pairwise_sqdist, unit_vectors
from .native import rbf_bias_kernel
from .score import LOG2E, MIN_EXPONENT, ScoreMod, add_padding, key_padding
from .whole_tile import whole_tiles

__all__ = ["RBFBias", "SumBias", "pairwise_sqdist", "great_circle_sqdist", "METRICS"]

METRICS = ("euclidean", "geodesic")
#: query-key pairs per chunk of the bias evaluation: the ``h × F`` terms of one chunk (5 MB in float32 for
#: 4 heads × 5 bases) stay in cache while they are evaluated and summed
BIAS_CHUNK = 2**16
#: a bias on one coordinate is looked up from a table of its distinct values when the table has at
#: most 1/TABLE_FACTOR of the tile's pairs (time in a window of frames; RBFBias._table_bias)
TABLE_FACTOR = 64


class RBFBias(ScoreMod):
    """Per-head RBF-network bias on the distance between selected coordinate columns.

    ``B_h = Σ_f a_hf exp(-b_hf d²)`` with ``b_hf = 1 / (2 ℓ_hf²)`` kept positive
    through ``log ℓ``; lengthscales start log-spaced over ``lengthscales``.

    Parameters
    ----------
    num_heads : int
        Number of attention heads ``h``.
    num_bases : int
        RBF bases per head ``F`` (5 for space, 3 for time in the paper).
    columns : tuple of int
        Coordinate columns the distance is measured on.
    metric : {"euclidean", "geodesic"}
        ``"geodesic"`` reads the two columns as longitude, latitude in degrees.
    lengthscales : (float, float)
        Initial range of lengthscales, in coordinate units.
    """

    def __init__(self, num_heads: int, num_bases: int, columns: tuple[int, ...], *, metric: str = "euclidean",
                 lengthscales: tuple[float, float] = (0.03, 3.0)) -> None:
        super().__init__()
        if metric not in METRICS:
            raise UnknownOptionError(f"unknown bias metric {metric!r}; expected one of {METRICS}.")
        if metric == "geodesic" and len(columns) != 2:
            raise ConfigError(
                f"the geodesic bias needs exactly 2 columns (longitude, latitude), got {len(columns)}; "
                "use metric='euclidean' for projected coordinates."
            )
        if not columns:
            raise ConfigError("a bias needs at least one coordinate column to measure distances on; got columns=().")
        lo, hi = lengthscales
        if not 0 < lo <= hi:
            raise ConfigError(f"lengthscales must satisfy 0 < low <= high, got {lengthscales}.")
        self.num_heads, self.num_bases, self.metric = num_heads, num_bases, metric
        self.columns = tuple(int(c) for c in columns)
        grid = torch.linspace(math.log(lo), math.log(hi), num_bases)
        # heads start on interleaved grids so they do not all learn the same thing
        offsets = torch.linspace(0, 1, num_heads + 1)[:-1, None] * (grid[1] - grid[0] if num_bases > 1 else 0.0)
        self.log_lengthscale = nn.Parameter(grid[None, :] + offsets)  # [h, F]
        self.weight = nn.Parameter(torch.ones(num_heads, num_bases))  # a_hf: nearby points start +F logits up

    def sqdist(self, xq: Tensor, xk: Tensor) -> Tensor:
        """Squared distances ``[b, nq, nk]`` on this bias' columns."""
        cols = list(self.columns)
        xq, xk = xq[..., cols], xk[..., cols]
        return great_circle_sqdist(xq, xk) if self.metric == "geodesic" else pairwise_sqdist(xq, xk)

    def rate(self) -> Tensor:
        """``b_hf = 1 / (2 ℓ²)``, shape ``[h, F]``."""
        return 0.5 * torch.exp(-2.0 * self.log_lengthscale)

    def bias(self, xq: Tensor, xk: Tensor) -> Tensor:
        d2 = self.sqdist(xq, xk)[:, None, :, :, None]  # [b, 1, nq, nk, 1]
        rate = self.rate()[None, :, None, None, :]  # [1, h, 1, 1, F]
        basis = torch.exp(torch.clamp(-rate * d2, min=MIN_EXPONENT))  # [b, h, nq, nk, F]
        return (basis * self.weight[None, :, None, None, :]).sum(-1)  # [b, h, nq, nk]

    @property
    def order_columns(self) -> tuple[int, ...]:
        """Columns whose bounding boxes bound the Euclidean distance (none for the geodesic metric)."""
        return self.columns if self.metric == "euclidean" else ()

    @torch.no_grad()
    def fast_bias(self, xq: Tensor, xk: Tensor) -> Tensor | None:
        active = self.active_bases(xq, xk)
        if not any(any(row) for row in active):
            return None
        row = self._shared_query_bias(xq, xk, active)
        if row is not None:
            return row
        table = self._table_bias(xq, xk, active)
        return table if table is not None else self._rbf_sum(xq, xk, active)

    @torch.no_grad()
    def active_bases(self, xq: Tensor, xk: Tensor) -> list[list[bool]]:
        """Which ``(head, basis)`` terms can exceed the dtype's resolution anywhere on this tile.

        A term ``a exp(-b d²)`` is below ``eps / 10`` for every pair when ``b d²_min > ln(10 |a| / eps)``,
        with ``d²_min`` the squared distance between the bounding boxes of ``xq`` and ``xk``. Skipping such
        terms changes the logits by less than float rounding; terms with ``a = 0`` are always skipped.
        """
        weight = self.weight.detach().abs()
        if self.metric != "euclidean" or xq.shape[1] == 0 or xk.shape[1] == 0:
            return (weight > 0).tolist()
        cols = list(self.columns)
        pq, pk = xq[..., cols], xk[..., cols]
        gap = torch.maximum(pk.amin(1) - pq.amax(1), pq.amin(1) - pk.amax(1)).clamp_min(0)  # [b, c]
        d2_min = float(gap.square().sum(-1).min())
        if d2_min == 0.0:
            return (weight > 0).tolist()
        tol = torch.finfo(xq.dtype).eps / 10
        return (self.rate().detach() * d2_min < torch.log(weight / tol)).tolist()  # log 0 = -inf: skipped

    def _kernel(self, xq: Tensor):
        """Return the compiled kernel (geonp/models/native.py) where it applies (float32, CPU, Euclidean), else None."""
        if xq.dtype != torch.float32 or xq.device.type != "cpu" or self.metric != "euclidean":
            return None
        return rbf_bias_kernel()

    def _chunks(self, xq: Tensor, xk: Tensor):
        """Yield ``(j, r0, r1, d2)``: task ``j``'s query rows ``r0:r1`` and their squared distances ``[1, n]``.

        A chunk holds about :data:`BIAS_CHUNK` query-key pairs of one task, so that the ``h × F`` terms
        of one chunk stay in the CPU cache while every term is evaluated (one pass per term over a
        whole tile would stream it through memory ``4 h F`` times), and so that the chunk's rows of
        ``[b, h, nq, nk]`` are one ``[h, n]`` view per task: written and read in place, never copied.
        """
        b, nq, nk = xq.shape[0], xq.shape[1], xk.shape[1]
        rows = max(1, BIAS_CHUNK // max(1, nk))
        for j in range(b):
            for r0 in range(0, nq, rows):
                r1 = min(nq, r0 + rows)
                yield j, r0, r1, self.sqdist(xq[j : j + 1, r0:r1], xk[j : j + 1]).reshape(1, -1)

    def _rbf_sum(self, xq: Tensor, xk: Tensor, active: list[list[bool]], table=None,
                 key_add: Tensor | None = None) -> Tensor:
        """``Σ_f a_hf exp(-b_hf d²)`` → ``[b, h, nq, nk]``, evaluated chunk by chunk (see :meth:`_chunks`).

        ``active[h][f]`` false skips a term (see :meth:`active_bases`); a head without terms is zero.
        ``table`` (another bias' :meth:`lookup`) and ``key_add [b, nk]`` are added in the same pass (kernel only).
        """
        b, nq, nk = xq.shape[0], xq.shape[1], xk.shape[1]
        h = self.num_heads
        rate, weight = self.rate().detach(), self.weight.detach()
        on = torch.tensor(active, device=rate.device)  # [h, F]: the active terms
        n_terms = int(on.sum())
        if (table is not None or key_add is not None) and self._kernel(xq) is None:
            raise ConfigError("a table or key_add needs the compiled kernel (float32, CPU); add them apart instead.")
        if not n_terms and table is None:
            return xq.new_zeros(b, h, nq, nk)
        if whole_tiles(xq):  # GPUs: a basis at a time over the whole tile (geonp.models.whole_tile)
            return whole_tile.rbf_sum(self.sqdist(xq, xk)[:, None], torch.where(on, -LOG2E * rate, 0.0).to(xq.dtype),
                                      torch.where(on, weight, 0.0).to(xq.dtype), LOG2E * MIN_EXPONENT)
        out = xq.new_empty(b, h, nq, nk)
        # the active terms, ordered by head (row-major): head i owns terms starts[i]:starts[i + 1]
        neg_rate = (-LOG2E * rate)[on].to(xq.dtype)  # base 2: see LOG2E
        term_weight = weight[on].to(xq.dtype)
        starts = [0, *on.sum(1).cumsum(0).tolist()]
        kernel = self._kernel(xq)
        if kernel is not None:
            cols, head_start = list(self.columns), torch.tensor(starts)
            for j in range(b):
                kernel(xq[j][:, cols], xk[j][:, cols], neg_rate, term_weight, head_start, LOG2E * MIN_EXPONENT, out[j],
                       None if table is None else (table[0][j], table[1][j], table[2]),
                       None if key_add is None else key_add[j])
            return out
        terms = None  # flat buffer of the first (largest) chunk, viewed contiguously for each chunk
        for j, r0, r1, d2 in self._chunks(xq, xk):
            n = d2.shape[1]
            if terms is None:
                terms = xq.new_empty(n_terms * n)
            x = terms[: n_terms * n].view(n_terms, n)
            torch.mul(d2, neg_rate[:, None], out=x).clamp_(min=LOG2E * MIN_EXPONENT).exp2_()
            dest = out[j, :, r0:r1].view(h, n)  # [h, n] rows of the output, written in place
            # one product per head: a single [h, terms] product would spend 3/4 of its work on the zeros
            # between heads (2.2 x the time of these four at 4 heads x 5 bases; docs/benchmarks.md)
            for i, (s0, s1) in enumerate(zip(starts[:-1], starts[1:])):
                if s1 == s0:
                    dest[i].zero_()
                else:
                    torch.mm(term_weight[None, s0:s1], x[s0:s1], out=dest[i : i + 1])
        return out

    def _shared_query_bias(self, xq: Tensor, xk: Tensor, active: list[list[bool]]) -> Tensor | None:
        """The bias as a broadcast view when every query shares one value of a 1-D coordinate.

        That is the target stream of an infill task (all targets in one frame): the bias then
        depends on the key only, ``B[h, i, j] = row[h, j]``, computed by the same operations
        as the direct path (equal to rounding), with ``nk`` instead of ``nq · nk`` exponentials per basis.
        ``None`` when it does not apply. The result is an expanded (read-only) view.
        """
        if len(self.columns) != 1 or self.metric != "euclidean" or xq.shape[1] < 2:
            return None
        cq = xq[..., self.columns[0]]
        if not bool((cq == cq[:, :1]).all()):
            return None
        row = self._rbf_sum(xq[:, :1], xk, active)  # [b, h, 1, nk]
        return row.expand(row.shape[0], self.num_heads, xq.shape[1], row.shape[-1])

    def _table_bias(self, xq: Tensor, xk: Tensor, active: list[list[bool]]) -> Tensor | None:
        """The bias looked up from :meth:`lookup`'s table (time in a window of frames); ``None`` where none applies."""
        found = self.lookup(xq, xk, active)
        if found is None:
            return None
        iq, ik, table = found
        kernel = self._kernel(xq)
        out = xq.new_empty(xq.shape[0], self.num_heads, xq.shape[1], xk.shape[1])
        for j in range(xq.shape[0]):
            kernel.table(iq[j], ik[j], table, out[j])
        return out

    @torch.no_grad()
    def lookup(self, xq: Tensor, xk: Tensor, active: list[list[bool]] | None = None) -> tuple | None:
        """``(iq [b, nq], ik [b, nk], table [h, uq, uk])``: this bias tabulated over its one coordinate's values.

        int32 indices of each point's value, and the bias between every pair of the batch's distinct values
        by the direct path's kernel (``table[h, iq, ik]`` equals it exactly). ``None`` with more than one
        column, no compiled kernel, or a table not :data:`TABLE_FACTOR` times smaller than the batch's tile.
        """
        b, nq, nk = xq.shape[0], xq.shape[1], xk.shape[1]
        if len(self.columns) != 1 or b * nq * nk < TABLE_FACTOR or self._kernel(xq) is None:
            return None
        c = self.columns[0]
        uq, iq = torch.unique(xq[..., c], return_inverse=True)
        uk, ik = torch.unique(xk[..., c], return_inverse=True)
        if len(uq) * len(uk) * TABLE_FACTOR > b * nq * nk:
            return None
        pq, pk = xq.new_zeros(1, len(uq), xq.shape[-1]), xk.new_zeros(1, len(uk), xk.shape[-1])
        pq[0, :, c], pk[0, :, c] = uq, uk
        table = self._rbf_sum(pq, pk, self.active_bases(xq, xk) if active is None else active)[0]  # [h, uq, uk]
        return iq.to(torch.int32), ik.to(torch.int32), table

    def flex_terms(self, xq: Tensor, xk: Tensor) -> list:
        """``[term(b, h, i, j)]`` computing this bias inline for ``flex_attention``."""
        cols = list(self.columns)
        geodesic = self.metric == "geodesic"
        pq, pk = xq[..., cols], xk[..., cols]
        if geodesic:
            pq, pk = unit_vectors(pq), unit_vectors(pk)
        pq, pk = pq.contiguous(), pk.contiguous()
        rate, weight = self.rate().detach(), self.weight.detach()

        def term(b, h, i, j):
            d2 = None
            for c in range(pq.shape[-1]):
                diff = pq[b, i, c] - pk[b, j, c]
                d2 = diff * diff if d2 is None else d2 + diff * diff
            if geodesic:
                d2 = torch.rad2deg(2.0 * torch.asin(torch.clamp(torch.sqrt(d2) * 0.5, max=1.0))) ** 2
            out = 0.0
            for f in range(self.num_bases):
                out = out + weight[h, f] * torch.exp(torch.clamp(-rate[h, f] * d2, min=MIN_EXPONENT))
            return out

        return [term]

    @torch.no_grad()
    def bias_grad(self, xq: Tensor, xk: Tensor, grad: Tensor) -> list[Tensor]:
        """Analytic gradients for ``(log_lengthscale, weight)`` given ``grad [b, h, nq, nk]``.

        Evaluated chunk by chunk like :meth:`_rbf_sum`, every term of a chunk while it is in cache;
        the sums over pairs accumulate in float64.
        """
        h, nf = self.num_heads, self.num_bases
        rate, weight = self.rate().detach(), self.weight.detach()
        neg_rate = (-LOG2E * rate).reshape(-1, 1).to(xq.dtype)  # [h F, 1], base 2 (see LOG2E)
        g_weight = torch.zeros(h, nf, dtype=torch.float64, device=xq.device)
        g_decay = torch.zeros(h, nf, dtype=torch.float64, device=xq.device)  # Σ g d² exp(-b d²)
        kernel = self._kernel(xq) if grad.dtype == torch.float32 and grad.stride(-1) == 1 else None
        if kernel is None:
            self._grad_sums(xq, xk, grad, neg_rate, g_weight, g_decay)
        else:
            cols, head_start = list(self.columns), torch.arange(0, h * nf + 1, nf)
            for j in range(xq.shape[0]):
                kernel.grad(xq[j][:, cols], xk[j][:, cols], neg_rate.reshape(-1), head_start, LOG2E * MIN_EXPONENT,
                            grad[j], g_weight.view(-1), g_decay.view(-1))
        g_rate = -weight * g_decay.to(weight.dtype)  # d/d rate
        # rate = exp(-2 log ℓ) / 2  ⇒  d rate / d log ℓ = -2 rate
        return [g_rate * (-2.0 * rate), g_weight.to(weight.dtype)]

    def _grad_sums(self, xq: Tensor, xk: Tensor, grad: Tensor, neg_rate: Tensor, g_weight: Tensor,
                   g_decay: Tensor) -> None:
        """Add ``Σ g 2^e`` and ``Σ g d² 2^e`` per ``(head, basis)`` to ``g_weight``/``g_decay`` (the torch path)."""
        h, nf = self.num_heads, self.num_bases
        if whole_tiles(xq):  # GPUs: a basis at a time over the whole tile (geonp.models.whole_tile)
            whole_tile.grad_sums(self.sqdist(xq, xk)[:, None], grad, neg_rate.view(h, nf), LOG2E * MIN_EXPONENT,
                                 g_weight, g_decay)
            return
        terms = gd = None  # flat buffers of the first (largest) chunk
        for j, r0, r1, d2 in self._chunks(xq, xk):
            n = d2.shape[1]
            if terms is None:
                terms, gd = xq.new_empty(h * nf * n), xq.new_empty(h * n)
            x = terms[: h * nf * n].view(h * nf, n)
            torch.mul(d2, neg_rate, out=x).clamp_(min=LOG2E * MIN_EXPONENT).exp2_()
            gc = grad[j, :, r0:r1].reshape(h, n)  # a view when grad's rows are contiguous (they are here)
            gdc = torch.mul(gc, d2, out=gd[: h * n].view(h, n))
            xv = x.view(h, nf, n)
            for i in range(h):
                g_weight[i] += torch.mv(xv[i], gc[i])
                g_decay[i] += torch.mv(xv[i], gdc[i])


class SumBias(ScoreMod):
    """The sum of several additive biases (e.g. space + time)."""

    def __init__(self, biases: list[ScoreMod]) -> None:
        super().__init__()
        self.parts = nn.ModuleList(biases)

    def bias(self, xq: Tensor, xk: Tensor) -> Tensor:
        out = self.parts[0].bias(xq, xk)
        for part in self.parts[1:]:
            out = out + part.bias(xq, xk)
        return out

    @property
    def order_columns(self) -> tuple[int, ...]:
        """The first part's columns (space, in BSA-TNP) when every part prunes far tiles, else none."""
        cols = [part.order_columns for part in self.parts]
        return cols[0] if all(cols) else ()

    @torch.no_grad()
    def fast_bias(self, xq: Tensor, xk: Tensor) -> Tensor | None:
        fused = self._fused(xq, xk)
        return fused if fused is not None else self._parts_sum(xq, xk)

    @torch.no_grad()
    def fast_mask(self, xq: Tensor, xk: Tensor, key_mask: Tensor | None, dtype: torch.dtype) -> Tensor | None:
        pad = key_padding(key_mask, dtype) if key_mask is not None and dtype == torch.float32 else None
        fused = self._fused(xq, xk, pad)  # the padding too in the fused pass
        if fused is None:
            return add_padding(self._parts_sum(xq, xk), key_mask, dtype)
        return fused if pad is not None else add_padding(fused, key_mask, dtype)

    def _parts_sum(self, xq: Tensor, xk: Tensor) -> Tensor | None:
        """Each part's fast bias, added (``None``: every part is zero on the tile)."""
        parts = [p for p in (part.fast_bias(xq, xk) for part in self.parts) if p is not None]
        if not parts:
            return None
        # broadcast views (see RBFBias) are added, never written: the sum goes into a dense part, or a copy
        first = next((i for i, p in enumerate(parts) if p.is_contiguous()), None)
        out = parts[first] if first is not None else parts[0].contiguous()
        for i, p in enumerate(parts):
            if i != (first if first is not None else 0):
                out.add_(p)
        return out

    def _fused(self, xq: Tensor, xk: Tensor, key_add: Tensor | None = None) -> Tensor | None:
        """BSA-TNP's space sum and time table (:meth:`RBFBias.lookup`) in one kernel pass per task, or ``None``.

        Each time value (and ``key_add``) is added as the space sum is stored, rounded as adding them apart
        would be: the parts' sum, bit for bit, without a second ``[b, h, nq, nk]`` buffer and its passes.
        """
        if len(self.parts) != 2 or not all(isinstance(p, RBFBias) for p in self.parts):
            return None
        direct, timed = self.parts
        if direct._kernel(xq) is None or direct.num_heads != timed.num_heads:
            return None
        table = timed.lookup(xq, xk)
        if table is None:
            return None
        return direct._rbf_sum(xq, xk, direct.active_bases(xq, xk), table=table, key_add=key_add)

    def flex_terms(self, xq: Tensor, xk: Tensor) -> list:
        """The terms of every part, for ``flex_attention``."""
        terms = []
        for part in self.parts:
            make = getattr(part, "flex_terms", None)
            if make is None:
                raise ConfigError(f"{type(part).__name__} has no flex_attention form; use backend='tiled'.")
            terms += make(xq, xk)
        return terms

    def bias_grad(self, xq: Tensor, xk: Tensor, grad: Tensor) -> list[Tensor] | None:
        grads: list[Tensor] = []
        for part in self.parts:
            g = part.bias_grad(xq, xk, grad)
            if g is None:
                return None
            grads += g
        return grads

