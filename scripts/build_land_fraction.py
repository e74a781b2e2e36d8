"""Build the bundled global land fraction ``geonp/static/land_fraction.npz``.

    pip install global-land-mask && python scripts/build_land_fraction.py

Source: the GLOBE 1 km land–sea mask (NOAA NGDC, public domain) as packaged by
``global-land-mask`` (MIT): 21,600 × 43,200 points every 1/120°, True at sea. Each 0.05° cell
(6 × 6 of those points) stores how many of its 36 points are land, as ``uint8``. Compressed that
is about 0.4 MB, and :mod:`geonp.coastline` reads it without executing code
(``allow_pickle=False``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "geonp" / "static" / "land_fraction.npz"
BLOCK = 6  # 1/120° points per 0.05° cell side


def main() -> None:
    """Count the land points of each 0.05° cell and write the table to ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    from global_land_mask import globe

    ocean, lat, lon = globe._mask, globe._lat, globe._lon  # the package's arrays: no public accessor
    ny, nx = ocean.shape[0] // BLOCK, ocean.shape[1] // BLOCK
    land = (~ocean).reshape(ny, BLOCK, nx, BLOCK).sum((1, 3), dtype=np.int64).astype(np.uint8)
    # cell centres: the mean of each block's point coordinates (lat descending from 90, lon from -180)
    lat_c = lat[: ny * BLOCK].reshape(ny, BLOCK).mean(1)
    lon_c = lon[: nx * BLOCK].reshape(nx, BLOCK).mean(1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, land=land, points=np.uint8(BLOCK * BLOCK), lat0=lat_c[0], lon0=lon_c[0],
                        dlat=lat_c[1] - lat_c[0], dlon=lon_c[1] - lon_c[0])
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.2f} MB): {ny} x {nx} cells of 0.05 deg, "
          f"land fraction {land.mean() / (BLOCK * BLOCK):.3f} of the cells")


if __name__ == "__main__":
    main()
