"""One attempt run to its Result (schedulerd/worker/attempt.py): how each way a handler ends is recorded."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest

from schedulerd import PermanentError, RetryAfter, TaskContext, UnknownTaskError, ValidationError
from schedulerd.models import AttemptOutcome, Claim
from schedulerd.tasks import registry
from schedulerd.worker import Result, Stop
from schedulerd.worker.attempt import Deadline, Running, run

AT = datetime(2026, 1, 1, tzinfo=UTC)


@registry.task("unit.attempt.none")
async def _none(ctx: TaskContext, params: dict[str, Any]) -> None:
    return None


@registry.task("unit.attempt.value")
def _value(ctx: TaskContext, params: dict[str, Any]) -> dict[str, Any]:
    return {"n": params["n"]}


@registry.task("unit.attempt.permanent")
async def _permanent(ctx: TaskContext, params: dict[str, Any]) -> None:
    raise PermanentError("gone", detail={"status": 404})


@registry.task("unit.attempt.retry_after")
async def _retry_after(ctx: TaskContext, params: dict[str, Any]) -> None:
    raise RetryAfter("busy", 30.0)


@registry.task("unit.attempt.own_timeout")
async def _own_timeout(ctx: TaskContext, params: dict[str, Any]) -> None:
    raise TimeoutError("the target timed out")


@registry.task("unit.attempt.slow")
async def _slow(ctx: TaskContext, params: dict[str, Any]) -> None:
    await asyncio.sleep(10)


def _claim(task: str, *, timeout_s: float = 5.0, params: dict[str, Any] | None = None) -> Claim:
    return Claim(uuid.uuid4(), uuid.uuid4(), "t", AT, 0.0, 1, 1, 0.0, task, params or {}, timeout_s, 3, 1.0, 2.0, 60.0,
                 "allow", None)  # fmt: skip


def _ctx(claim: Claim) -> TaskContext:
    return TaskContext(claim.id, claim.job_id, claim.tenant, claim.scheduled_for, claim.attempt, claim.fence, claim.task)


@pytest.fixture
def threads() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(1) as pool:
        yield pool


async def _run(claim: Claim, threads: ThreadPoolExecutor) -> Result | None:
    return await run(Running(claim), _ctx(claim), threads, "w1")


async def test_a_handler_that_returns_nothing_succeeds(threads: ThreadPoolExecutor) -> None:
    assert await _run(_claim("unit.attempt.none"), threads) == Result(AttemptOutcome.SUCCEEDED)


async def test_a_plain_handler_runs_in_the_pool_and_its_value_is_the_detail(threads: ThreadPoolExecutor) -> None:
    result = await _run(_claim("unit.attempt.value", params={"n": 3}), threads)
    assert result == Result(AttemptOutcome.SUCCEEDED, detail='{"n": 3}')


async def test_each_error_a_handler_raises_is_recorded_as_it_says(threads: ThreadPoolExecutor) -> None:
    permanent = await _run(_claim("unit.attempt.permanent"), threads)
    assert permanent == Result(AttemptOutcome.FAILED, "not retried (permanent): gone", '{"status": 404}', permanent=True)
    assert await _run(_claim("unit.attempt.retry_after"), threads) == Result(AttemptOutcome.FAILED, "busy", retry_after_s=30.0)
    own = await _run(_claim("unit.attempt.own_timeout"), threads)
    assert own is not None and own.outcome is AttemptOutcome.FAILED
    assert own.error is not None and "TimeoutError: the target timed out" in own.error  # the handler's own, not the claim's


async def _run_with_deadline(claims: list[Claim], threads: ThreadPoolExecutor, timeout_s: float) -> list[Result | None]:
    """As the worker starts a claim batch: a task per attempt, one Deadline for those sharing a timeout."""
    running = [Running(claim) for claim in claims]
    for r in running:
        r.task = asyncio.ensure_future(_until_ended(r, threads))
    Deadline(running, timeout_s)
    return list(await asyncio.gather(*(r.task for r in running)))  # type: ignore[misc]


async def _until_ended(running: Running, threads: ThreadPoolExecutor) -> Result | None:
    try:
        return await run(running, _ctx(running.claim), threads, "w1")
    finally:
        assert running.deadline is not None
        running.deadline.ended(running)


async def test_the_claims_timeout_times_the_attempt_out(threads: ThreadPoolExecutor) -> None:
    slow, quick = _claim("unit.attempt.slow", timeout_s=0.01), _claim("unit.attempt.none", timeout_s=0.01)
    results = await _run_with_deadline([slow, quick], threads, 0.01)
    assert results == [Result(AttemptOutcome.TIMED_OUT, "timed out after 0.01 s"), Result(AttemptOutcome.SUCCEEDED)]


async def test_a_deadline_is_disarmed_once_its_last_attempt_ends(threads: ThreadPoolExecutor) -> None:
    """Quick attempts are not held until a long timeout passes: their shared timer goes with the last."""
    running = [Running(_claim("unit.attempt.none", timeout_s=3600.0)) for _ in range(3)]
    for r in running:
        r.task = asyncio.ensure_future(_until_ended(r, threads))
    deadline = Deadline(running, 3600.0)
    timer = deadline._timer
    await asyncio.gather(*(r.task for r in running))  # type: ignore[misc]
    assert timer.cancelled() and not deadline._running


async def test_an_attempt_stopped_for_another_reason_is_not_called_timed_out(threads: ThreadPoolExecutor) -> None:
    running = Running(_claim("unit.attempt.slow", timeout_s=0.01))
    running.task = asyncio.ensure_future(_until_ended(running, threads))
    Deadline([running], 0.01)
    await asyncio.sleep(0)  # the handler is under way
    running.stopped = Stop.LEASE_LOST  # the heartbeat found its lease lost first
    running.task.cancel()
    assert await running.task is None


async def test_an_unknown_task_type_fails_naming_the_worker(threads: ThreadPoolExecutor) -> None:
    with pytest.raises(UnknownTaskError) as raised:
        registry.get("unit.attempt.nowhere")
    assert isinstance(raised.value, ValidationError) and raised.value.field == "task"
    result = await _run(_claim("unit.attempt.nowhere"), threads)
    assert result is not None and result.outcome is AttemptOutcome.FAILED
    assert result.error is not None and result.error.startswith("task: unknown task type 'unit.attempt.nowhere'")
    assert result.error.endswith(" on worker w1")


@pytest.mark.parametrize(("stop", "expected"), [(Stop.CANCELLED, AttemptOutcome.CANCELLED), (Stop.LEASE_LOST, None),
                                                (Stop.HANDED_BACK, None), (None, "raises")])  # fmt: skip
async def test_a_cancelled_attempt_ends_as_the_loop_asked(threads: ThreadPoolExecutor, stop: Stop | None, expected: Any) -> None:
    running = Running(_claim("unit.attempt.slow"))
    task = asyncio.ensure_future(run(running, _ctx(running.claim), threads, "w1"))
    await asyncio.sleep(0)
    running.stopped = stop
    task.cancel()
    if expected == "raises":
        with pytest.raises(asyncio.CancelledError):
            await task
        return
    result = await task
    assert (result.outcome if result is not None else None) == expected
