"""Shared fixtures. pyproj is imported first (see geonp/__init__.py)."""

import pyproj  # noqa: F401  isort: skip

import pytest
import torch

# tiny test models run several times faster on one thread, and steadier on a shared machine
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same torch seed."""
    torch.manual_seed(0)
    yield


@pytest.fixture
def kernel():
    """The compiled RBF bias kernel (geonp/models/native.py); the test is skipped where it cannot be built."""
    from geonp.models import native

    k = native.rbf_bias_kernel()
    if k is None:
        pytest.skip(f"no compiled kernel here: {native.status()}")
    return k
