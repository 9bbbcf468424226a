"""Per-task concurrency limits and the slow pool: a long task never holds the slots short ones
wait for, and executions over a limit are handed back unrun without using an attempt."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from schedulerd.models import ExecutionStatus
from schedulerd.tasks.registry import TaskContext, task
from tests.conftest import wait_for


@task("test.long")
async def long_task(ctx: TaskContext, params: dict[str, Any]) -> None:
    await asyncio.sleep(params.get("seconds", 30))


async def _drive(worker, store, done, timeout_s: float = 20.0) -> float:  # type: ignore[no-untyped-def]
    """Pop/claim/finish until done() holds; returns the seconds it took."""
    started = time.monotonic()

    async def step() -> bool:
        await worker.run_once()
        await asyncio.sleep(0.02)
        await worker.flush_outcomes()
        return await done()

    await wait_for(step, timeout_s=timeout_s, interval_s=0.01)
    return time.monotonic() - started


async def test_slow_tasks_cannot_take_the_main_pool(make_job, make_worker, store) -> None:
    # The long executions are created first, so they are due first and popped first.
    long = [(await make_job("test.long", params={"seconds": 30}))[1] for _ in range(5)]
    fast = [(await make_job("sleep", params={"seconds": 0.2}))[1] for _ in range(8)]
    worker = make_worker(concurrency=2, batch_size=2, slow_tasks=("test.long",), slow_concurrency=1, defer_s=0.5)

    async def fast_done() -> bool:
        return [(await store.execution_get(e.id)).status for e in fast] == [ExecutionStatus.SUCCEEDED] * len(fast)

    took_s = await _drive(worker, store, fast_done)

    # 8 x 200 ms on 2 slots: 0.8 s of work; a loaded machine gets generous room, 30 s it is not.
    print(f"\n8 fast executions behind 5 long ones finished in {took_s:.2f} s")
    assert took_s < 10
    rows = [await store.execution_get(e.id) for e in long]
    running = [r for r in rows if r.status == ExecutionStatus.RUNNING]
    waiting = [r for r in rows if r.status == ExecutionStatus.QUEUED]
    assert len(running) == 1 and len(waiting) == 4  # the slow pool has one slot
    assert all(r.attempt == 0 and r.reason == "task_limit" and r.first_started_at is None for r in waiting)
    assert [await store.attempt_list(r.id) for r in waiting] == [[]] * 4  # a hand-back is not an attempt
    assert worker.stats.parked >= 4


async def test_task_limit_caps_one_type_and_lets_the_rest_run(make_job, make_worker, store) -> None:
    long = [(await make_job("test.long", params={"seconds": 30}))[1] for _ in range(6)]
    quick = [(await make_job("noop"))[1] for _ in range(10)]
    worker = make_worker(concurrency=16, batch_size=50, task_concurrency={"test.long": 2}, defer_s=0.3)

    async def quick_done() -> bool:
        return [(await store.execution_get(e.id)).status for e in quick] == [ExecutionStatus.SUCCEEDED] * len(quick)

    await _drive(worker, store, quick_done)
    await asyncio.sleep(0.5)  # let the handed-back ones come due and be refused again
    await worker.run_once()

    statuses = [(await store.execution_get(e.id)).status for e in long]
    assert statuses.count(ExecutionStatus.RUNNING) == 2
    assert statuses.count(ExecutionStatus.QUEUED) == 4
    assert worker.admission.by_task["test.long"] == 2
