"""Pretrained weights shipped inside the package, and the recipe that made them.

The weights were trained by ``scripts/pretrain.py`` on synthetic space-time GP priors
(:class:`geonp.synthetic.SpaceTimeGP`) whose coordinates use the units a real-data
pipeline must reproduce for zero-shot use:

* space: lengths in units of the typical context spacing, ``sqrt(area / context points per frame)``;
* time: one unit = one time step of the data;
* values: standardised by the context mean and standard deviation of each task.

See ``geonp/weights/MODEL_CARD.md`` for data, configuration, budget and metrics.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from .checkpoint import load_model, read_checkpoint
from .errors import CheckpointNotFoundError, UnknownOptionError
from .models import NeuralProcess, build_model
from .synthetic import SpaceTimeGP
from .train import TrainConfig

__all__ = ["PRETRAINED", "SETTINGS", "WEIGHTS_DIR", "pretrained_path", "load_pretrained", "pretraining_recipe",
           "has_scattered_windows", "scattered_windows", "shipped_name"]

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
#: model name → file in ``geonp/weights``
PRETRAINED = {"bsa-tnp": "bsa-tnp-small.pt", "te-pt-tnp": "te-pt-tnp-small.pt"}
#: prediction settings of the shipped models where they differ from geonp.model.DEFAULT_SETTINGS: TE-PT-TNP's
#: 16 pseudo-tokens infill better from ±1 frame than from ±3 (ERA5 random 0.823 → 0.793 K, block 0.823 →
#: 0.795 K, Colorado every month 1.203 → 1.204 °C; docs/benchmarks.md, "TE-PT-TNP's time window")
SETTINGS = {"te-pt-tnp": {"half_window": 1}}
#: windows of the shipped models for gaps that lie near an observation (99 % of the sampled frames' missing
#: points within ``SCATTERED_REACH`` of the small halo), on grids and station networks: TE-PT-TNP's 16
#: pseudo-tokens summarise a small window better than one of 8 units (ERA5 t2m, 90 % of cells hidden at
#: random, ±1 h: 0.711 → 0.640 K; Colorado stations, ±3 months: 1.119 → 1.081 °C); inside a 12 × 12 hole a
#: small window sees no data (docs/benchmarks.md, "Small windows for scattered gaps", "Small windows on station
#: networks too")
SCATTERED_WINDOWS = {"te-pt-tnp": {"tile": 2.0, "halo": 2.0}}
#: share of the small halo that 99 % of the sampled gaps may reach for :data:`SCATTERED_WINDOWS` to apply
SCATTERED_REACH = 0.75
#: architecture overrides of the shipped models (small preset; bias ranges in the units above)
OVERRIDES = {
    "bsa-tnp": dict(space_lengthscales=(0.1, 10.0), time_lengthscales=(0.5, 30.0), proximity_features=True,
                    position_moments=4),
    "te-pt-tnp": {},
}
#: what the terrain-aware weights add: one covariate, elevation in km less the mean, with an attention bias
TERRAIN_OVERRIDES = dict(covariate_dims=1, bias_covariates=(0,))


#: frames whose departures change more than this many times their neighbours' differences are infilled alone
FRAME_CHANGE_RATIO = 2.0
#: above this ratio (and up to :data:`FRAME_CHANGE_RATIO`) shipped weights read :data:`NEAR_WINDOW` frames each side
#: where that sees every target's surroundings (the demo's field, 0.72, infills better at ±3: 0.126 against 0.136 K)
FRAME_NEAR_RATIO = 0.8
NEAR_WINDOW = 1


#: most frames each side an infill of shipped weights reads where its own window sees a missing place on one
#: side only and a wider one on both (:func:`geonp.reach.wide_entries`): ERA5, the west half missing for 6 hours,
#: 0.707 -> 0.562 K (coverage 0.839 -> 0.927), for 10 hours 0.883 -> 0.767 (NLL 49 -> 1.23); linear
#: interpolation in time 0.653 and 0.940 (docs/benchmarks.md, "Both sides of an outage")
WIDE_WINDOWS = {"bsa-tnp": 8}

#: most frames each side in which a place missing in all a task's frames is looked for, to give it the persistence
#: error of the time since as least std where it is seen on one side only (:func:`geonp.reach.one_sided_floors`):
#: ERA5, the west half missing in the last 10 hours, NLL 24.7 -> 1.86 (BSA-TNP), 3.10 -> 2.24 (TE-PT-TNP, which
#: keeps its window: widened, a 10-hour outage's coverage fell 0.90 -> 0.83); 12 frames, not 8, reach the late
#: region's last hours (docs/benchmarks.md, "One side of an outage")
SIDE_WINDOWS = {"bsa-tnp": 12, "te-pt-tnp": 12}


def outage_windows(model, time_window: int | None) -> dict:
    """The infill settings ``wide_window`` and ``side_window`` of ``model`` (None: not used).

    Shipped weights at their own time window (``time_window`` None) take their :data:`WIDE_WINDOWS`
    and :data:`SIDE_WINDOWS`; a given time window and fitted models use neither.
    """
    name = shipped_name(model) if time_window is None else None
    return {"wide_window": WIDE_WINDOWS.get(name), "side_window": SIDE_WINDOWS.get(name)}


def shipped_name(model) -> str | None:
    """The name of the shipped weights ``model`` asks for, or ``None`` (a fitted model or a path)."""
    if not isinstance(model, str):
        return None
    name = model.lower().replace("_", "-")
    return name if name in PRETRAINED else None


def has_scattered_windows(model) -> bool:
    """Whether ``model`` names shipped weights with :data:`SCATTERED_WINDOWS`."""
    return shipped_name(model) in SCATTERED_WINDOWS


def scattered_windows(model, problem, windows: dict) -> dict:
    """``windows`` (``tile``/``halo``), or the :data:`SCATTERED_WINDOWS` of shipped ``model`` for these gaps.

    They apply to a model name with such windows (:func:`has_scattered_windows`), filling the gaps
    of a grid or a station network (``problem``, a :class:`geonp.chunked.Problem`, or ``None``) when
    neither ``tile`` nor ``halo`` is set and 99 % of the sampled gaps lie within ``SCATTERED_REACH`` ×
    the small halo of an observation (:func:`geonp.tiling.gap_reach`); data without gaps, and
    predictions at other targets (``targets=``), keep ``windows``.
    """
    from .tiling import gap_reach

    if not has_scattered_windows(model) or problem is None or any(v is not None for v in windows.values()) \
            or not problem.fill_gaps:
        return windows
    small = SCATTERED_WINDOWS[shipped_name(model)]
    return dict(small) if 0.0 < gap_reach(problem) <= SCATTERED_REACH * small["halo"] else windows


def frame_window(model, problem, time_window: int | None) -> tuple[int | None, int | None]:
    """``(time_window, near_window)`` for shipped ``model`` on frames that resemble their neighbours less.

    When ``time_window`` is not given, frames whose departures change between consecutive frames more
    than :data:`FRAME_CHANGE_RATIO` times as much as they differ between neighbouring points
    (:func:`geonp.persistence.change_ratio`) are infilled each alone (``time_window`` 0), and above
    :data:`FRAME_NEAR_RATIO` from one frame each side (``near_window`` 1) where that sees enough of
    every target's surroundings, else from the model's window (:func:`geonp.reach.near_entries`): the
    shipped weights were trained on priors whose frames stay correlated from one step to the next, and
    lean on the frames around a target more than such data allow. ERA5 with 30 % of the cells hidden,
    RMSE K at ±3 / by default: 2-hourly at 0.25° (ratio 1.54) 0.206 / 0.178, 6-hourly at 1° (1.58)
    0.693 / 0.630; ±1 everywhere took a 6-hour outage over half the domain from 0.688 K to 0.909,
    the default keeps it at 0.707 (docs/benchmarks.md, "A near window where it sees enough"). ``None``:
    the model's own. Fitted models keep their window.
    """
    from .persistence import change_ratio

    if time_window is not None or shipped_name(model) is None or problem is None:
        return time_window, None
    ratio = change_ratio(problem)
    if ratio > FRAME_CHANGE_RATIO:
        return 0, None
    return None, NEAR_WINDOW if ratio > FRAME_NEAR_RATIO else None


def pretrained_path(name: str) -> Path:
    """Path of the shipped weights of model ``name``.

    Raises
    ------
    UnknownOptionError
        No weights are shipped for ``name``.
    CheckpointNotFoundError
        The package was installed without its weights file.
    """
    key = str(name).lower().replace("_", "-")
    if key not in PRETRAINED:
        raise UnknownOptionError(
            f"no pretrained weights for {name!r}; shipped: {tuple(PRETRAINED)}. Train one with geonp.train.train."
        )
    path = WEIGHTS_DIR / PRETRAINED[key]
    if not path.exists():
        raise CheckpointNotFoundError(
            f"pretrained weights {path} are missing from the installed package; reinstall geonp "
            "or regenerate them with `python scripts/pretrain.py --model " + key + "`."
        )
    return path


def load_pretrained(name: str = "bsa-tnp") -> NeuralProcess:
    """The shipped model ``name`` (``"bsa-tnp"`` or ``"te-pt-tnp"``), in eval mode.

    Examples
    --------
    >>> model = load_pretrained("bsa-tnp")
    >>> model.config.time_dims
    1
    """
    return load_model(pretrained_path(name), expected_name=name).eval()


def pretrained_metadata(name: str) -> dict:
    """The metadata stored with the shipped weights (recipe, budget, metrics)."""
    return read_checkpoint(pretrained_path(name))["metadata"]


def pretraining_recipe(
    name: str, *, max_cpu_time: float, seed: int = 0, hole_probability: float = 0.5,
    noise_std_range: tuple[float, float] = (0.01, 0.3), num_locations: tuple[int, int] = (64, 256),
    max_points: int = 1500, lattice_probability: float = 0.0, hole_fraction: tuple[float, float] = (0.03, 0.3),
    terrain: bool = False, **overrides
) -> tuple[NeuralProcess, SpaceTimeGP, TrainConfig]:
    """Model, data and training configuration used for the shipped weights.

    ``hole_probability`` is the share of infill batches with a hole missing from every frame,
    ``hole_fraction`` the range of the hole's share of a task's locations, and
    ``noise_std_range`` the log-uniform prior of the observation noise std relative to the signal
    std (see :class:`~geonp.synthetic.SpaceTimeGP`). Raising its top to 1.0 (a station nugget as large
    as the spatial signal) made the weights *more* confident on real data, not less (docs/benchmarks.md),
    so the shipped weights end on 0.01–0.3. ``num_locations`` and ``max_points`` set the task sizes
    (locations per task, context + targets per task) and ``lattice_probability`` the share of batches
    laid out on a regular grid, as gridded products are. ``terrain=True`` gives every location an
    elevation (km, less the task's mean) that the field's correlation depends on, fed to the model as
    one covariate with an attention bias on Δelevation (:data:`TERRAIN_OVERRIDES`).
    ``overrides`` replace architecture overrides.
    """
    if name not in OVERRIDES:
        raise UnknownOptionError(f"no pretraining recipe for {name!r}; expected one of {tuple(OVERRIDES)}.")
    if terrain and name != "bsa-tnp":
        raise UnknownOptionError(f"terrain=True needs the attention bias of 'bsa-tnp'; got {name!r}.")
    extra = TERRAIN_OVERRIDES if terrain else {}
    model = build_model(name, preset="small", space_dims=2, time_dims=1, **{**OVERRIDES[name], **extra, **overrides})
    data = SpaceTimeGP(mode="mixed", hole_probability=hole_probability, hole_fraction=tuple(hole_fraction),
                       noise_std_range=tuple(noise_std_range),
                       num_locations=tuple(num_locations), max_points=max_points,
                       lattice_probability=lattice_probability, terrain=terrain)
    config = TrainConfig(
        max_cpu_time=max_cpu_time, batch_size=8, lr=1e-3, lr_final=1e-5, warmup_steps=100,
        val_every=500, val_batches=8, seed=seed, progress=False,
    )
    return model, data, config


def recipe_metadata(data: SpaceTimeGP, config: TrainConfig) -> dict:
    """Plain-data description of a recipe, stored in the checkpoint."""
    gen = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(data).items()}
    return {"generator": "SpaceTimeGP", "generator_config": gen, "train_config": config.to_dict()}
