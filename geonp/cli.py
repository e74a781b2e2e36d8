"""The ``geonp`` command line: a thin argparse front end to :mod:`geonp.api`.

::

    geonp infill   INPUT --out OUT.zarr [--var V] [--model NAME|PATH] [--targets PATH] [--times START/END] ...
    geonp forecast INPUT --hours H (or --steps N) --out OUT.zarr [--init-time ISO ...] [--context-frames N] ...
    geonp fit      INPUT --out MODEL.geonp [--task infill|forecast] [--max-time 10min] [--steps N] ...
    geonp demo     [--model bsa-tnp] [--seed 0] [--out demo.zarr] [--png demo.png]

Progress goes to stderr (``--quiet`` turns it off), a one-line summary to stdout. Warnings print one
line ``geonp: warning: ...`` on stderr. Every error a user can cause prints one line
``geonp: error: ...`` on stderr and exits 2 (its hints in the CLI's syntax: ``--reference none``, not
``reference='none'``); nothing is computed when the
output exists (exit 3; ``--overwrite`` replaces only a Zarr store or a model file) or another run is
writing it (exit 4), and nothing half-written is left behind. Ctrl-C exits 130, SIGTERM 143, with one
``geonp: interrupted`` line.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shlex
import signal
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

from . import time_select
from .cli_args import parse_args, parse_chunks
from .cli_hints import cli_hints
from .errors import ConfigError, ExistingOutputError, GeonpError, OutputLockedError

__all__ = ["main", "parse_chunks"]

# ------------------------------------------------------------------------------------------ commands


def _refuse_existing(path: str, args: argparse.Namespace, store: bool = True) -> Path:
    """Fail fast, before any computation, where the output may not be written.

    The same checks and messages as geonp.to_zarr: the output exists (without ``--overwrite``); it is, holds or
    lies inside the input or the ``--targets`` file; ``--overwrite`` replaces only a Zarr store (``store=False``: a
    model file written by geonp); a store named like another format.
    """
    from ._files import MODEL_MAGIC
    from .io.lock import check_apart, check_new_path, check_store_path

    others = [("the input", args.input), ("the --targets file", getattr(args, "targets", None))]
    if store:
        return check_store_path(path, args.overwrite, others)
    check_apart(path, others)
    return check_new_path(path, args.overwrite, "model", magic=MODEL_MAGIC)


def _open(args: argparse.Namespace, chunks, own_chunks: bool = False):
    """The input; dask-backed with ``--chunks``, or (``own_chunks``) a Zarr store's own chunks without it.

    An infill of a chunked Zarr store read it whole and wrote one region (a 24-frame-chunked week as one
    168-frame region, which an interrupted run could not resume partway: a thirtieth new-user test);
    on its own chunks it is computed and written chunk by chunk.
    """
    from .io import open_dataset
    from .io.lock import is_zarr_store

    if chunks is None and own_chunks and is_zarr_store(args.input):
        chunks = {}
    extra = {}
    if args.na_values:  # numbers for every format but CSV, whose markers may be text (pandas' na_values)
        csv = Path(args.input).suffix.lower() == ".csv"
        extra["na_values"] = list(args.na_values) if csv else [_number(v, "--na-values") for v in args.na_values]
    # any chunks= gives dask-backed variables: nothing is read whole, the API then tiles as asked
    return open_dataset(args.input, chunks={} if chunks is not None else None, crs=args.crs, dayfirst=args.dayfirst,
                        **extra)


def _number(text: str, option: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ConfigError(f"{option} {text!r} is not a number; for a grid (GRIB, NetCDF, Zarr, GeoTIFF) the values "
                          "that mean missing are numbers, e.g. --na-values -999 -9999.") from None


def _open_targets(args: argparse.Namespace):
    """The ``--targets`` file with ``--targets-crs`` attached; without it, ``--crs`` only where it is needed.

    Lat/lon targets, or targets carrying a CRS, are opened as they are (api.infill applies ``--crs`` to
    projected targets without one), so a projected ``--crs`` of the data does not clash with lat/lon targets.
    """
    from .errors import CRSError
    from .io import open_dataset

    if args.targets_crs is not None:
        try:
            return open_dataset(args.targets, crs=args.targets_crs, dayfirst=args.dayfirst)
        except CRSError as exc:  # the library names its crs= keyword; here it is --targets-crs (see cli_hints)
            message = re.sub(r"\bcrs=", "targets_crs=", str(exc)).replace("leave crs unset", "leave --targets-crs out")
            raise CRSError(message) from None
    try:
        return open_dataset(args.targets, dayfirst=args.dayfirst)
    except CRSError:  # a CSV of x/y columns, which needs a CRS to be read at all
        if args.crs is None:
            raise
        return open_dataset(args.targets, crs=args.crs, dayfirst=args.dayfirst)


def _progress(args: argparse.Namespace):
    """Show dask progress on stderr around eager computations.

    A bar on a terminal, lines in a log; none with --quiet.
    """
    if args.quiet:
        return contextlib.nullcontext()
    from .progress import compute_progress

    return compute_progress(sys.stderr, minimum=1.0)


def _write(result, out: Path, args: argparse.Namespace, history: str, start: float) -> None:
    from .io import to_zarr

    to_zarr(result, out, overwrite=args.overwrite, progress=not args.quiet, history=history)
    names = ", ".join(map(str, result.data_vars))
    dims = ", ".join(f"{d}: {n}" for d, n in result.sizes.items())
    print(f"wrote {names} ({dims}) to {out} in {time.perf_counter() - start:.1f} s{_all_nan(out)}")


def _all_nan(out: Path) -> str:
    """``"; all N values of V_mean are NaN ..."`` where the written mean is NaN everywhere.

    Read chunk by chunk, stopping at the first chunk with a value: a usual output costs one chunk's read.
    """
    import numpy as np
    import xarray as xr

    with contextlib.suppress(Exception), xr.open_zarr(out) as ds:  # a summary only: the store is written
        means = [name for name in ds.data_vars if str(name).endswith("_mean")]
        if not means:
            return ""
        data = ds[means[0]].data
        if any(np.isfinite(data.blocks[index].compute()).any() for index in np.ndindex(*data.numblocks)):
            return ""
        return (f"; all {data.size} values of {means[0]} are NaN: no prediction was possible (are the targets "
                "far from the data, or the data all missing?)")
    return ""


def _infill(args: argparse.Namespace, history: str) -> None:
    from . import api

    start = time.perf_counter()
    chunks = parse_chunks(args.chunks)
    out = _refuse_existing(args.out, args)
    ds = _open(args, chunks, own_chunks=True)
    targets = _open_targets(args) if args.targets is not None else None
    ds, keep, model = _some_times(args, ds) if args.times is not None else (ds, None, args.model)
    with _progress(args):
        result = api.infill(ds, args.var, model=model, targets=targets, covariates=args.covariates,
                            chunks=chunks, device=args.device, crs=args.crs, halo=args.halo, tile=args.tile,
                            time_window=args.time_window, frames_per_task=args.frames_per_task,
                            batch_size=args.batch_size, calibrate="auto" if args.calibrate is None else args.calibrate,
                            land=args.land, mask=args.mask, reference=args.reference)
    if keep is not None:
        result = time_select.keep_times(result, *keep)
    _write(result, out, args, history, start)


def _some_times(args: argparse.Namespace, ds):
    """The input cut to ``--times`` and the frames its tasks read, what to keep of the prediction, and the model.

    The model is returned loaded when ``--model`` is a file (read once); a shipped name stays a name, which
    is what selects the shipped weights' own windows and calibration.
    """
    from .geo import describe, select_variable
    from .model import frames_per_task, resolve_model
    from .pretrained import outage_windows, shipped_name

    name = select_variable(ds, args.var)[1]
    layout = describe(ds, name, crs=args.crs)[1]
    model = resolve_model(args.model)
    half = int(model.settings["half_window"] if args.time_window is None else args.time_window)
    group = frames_per_task(args.frames_per_task or model.settings.get("frames_per_task", "auto"), half, model.name)
    # across an outage: up to the wide window and the one-sided floors' (reach.wide_entries, reach.one_sided_floors)
    reach = max(half, *(w or 0 for w in outage_windows(args.model, args.time_window).values()))
    cut, keep = time_select.select_times(ds, layout.time, args.times, time_select.context_pad(reach, group))
    return cut, (layout.time, keep), args.model if shipped_name(args.model) else model


def _forecast(args: argparse.Namespace, history: str) -> None:
    from . import api

    start = time.perf_counter()
    chunks = parse_chunks(args.chunks)
    out = _refuse_existing(args.out, args)
    ds = _open(args, chunks)
    with _progress(args):
        result = api.forecast(ds, args.var, hours=args.hours, steps=args.steps, model=args.model,
                              init_time=args.init_time,
                              covariates=args.covariates, chunks=chunks, device=args.device, crs=args.crs,
                              halo=args.halo, tile=args.tile, context_frames=args.context_frames,
                              reference=args.reference, batch_size=args.batch_size,
                              calibrate="auto" if args.calibrate is None else args.calibrate, mask=args.mask)
    _write(result, out, args, history, start)


def _fit(args: argparse.Namespace, history: str) -> None:
    from . import api

    start = time.perf_counter()
    if args.max_time is None and args.steps is None:
        raise ConfigError("fit needs a budget: pass --max-time (e.g. 10min) and/or --steps (e.g. 2000).")
    if Path(args.out).suffix.lower() in _DATA_SUFFIXES:
        raise ConfigError(f"--out {args.out} names a data file, but fit writes a model file; pass a name such as "
                          f"{Path(args.out).with_suffix('.geonp').name} (infill and forecast write Zarr stores).")
    out = _refuse_existing(args.out, args, store=False)
    ds = _open(args, None)
    model = api.fit(ds, args.var, model=args.model, task=args.task, max_time=args.max_time, steps=args.steps,
                    seed=args.seed, covariates=args.covariates, crs=args.crs, device=args.device,
                    progress=not args.quiet, reference=args.reference, preset=args.preset,
                    pretrained=not args.from_scratch, time_window=args.time_window,
                    context_frames=args.context_frames, land=args.land, mask=args.mask)
    model.metadata.setdefault("command", history)
    model.save(out, overwrite=True)  # _refuse_existing checked --overwrite before training
    steps = model.metadata.get("steps")
    trained = f", {steps} step{'' if steps == 1 else 's'}" if steps is not None else ""
    what = f"{model.task} of {', '.join(model.variables) or 'any variable'}{trained}"
    print(f"saved {model.name} ({what}) to {out} in {time.perf_counter() - start:.1f} s; "
          f"use it with: geonp {model.task} ... --model {shlex.quote(str(out))}")


def _demo(args: argparse.Namespace, history: str) -> None:
    from .demo import BLOCK, KEEP, run_demo

    result = run_demo(args.model, seed=args.seed, out=args.out, png=args.png, overwrite=args.overwrite,
                      progress=not args.quiet)
    print(f"{result.num_context} observations ({KEEP:.0%} of cells per frame, a {BLOCK}×{BLOCK} block missing in "
          f"the middle frame); every gap infilled in {result.seconds:.1f} s; the {result.num_targets} gaps of the "
          "middle frame scored (K):\n")
    print(result.table())
    print(f"\nwrote {result.out} and {result.png}")


#: suffixes of data files, which a fitted model's file should not take
_DATA_SUFFIXES = (".zarr", ".nc", ".nc4", ".csv", ".grib", ".grb", ".grib2", ".tif", ".tiff", ".parquet")

_COMMANDS = {"infill": _infill, "forecast": _forecast, "fit": _fit, "demo": _demo}


@contextlib.contextmanager
def _one_line_warnings(command: str):
    """Show warnings as one line ``geonp: warning: ...`` on stderr while a command runs; Python's own after it.

    No file, line number or source line; fix hints in the CLI's syntax (:func:`cli_hints`). Each text
    once: raised in dask's threads, one per block, a chunked infill printed the same line 11 times.
    """
    shown: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        text = cli_hints(" ".join(str(message).split()), command)
        if text not in shown:
            shown.add(text)
            print(f"geonp: warning: {text}", file=sys.stderr if file is None else file)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


class _Terminated(KeyboardInterrupt):
    """SIGTERM (what batch schedulers send before killing a job), raised where Ctrl-C raises KeyboardInterrupt."""


def _raise_terminated(signum, frame) -> None:
    raise _Terminated


@contextlib.contextmanager
def _sigterm_interrupts():
    """Turn SIGTERM into :class:`_Terminated` while a command runs (main thread only): handled like Ctrl-C."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


_RESUMES = "a Zarr write resumes when the same command is run again"  # what an interruption leaves
_INTERRUPTED = {"fit": "nothing was saved: training does not resume; run the command again to train again"}


def _interrupted_note(args: argparse.Namespace) -> str:
    """What an interruption left: a resumable partial store, or nothing written yet."""
    if args.command in _INTERRUPTED:
        return _INTERRUPTED[args.command]
    from .io.zarr import PARTIAL_SUFFIX

    out = Path(str(getattr(args, "out", "") or ""))
    if out.name and out.with_name(out.name + PARTIAL_SUFFIX).exists():
        return _RESUMES
    return "nothing was written yet: the same command starts afresh"


#: exit code when the output exists (nothing was computed): a nightly job's run already done
EXIT_EXISTS = 3
#: exit code when another run is writing the output (it holds its lock): run again later
EXIT_LOCKED = 4


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code.

    0 on success, 1 when the file system refuses (permissions, a full disk), 2 on a user error,
    :data:`EXIT_EXISTS` (3) when the output exists, :data:`EXIT_LOCKED` (4) when another run is writing
    it, 130/143 on SIGINT/SIGTERM: a cron job tells "done already" and "still running" from a failure.

    Argparse usage errors (unknown options, missing arguments) exit 2 through ``SystemExit``.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    history = shlex.join(["geonp", *argv])
    try:
        with _one_line_warnings(args.command), _sigterm_interrupts():
            _COMMANDS[args.command](args, history)
    except GeonpError as exc:
        print(f"geonp: error: {cli_hints(' '.join(str(exc).split()), args.command)}", file=sys.stderr)
        return EXIT_LOCKED if isinstance(exc, OutputLockedError) else EXIT_EXISTS if isinstance(
            exc, ExistingOutputError) else 2
    except OSError as exc:  # the file system said no (permissions, a full disk): not a bug of ours
        where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
        resume = f" ({_RESUMES})" if _interrupted_note(args) == _RESUMES else ""  # a full disk: free space, rerun
        print(f"geonp: error: {exc.strerror or exc}{where}{resume}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, _Terminated)
        print(f"geonp: interrupted{' by SIGTERM' if terminated else ''} ({_interrupted_note(args)})", file=sys.stderr)
        return 143 if terminated else 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
