"""Fill gaps in ERA5 2 m temperature with a shipped model, zero-shot, and score it.

Opens the ERA5 GRIB file of ``../shared/data`` (hourly 0.25° over the UK and Ireland, no gaps of its
own), hides part of a few frames, fills the gaps with ``ds.np.infill`` and scores the filled values
against the hidden truth beside the simplest baseline (the mean of each frame's observations) and
beside the same model without the land–sea trend (``land="none"``). The
result goes to a Zarr store, and optionally to a PNG map.

Run from the project root (a few frames keep it well under a minute on 2 CPU cores)::

    python examples/era5_infill.py                       # writes to a temporary folder
    python examples/era5_infill.py --out t2m.zarr --png t2m.png --frames 6 --hide 0.9

Exits 0 with a message when the data folder is absent. The ERA5 data: Contains modified Copernicus
Climate Change Service information 2019.
"""

from __future__ import annotations

import sys

import numpy as np
from _common import data_file, example_parser, pyplot, rmse, save_figure, write_zarr

import geonp  # imports pyproj before cfgrib/eccodes can load; registers ds.np

FILE = "era5-2mt-2019-03-uk.grib"


def main(argv: list[str] | None = None) -> int:
    """Run the example; returns the exit code."""
    p = example_parser(
        __doc__,
        FILE,
        out_help="Zarr store to write (default: in a temporary folder)",
        png_help="also draw a map of the first frame",
    )
    p.add_argument("--frames", type=int, default=3, help="hourly frames to use, from 2019-03-15T00:00 (default 3)")
    p.add_argument("--hide", type=float, default=0.8, help="fraction of cells hidden at random (default 0.8)")
    args = p.parse_args(argv)

    path = data_file(args.data, FILE)
    if path is None:
        return 0

    ds = geonp.open_dataset(path)  # cfgrib, no index files written; `time` holds valid times
    truth = ds["t2m"].sel(time=slice("2019-03-15T00:00", None)).isel(time=slice(0, args.frames)).load()

    # gaps: cells hidden at random, plus a 10 x 10 block (about 250 km) in the middle of every frame
    rng = np.random.default_rng(args.seed)
    hidden = rng.random(truth.shape) < args.hide
    hidden[:, 12:22, 20:30] = True
    observed = truth.where(~hidden)  # NaN = a gap to fill; every finite value is context
    data = observed.to_dataset(name="t2m")

    # t2m_mean, t2m_std, t2m_filled; the file has no land-sea mask, so by default (land="auto") each task
    # fits a land-sea trend from the bundled global land fraction where its values follow the coast
    out = data.np.infill("t2m", model=args.model)
    plain = data.np.infill("t2m", model=args.model, land="none")

    gaps = hidden
    err = out["t2m_mean"].values[gaps] - truth.values[gaps]
    std = out["t2m_std"].values[gaps]
    frame_mean = observed.mean(["latitude", "longitude"]).values[:, None, None]
    base = np.broadcast_to(frame_mean, truth.shape)[gaps] - truth.values[gaps]
    inside = np.abs(err) <= 1.96 * std
    print(f"{args.frames} frames, {int((~hidden).sum())} observed cells, {int(gaps.sum())} gaps filled "
          f"with {out.attrs['geonp_model']} ({out.attrs['geonp_model_source']})")
    print(f"  RMSE over the gaps: {rmse(err):.3f} K (mean of each frame's observations: {rmse(base):.3f} K)")
    print(f"  share of hidden values inside mean ± 1.96 std: {inside.mean():.2f}")
    print(f"  without the land-sea trend (land='none'): "
          f"{rmse(plain['t2m_mean'].values[gaps] - truth.values[gaps]):.3f} K")

    target = write_zarr(out, args.out, prefix="geonp-era5-", name="t2m_infill.zarr")
    print(f"  wrote {target} (read it with xr.open_zarr(path, decode_coords='all'))")

    if args.png is not None:
        plt = pyplot()
        fig, axes = plt.subplots(1, 4, figsize=(16, 3.6), constrained_layout=True)
        kw = dict(vmin=float(truth[0].min()), vmax=float(truth[0].max()), cmap="RdYlBu_r")
        observed[0].plot(ax=axes[0], **kw)
        out["t2m_filled"][0].plot(ax=axes[1], **kw)
        truth[0].plot(ax=axes[2], **kw)
        out["t2m_std"][0].plot(ax=axes[3], cmap="viridis")
        for ax, title in zip(axes, ["observed (gaps = NaN)", "filled", "truth", "predictive std"], strict=True):
            ax.set_title(title)
        save_figure(fig, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
