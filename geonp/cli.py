"""The ``geonp`` command line: thin argparse front end.

Every failure a user can cause prints one line ``geonp: error: ...`` and exits non-zero.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .errors import GeonpError

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="geonp", description="Transformer neural processes for geospatial data.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="infill a synthetic gridded field with a shipped model and score it")
    demo.add_argument("--model", default="bsa-tnp", help="shipped model: bsa-tnp (default) or te-pt-tnp")
    demo.add_argument("--seed", type=int, default=0, help="seed of the synthetic field")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 on success)."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            from .demo import run_demo

            print(f"geonp demo: infilling a 48×48×7 synthetic field with the shipped {args.model} ...", file=sys.stderr)
            result = run_demo(args.model, seed=args.seed)
            print(
                f"{result.num_context} observations (15 % of cells per frame, a 12×12 block missing in the middle "
                f"frame) -> {result.num_targets} gaps infilled in {result.seconds:.1f} s\n"
            )
            print(result.table())
    except GeonpError as exc:
        print(f"geonp: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
