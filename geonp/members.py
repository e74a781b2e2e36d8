"""Extra dims (ensemble member, pressure level, ...) as separate problems.

``ds.np.infill`` and ``ds.np.forecast`` predict each index of a dim that is neither space nor
time on its own, exactly as if it had been selected first: ``infill(ds).isel(member=k)`` equals
``infill(ds.isel(member=k))``, with its own space unit (the spacing of *its* observations), its
own calibration and its own annual cycle. :func:`each` runs a prediction per index and
concatenates the results back along the dim, lazily. An index with fewer than two observed
values (a missing member, a level below ground) gets NaN predictions and a
:class:`~geonp.errors.NoContextWarning`; it does not change the others. No torch here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import xarray as xr

from . import geo
from .errors import NoContextWarning, NoDataError, warn_user

__all__ = ["drop_chunks", "each", "split"]


def split(run: Callable[..., xr.Dataset | None], obj, var: str | None, dims: tuple[str, ...], part: bool,
          order: tuple[str, ...] = ()) -> xr.Dataset | None:
    """``run(ds, name)`` for each index of the extra ``dims`` of ``var`` in ``obj`` (see :func:`each`).

    Each part is the user's own selection (``geo.select_variable``, nothing prepared yet), as if
    ``obj.isel(dim=k)`` had been passed. ``part``: ``obj`` is itself a part, so ``None`` is
    returned where no index has data; the whole raises :class:`~geonp.errors.NoDataError` instead.
    """
    ds, name = geo.select_variable(obj, var)
    out = each(lambda p: run(p, name), ds, name, dims, order)
    if out is None and not part:
        raise NoDataError(f"no index of {list(dims)} has two observed values of {name!r}; expected observations "
                          "to condition on. Check the variable and the selection.")
    return out


def drop_chunks(options: dict, dims: tuple[str, ...]) -> dict:
    """``options`` for one index of the extra ``dims``: ``chunks`` without them (a part has one index)."""
    chunks = options.get("chunks")
    if isinstance(chunks, Mapping):
        options = {**options, "chunks": {k: v for k, v in chunks.items() if k not in dims}}
    return options


def each(run: Callable[[xr.Dataset], xr.Dataset | None], ds: xr.Dataset, var: str, dims: tuple[str, ...],
         order: tuple[str, ...]) -> xr.Dataset | None:
    """``run(part)`` for each index of ``dims[0]``, concatenated back along it.

    Parameters
    ----------
    run : callable
        Predicts one part: ``ds`` with ``dims[0]`` selected (any further extra dims are split by
        ``run`` itself). Returns the prediction, or ``None`` where the part has too few
        observations to predict from.
    ds : xarray.Dataset
        The input, holding ``var``.
    var : str
        The variable predicted.
    dims : tuple of str
        The extra dims of ``var``, outermost first.
    order : tuple of str
        Dims of the output variables, in order (dims a variable lacks are skipped).

    Returns
    -------
    xarray.Dataset or None
        ``None`` when no index could be predicted.
    """
    dim = dims[0]
    parts = [ds.isel({dim: k}) for k in range(ds.sizes[dim])]
    results = [run(part) for part in parts]
    like = next((r for r in results if r is not None), None)
    if like is None:
        return None
    empty = [k for k, r in enumerate(results) if r is None]
    if empty:
        warn_user(f"{len(empty)} of {len(parts)} indices of {dim!r} ({_labels(ds, dim, empty)}) have fewer than "
                      f"two observed values of {var!r}; their predictions are NaN. Each index of an extra dim is "
                      "predicted from its own values: select the indices with data (ds.isel) to drop them.",
                      NoContextWarning)
    filled = [_missing(like, part, var) if r is None else r for r, part in zip(results, parts)]
    along = [c for c in ds.coords if dim in ds[c].dims and c != dim and all(c in r.coords for r in filled)]
    out = xr.concat(filled, dim=dim, coords=along, compat="override", join="override", combine_attrs="override")
    return out.transpose(*order, missing_dims="ignore") if order else out


def _missing(like: xr.Dataset, part: xr.Dataset, var: str) -> xr.Dataset:
    """NaN predictions shaped like ``like`` for ``part``; its ``_filled`` keeps the part's own values."""
    out = xr.full_like(like, np.nan)
    scalars = {c: part[c] for c in part.coords if part[c].ndim == 0 and c in out.coords}
    out = out.assign_coords(scalars)
    name = f"{var}_filled"
    if name in out:
        src = part[var].transpose(*out[name].dims).astype(out[name].dtype)
        out[name] = src.reset_coords(drop=True).assign_attrs(out[name].attrs)
    return out


def _labels(ds: xr.Dataset, dim: str, index: list[int]) -> str:
    values = ds[dim].values[index] if dim in ds.coords else np.asarray(index)
    shown = ", ".join(str(v) for v in values[:5])
    return f"{dim}={shown}" + (", ..." if len(values) > 5 else "")
