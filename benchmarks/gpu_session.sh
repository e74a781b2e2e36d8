#!/usr/bin/env bash
# One GPU session's checks, in the order they pay: the GPU tests, then the kernels with and without the
# fused bias, then the rest of benchmarks/gpu.py. Run from the repository root on a CUDA machine:
#
#   bash benchmarks/gpu_session.sh OUT_DIR
#
# A lent GPU machine may lack geonp's pure-Python dependencies and reach no package index. Fetch
# wheels for it beforehand into .whl/ (Python 3.12 there; keep .whl out of git) and this script
# installs them into /tmp/site without touching the machine's own packages:
#
#   python -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#     -d .whl pyproj dask zarr numcodecs donfig google-crc32c locket partd xarray
#
# Results: OUT_DIR/pytest.log, OUT_DIR/fused/gpu.json (matmul + attention with GEONP_FUSED_BIAS=1),
# OUT_DIR/gpu.json (every section with the default bias). Copy them to benchmarks/results/ and update
# docs/benchmarks.md, "GPU".
set -u
out=${1:?usage: bash benchmarks/gpu_session.sh OUT_DIR}
mkdir -p "$out/fused"
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 3
    export PYTHONPATH="/tmp/site:$PWD"
fi
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py 2>&1 | tail -20 | tee "$out/pytest.log"
GEONP_FUSED_BIAS=1 timeout 150 python3 benchmarks/gpu.py --sections matmul attention --no-flex --out "$out/fused"
timeout 300 python3 benchmarks/gpu.py --out "$out"
