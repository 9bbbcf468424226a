"""Task registry: @task("name") maps a task type to its handler.

A handler receives a TaskContext and the job's params. It may be async (run on the event loop)
or plain (run in the worker's thread pool). Use ctx.execution_id as the idempotency key
downstream and pass ctx.fence to any sink that can reject stale writers.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any
from uuid import UUID

import structlog

from schedulerd.errors import UnknownTaskError


@dataclass(frozen=True)
class TaskContext:
    execution_id: UUID  # stable across the attempts of one occurrence
    job_id: UUID
    tenant: str
    scheduled_for: datetime  # the occurrence's nominal instant (UTC)
    attempt: int  # 1-based
    fence: int  # rises with every claim; a higher fence supersedes a lower one
    task: str
    # The attempt's span as a W3C traceparent while tracing is on (docs/tracing.md), to pass
    # downstream (the http task sends it); None when it is off.
    traceparent: str | None = None

    @cached_property
    def log(self) -> Any:
        """A structlog logger bound to the ids above; made on first use (most handlers never
        log, and binding one per execution cost ~3% of a busy worker)."""
        return structlog.get_logger("schedulerd.worker").bind(
            execution_id=str(self.execution_id), job_id=str(self.job_id), tenant=self.tenant,
            attempt=self.attempt, fence=self.fence, task=self.task,
        )  # fmt: skip


Handler = Callable[[TaskContext, dict[str, Any]], Any | Awaitable[Any]]


class PermanentError(Exception):
    """Raise from a handler when retrying cannot help (a 404, bad params): the execution is
    failed at once, whatever attempts are left. `detail` (optional) is kept on the attempt."""

    def __init__(self, message: str, *, detail: Any = None) -> None:
        super().__init__(message)
        self.detail = detail


class RetryAfter(Exception):
    """Raise from a handler when the target said when to come back (HTTP Retry-After): the
    attempt fails and the next one waits at least `delay_s` seconds (more if the backoff says so)."""

    def __init__(self, message: str, delay_s: float, *, detail: Any = None) -> None:
        super().__init__(message)
        self.delay_s = max(0.0, delay_s)
        self.detail = detail


@dataclass(frozen=True)
class Task:
    name: str
    handler: Handler
    is_async: bool
    breaker_key: Callable[[dict[str, Any]], str] | None = None  # params -> circuit breaker key; None: the task name
    target_host: Callable[[dict[str, Any]], str | None] | None = None  # params -> the host it calls ([rate_limits].hosts)
    inline: bool = False  # run on the event loop as its claim starts: no thread, no asyncio task (see task())


def breaker_key(task_name: str, params: dict[str, Any]) -> str:
    """Which circuit breaker guards an execution: the task type's, unless the task splits it
    (the http task keeps one per target host)."""
    found = _TASKS.get(task_name)
    return found.breaker_key(params) if found is not None and found.breaker_key is not None else task_name


def target_host(task_name: str, params: dict[str, Any]) -> str | None:
    """The host an execution calls (lower case), for per-host rate limits; None for a task that
    names none (only the http task does, from params.url)."""
    found = _TASKS.get(task_name)
    return found.target_host(params) if found is not None and found.target_host is not None else None


_TASKS: dict[str, Task] = {}


def task(
    name: str,
    *,
    breaker_key: Callable[[dict[str, Any]], str] | None = None,
    target_host: Callable[[dict[str, Any]], str | None] | None = None,
    inline: bool = False,
) -> Callable[[Handler], Handler]:
    """Register a handler under a task type name (breaker_key, target_host: see Task).

    inline=True, for a plain function that returns at once (no I/O, no waiting: bump a counter,
    put an item on an in-process queue, a small computation): it runs on the event loop as its
    claim starts, with no thread and no asyncio task, the cheapest way to run many tiny handlers.
    Nothing can interrupt it, so its timeout is not enforced, and while it runs the worker does
    nothing else: keep it well under a millisecond. Anything that waits is an async handler."""

    def register(handler: Handler) -> Handler:
        if name in _TASKS and _TASKS[name].handler is not handler:
            raise ValueError(f"task {name!r} is already registered by {_TASKS[name].handler!r}")
        is_async = inspect.iscoroutinefunction(handler)
        if inline and is_async:
            raise ValueError(f"task {name!r}: inline=True is for plain functions; an async handler runs in its own asyncio task")
        _TASKS[name] = Task(name, handler, is_async, breaker_key, target_host, inline)
        return handler

    return register


def is_inline(name: str) -> bool:
    found = _TASKS.get(name)
    return found is not None and found.inline


def get(name: str) -> Task:
    try:
        return _TASKS[name]
    except KeyError:
        known = ", ".join(sorted(_TASKS)) or "none"
        raise UnknownTaskError(name, f"unknown task type {name!r} (registered: {known})") from None


def names() -> list[str]:
    return sorted(_TASKS)
