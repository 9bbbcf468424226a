"""The task author's imports at their published path (`from schedulerd.registry import task,
TaskContext`, as task modules already write them); the registry itself is tasks/registry.py."""

from schedulerd.tasks.registry import Handler, PermanentError, RetryAfter, TaskContext, task

__all__ = ["Handler", "PermanentError", "RetryAfter", "TaskContext", "task"]
