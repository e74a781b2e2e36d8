"""A prediction's dask graph, written out task by task (numpy only, no torch).

:func:`geonp.chunked.lazy_infill` and :func:`~geonp.chunked.lazy_forecast` predict every tile once and
assemble each output block from the tiles it meets (:func:`geonp.tiling.tile_plan`). Built with
``dask.delayed`` calls, ``da.from_delayed`` and ``da.block``, such a graph cost about 3 ms of
tokenising and layer merging per tile: a 0.5° global frame (2,742 tiles) took 12.0 CPU-s to build
its graph, 4.3 as written here (docs/benchmarks.md, "A prediction's graph written out task by task").
Here the graph is one dictionary with a task per tile, reading its window straight from the
input's chunk keys (so each chunk is still read once per compute), and a task per output block
and array.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence

import dask.array as da
import numpy as np
from dask.base import tokenize

from .progress import PREDICTION_PREFIX
from .tiling import scatter

__all__ = ["BlockGraph", "window_index", "space_chunks"]


class _Frozen:
    """A value dask must hand over as it is (never searched for keys or tasks)."""

    __slots__ = ("value",)

    def __init__(self, value) -> None:
        self.value = value


def _cut(pieces, takes: _Frozen) -> np.ndarray:
    """The window from its chunks' pieces (nested along the kept axes), then the index arrays' picks."""
    out = np.block(pieces) if isinstance(pieces, list) else np.asarray(pieces)
    for axis, idx in takes.value:
        out = np.take(out, idx, axis=axis)
    return out


def _call(func: Callable, payload, values, meta: _Frozen, norm, *rest):
    """``func(payload, values, meta)`` with the normaliser (plain data, or a calibration's result) in ``meta``."""
    return func(payload, values, {**meta.value, "norm": norm}, *rest)


def _scatter(parts: list, places: _Frozen, shape: tuple, lead: int):
    return scatter(parts, places.value, shape, lead)


def _part(pair, which: int, shape: tuple) -> np.ndarray:
    """The mean (0) or std (1) of a tile's or a block's prediction, in the output block's shape."""
    return np.asarray(pair[which], dtype=np.float32).reshape(shape)


class BlockGraph:
    """The graph of one prediction: a task per tile and a task per output block of the mean and the std.

    Parameters
    ----------
    data : dask.array.Array
        The input (``extra..., time, *space``); tile windows read its chunk keys.
    inputs : sequence of dask.delayed.Delayed
        Other values the tasks take by key (the model payload, a calibration).
    identity : tuple
        What makes this prediction differ from another over the same input (settings, coordinates...):
        it names the keys, so two predictions computed together never share a key they should not.
    """

    def __init__(self, data: da.Array, inputs: Sequence, identity: tuple) -> None:
        self.data = data
        self.tasks: dict = dict(data.__dask_graph__())
        for item in inputs:
            self.tasks.update(dict(item.__dask_graph__()))
        token = tokenize(data.name, *[item.key for item in inputs], *identity)
        self.tile_name, self.pair_name = f"{PREDICTION_PREFIX}{token}", f"geonp-blocks-{token}"
        self.mean_name, self.std_name = f"geonp-mean-{token}", f"geonp-std-{token}"

    def window(self, index: tuple) -> tuple:
        """A task giving ``data[index]`` from the input's chunk keys.

        ``index``: integers (the axis is dropped), slices of step 1, or integer arrays (a station
        window, a grid's columns across the date line, a forecast's initial frames), read as the
        range they span and then picked.
        """
        chunks = self.data.chunks
        per_axis, takes = [], []
        for axis, sel in enumerate(index):
            bounds = np.cumsum((0, *chunks[axis]))
            if isinstance(sel, (int, np.integer)):
                c = int(np.searchsorted(bounds, sel, side="right") - 1)
                per_axis.append(([c], [int(sel - bounds[c])], False))
                continue
            if isinstance(sel, slice):
                start, stop, step = sel.indices(int(bounds[-1]))
                if step != 1:
                    raise ValueError(f"a window slice of step {step}")
            else:
                idx = np.asarray(sel, dtype=np.int64)
                start, stop = (int(idx.min()), int(idx.max()) + 1) if idx.size else (0, 0)
                takes.append((sum(keep for _, _, keep in per_axis), idx - start))
            stop = max(stop, start)
            first = int(np.clip(np.searchsorted(bounds, start, side="right") - 1, 0, len(chunks[axis]) - 1))
            ids = [c for c in range(len(chunks[axis])) if bounds[c] < stop and bounds[c + 1] > start] or [first]
            # each chunk's part of [start, stop): empty in the one chunk holding start when the range is empty
            local = [slice(max(start, bounds[c]) - bounds[c], min(stop, bounds[c + 1]) - bounds[c]) for c in ids]
            per_axis.append((ids, local, True))

        def nest(axis: int, chosen: tuple, where: tuple):
            if axis == len(per_axis):
                return (operator.getitem, (self.data.name, *chosen), where)
            ids, local, keep = per_axis[axis]
            if not keep:
                return nest(axis + 1, (*chosen, ids[0]), (*where, local[0]))
            return [nest(axis + 1, (*chosen, c), (*where, sl)) for c, sl in zip(ids, local)]

        return (_cut, nest(0, (), ()), _Frozen(tuple(takes)))

    def tile(self, index: tuple, func: Callable, payload_key, values: tuple, meta: dict, norm, *rest) -> tuple:
        """Add a tile's task, ``func(payload, values, meta)``; returns its key."""
        key = (self.tile_name, *index)
        self.tasks[key] = (_call, func, payload_key, values, _Frozen(meta), norm, *rest)
        return key

    def block(self, index: tuple, parts: list, groups: list, shape: tuple, lead: int, full: tuple) -> None:
        """Add an output block's mean and std tasks: its one tile's prediction, or its tiles' parts scattered.

        ``groups``: per tile, ``(tile, positions in the block, positions in the tile's flat prediction)``
        (:class:`geonp.tiling.TilePlan`), either ``None`` when it is all of it.
        """
        source = parts[0]
        places = None if len(groups) == 1 and groups[0][1] is None and groups[0][2] is None else [
            (pos, take) for _, pos, take in groups]
        if places is not None:
            source = (self.pair_name, *index)
            self.tasks[source] = (_scatter, list(parts), _Frozen(places), shape, lead)
        self.tasks[(self.mean_name, *index)] = (_part, source, 0, full)
        self.tasks[(self.std_name, *index)] = (_part, source, 1, full)

    def arrays(self, chunks: tuple) -> tuple[da.Array, da.Array]:
        """The lazy mean and std: one layer each over the shared tasks."""
        meta = np.empty((0,) * len(chunks), dtype=np.float32)
        return (da.Array(self.tasks, self.mean_name, chunks, meta=meta),
                da.Array(self.tasks, self.std_name, chunks, meta=meta))


def window_index(e: tuple, frames, sel) -> tuple:
    """The input index of extra index ``e``, ``frames`` and a space selection ``sel`` (slices, or point indices)."""
    return (*e, frames, *(sel if isinstance(sel, tuple) else (sel,)))


def space_chunks(blocks) -> list[tuple[int, ...]]:
    """The output's chunks along each space dim, from its blocks' slices (:func:`geonp.tiling.output_blocks`)."""
    return [tuple(stop - start for start, stop in sorted({(s[k].start, s[k].stop) for s, _ in blocks}))
            for k in range(len(blocks[0][0]))]
