"""xarray/numpy data → neural-process tasks and back (no torch)."""

from .sampler import SamplerConfig, TaskSampler
from .tasks import (
    Task,
    Window,
    coarsen_far,
    forecast_tasks,
    frame_groups,
    gap_to_context,
    infill_tasks,
    nearest_distance,
    temporal_support,
)

__all__ = [
    "Window", "Task", "infill_tasks", "frame_groups", "forecast_tasks", "gap_to_context", "nearest_distance",
    "coarsen_far", "temporal_support",
    "SamplerConfig", "TaskSampler",
]
