"""The geonp command line and the demo."""

import pytest

import geonp.pretrained as pretrained
from geonp.cli import main
from geonp.demo import run_demo


def test_cli__unknown_command_exits_2(capsys):
    """An unknown subcommand is an argparse error with exit code 2."""
    with pytest.raises(SystemExit) as exc:
        main(["frobnicate"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_cli__unknown_option_exits_2(capsys):
    """An unknown option is rejected."""
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--bogus"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_cli__unknown_model_prints_one_error_line(capsys):
    """A model without shipped weights prints `geonp: error: ...` and returns 2."""
    assert main(["demo", "--model", "tnp-d"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("geonp: error: no pretrained weights for 'tnp-d'")


def test_pretrained__missing_weights_file_is_typed(tmp_path, monkeypatch):
    """A package installed without its weights raises CheckpointNotFoundError with a fix hint."""
    monkeypatch.setattr(pretrained, "WEIGHTS_DIR", tmp_path)
    with pytest.raises(pretrained.CheckpointNotFoundError, match="scripts/pretrain.py --model bsa-tnp"):
        pretrained.load_pretrained("bsa-tnp")


@pytest.mark.parametrize("name", sorted(pretrained.PRETRAINED))
def test_pretrained__shipped_weights_load(name):
    """The shipped weights load safely and are space-time models in eval mode."""
    model = pretrained.load_pretrained(name)
    assert model.config.space_dims == 2 and model.config.time_dims == 1
    assert not model.training
    meta = pretrained.pretrained_metadata(name)
    assert meta["units"]["time"] == "one time step"


@pytest.mark.slow
def test_demo__shipped_bsa_tnp_beats_the_mean():
    """Zero-shot, the shipped BSA-TNP infills the demo field far better than the mean of the observations.

    (The shipped TE-PT-TNP does not yet: 16 pseudo-tokens for 2,448 context points, see MODEL_CARD.md.)
    """
    name = "bsa-tnp"
    result = run_demo(name)
    model = result.scores[f"geonp {name} (zero-shot)"]
    assert model["rmse"] < 0.5 * result.scores["mean of observations"]["rmse"]
    assert model["coverage"] > 0.9  # the shipped small models are under-trained and too wide (MODEL_CARD.md)


def test_cli__demo_runs(capsys):
    """`geonp demo` prints the score table and returns 0."""
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "geonp bsa-tnp (zero-shot)" in out and "exact GP, true kernel" in out
