"""Training loop: AdamW, cosine learning rate, gradient-norm clipping, validation, budgets and resumable checkpoints."""

from __future__ import annotations

import logging
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol

import torch
from tqdm import tqdm

from .allocator import keep_freed_memory
from .checkpoint import check_destination, load_training_state, save_training_state
from .errors import CheckpointError, ConfigError, InvalidBatchError, NonFiniteError, OutputExistsError
from .models import Batch, NeuralProcess
from .models.score import ScoreMod
from .progress import bar_options

__all__ = ["DataSource", "TrainConfig", "TrainResult", "train", "lr_at"]

logger = logging.getLogger(__name__)

_LOOP_KEYS = ("step", "wall_seconds", "cpu_seconds", "history", "best_val", "best_state", "rng", "train_config")
_IGNORED_ON_RESUME = ("steps", "max_time", "max_cpu_time", "progress", "log_every", "checkpoint_every")


class DataSource(Protocol):
    """Anything that draws training tasks: ``sample(batch_size, generator) -> Batch``."""

    def sample(self, batch_size: int, generator: torch.Generator) -> Batch: ...


@dataclass(frozen=True)
class TrainConfig:
    """Settings of :func:`train` (defaults follow BSA-TNP, 003 App. A; see seeds-spec §3.13).

    Budgets count the training work only (data sampling, forward, backward, update);
    validation and checkpoint writes are not counted, so models compare fairly.
    """

    steps: int | None = None  # optimizer updates; the cosine schedule spans them
    max_time: float | None = None  # wall-clock seconds of training (no step is begun that would end past it)
    max_cpu_time: float | None = None  # process CPU seconds of training (all threads), for equal-compute benchmarks
    batch_size: int = 8  # tasks per update (and per validation batch)
    lr: float = 5e-4  # peak learning rate (after warm-up)
    lr_final: float = 1e-5  # learning rate at the end of the cosine; = lr for a constant rate
    warmup_steps: int = 0  # linear warm-up updates before the cosine
    weight_decay: float = 1e-4  # AdamW decoupled weight decay
    betas: tuple[float, float] = (0.9, 0.999)  # AdamW moment decays
    grad_clip: float | None = 0.5  # max global gradient norm; None disables clipping
    val_every: int = 500  # updates between validations (also run at the end)
    val_batches: int = 16  # fixed validation batches, drawn once
    val_seed: int = 12345  # seed of the validation batches, independent of `seed` so runs compare
    #: restore the weights of the best validation loss into the model at the end; a training checkpoint
    #: still holds the last step (for resuming): save TrainResult.model with save_model to keep the best
    keep_best: bool = True
    checkpoint_every: int = 500  # updates between checkpoints (also written at the end)
    seed: int = 0  # seed of the training batches and of any other torch randomness
    progress: bool = True  # tqdm bar on stderr
    log_every: int = 100  # updates between INFO log lines

    def __post_init__(self) -> None:
        if self.steps is None and self.max_time is None and self.max_cpu_time is None:
            raise ConfigError(
                "no budget given; set at least one of steps, max_time (seconds) or max_cpu_time (seconds)."
            )
        ints = {"batch_size": 1, "warmup_steps": 0, "val_every": 1, "val_batches": 1, "checkpoint_every": 1,
                "log_every": 1, "seed": None, "val_seed": None, **({"steps": 1} if self.steps is not None else {})}
        for name, low in ints.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or (low is not None and value < low):
                raise ConfigError(f"{name} must be an int{f' >= {low}' if low is not None else ''}, got {value!r}.")
        for name in ("lr", "max_time", "max_cpu_time", "grad_clip"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and value > 0 and math.isfinite(value)):
                hint = "" if name == "lr" else " or None"
                raise ConfigError(f"{name} must be a finite number > 0{hint}, got {value!r}.")
        if not 0 <= self.lr_final <= self.lr:
            raise ConfigError(f"lr_final must satisfy 0 <= lr_final <= lr = {self.lr}, got {self.lr_final}; "
                              "set lr_final = lr for a constant learning rate.")
        if self.steps is not None and self.warmup_steps >= self.steps:
            raise ConfigError(f"warmup_steps ({self.warmup_steps}) must be < steps ({self.steps}).")
        if not self.weight_decay >= 0:
            raise ConfigError(f"weight_decay must be >= 0, got {self.weight_decay}.")
        if len(self.betas) != 2 or not all(0 <= b < 1 for b in self.betas):
            raise ConfigError(f"betas must be two numbers in [0, 1), got {self.betas!r}.")

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (saved in training checkpoints)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Inverse of :meth:`to_dict`; rejects unknown keys, listing the valid ones."""
        valid = sorted(f.name for f in fields(cls))
        unknown = sorted(set(data) - set(valid))
        if unknown:
            raise ConfigError(f"unknown TrainConfig fields {unknown}; valid fields are {valid}.")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


@dataclass
class TrainResult:
    """What :func:`train` returns; ``model`` is the trained model (the same object as passed in).

    With validation data and ``keep_best=True``, ``model`` holds the weights of the best validation loss,
    while a training checkpoint written by :func:`train` holds the last step's (so that training can
    resume): save ``model`` with :func:`geonp.checkpoint.save_model` to keep the best weights in a file.
    """

    model: NeuralProcess
    steps: int  # updates done in total (including those before a resume)
    wall_seconds: float  # training wall time counted against max_time
    cpu_seconds: float  # training CPU time counted against max_cpu_time
    history: list[dict[str, Any]] = field(default_factory=list)  # per update: step, loss, lr, grad_norm, val
    best_val: float | None = None  # lowest validation loss (None without val_data)
    stopped_by: str = ""  # "steps", "max_time", "max_cpu_time" or "callback"


def lr_at(config: TrainConfig, step: int, fraction: float = 0.0) -> float:
    """Learning rate of update ``step`` (0-based): linear warm-up, then cosine from ``lr`` to ``lr_final``.

    With a step budget the first cosine update uses ``lr`` and the last (``steps - 1``)
    ``lr_final``; with only time budgets the cosine follows ``fraction``, the elapsed
    fraction of the budget.

    Examples
    --------
    >>> cfg = TrainConfig(steps=11, lr=1e-3, lr_final=1e-5)
    >>> lr_at(cfg, 0), lr_at(cfg, 5), lr_at(cfg, 10)
    (0.001, 0.000505, 1e-05)
    """
    c = config
    if step < c.warmup_steps:
        return c.lr * (step + 1) / c.warmup_steps
    if c.steps is not None:
        fraction = (step - c.warmup_steps) / max(1, c.steps - c.warmup_steps - 1)
    fraction = min(max(fraction, 0.0), 1.0)
    return c.lr_final + 0.5 * (c.lr - c.lr_final) * (1.0 + math.cos(math.pi * fraction))


def train(
    model: NeuralProcess,
    data: DataSource,
    config: TrainConfig,
    *,
    val_data: DataSource | None = None,
    checkpoint: str | os.PathLike | None = None,
    resume: bool = False,
    callback: Callable[[dict[str, Any]], bool | None] | None = None,
    overwrite: bool = False,
) -> TrainResult:
    """Train ``model`` in place on tasks drawn from ``data``.

    Parameters
    ----------
    model : NeuralProcess
        Trained on its current device; batches are moved there.
    data, val_data : DataSource
        Objects with ``sample(batch_size, generator) -> Batch``. ``val_data`` gives
        ``config.val_batches`` fixed batches drawn once with ``config.val_seed``.
    config : TrainConfig
        Budgets, optimiser and schedule settings.
    checkpoint : str or PathLike, optional
        Training checkpoint written every ``checkpoint_every`` updates and at the end
        (atomically; see :mod:`geonp.checkpoint`). It holds the last step's weights and
        optimiser state so that training can resume, also when ``config.keep_best`` restores
        the best validation weights into the returned model; save ``TrainResult.model``
        (:func:`geonp.checkpoint.save_model`) to keep the best weights.
    resume : bool
        Continue from ``checkpoint``: same seed and config give the same result as an
        uninterrupted run.
    callback : callable, optional
        Called after each update with its history record (``step``, ``loss``, ``lr``,
        ``grad_norm`` before clipping, ``val``); ``model``'s ``.grad`` hold the clipped
        gradients. Return ``True`` to stop.
    overwrite : bool
        Start afresh over an existing ``checkpoint`` file (without it, and without ``resume``,
        an existing file is refused: rerunning a crashed job's script would erase its state).

    Returns
    -------
    TrainResult

    Raises
    ------
    TypeError
        ``data`` has no ``sample`` method.
    InvalidBatchError
        ``data.sample`` returned something other than a :class:`~geonp.models.Batch`.
    ConfigError
        ``resume=True`` without ``checkpoint``.
    OutputExistsError
        ``checkpoint`` is an existing directory, or an existing file with neither ``resume`` nor ``overwrite``.
    CheckpointError
        The checkpoint to resume from is missing (``CheckpointNotFoundError``), damaged,
        or of another model or config.
    NonFiniteError
        The loss or the gradient norm became NaN or infinite.
    """
    if not callable(getattr(data, "sample", None)):
        raise TypeError(
            f"data is a {type(data).__name__}; expected an object with sample(batch_size, generator) -> Batch."
        )
    if resume and checkpoint is None:
        raise ConfigError("resume=True needs checkpoint=<path of a training checkpoint>; pass it or set resume=False.")
    if checkpoint is not None:
        check_destination(checkpoint)  # before any training, not at the first write
        if not (resume or overwrite) and os.path.exists(checkpoint):
            raise OutputExistsError(
                f"{checkpoint} already holds a training checkpoint; pass resume=True to continue it, "
                "overwrite=True to start again over it, or another path.")
    keep_freed_memory()  # tile-sized temporaries reuse freed memory (geonp.allocator)
    device = next(model.parameters()).device
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(_param_groups(model, config.weight_decay), lr=config.lr, betas=config.betas)
    gen = torch.Generator().manual_seed(config.seed)
    val_set = _draw(val_data, config.val_batches, config, torch.Generator().manual_seed(config.val_seed), device)
    loop: dict[str, Any] = dict(step=0, wall_seconds=0.0, cpu_seconds=0.0, history=[], best_val=None, best_state=None)
    was_training = model.training
    devices = [torch.cuda.current_device() if device.index is None else device.index] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):  # the caller's global RNG state is left as it was
        torch.manual_seed(config.seed)
        if resume:
            loop.update(_loop_state(checkpoint, model, opt))
            _restore_rng(loop.pop("rng"), gen, devices)
            _warn_changes(TrainConfig.from_dict(loop.pop("train_config")), config)
            logger.info("resumed from %s at step %d", checkpoint, loop["step"])
        bar = tqdm(total=config.steps, initial=loop["step"], disable=not config.progress,
                   desc=model.name, unit="step", dynamic_ncols=True, **bar_options(sys.stderr))
        model.train()
        stopped_by = _exhausted(config, loop)
        try:
            while not stopped_by:
                record = _update(model, data, config, opt, params, gen, loop, device)
                stopped_by = _exhausted(config, loop)
                step = record["step"]
                if val_set and (step % config.val_every == 0 or stopped_by):
                    _validate(model, val_set, loop, record, config.keep_best)
                loop["history"].append(record)
                bar.update(1)
                bar.set_postfix(loss=f"{record['loss']:.3f}", val=_fmt(loop["best_val"]), refresh=False)
                if step % config.log_every == 0 or record["val"] is not None:
                    logger.info("step %d loss %.4f lr %.2e val %s", step, record["loss"], record["lr"],
                                _fmt(record["val"]))
                if checkpoint is not None and step % config.checkpoint_every == 0 and not stopped_by:
                    _save(checkpoint, model, opt, gen, config, loop, devices)
                if callback is not None and callback(record) and not stopped_by:
                    stopped_by = "callback"
            if val_set and loop["history"] and loop["history"][-1]["val"] is None:
                _validate(model, val_set, loop, loop["history"][-1], config.keep_best)
            if checkpoint is not None:
                _save(checkpoint, model, opt, gen, config, loop, devices)
        finally:
            bar.close()
            model.train(was_training)
    if config.keep_best and loop["best_state"] is not None:
        model.load_state_dict(loop["best_state"])
    logger.info("stopped by %s after %d steps (%.1f s wall, %.1f s CPU), best val %s", stopped_by, loop["step"],
                loop["wall_seconds"], loop["cpu_seconds"], _fmt(loop["best_val"]))
    return TrainResult(model, loop["step"], loop["wall_seconds"], loop["cpu_seconds"], loop["history"],
                       loop["best_val"], stopped_by)


def _update(model, data, config, opt, params, gen, loop, device) -> dict[str, Any]:
    """One optimizer update; advances the step and the budget clocks."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    step = loop["step"]
    fractions = [loop["wall_seconds"] / config.max_time if config.max_time else 0.0,
                 loop["cpu_seconds"] / config.max_cpu_time if config.max_cpu_time else 0.0]
    lr = lr_at(config, step, max(fractions))
    for group in opt.param_groups:
        group["lr"] = lr
    batch = data.sample(config.batch_size, gen)
    if not isinstance(batch, Batch):
        raise InvalidBatchError(f"data.sample returned a {type(batch).__name__}; expected a geonp.models.Batch.")
    opt.zero_grad(set_to_none=True)
    loss = model.loss(batch.to(device))
    value = loss.item()
    if not math.isfinite(value):
        raise NonFiniteError(
            f"the training loss is {value} at step {step + 1}; expected a finite value. Lower lr (now {lr:.2e}), "
            "keep grad_clip on, or check the data for NaN, infinite or extreme values."
        )
    loss.backward()
    clip = config.grad_clip if config.grad_clip is not None else math.inf
    grad_norm = float(torch.nn.utils.clip_grad_norm_(params, clip))
    if not math.isfinite(grad_norm):
        raise NonFiniteError(
            f"the gradient norm is {grad_norm} at step {step + 1} (loss {value:.4g}); expected a finite value. "
            "Lower lr, or look for operations that overflow on this batch."
        )
    opt.step()
    loop["step"] = step + 1
    loop["last_step"] = (time.perf_counter() - wall0, time.process_time() - cpu0)  # not saved: 0 after a resume
    loop["wall_seconds"] += loop["last_step"][0]
    loop["cpu_seconds"] += loop["last_step"][1]
    return {"step": step + 1, "loss": value, "lr": lr, "grad_norm": grad_norm, "val": None}


def _exhausted(config: TrainConfig, loop: dict[str, Any]) -> str:
    """Name of the first budget used up, or ``""``.

    A time budget counts as used up when another step as long as the last one would end past it: a
    step that has started runs to its end, so the loop stops before one that would overrun.
    """
    if config.steps is not None and loop["step"] >= config.steps:
        return "steps"
    wall, cpu = loop.get("last_step", (0.0, 0.0))
    if config.max_time is not None and loop["wall_seconds"] + wall > config.max_time:
        return "max_time"
    if config.max_cpu_time is not None and loop["cpu_seconds"] + cpu > config.max_cpu_time:
        return "max_cpu_time"
    return ""


def _draw(source, n: int, config: TrainConfig, gen: torch.Generator, device) -> list[Batch]:
    if source is None:
        return []
    return [source.sample(config.batch_size, gen).to(device) for _ in range(n)]


@torch.no_grad()
def _validate(model, val_set: list[Batch], loop: dict[str, Any], record: dict[str, Any], keep_best: bool) -> None:
    """Mean loss over the fixed validation batches; remembers the best weights."""
    model.eval()
    value = sum(model.loss(b).item() for b in val_set) / len(val_set)
    model.train()
    record["val"] = value
    if loop["best_val"] is None or value < loop["best_val"]:
        loop["best_val"] = value
        if keep_best:
            loop["best_state"] = {k: v.detach().clone() for k, v in model.state_dict().items()}


def _save(path, model, opt, gen, config, loop, devices) -> None:
    rng = {"torch": torch.get_rng_state(), "data": gen.get_state()}
    if devices:
        rng["cuda"] = [torch.cuda.get_rng_state(d) for d in devices]
    state = dict({k: v for k, v in loop.items() if k != "last_step"}, rng=rng, train_config=config.to_dict())
    save_training_state(path, model, optimizer=opt, state=state)


def _loop_state(path, model, opt) -> dict[str, Any]:
    state = load_training_state(path, model, optimizer=opt)
    missing = sorted(set(_LOOP_KEYS) - set(state))
    if missing:
        raise CheckpointError(
            f"{path} lacks the loop state {missing} that train() writes; expected a checkpoint written by "
            "geonp.train.train. Start fresh with resume=False."
        )
    return state


def _restore_rng(rng: dict[str, Any], gen: torch.Generator, devices: list[int]) -> None:
    torch.set_rng_state(rng["torch"])
    gen.set_state(rng["data"])
    for d, s in zip(devices, rng.get("cuda", []), strict=False):
        torch.cuda.set_rng_state(s, d)


def _warn_changes(saved: TrainConfig, config: TrainConfig) -> None:
    changed = [f.name for f in fields(TrainConfig)
               if f.name not in _IGNORED_ON_RESUME and getattr(saved, f.name) != getattr(config, f.name)]
    if changed:
        logger.warning("resuming with changed settings %s: the run will differ from an uninterrupted one", changed)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """Decay only weight matrices: not biases, norms, or coordinate-bias parameters.

    Decaying an RBF bias' log-lengthscale would pull it towards 1 coordinate unit,
    a choice of units rather than a regulariser.
    """
    skip = {id(p) for m in model.modules() if isinstance(m, ScoreMod) for p in m.parameters()}
    decay, plain = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.ndim >= 2 and id(p) not in skip else plain).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0.0}]
