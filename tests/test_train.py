"""Tests of geonp.train: budgets, schedule, clipping, validation, determinism and resume."""

from __future__ import annotations

import dataclasses
import logging
import math

import pytest
import torch

from geonp.checkpoint import read_checkpoint, save_training_state
from geonp.errors import CheckpointError, CheckpointNotFoundError, ConfigError, InvalidBatchError, NonFiniteError
from geonp.models import Batch, build_model
from geonp.train import TrainConfig, TrainResult, _param_groups, lr_at, train

TINY = dict(num_layers=1, token_dim=16, num_heads=2, head_dim=8, ff_hidden=(32,), embed_hidden=(32,), head_hidden=(32,))


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors run fastest (and bitwise reproducibly) on one intra-op thread."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


class Sine:
    """Noisy sine functions with random amplitude and phase; 10 context and 10 target points."""

    def __init__(self, nan: bool = False) -> None:
        self.nan = nan

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        x = torch.rand(batch_size, 20, 1, generator=generator) * 4 - 2
        amp = torch.rand(batch_size, 1, 1, generator=generator) + 1.0
        phase = torch.rand(batch_size, 1, 1, generator=generator) * 6
        y = amp * torch.sin(1.5 * x + phase) + 0.1 * torch.randn(batch_size, 20, 1, generator=generator)
        yt = y[:, 10:] * math.nan if self.nan else y[:, 10:]
        return Batch(xc=x[:, :10], yc=y[:, :10], xt=x[:, 10:], yt=yt)


def tiny(name: str = "bsa-tnp", seed: int = 0):
    """Build a one-layer model small enough for CPU tests."""
    torch.manual_seed(seed)
    return build_model(name, "small", space_dims=1, **TINY)


def cfg(**kw) -> TrainConfig:
    """Return a quiet, short TrainConfig with test overrides."""
    return TrainConfig(**{"steps": 6, "lr": 5e-3, "lr_final": 1e-3, "progress": False, **kw})


def val_loss(model, config: TrainConfig) -> float:
    """Mean loss on the validation batches train() draws for ``config``."""
    g = torch.Generator().manual_seed(config.val_seed)
    batches = [Sine().sample(config.batch_size, g) for _ in range(config.val_batches)]
    with torch.no_grad():
        return sum(model.loss(b).item() for b in batches) / len(batches)


def test_train__reduces_validation_loss():
    """Forty updates lower the loss on the fixed validation batches."""
    config = cfg(steps=40, val_every=20, val_batches=4)
    model = tiny()
    before = val_loss(model, config)
    result = train(model, Sine(), config, val_data=Sine())
    assert isinstance(result, TrainResult) and result.model is model
    assert result.best_val < before - 0.2
    assert [h["step"] for h in result.history if h["val"] is not None] == [20, 40]


def test_train__keep_best_restores_best_weights():
    """With keep_best the returned weights score the best validation loss; without, the last."""
    config = cfg(steps=6, val_every=2, val_batches=2)

    def spoil(model):  # wreck the weights after the step-4 validation, so step 6 validates worse
        def callback(record):
            if record["step"] == 4:
                with torch.no_grad():
                    for p in model.head.parameters():
                        p.add_(5.0)

        return callback

    model = tiny()
    best = train(model, Sine(), config, val_data=Sine(), callback=spoil(model))
    vals = [h["val"] for h in best.history if h["val"] is not None]
    assert len(vals) == 3 and best.best_val == min(vals) < vals[-1]
    assert val_loss(best.model, config) == pytest.approx(best.best_val, abs=1e-5)
    model = tiny()
    last = train(model, Sine(), dataclasses.replace(config, keep_best=False), val_data=Sine(), callback=spoil(model))
    assert val_loss(last.model, config) == pytest.approx(last.history[-1]["val"], rel=1e-5)


def test_train__seeded_runs_are_identical():
    """The same seed and initial weights give identical losses and weights; another seed does not."""
    a, b = train(tiny(), Sine(), cfg()), train(tiny(), Sine(), cfg())
    assert [h["loss"] for h in a.history] == [h["loss"] for h in b.history]
    pairs = zip(a.model.state_dict().values(), b.model.state_dict().values(), strict=True)
    assert all(torch.equal(x, y) for x, y in pairs)
    c = train(tiny(), Sine(), cfg(seed=1))
    assert [h["loss"] for h in a.history] != [h["loss"] for h in c.history]


def test_train__leaves_global_rng_untouched():
    """Training seeds torch inside a forked RNG, so the caller's random stream is unchanged."""
    model = tiny()
    torch.manual_seed(123)
    state = torch.get_rng_state()
    train(model, Sine(), cfg(steps=2))
    assert torch.equal(torch.get_rng_state(), state)


def test_train__step_budget_and_cosine_lr():
    """Exactly `steps` updates; the first uses lr and the last lr_final."""
    result = train(tiny(), Sine(), cfg(steps=7))
    assert result.steps == 7 and len(result.history) == 7 and result.stopped_by == "steps"
    assert [h["step"] for h in result.history] == list(range(1, 8))
    assert result.history[0]["lr"] == pytest.approx(5e-3) and result.history[-1]["lr"] == pytest.approx(1e-3)
    lrs = [h["lr"] for h in result.history]
    assert lrs == sorted(lrs, reverse=True)
    assert result.best_val is None and result.wall_seconds > 0 and result.cpu_seconds > 0


def test_train__time_budget_stops_early():
    """max_time stops training long before a huge step budget."""
    result = train(tiny(), Sine(), cfg(steps=100_000, max_time=0.3))
    assert result.stopped_by == "max_time" and 0 < result.steps < 100_000
    assert result.wall_seconds <= 0.3 + max(0.05, result.wall_seconds / result.steps)


class _Clock:
    """A stand-in for the ``time`` module in ``geonp.train`` whose clocks only move when a batch is drawn."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        return self.now

    def process_time(self):
        return self.now


class SlowSine(Sine):
    """Sine tasks whose sampling takes 0.1 s on the clock, as a slow training step would."""

    def __init__(self, clock):
        super().__init__()
        self.clock = clock

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch:
        self.clock.now += 0.1
        return super().sample(batch_size, generator)


@pytest.mark.parametrize("budget", ["max_time", "max_cpu_time"])
def test_train__no_step_begins_that_would_overrun_the_time_budget(monkeypatch, budget):
    """Steps of 0.1 s and a 0.25 s budget: two steps (a third would end at 0.3 s), not three."""
    import geonp.train

    clock = _Clock()
    monkeypatch.setattr(geonp.train, "time", clock)
    result = train(tiny(), SlowSine(clock), cfg(steps=100, **{budget: 0.25}))
    assert result.stopped_by == budget and result.steps == 2
    assert result.wall_seconds == pytest.approx(0.2) and result.cpu_seconds == pytest.approx(0.2)


def test_train__cpu_budget_anneals_by_elapsed_fraction():
    """With only max_cpu_time the cosine follows the spent fraction of the budget."""
    result = train(tiny(), Sine(), TrainConfig(max_cpu_time=0.3, lr=1e-2, lr_final=1e-4, progress=False))
    assert result.stopped_by == "max_cpu_time" and result.cpu_seconds > 0.2
    lrs = [h["lr"] for h in result.history]
    assert lrs[0] == 1e-2 and lrs == sorted(lrs, reverse=True) and lrs[-1] < 2e-3


def test_lr_at__warmup_cosine_and_time_fraction():
    """Linear warm-up, cosine from lr to lr_final over the steps, or over the time fraction."""
    c = TrainConfig(steps=13, warmup_steps=2, lr=1e-3, lr_final=1e-5)
    assert [lr_at(c, s) for s in (0, 1)] == [5e-4, 1e-3]
    assert lr_at(c, 2) == pytest.approx(1e-3) and lr_at(c, 12) == pytest.approx(1e-5)
    assert lr_at(c, 7) == pytest.approx((1e-3 + 1e-5) / 2)
    t = TrainConfig(max_time=10.0, lr=1e-3, lr_final=1e-5)
    assert [lr_at(t, 99, f) for f in (0.0, 1.0, 2.0)] == pytest.approx([1e-3, 1e-5, 1e-5])
    assert lr_at(TrainConfig(steps=5, lr=5e-4, lr_final=5e-4), 3) == 5e-4


def test_train__clips_gradient_norm():
    """After clipping the global gradient norm is at most grad_clip (0.5), and clipping did happen."""
    model = tiny()
    seen = []

    def check(record):
        norm = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters() if p.grad is not None]))
        seen.append((record["grad_norm"], float(norm)))

    train(model, Sine(), cfg(steps=5, grad_clip=0.5), callback=check)
    assert len(seen) == 5 and all(after <= 0.5 + 1e-5 for _, after in seen)
    assert max(before for before, _ in seen) > 0.5


def test_train__callback_can_stop():
    """A callback returning True ends training after that update."""
    result = train(tiny(), Sine(), cfg(steps=50), callback=lambda r: r["step"] == 3)
    assert result.steps == 3 and result.stopped_by == "callback"


class Killed(Exception):
    """Stands in for the process being killed."""


def test_train__resume_equals_uninterrupted(tmp_path):
    """Killed after step 6 (checkpoint at 5) and resumed to 10 gives the uninterrupted run's weights."""
    config = cfg(steps=10, checkpoint_every=5, val_every=4, val_batches=2)
    full = train(tiny(), Sine(), config, val_data=Sine(), checkpoint=tmp_path / "full.pt")

    def kill(record):
        if record["step"] == 6:
            raise Killed

    path = tmp_path / "run.pt"
    with pytest.raises(Killed):
        train(tiny(), Sine(), config, val_data=Sine(), checkpoint=path, callback=kill)
    assert read_checkpoint(path)["training"]["step"] == 5
    resumed = train(tiny(seed=99), Sine(), config, val_data=Sine(), checkpoint=path, resume=True)
    assert resumed.steps == 10 and resumed.best_val == full.best_val
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in full.history]
    for (k, a), b in zip(full.model.state_dict().items(), resumed.model.state_dict().values(), strict=True):
        assert torch.equal(a, b), k
    assert resumed.cpu_seconds >= read_checkpoint(path)["training"]["cpu_seconds"] > 0


def test_train__resume_needs_checkpoint(tmp_path):
    """resume=True without a checkpoint path, or with a missing file, is refused."""
    with pytest.raises(ConfigError, match="resume=True needs checkpoint"):
        train(tiny(), Sine(), cfg(), resume=True)
    with pytest.raises(CheckpointNotFoundError, match="does not exist"):
        train(tiny(), Sine(), cfg(), checkpoint=tmp_path / "none.pt", resume=True)


def test_train__resume_refuses_other_model(tmp_path):
    """Resuming with another model or config raises CheckpointError."""
    path = tmp_path / "run.pt"
    train(tiny(), Sine(), cfg(steps=2), checkpoint=path)
    with pytest.raises(CheckpointError, match="'bsa-tnp' model; expected 'tnp-kr'"):
        train(tiny("tnp-kr"), Sine(), cfg(), checkpoint=path, resume=True)
    other = build_model("bsa-tnp", "small", space_dims=1, **{**TINY, "token_dim": 8})
    with pytest.raises(CheckpointError, match="another bsa-tnp config.*token_dim"):
        train(other, Sine(), cfg(), checkpoint=path, resume=True)



def test_train__an_existing_checkpoint_is_kept_unless_resumed_or_overwritten(tmp_path):
    """Rerunning a script without resume=True erased the earlier run's checkpoint (a new-user report)."""
    from geonp.checkpoint import read_checkpoint
    from geonp.errors import OutputExistsError

    path = tmp_path / "run.pt"
    train(tiny(), Sine(), cfg(steps=3), checkpoint=path)
    with pytest.raises(OutputExistsError, match=r"run.pt already holds a training checkpoint; pass resume=True"):
        train(tiny(), Sine(), cfg(steps=1), checkpoint=path)
    assert read_checkpoint(path)["training"]["step"] == 3
    train(tiny(), Sine(), cfg(steps=1), checkpoint=path, overwrite=True)
    assert read_checkpoint(path)["training"]["step"] == 1


def test_train__resume_warns_on_changed_settings(tmp_path, caplog):
    """Changed trajectory settings on resume are logged as a warning."""
    path = tmp_path / "run.pt"
    train(tiny(), Sine(), cfg(steps=2), checkpoint=path)
    with caplog.at_level(logging.WARNING, logger="geonp.train"):
        result = train(tiny(), Sine(), cfg(steps=3, seed=5), checkpoint=path, resume=True)
    assert result.steps == 3 and "['seed']" in caplog.text


def test_train__nonfinite_loss_raises():
    """NaN target values are named before the loss is computed; a NaN loss from the model stops training."""
    with pytest.raises(NonFiniteError, match="yt contains .* NaN or infinite values"):
        train(tiny(), Sine(nan=True), cfg())
    model = tiny()
    with torch.no_grad():
        model.head.mlp[0].bias.fill_(math.nan)
    with pytest.raises(NonFiniteError, match="training loss is nan at step 1"):
        train(model, Sine(), cfg())


def test_train__nonfinite_gradient_raises():
    """A NaN gradient with a finite loss stops training with NonFiniteError."""
    model = tiny()
    model.head.mlp[0].weight.register_hook(lambda g: g * math.nan)
    with pytest.raises(NonFiniteError, match="gradient norm is nan at step 1"):
        train(model, Sine(), cfg())


def test_train__resume_refuses_foreign_training_state(tmp_path):
    """A training checkpoint without train()'s loop state cannot be resumed."""
    model = tiny()
    opt = torch.optim.AdamW(_param_groups(model, 1e-4))
    path = save_training_state(tmp_path / "t.pt", model, optimizer=opt, state={})
    with pytest.raises(CheckpointError, match="lacks the loop state .* that train\\(\\) writes"):
        train(model, Sine(), cfg(), checkpoint=path, resume=True)


def test_train__rejects_non_data_source():
    """A data source without a sample method is a TypeError naming the protocol."""
    with pytest.raises(TypeError, match=r"expected an object with sample\(batch_size, generator\)"):
        train(tiny(), [1, 2, 3], cfg())


def test_train__rejects_non_batch_samples():
    """A data source returning something other than a Batch raises InvalidBatchError."""

    class Tuples:
        def sample(self, batch_size, generator):
            return (torch.zeros(batch_size, 3, 1),)

    with pytest.raises(InvalidBatchError, match="data.sample returned a tuple; expected a geonp.models.Batch"):
        train(tiny(), Tuples(), cfg())


def test_train__progress_bar_and_logging(capsys, caplog):
    """The tqdm bar goes to stderr (only when progress=True); a summary goes to the log."""
    with caplog.at_level(logging.INFO, logger="geonp.train"):
        train(tiny(), Sine(), cfg(steps=2, progress=True), val_data=Sine())
    err = capsys.readouterr().err
    assert "bsa-tnp" in err and "val=" in err
    assert "stopped by steps after 2 steps" in caplog.text
    train(tiny(), Sine(), cfg(steps=2))
    assert capsys.readouterr().err == ""


def test_train_config__validation():
    """Missing budgets and out-of-range values raise ConfigError with the fix."""
    with pytest.raises(ConfigError, match="set at least one of steps, max_time"):
        TrainConfig()
    with pytest.raises(ConfigError, match="steps must be an int >= 1"):
        TrainConfig(steps=0)
    with pytest.raises(ConfigError, match="lr_final must satisfy"):
        TrainConfig(steps=5, lr=1e-4, lr_final=1e-3)
    with pytest.raises(ConfigError, match="max_time must be a finite number > 0"):
        TrainConfig(max_time=-1.0)
    with pytest.raises(ConfigError, match="warmup_steps"):
        TrainConfig(steps=5, warmup_steps=5)
    with pytest.raises(ConfigError, match="betas"):
        TrainConfig(steps=5, betas=(0.9, 1.0))


def test_train_config__dict_round_trip():
    """to_dict/from_dict round-trip; unknown keys are rejected with the valid ones listed."""
    c = TrainConfig(steps=5, betas=(0.8, 0.99), grad_clip=None)
    assert TrainConfig.from_dict(c.to_dict()) == c
    with pytest.raises(ConfigError, match=r"unknown TrainConfig fields \['step'\]; valid fields are .*'steps'"):
        TrainConfig.from_dict({"step": 5})


def test_train_config__defaults_are_the_seeds():
    """Gradient-norm clipping at 0.5 (the seeds') is on by default, and configs are frozen."""
    from geonp.models import KRConfig, TEPTConfig

    assert TrainConfig(steps=1).grad_clip == 0.5
    for config, field in ((TrainConfig(steps=1), "seed"), (KRConfig(), "num_heads"), (TEPTConfig(), "num_pseudo")):
        assert hasattr(config, field)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(config, field, 1)
