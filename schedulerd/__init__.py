"""schedulerd: a distributed job scheduler. The producer API is `Client` (asyncio) and
`SyncClient`; task authors decorate handlers with `task`. Loaded on first use, so that the
daemon's own modules (which import this package first) do not pull the client in."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from schedulerd.client import Client, Enqueued, EnqueuedExecution, JobRequest, Refused, SyncClient, TaskRef, task
    from schedulerd.errors import ConflictError, NotFoundError, SchedulerdError, StaleVersionError, UnknownTaskError, ValidationError
    from schedulerd.jobs import Edit
    from schedulerd.tasks.registry import PermanentError, RetryAfter, TaskContext

__version__ = "0.1.0"
_EXPORTS = {
    "Client": "schedulerd.client", "SyncClient": "schedulerd.client", "JobRequest": "schedulerd.client",
    "Enqueued": "schedulerd.client", "EnqueuedExecution": "schedulerd.client", "Refused": "schedulerd.client",
    "TaskRef": "schedulerd.client", "task": "schedulerd.client",
    "SchedulerdError": "schedulerd.errors", "ValidationError": "schedulerd.errors",
    "UnknownTaskError": "schedulerd.errors", "NotFoundError": "schedulerd.errors", "ConflictError": "schedulerd.errors",
    "StaleVersionError": "schedulerd.errors", "Edit": "schedulerd.jobs",
    "TaskContext": "schedulerd.tasks.registry", "PermanentError": "schedulerd.tasks.registry",
    "RetryAfter": "schedulerd.tasks.registry",
}  # fmt: skip
__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'schedulerd' has no attribute {name!r}")
