"""From weather stations to a grid: Colorado monthly maximum temperature, zero-shot.

Opens the Colorado station record of ``../shared/data`` (376 stations, monthly ``tmax`` in °C with
real gaps), then for a few months:

1. hides 20 % of the reporting stations, fills them with ``ds.np.infill`` (gaps are NaN values) and
   scores the filled values against the hidden ones beside the mean of the remaining stations;
2. predicts on a regular 0.1° latitude/longitude grid from all reporting stations with
   ``ds.np.infill(targets=grid)`` and writes the grid to a Zarr store (optionally a PNG map).

Elevation (the main driver of temperature in Colorado): the stations carry an ``elevation`` coordinate,
so in step 1 every task removes a lapse rate fitted to its context and adds it back at the targets.
The grid of step 2 has no elevation here (no DEM in the data folder), so the grid is predicted
without that trend; give the grid an ``elevation`` coordinate to use it. A model fitted with
``ds.np.fit`` also takes elevation as an input, and then the grid must have one.

Run from the project root (well under a minute on 2 CPU cores)::

    python examples/stations_to_grid.py
    python examples/stations_to_grid.py --out tmax_grid.zarr --png tmax_grid.png --start 1990-06 --months 3

Exits 0 with a message when the data folder is absent.
"""

from __future__ import annotations

import sys

import numpy as np
import pyproj
import xarray as xr
from _common import data_file, example_parser, pyplot, rmse, save_figure, write_zarr

import geonp  # registers ds.np

FILE = "colorado_monthly_met_1895_1997.nc"


def main(argv: list[str] | None = None) -> int:
    """Run the example; returns the exit code."""
    p = example_parser(
        __doc__,
        FILE,
        out_help="Zarr store for the grid (default: in a temporary folder)",
        png_help="also draw a map of the first month",
    )
    p.add_argument("--start", default="1990-01", help="first month (default 1990-01)")
    p.add_argument("--months", type=int, default=3, help="number of months (default 3)")
    args = p.parse_args(argv)

    path = data_file(args.data, FILE)
    if path is None:
        return 0

    ds = geonp.open_dataset(path)  # dims (time, station); coords lon, lat, elevation, station_name
    tmax = ds[["tmax"]].sel(time=slice(args.start, None)).isel(time=slice(0, args.months)).load()

    # 1. hold out 20 % of the stations that reported each month and fill them back in
    rng = np.random.default_rng(args.seed)
    reported = tmax["tmax"].notnull().values
    held_out = reported & (rng.random(reported.shape) < 0.2)
    gappy = tmax.where(~xr.DataArray(held_out, dims=tmax["tmax"].dims))
    filled = gappy.np.infill("tmax", model=args.model)
    truth = tmax["tmax"].values[held_out]
    err = filled["tmax_mean"].values[held_out] - truth
    means = gappy["tmax"].mean("station").values[:, None]
    base = np.broadcast_to(means, held_out.shape)[held_out] - truth
    print(f"{args.months} months from {args.start}: {int(reported.sum())} station-months reported, "
          f"{int(held_out.sum())} held out")
    print(f"  RMSE at held-out stations: {rmse(err):.2f} °C (mean of the other stations: {rmse(base):.2f} °C)")

    # 2. every reporting station -> a 0.1° grid (targets= gives coordinates; its values are ignored).
    #    Without an elevation coordinate on the grid, no elevation trend is used here.
    grid = xr.Dataset(coords={
        "lat": ("lat", np.round(np.arange(37.0, 41.0 + 1e-9, 0.1), 2), {"units": "degrees_north"}),
        "lon": ("lon", np.round(np.arange(-109.0, -102.0 + 1e-9, 0.1), 2), {"units": "degrees_east"}),
    })
    gridded = tmax.np.infill("tmax", targets=grid, model=args.model)  # tmax_mean, tmax_std on (time, lat, lon)
    crs = pyproj.CRS.from_wkt(gridded["spatial_ref"].attrs["crs_wkt"])
    print(f"  gridded to {gridded.sizes['lat']} x {gridded.sizes['lon']} cells; "
          f"variables {list(gridded.data_vars)}, CRS {crs.to_string()}")

    target = write_zarr(gridded, args.out, prefix="geonp-stations-", name="tmax_grid.zarr")
    print(f"  wrote {target}")

    if args.png is not None:
        plt = pyplot()
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), constrained_layout=True)
        first = tmax.isel(time=0)
        gridded["tmax_mean"].isel(time=0).plot(ax=axes[0], cmap="RdYlBu_r")
        axes[0].scatter(first.lon, first.lat, c=first.tmax, cmap="RdYlBu_r", edgecolors="k", s=14,
                        vmin=float(gridded["tmax_mean"].isel(time=0).min()),
                        vmax=float(gridded["tmax_mean"].isel(time=0).max()))
        gridded["tmax_std"].isel(time=0).plot(ax=axes[1], cmap="viridis")
        axes[0].set_title(f"tmax mean {str(first.time.values)[:7]} (dots: stations)")
        axes[1].set_title("predictive std")
        save_figure(fig, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
