"""Chunked inference on a dask.distributed cluster, and the layering rules of the package."""

import pyproj  # noqa: F401  isort: skip

import ast
import os
from pathlib import Path

import numpy as np
import pytest
from test_api import field, stations

import geonp  # noqa: F401

PACKAGE = Path(geonp.__file__).resolve().parent


@pytest.mark.slow
def test_local_cluster_matches_threads(tmp_path):
    distributed = pytest.importorskip("distributed")
    ds, _ = field(times=4)
    ref = ds.np.infill("t2m", halo=1000.0)
    lazy = ds.np.infill("t2m", chunks={"time": 1}, halo=1000.0)
    st = stations(times=6)  # station data are calibrated by default: a task of the graph on the cluster
    st_ref = st.np.infill("tmax", model="te-pt-tnp")
    st_lazy = st.chunk({"time": 2}).np.infill("tmax", model="te-pt-tnp")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  local_directory=str(tmp_path)) as cluster, distributed.Client(cluster):
        got = lazy.compute()
        path = geonp.to_zarr(lazy, tmp_path / "out.zarr", progress=False)
        st_got = st_lazy.compute()
    np.testing.assert_allclose(st_got.tmax_std, st_ref.tmax_std, rtol=1e-5)
    np.testing.assert_allclose(got.t2m_mean, ref.t2m_mean, atol=2e-4)
    import xarray as xr

    back = xr.open_zarr(path, decode_coords="all")
    np.testing.assert_allclose(back.t2m_std, ref.t2m_std, atol=2e-4)
    assert back.rio.crs.to_epsg() == 4326


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("part", ["data", "io", "geo.py", "normalise.py", "api.py", "accessor.py"])
def test_data_io_geo_never_import_torch(part):
    files = [PACKAGE / part] if part.endswith(".py") else sorted((PACKAGE / part).rglob("*.py"))
    for f in files:
        assert "torch" not in _imports(f), f"{f} imports torch"


def test_models_never_import_xarray():
    for f in sorted((PACKAGE / "models").rglob("*.py")):
        assert not {"xarray", "dask", "pandas"} & _imports(f), f"{f} imports the data stack"


def test_import_geonp_does_not_load_torch():
    import subprocess
    import sys

    code = "import geonp, geonp.io, geonp.geo, geonp.data, sys; assert 'torch' not in sys.modules, 'torch loaded'"
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)})
