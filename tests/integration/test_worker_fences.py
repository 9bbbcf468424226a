"""The worker applies each database answer to the attempt it was about: the fence the statement
was sent with must be the fence held now (an execution's id is reused by its next attempt)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from schedulerd.models import ExecutionStatus
from schedulerd.tasks.registry import TaskContext, task
from schedulerd.worker import Worker
from tests.integration.conftest import settle


@task("test.fail_first_then_sleep")
async def fail_first_then_sleep(ctx: TaskContext, params: dict[str, Any]) -> None:
    if ctx.attempt == 1:
        raise RuntimeError("the first attempt fails")
    await asyncio.sleep(params["seconds"])


async def _claim_next_attempt(worker: Worker, execution_id: Any, fence: int) -> None:
    """Write the held outcome of the attempt before, then pop and claim the retry (its backoff
    is at most [jobs].backoff_base_s) until the worker runs it at `fence`."""
    await worker.flush_outcomes()
    for _ in range(100):
        await worker.run_once()
        if (running := worker.running.get(execution_id)) is not None and running.claim.fence == fence:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"attempt at fence {fence} was not claimed")


def _delayed(call: Callable[..., Awaitable[Any]], before: asyncio.Event | None = None,
             after: asyncio.Event | None = None) -> tuple[Callable[..., Awaitable[Any]], asyncio.Event, asyncio.Event]:  # fmt: skip
    """`call` with latency injected: it waits for `before` to be set before running, and for
    `after` before its answer is returned. The events returned are set once the call was made
    and once the database answered."""
    sent, answered = asyncio.Event(), asyncio.Event()

    async def delayed(*args: Any, **kwargs: Any) -> Any:
        sent.set()
        if before is not None:
            await before.wait()
        answer = await call(*args, **kwargs)
        answered.set()
        if after is not None:
            await after.wait()
        return answer

    return delayed, sent, answered


async def test_a_stale_heartbeat_answer_does_not_cancel_the_next_attempt(make_job, make_worker, store, monkeypatch) -> None:
    """The heartbeat for fence 1 is sent; before its UPDATE runs, attempt 1 fails, its outcome is
    written and the same worker claims attempt 2 (fence 2). The UPDATE then matches nothing
    (fence 1 is gone): that says attempt 1 lost its lease, not attempt 2, which must run on."""
    _, execution = await make_job("test.fail_first_then_sleep", params={"seconds": 0.6}, max_attempts=2)
    worker = make_worker("fence-worker")
    assert await worker.run_once() == 1
    await asyncio.gather(*(r.task for r in worker.running.values() if r.task is not None))
    assert worker._outcomes[execution.id].fence == 1  # attempt 1 failed; its outcome is held

    release = asyncio.Event()
    delayed, sent, _ = _delayed(store.execution_heartbeat_many, before=release)
    monkeypatch.setattr(store, "execution_heartbeat_many", delayed)
    beat = asyncio.create_task(worker.heartbeat_once())
    await sent.wait()  # the heartbeat holds (id, fence 1)
    await _claim_next_attempt(worker, execution.id, fence=2)
    release.set()
    assert await beat == 0  # fence 1 is no longer running: nothing extended

    assert worker.stats.lease_lost == 0
    second = worker.running.get(execution.id)
    assert second is not None and second.claim.fence == 2 and second.stopped is None
    await settle(worker)
    done = await store.execution_get(execution.id)
    assert (done.status, done.attempt, done.fence) == (ExecutionStatus.SUCCEEDED, 2, 2)
    assert [(a.attempt, a.fence, a.outcome) for a in await store.attempt_list(execution.id)] == [
        (1, 1, "failed"), (2, 2, "succeeded"),
    ]  # fmt: skip


async def test_a_stale_cancel_request_does_not_stop_the_next_attempt(make_job, make_worker, store, monkeypatch) -> None:
    """The heartbeat for fence 1 answers that an overlap policy asked it to stop; before the
    answer is applied, attempt 1 has failed and attempt 2 is running. The request was about
    attempt 1: attempt 2 is not cancelled."""
    _, execution = await make_job("test.fail_first_then_sleep", params={"seconds": 0.6}, max_attempts=2)
    worker = make_worker("fence-worker")
    assert await worker.run_once() == 1
    await asyncio.gather(*(r.task for r in worker.running.values() if r.task is not None))

    await store.db.execute("UPDATE executions SET cancel_requested_at = now() WHERE id = $1", execution.id)
    release = asyncio.Event()
    delayed, _, answered = _delayed(store.execution_heartbeat_many, after=release)
    monkeypatch.setattr(store, "execution_heartbeat_many", delayed)
    beat = asyncio.create_task(worker.heartbeat_once())
    await answered.wait()  # the UPDATE ran: {id: cancel requested}, not yet applied
    # The request was about attempt 1, which is over: its retry does not carry it.
    await store.db.execute("UPDATE executions SET cancel_requested_at = NULL WHERE id = $1", execution.id)
    await _claim_next_attempt(worker, execution.id, fence=2)
    release.set()
    assert await beat == 1  # it extended fence 1's lease, and said that attempt was asked to stop

    second = worker.running.get(execution.id)
    assert second is not None and second.claim.fence == 2 and second.stopped is None
    await settle(worker)
    done = await store.execution_get(execution.id)
    assert (done.status, done.attempt, done.fence) == (ExecutionStatus.SUCCEEDED, 2, 2)


running_now: dict[Any, int] = {}  # handlers of test.count_overlap running at once, by execution
most_at_once: dict[Any, int] = {}


@task("test.count_overlap")
async def count_overlap(ctx: TaskContext, params: dict[str, Any]) -> None:
    running_now[ctx.execution_id] = running_now.get(ctx.execution_id, 0) + 1
    most_at_once[ctx.execution_id] = max(most_at_once.get(ctx.execution_id, 0), running_now[ctx.execution_id])
    try:
        await asyncio.sleep(params["first_s"] if ctx.attempt == 1 else params["then_s"])
    finally:
        running_now[ctx.execution_id] -= 1


async def test_a_newer_fence_claimed_by_the_same_worker_stops_the_older_attempt(
    make_job, make_worker, store, sweeper
) -> None:
    """Attempt 1's lease was reclaimed before its heartbeat noticed, and the same worker's claim
    straight from Postgres (Redis unreachable) takes attempt 2. The older handler is stopped
    rather than left running beside it, its exit does not drop attempt 2 from what the worker
    holds, and attempt 2's lease is the one the heartbeat extends."""
    _, execution = await make_job("test.count_overlap", params={"first_s": 30.0, "then_s": 0.3}, max_attempts=3)
    worker = make_worker("fence-worker")
    assert await worker.run_once() == 1
    first = worker.running[execution.id]
    # Expired long ago: past the grace a replica still reporting itself alive keeps its leases.
    await store.db.execute("UPDATE executions SET lease_until = now() - interval '1 hour' WHERE id = $1", execution.id)
    assert (await sweeper.run_once()).reclaimed == 1
    await asyncio.sleep(0.25)  # past the reclaim's jittered retry delay (base 0.2 s here)

    worker.redis_down_since = worker._next_redis_probe = float("inf")  # pop nothing: claim from Postgres
    assert await worker.run_once() == 1
    second = worker.running[execution.id]
    assert second.claim.fence == 2 and first.stopped == "lease_lost"
    await asyncio.sleep(0)  # the older handler takes its cancellation
    assert first.task.done() and worker.running.get(execution.id) is second  # type: ignore[union-attr]
    assert await worker.heartbeat_once() == 1  # fence 2's lease is extended
    await settle(worker)

    assert most_at_once[execution.id] == 1
    done = await store.execution_get(execution.id)
    assert (done.status, done.attempt, done.fence) == (ExecutionStatus.SUCCEEDED, 2, 2)
    assert [(a.attempt, a.fence, a.outcome) for a in await store.attempt_list(execution.id)] == [
        (1, 1, "lease_expired"), (2, 2, "succeeded"),
    ]  # fmt: skip
