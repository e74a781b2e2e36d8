"""Steps the example scripts share: their common options, the data check, scores and outputs.

The scripts import it as ``from _common import ...``: ``python examples/<name>.py`` puts
``examples/`` first on ``sys.path``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

import geonp  # imports pyproj before cfgrib/eccodes can load; registers ds.np

DEFAULT_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


def example_parser(doc: str, file: str, *, out_help: str, png_help: str) -> argparse.ArgumentParser:
    """Build the argument parser with the options every example takes.

    Parameters
    ----------
    doc : str
        The script's docstring; its first line is the description.
    file : str
        Name of the data file the script reads from ``--data``.
    out_help, png_help : str
        Help of ``--out`` (Zarr store) and ``--png`` (map).

    Returns
    -------
    argparse.ArgumentParser
        With ``--data``, ``--out``, ``--png``, ``--model`` and ``--seed``; the script adds its own.
    """
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder holding " + file)
    p.add_argument("--out", type=Path, help=out_help)
    p.add_argument("--png", type=Path, help=png_help)
    p.add_argument("--model", default="bsa-tnp", help="shipped model name or saved model path (default bsa-tnp)")
    p.add_argument("--seed", type=int, default=0)
    return p


def data_file(folder: Path, file: str) -> Path | None:
    """Return ``folder / file``, or ``None`` after saying it is absent (the script then exits 0).

    Parameters
    ----------
    folder : Path
        The ``--data`` folder.
    file : str
        The data file's name.

    Returns
    -------
    Path or None
        The path when it exists.
    """
    path = folder / file
    if not path.exists():
        print(f"skipped: {path} not found (the shared data folder is absent); pass --data FOLDER")
        return None
    return path


def rmse(err: np.ndarray) -> float:
    """Root mean square of ``err``.

    Parameters
    ----------
    err : numpy.ndarray
        Errors (prediction minus truth).

    Returns
    -------
    float
        ``sqrt(mean(err²))``.
    """
    return float(np.sqrt(np.mean(err**2)))


def write_zarr(ds, out: Path | None, *, prefix: str, name: str) -> Path:
    """Write ``ds`` with :func:`geonp.to_zarr` to ``out``, or to ``name`` in a new temporary folder.

    Parameters
    ----------
    ds : xarray.Dataset
        The result to write.
    out : Path or None
        The ``--out`` store (replaced if it exists); ``None``: a temporary folder.
    prefix, name : str
        Prefix of the temporary folder and name of the store in it.

    Returns
    -------
    Path
        The store written.
    """
    target = Path(tempfile.mkdtemp(prefix=prefix)) / name if out is None else out
    geonp.to_zarr(ds, target, overwrite=out is not None and target.exists(), progress=False)
    return target


def pyplot():
    """Import ``matplotlib.pyplot`` on the non-interactive Agg backend (only when a PNG is asked for).

    Returns
    -------
    module
        ``matplotlib.pyplot``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: Path) -> None:
    """Save ``fig`` to ``path`` at 100 dpi and say so.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure.
    path : Path
        The ``--png`` file.
    """
    fig.savefig(path, dpi=100)
    print(f"  wrote {path}")
