"""``import geonp`` makes torch's OpenMP threads wait passively, unless the user chose or torch came first."""

import pyproj  # noqa: F401  isort: skip

import os
import subprocess
import sys

import pytest

from geonp.openmp import ENV, passive_waits


def _policy_after(code: str, **env) -> str:
    base = {k: v for k, v in os.environ.items() if k != ENV}
    out = subprocess.run([sys.executable, "-c", code + f"; import os; print(os.environ.get({ENV!r}))"],
                         check=True, capture_output=True, text=True, env={**base, **env})
    return out.stdout.strip().splitlines()[-1]


def test_import_geonp_sets_passive_waits_before_torch_loads():
    assert _policy_after("import geonp, sys; assert 'torch' not in sys.modules") == "PASSIVE"


@pytest.mark.parametrize("code, env, expected", [
    ("import geonp", {ENV: "ACTIVE"}, "ACTIVE"),  # the user's choice is kept
    ("import torch, geonp", {}, "None"),  # too late: libgomp read the environment when torch loaded
])
def test_passive_waits_keeps_a_choice_and_does_nothing_after_torch(code, env, expected):
    assert _policy_after(code, **env) == expected


def test_passive_waits_reports_whether_it_set_the_variable(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert passive_waits() is True and os.environ[ENV] == "PASSIVE"
    assert passive_waits() is False  # set already
    monkeypatch.delenv(ENV)
    monkeypatch.setitem(sys.modules, "torch", object())
    assert passive_waits() is False and ENV not in os.environ
