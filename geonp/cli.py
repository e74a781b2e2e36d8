"""The ``geonp`` command line: a thin argparse front end to :mod:`geonp.api`.

::

    geonp infill   INPUT --out OUT.zarr [--var V] [--model NAME|PATH] [--targets PATH] [--chunks SPEC] ...
    geonp forecast INPUT --hours H (or --steps N) --out OUT.zarr [--init-time ISO ...] [--context-frames N] ...
    geonp fit      INPUT --out MODEL.geonp [--task infill|forecast] [--max-time 10min] [--steps N] ...
    geonp demo     [--model bsa-tnp] [--seed 0] [--out demo.zarr] [--png demo.png]

Progress goes to stderr (``--quiet`` turns it off), a one-line summary to stdout. Warnings print one
line ``geonp: warning: ...`` on stderr. Every error a user can cause prints one line
``geonp: error: ...`` on stderr and exits 2; nothing is computed when the
output exists (without ``--overwrite``, which replaces only a Zarr store or a model file), and nothing
half-written is left behind. Ctrl-C exits 130, SIGTERM 143, with one ``geonp: interrupted`` line.
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

from .errors import ConfigError, GeonpError

__all__ = ["main", "parse_chunks"]

_CHUNK_ITEM = re.compile(r"\s*([A-Za-z_][\w.\-]*)\s*=\s*(-?\d+)\s*")


def parse_chunks(spec: str | None) -> int | dict[str, int] | None:
    """``"24"`` -> 24 (frames per chunk); ``"time=24,latitude=64"`` -> ``{"time": 24, "latitude": 64}``.

    Raises
    ------
    ConfigError
        Not one of those forms, a size below 1 (``-1``, the whole dim, is allowed in a dict), or a dim twice.
    """
    if spec is None:
        return None
    hint = ("expected a number of frames per chunk (e.g. 24) or dim=size pairs "
            "(e.g. time=24,latitude=64,longitude=64)")
    text = spec.strip()
    if re.fullmatch(r"\d+", text):
        if int(text) < 1:
            raise ConfigError(f"--chunks {spec!r} must be at least 1; {hint}.")
        return int(text)
    out: dict[str, int] = {}
    for item in text.split(","):
        m = _CHUNK_ITEM.fullmatch(item)
        if m is None:
            raise ConfigError(f"--chunks {spec!r} is not a chunk spec; {hint}.")
        dim, size = m.group(1), int(m.group(2))
        if size < 1 and size != -1:
            raise ConfigError(f"--chunks {spec!r}: {dim}={size} must be positive (or -1 for the whole dim).")
        if dim in out:
            raise ConfigError(f"--chunks {spec!r} names {dim!r} twice; {hint}.")
        out[dim] = size
    return out


# ------------------------------------------------------------------------------------------ parser


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one ``geonp: error: ...`` line, like every other error."""

    def error(self, message: str):  # noqa: D401  (argparse's name)
        """Print one error line naming the command's help, and exit with status 2."""
        self.exit(2, f"geonp: error: {message} (see `{self.prog} --help`)\n")


def _common(p: argparse.ArgumentParser, *, model_help: str) -> None:
    p.add_argument("input", metavar="INPUT", help="data file or store: .grib/.grb, .nc, .zarr, .tif, .csv (stations)")
    p.add_argument("--var", help="variable to use (may be omitted when the data have one)")
    p.add_argument("--model", default="bsa-tnp", help=model_help)
    p.add_argument("--crs", help="CRS of projected x/y coordinates when the data carry none (e.g. EPSG:3035)")
    p.add_argument("--dayfirst", action=argparse.BooleanOptionalAction, default=None,
                   help="CSV dates like 01/02/1990 are day first (1 Feb); --no-dayfirst: month first; default: "
                        "the order the dates show, else month first with a warning")
    p.add_argument("--device", default="auto", help="auto (a GPU when present, default), cpu or cuda")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    p.add_argument("--quiet", action="store_true", help="no progress bars on stderr")


def _predict_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--covariates", nargs="*", metavar="NAME",
                   help="elevation variable/coordinate name, 'hour', 'doy' (found automatically when omitted)")
    p.add_argument("--chunks", metavar="SPEC",
                   help="compute chunk by chunk, lazily: frames per chunk (24) or dim=size pairs "
                        "(time=24,latitude=64,longitude=64)")
    p.add_argument("--halo", type=float, help="space halo of each tile's context, in model units (typical spacings; 3)")
    p.add_argument("--tile", type=float,
                   help="edge of the tiles a grid is predicted in, each from its own window, in model units (8)")
    p.add_argument("--calibrate", action=argparse.BooleanOptionalAction, default=None,
                   help="calibrate the shipped weights on the input first, forward passes only (infill: on held-out "
                        "observed values; forecast: on the history before the first initial time); by default "
                        "for forecasts and station infill when there is enough to calibrate on, not for gridded "
                        "infill")
    p.add_argument("--batch-size", type=int, default=8, metavar="N",
                   help="tasks per forward pass (default 8; lower it to save memory)")


_NAME_OR_PATH = "shipped model name (bsa-tnp, default; te-pt-tnp) or the path of a model saved by `geonp fit`"


_LAND_HELP = ("land-sea mask for a land-sea trend: auto (the data's mask, else the bundled global land fraction; "
              "default), data (the data's only), none, or the mask variable's name")


def _frames_per_task(text: str) -> int | str:
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of frames or 'auto'") from None


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="geonp", description="Infill and forecast gridded or station data with transformer neural processes.")
    from . import __version__

    parser.add_argument("--version", action="version", version=f"geonp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{infill,forecast,fit,demo}")

    p = sub.add_parser("infill", help="fill the gaps (NaN) of a variable, or predict it at --targets",
                       description="Fill the gaps (NaN) of a variable and write {var}_mean, {var}_std and "
                                   "{var}_filled to a Zarr store.")
    _common(p, model_help=_NAME_OR_PATH)
    p.add_argument("--out", required=True, metavar="OUT.zarr", help="Zarr store to write")
    p.add_argument("--targets", metavar="PATH", help="predict at the coordinates of this file instead of the gaps")
    p.add_argument("--targets-crs", metavar="CRS",
                   help="CRS of projected x/y coordinates of the --targets file when it carries none (e.g. "
                        "EPSG:26913); default: --crs where it applies (the file's own CRS, or none for lat/lon)")
    _predict_options(p)
    p.add_argument("--time-window", type=int, metavar="N", help="frames each side of a target frame used as context")
    p.add_argument("--frames-per-task", type=_frames_per_task, metavar="K",
                   help="consecutive frames predicted as one task from a shared context, or 'auto' (the default: "
                        "3 when the time window is 3 or more and the model is not te-pt-tnp, else 1)")
    p.add_argument("--land", default="auto", metavar="MASK", help=_LAND_HELP)

    p = sub.add_parser("forecast", help="forecast a variable up to --hours ahead",
                       description="Forecast a variable at every lead time up to --hours after the initial time(s) "
                                   "and write {var}_mean and {var}_std to a Zarr store.")
    _common(p, model_help=_NAME_OR_PATH)
    leads = p.add_mutually_exclusive_group(required=True)
    leads.add_argument("--hours", type=float, metavar="H", help="last lead time, a multiple of the time step")
    leads.add_argument("--steps", type=int, metavar="N",
                       help="number of lead times of one time step each (instead of --hours; e.g. daily or "
                            "monthly data)")
    p.add_argument("--out", required=True, metavar="OUT.zarr", help="Zarr store to write")
    p.add_argument("--init-time", nargs="+", metavar="ISO", help="initial time(s) (default: the last time step)")
    _predict_options(p)
    p.add_argument("--context-frames", type=int, metavar="N", help="past frames used as context")
    p.add_argument("--reference", choices=("auto", "diurnal", "none"),
                   help="forecast departures from the same hour a day earlier (diurnal), or the variable itself "
                        "(none); default: the model's, auto for shipped models")

    p = sub.add_parser("fit", help="train a model on the data itself and save it",
                       description="Train a model on the data (context/target splits of the data itself) and save "
                                   "it for `geonp infill --model PATH`.")
    _common(p, model_help="model to train: bsa-tnp (default), te-pt-tnp, te-tnp, tnp-d, tnp-kr, or the path of a "
                          "model saved by `geonp fit` to train further")
    p.add_argument("--out", required=True, metavar="MODEL.geonp", help="model file to write")
    p.add_argument("--task", choices=("infill", "forecast"), default="infill",
                   help="what to train for (default infill)")
    p.add_argument("--max-time", metavar="DURATION",
                   help="training time budget, e.g. 90s, 10min, 1h (the training loop: reading, validation and "
                        "calibration add 20-40 s)")
    p.add_argument("--steps", type=int, metavar="N", help="training step budget")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--covariates", nargs="*", metavar="NAME",
                   help="elevation variable/coordinate name, 'hour', 'doy'; none after the flag means none at all")
    p.add_argument("--reference", choices=("auto", "diurnal", "none"), default="auto",
                   help="--task forecast: learn departures from the same hour a day earlier (diurnal) or the "
                        "variable itself (none); default auto (diurnal for sub-daily data with two days or more)")
    p.add_argument("--preset", default="small", help="model size: small (default) or paper")
    p.add_argument("--from-scratch", action="store_true",
                   help="start from random weights instead of the shipped ones (bsa-tnp, te-pt-tnp)")
    p.add_argument("--time-window", type=int, metavar="N",
                   help="--task infill: frames each side of a target frame used as context")
    p.add_argument("--context-frames", type=int, metavar="N", help="--task forecast: past frames used as context")
    p.add_argument("--land", default="auto", metavar="MASK", help="--task infill: " + _LAND_HELP)

    p = sub.add_parser("demo", help="infill a synthetic gridded field with a shipped model, score it and map it",
                       description="Infill a synthetic 48x48x7 field with gaps (a known space-time GP on an EPSG:3035 "
                                   "grid) with a shipped model, zero-shot; print scores beside the exact GP; write "
                                   "the result to Zarr and a PNG map.")
    p.add_argument("--model", default="bsa-tnp", help="shipped model: bsa-tnp (default) or te-pt-tnp")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic field (default 0)")
    p.add_argument("--out", default="demo.zarr", metavar="OUT.zarr", help="Zarr store to write (default demo.zarr)")
    p.add_argument("--png", default="demo.png", metavar="PNG", help="map to write (default demo.png)")
    p.add_argument("--overwrite", action="store_true", help="replace existing --out / --png")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser


def _parse(argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``; unknown options are reported by the subcommand's parser (its help is the one to read)."""
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        commands.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


# ------------------------------------------------------------------------------------------ commands


def _refuse_existing(path: str, args: argparse.Namespace, store: bool = True) -> Path:
    """Fail fast, before any computation, where the output may not be written.

    The same checks and messages as geonp.to_zarr: the output exists (without ``--overwrite``); it is, holds or
    lies inside the input or the ``--targets`` file; ``--overwrite`` replaces only a Zarr store (``store=False``: a
    model file written by geonp); a store named like another format.
    """
    from .io.zarr import check_apart, check_new_path, check_store_path

    others = [("the input", args.input), ("the --targets file", getattr(args, "targets", None))]
    if store:
        return check_store_path(path, args.overwrite, others)
    check_apart(path, others)
    return check_new_path(path, args.overwrite, "model", magic=_ZIP_MAGIC)


_ZIP_MAGIC = b"PK\x03\x04"  # a model file (torch.save writes a zip archive)


def _open(args: argparse.Namespace, chunks):
    from .io import open_dataset

    # any chunks= gives dask-backed variables: nothing is read whole, the API then tiles as asked
    return open_dataset(args.input, chunks={} if chunks is not None else None, crs=args.crs, dayfirst=args.dayfirst)


def _open_targets(args: argparse.Namespace):
    """The ``--targets`` file with ``--targets-crs`` attached; without it, ``--crs`` only where it is needed.

    Lat/lon targets, or targets carrying a CRS, are opened as they are (api.infill applies ``--crs`` to
    projected targets without one), so a projected ``--crs`` of the data does not clash with lat/lon targets.
    """
    from .errors import CRSError
    from .io import open_dataset

    if args.targets_crs is not None:
        return open_dataset(args.targets, crs=args.targets_crs, dayfirst=args.dayfirst)
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
    """``"; all N values of V_mean are NaN ..."`` where the written mean is NaN everywhere (read chunk by chunk)."""
    import xarray as xr

    with contextlib.suppress(Exception), xr.open_zarr(out) as ds:  # a summary only: the store is written
        means = [name for name in ds.data_vars if str(name).endswith("_mean")]
        if not means or int(ds[means[0]].count().compute()) > 0:
            return ""
        return (f"; all {ds[means[0]].size} values of {means[0]} are NaN: no prediction was possible (are the targets "
                "far from the data, or the data all missing?)")
    return ""


def _infill(args: argparse.Namespace, history: str) -> None:
    from . import api

    start = time.perf_counter()
    chunks = parse_chunks(args.chunks)
    out = _refuse_existing(args.out, args)
    ds = _open(args, chunks)
    targets = _open_targets(args) if args.targets is not None else None
    with _progress(args):
        result = api.infill(ds, args.var, model=args.model, targets=targets, covariates=args.covariates,
                            chunks=chunks, device=args.device, crs=args.crs, halo=args.halo, tile=args.tile,
                            time_window=args.time_window, frames_per_task=args.frames_per_task,
                            batch_size=args.batch_size, calibrate="auto" if args.calibrate is None else args.calibrate,
                            land=args.land)
    _write(result, out, args, history, start)


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
                              calibrate="auto" if args.calibrate is None else args.calibrate)
    _write(result, out, args, history, start)


def _fit(args: argparse.Namespace, history: str) -> None:
    from . import api

    start = time.perf_counter()
    if args.max_time is None and args.steps is None:
        raise ConfigError("fit needs a budget: pass --max-time (e.g. 10min) and/or --steps (e.g. 2000).")
    out = _refuse_existing(args.out, args, store=False)
    ds = _open(args, None)
    model = api.fit(ds, args.var, model=args.model, task=args.task, max_time=args.max_time, steps=args.steps,
                    seed=args.seed, covariates=args.covariates, crs=args.crs, device=args.device,
                    progress=not args.quiet, reference=args.reference, preset=args.preset,
                    pretrained=not args.from_scratch, time_window=args.time_window,
                    context_frames=args.context_frames, land=args.land)
    model.metadata.setdefault("command", history)
    model.save(out, overwrite=True)  # _refuse_existing checked --overwrite before training
    steps = model.metadata.get("steps")
    trained = f", {steps} steps" if steps is not None else ""
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


_COMMANDS = {"infill": _infill, "forecast": _forecast, "fit": _fit, "demo": _demo}


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Print a warning as one line ``geonp: warning: ...`` on stderr (no file, line number or source line)."""
    print(f"geonp: warning: {' '.join(str(message).split())}", file=sys.stderr if file is None else file)


@contextlib.contextmanager
def _one_line_warnings():
    """Show warnings as :func:`_show_warning` lines while a command runs; Python's own display after it."""
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 on success, 2 on a user error, 130/143 on SIGINT/SIGTERM).

    Argparse usage errors (unknown options, missing arguments) exit 2 through ``SystemExit``.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parse(argv)
    history = shlex.join(["geonp", *argv])
    try:
        with _one_line_warnings(), _sigterm_interrupts():
            _COMMANDS[args.command](args, history)
    except GeonpError as exc:
        print(f"geonp: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except OSError as exc:  # the file system said no (permissions, a full disk): not a bug of ours
        where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
        print(f"geonp: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        terminated = isinstance(exc, _Terminated)
        print(f"geonp: interrupted{' by SIGTERM' if terminated else ''} ({_INTERRUPTED.get(args.command, _RESUMES)})",
              file=sys.stderr)
        return 143 if terminated else 130
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
