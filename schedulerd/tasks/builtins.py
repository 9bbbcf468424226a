"""Built-in task types, for demos, tests and benchmarks."""

from __future__ import annotations

import asyncio
from typing import Any

from schedulerd.tasks.registry import TaskContext, task


@task("noop")
async def noop(ctx: TaskContext, params: dict[str, Any]) -> None:
    """Does nothing: measures the scheduler, not the task."""


@task("log")
async def log(ctx: TaskContext, params: dict[str, Any]) -> None:
    """Logs its params."""
    ctx.log.info("task.log", params=params)


@task("sleep")
async def sleep(ctx: TaskContext, params: dict[str, Any]) -> None:
    """Sleeps params["seconds"] (default 1)."""
    await asyncio.sleep(float(params.get("seconds", 1)))


class TaskFailed(Exception):
    """Raised by the `fail` task."""


@task("fail")
async def fail(ctx: TaskContext, params: dict[str, Any]) -> None:
    """Always raises (params["message"] is the error)."""
    raise TaskFailed(params.get("message", f"fail task raised on attempt {ctx.attempt}"))
