"""The ``geonp`` command line's arguments: the parser of every subcommand and ``--chunks`` specs (:mod:`geonp.cli`)."""

from __future__ import annotations

import argparse
import re

from .errors import ConfigError

__all__ = ["parse_chunks", "parse_args"]

_CHUNK_ITEM = re.compile(r"\s*([A-Za-z_][\w.\-]*)\s*=\s*(-?\d+)\s*")



def _hours(text: str) -> float | str:
    """``--hours``: a number of hours, or a duration string the API reads (``90min``, ``2D``)."""
    try:
        return float(text)
    except ValueError:
        return text

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
    p.add_argument("--na-values", nargs="+", metavar="VALUE",
                   help="CSV input: values that mean missing (e.g. --na-values -9999 -99.9)")
    p.add_argument("--mask", metavar="MASK",
                   help="where the field is defined: 'observed' (points with a value in some frame) or the name of a "
                        "boolean (0/1) variable on the space dims; points outside are neither context nor gaps, and "
                        "NaN in the output (e.g. land in a sea-surface field)")
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
                        "for forecasts, station infill, and grids of departures or rough from cell to cell when "
                        "there is enough to calibrate on, not for smooth grids")
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
    p.add_argument("--times", metavar="START/END",
                   help="infill only these times (ISO, either end may be open: 2019-03-07/), reading the frames "
                        "beside them that their context needs; e.g. the newest night of a growing archive")
    p.add_argument("--land", default="auto", metavar="MASK", help=_LAND_HELP)
    p.add_argument("--reference", choices=("auto", "seasonal", "none"),
                   help="infill departures from each point's annual cycle (seasonal; auto: for records of two years "
                        "or more) or the variable itself (none); default: the model's, auto for shipped models")

    p = sub.add_parser("forecast", help="forecast a variable up to --hours (or --steps) ahead",
                       description="Forecast a variable at every lead time up to --hours after the initial time(s) "
                                   "and write {var}_mean and {var}_std to a Zarr store.")
    _common(p, model_help=_NAME_OR_PATH)
    leads = p.add_mutually_exclusive_group(required=True)
    leads.add_argument("--hours", type=_hours, metavar="H",
                       help="last lead time, a multiple of the time step: hours (6) or a duration (90min, 2D)")
    leads.add_argument("--steps", type=int, metavar="N",
                       help="number of lead times of one time step each (instead of --hours; e.g. daily or "
                            "monthly data)")
    p.add_argument("--out", required=True, metavar="OUT.zarr", help="Zarr store to write")
    p.add_argument("--init-time", nargs="+", metavar="ISO", help="initial time(s) (default: the last time step)")
    _predict_options(p)
    p.add_argument("--context-frames", type=int, metavar="N", help="past frames used as context")
    p.add_argument("--reference", choices=("auto", "diurnal", "seasonal", "none"),
                   help="forecast departures from the same hour a day earlier (diurnal), from each point's annual "
                        "cycle (seasonal), or the variable itself (none); default: the model's, auto for shipped "
                        "models")

    p = sub.add_parser("fit", help="train a model on the data itself and save it",
                       description="Train a model on the data (context/target splits of the data itself) and save "
                                   "it for `geonp infill --model PATH`.")
    _common(p, model_help="model to train: bsa-tnp (default), te-pt-tnp, te-tnp, tnp-d, tnp-kr, or the path of a "
                          "model saved by `geonp fit` to train further")
    p.add_argument("--out", required=True, metavar="MODEL.geonp", help="model file to write")
    p.add_argument("--task", choices=("infill", "forecast"), default="infill",
                   help="what to train for (default infill)")
    p.add_argument("--max-time", metavar="DURATION",
                   help="training time budget, e.g. 90s, 10min, 1h (the training loop, which begins no step that "
                        "would end past it; reading, validation and calibration add 20-40 s on free cores)")
    p.add_argument("--steps", type=int, metavar="N", help="training step budget")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--covariates", nargs="*", metavar="NAME",
                   help="elevation variable/coordinate name, 'hour', 'doy'; none after the flag means none at all")
    p.add_argument("--reference", choices=("auto", "diurnal", "seasonal", "none"), default="auto",
                   help="learn departures from the same hour a day earlier (diurnal, --task forecast), from each "
                        "point's annual cycle (seasonal) or the variable itself (none); default auto (forecast: "
                        "diurnal for sub-daily data with two days or more, seasonal for daily or longer steps with "
                        "two years; infill: seasonal for records of two years or more)")
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


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``; unknown options are reported by the subcommand's parser (its help is the one to read)."""
    parser = _parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        commands.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    return args
