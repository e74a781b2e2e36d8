"""xarray/numpy data → neural-process tasks and back (no torch)."""

from .sampler import SamplerConfig, TaskSampler
from .tasks import Task, Window, forecast_tasks, infill_tasks

__all__ = ["Window", "Task", "infill_tasks", "forecast_tasks", "SamplerConfig", "TaskSampler"]
