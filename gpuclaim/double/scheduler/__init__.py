"""A kube-scheduler double: DRA feasibility from `dra.allocator`, HTTP extenders on the real wire JSON.

Not a kube-scheduler: see `e2e/scheduler/scheduler.py` for what it models and what it leaves out.
"""

from gpuclaim.double.scheduler.dra import CANNOT_ALLOCATE, NOT_ON_NODE, PodNotReady, Snapshot
from gpuclaim.double.scheduler.extenders import ExtenderConfig, ExtenderConfigError, ExtenderError, HTTPExtender
from gpuclaim.double.scheduler.scheduler import NODE_AFFINITY_REASON, Decision, Scheduler, fit_error

__all__ = [
    "CANNOT_ALLOCATE",
    "NODE_AFFINITY_REASON",
    "NOT_ON_NODE",
    "Decision",
    "ExtenderConfig",
    "ExtenderConfigError",
    "ExtenderError",
    "HTTPExtender",
    "PodNotReady",
    "Scheduler",
    "Snapshot",
    "fit_error",
]
