"""Deprecated import path, kept for one release: `schedulerd.registry` is now
`schedulerd.tasks.registry`. Task modules import `task` (and TaskContext, PermanentError,
RetryAfter) from `schedulerd`, the public surface (docs/api-python.md)."""

from __future__ import annotations

import warnings

from schedulerd.tasks.registry import Handler, PermanentError, RetryAfter, Task, TaskContext, breaker_key, get, names, task

__all__ = ["Handler", "PermanentError", "RetryAfter", "Task", "TaskContext", "breaker_key", "get", "names", "task"]

warnings.warn(
    "schedulerd.registry is deprecated and goes in the next release: import task, TaskContext, PermanentError and "
    "RetryAfter from schedulerd (from schedulerd import task)",
    DeprecationWarning,
    stacklevel=2,
)
