"""Pause and delete reach running work: a disabled or deleted job's execution is cancelled at its
next finish, claim, reclaim, park or hand back (reason paused | deleted), never retried or
started again; the attempt that was running is still recorded as it ended."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from typing import Any
from uuid import UUID

import pytest

from schedulerd.errors import ValidationError
from schedulerd.jobs import Jobs, JobSpec
from schedulerd.models import AttemptOutcome, Execution, ExecutionStatus, Outcome
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from schedulerd.sweeper import Sweeper
from schedulerd.tasks.registry import TaskContext, task
from schedulerd.worker import Worker
from tests.conftest import create_job
from tests.integration.conftest import settle

# Each gated handler waits for its test to release it, then succeeds or fails as told; starts
# records every attempt that began (execution id, attempt), so a test sees what ran after a steer.
gates: dict[UUID, asyncio.Event] = {}
starts: list[tuple[UUID, int]] = []


@task("test.steer_gate")
async def steer_gate(ctx: TaskContext, params: dict[str, Any]) -> None:
    starts.append((ctx.execution_id, ctx.attempt))
    gate = gates.setdefault(ctx.execution_id, asyncio.Event())
    await gate.wait()
    if params.get("fail"):
        raise RuntimeError(f"attempt {ctx.attempt} failed")


@pytest.fixture(autouse=True)
def _fresh_gates() -> None:
    gates.clear()
    starts.clear()


async def _started(execution_id: UUID, attempt: int = 1) -> None:
    for _ in range(200):
        if (execution_id, attempt) in starts:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"attempt {attempt} of {execution_id} never started")


async def _steer(jobs: Jobs, job_id: UUID, how: str) -> None:
    if how == "paused":
        await jobs.pause(job_id)
    else:
        await jobs.delete(job_id)


async def _drive(worker: Worker, rounds: int = 8, pause_s: float = 0.1) -> None:
    """Pop, claim and finish for a while (longer than the test config's retry delays)."""
    for _ in range(rounds):
        await worker.run_once()
        for gate in gates.values():
            gate.set()
        await settle(worker)
        await asyncio.sleep(pause_s)


async def _final(store: Store, execution_id: UUID) -> Execution:
    execution = await store.execution_get(execution_id)
    assert execution is not None
    return execution


@pytest.mark.parametrize("how", ["paused", "deleted"])
async def test_a_failure_after_pause_or_delete_is_not_retried(how, store, queue, config, make_worker) -> None:
    jobs = Jobs(store, queue, config)
    job, (execution,) = await create_job(jobs, JobSpec(task="test.steer_gate", params={"fail": True}, max_attempts=3))
    worker = make_worker()
    assert await worker.run_once() == 1
    await _started(execution.id)

    await _steer(jobs, job.id, how)  # while attempt 1 runs
    gates[execution.id].set()
    await settle(worker)

    final = await _final(store, execution.id)
    assert (final.status, final.reason, final.attempt) == (ExecutionStatus.CANCELLED, how, 1)
    assert final.finished_at is not None and (final.last_error or "").endswith("RuntimeError: attempt 1 failed")
    assert [(a.attempt, a.outcome) for a in await store.attempt_list(execution.id)] == [(1, "failed")]
    assert await queue.missing([str(execution.id)], [execution.tenant]) == [str(execution.id)]  # no retry entry
    await _drive(worker)  # well past the retry delay
    assert starts == [(execution.id, 1)]
    assert (await _final(store, execution.id)).status == ExecutionStatus.CANCELLED


async def test_the_running_attempt_of_a_paused_job_still_succeeds(store, queue, config, make_worker) -> None:
    jobs = Jobs(store, queue, config)
    job, (execution,) = await create_job(jobs, JobSpec(task="test.steer_gate", max_attempts=3))
    worker = make_worker()
    assert await worker.run_once() == 1
    await _started(execution.id)
    await jobs.pause(job.id)
    gates[execution.id].set()
    await settle(worker)
    final = await _final(store, execution.id)
    assert (final.status, final.reason) == (ExecutionStatus.SUCCEEDED, None)


async def _queued_retry_beside_a_pause(jobs: Jobs, store: Store, queue: DelayQueue, worker: Worker, job_id: UUID, how: str) -> None:
    """The interleaving a pause cannot see: the pause's transaction has disabled the job and
    cancelled its unstarted rows, but not yet committed, when the failure's finish writes the
    retry (its statement reads the job as still enabled); then the pause commits and the retry
    is enqueued, as the worker does after its finish."""
    await asyncio.gather(*(r.task for r in worker.running.values() if r.task is not None), return_exceptions=True)
    outcomes = list(worker._outcomes.values())
    worker._outcomes.clear()
    async with store.transaction() as tx:
        if how == "paused":
            assert await tx.job_set_enabled(job_id, False, jobs.clock.now(), None, None) is not None
        else:
            assert await tx.job_delete(job_id) is not None
        await tx.execution_cancel_for_job(job_id, how)
        applied = await store.execution_finish_many(outcomes)  # on another connection of the pool
    retries = [retry for _, _, retry in applied]
    assert retries and None not in retries  # the finish did not see the pause: each went back to the queue
    await queue.add(retries, only_new=False)


@pytest.mark.parametrize(("how", "overlap", "redis"), [
    ("paused", "allow", "up"), ("deleted", "allow", "up"), ("paused", "skip", "up"), ("paused", "allow", "down"),
    ("deleted", "buffer_one", "down"),
])  # fmt: skip
async def test_a_retry_queued_beside_a_pause_is_cancelled_by_the_claim_never_started(
    how, overlap, redis, store, queue, config, make_worker
) -> None:  # fmt: skip
    jobs = Jobs(store, queue, config)
    job, (execution,) = await create_job(jobs,
        JobSpec(task="test.steer_gate", params={"fail": True}, max_attempts=3, overlap=overlap, backoff_base_s=0.1)
    )
    worker = make_worker()
    assert await worker.run_once() == 1
    await _started(execution.id)
    gates[execution.id].set()
    await _queued_retry_beside_a_pause(jobs, store, queue, worker, job.id, how)
    row = await _final(store, execution.id)
    assert (row.status, row.attempt) == (ExecutionStatus.QUEUED, 1)  # the race happened

    await asyncio.sleep(0.3)  # the retry's due time passes
    if redis == "down":  # the fallback claims due rows straight from Postgres
        unreachable = DelayQueue.connect("redis://127.0.0.1:1/0", "nowhere", timeout_s=0.2)
        try:
            fallback = Worker(store, unreachable, replace(config.worker, redis_probe_s=60), "fallback", horizon_s=300)
            try:
                assert await fallback.run_once() == 0
            finally:
                fallback._threads.shutdown(wait=False)
        finally:
            await unreachable.close()
    else:
        assert await worker.run_once() == 0

    final = await _final(store, execution.id)
    assert (final.status, final.reason, final.attempt, final.fence) == (ExecutionStatus.CANCELLED, how, 1, 1)
    assert final.finished_at is not None
    assert starts == [(execution.id, 1)]
    running = await store.db.fetchval("SELECT overlap_running FROM jobs WHERE id = $1", job.id)
    assert running in (None, execution.id)  # the claim recorded no new runner


async def test_a_lease_expiring_on_a_paused_job_is_cancelled_not_queued(store, queue, config, make_worker) -> None:
    jobs = Jobs(store, queue, config)
    job, (execution,) = await create_job(jobs, JobSpec(task="test.steer_gate", params={"fail": True}, max_attempts=3))
    worker = make_worker()
    assert await worker.run_once() == 1
    await _started(execution.id)
    await jobs.pause(job.id)
    worker.running[execution.id].task.cancel()  # the worker dies: its lease runs out
    await asyncio.sleep(0.05)
    await store.db.execute("UPDATE executions SET lease_until = now() - interval '1 hour'")  # past any grace

    result = await Sweeper(store, queue, config.sweeper).run_once()

    assert result.reclaimed == 0
    final = await _final(store, execution.id)
    assert (final.status, final.reason, final.attempt) == (ExecutionStatus.CANCELLED, "paused", 1)
    assert [a.outcome for a in await store.attempt_list(execution.id)] == ["lease_expired"]
    await _drive(worker)
    assert starts == [(execution.id, 1)]


async def test_a_spent_lease_of_a_deleted_job_still_ends_failed(store, queue, config, make_worker) -> None:
    jobs = Jobs(store, queue, config)
    job, (execution,) = await create_job(jobs, JobSpec(task="test.steer_gate", max_attempts=1))
    worker = make_worker()
    assert await worker.run_once() == 1
    await _started(execution.id)
    await jobs.delete(job.id)
    worker.running[execution.id].task.cancel()
    await asyncio.sleep(0.05)
    await store.db.execute("UPDATE executions SET lease_until = now() - interval '1 hour'")
    assert (await Sweeper(store, queue, config.sweeper).run_once()).failed == 1
    assert (await _final(store, execution.id)).status == ExecutionStatus.FAILED  # its attempts were spent


@pytest.mark.parametrize("how", ["paused", "deleted"])
async def test_a_park_after_pause_or_delete_cancels_the_claim(how, store, queue, config) -> None:
    jobs = Jobs(store, queue, config)
    job, (execution,) = await create_job(jobs, JobSpec(task="test.steer_gate", max_attempts=3))
    (claim,) = await store.execution_claim_many([execution.id], 5.0, "worker-a")
    await _steer(jobs, job.id, how)  # between the claim and admission's park

    back, newly_late = await store.execution_park_many([(claim.id, claim.fence)], [0.0], "task_limit", late_grace_s=60)

    assert back == [] and newly_late == []
    final = await _final(store, execution.id)
    assert (final.status, final.reason, final.attempt, final.first_started_at) == (ExecutionStatus.CANCELLED, how, 0, None)
    assert await store.attempt_list(execution.id) == []  # it never ran
    assert await store.execution_claim_many([execution.id], 5.0, "worker-a") == []


async def test_a_hand_back_after_delete_cancels(store, queue, config) -> None:
    jobs = Jobs(store, queue, config)
    job, (execution,) = await create_job(jobs, JobSpec(task="test.steer_gate", max_attempts=3))
    (claim,) = await store.execution_claim_many([execution.id], 5.0, "worker-a")
    await jobs.delete(job.id)

    assert await store.execution_hand_back_many([(claim.id, claim.fence)]) == []

    final = await _final(store, execution.id)
    assert (final.status, final.reason, final.attempt) == (ExecutionStatus.CANCELLED, "deleted", 0)
    assert [a.outcome for a in await store.attempt_list(execution.id)] == ["handed_back"]


async def test_resume_does_not_revive_an_execution_a_pause_stopped_mid_retry(store, queue, config) -> None:
    """Resume gives back the future slots the pause cancelled; a run it stopped between two
    attempts stays cancelled (the paused stretch is not caught up)."""
    jobs = Jobs(store, queue, config)
    job, executions = await create_job(jobs, JobSpec(task="test.steer_gate", params={"fail": True}, cron="* * * * *"))
    now = await store.clock_now()
    (first,) = (await jobs.backfill(job.id, now - timedelta(seconds=61), now - timedelta(seconds=1))).created[:1]
    (claim,) = await store.execution_claim_many([first.id], 5.0, "worker-a")
    await jobs.pause(job.id)
    retry = Outcome(claim.id, claim.fence, claim.task, ExecutionStatus.QUEUED, AttemptOutcome.FAILED, "boom", 0.1)
    ((_, status, *_),) = await store.execution_finish_many([retry])
    assert status == ExecutionStatus.CANCELLED

    await jobs.resume(job.id)

    stopped = await _final(store, claim.id)
    assert (stopped.status, stopped.reason) == (ExecutionStatus.CANCELLED, "paused")
    revived = await store.db.fetchval(
        "SELECT count(*) FROM executions WHERE job_id = $1 AND status IN ('pending', 'queued')", job.id
    )
    assert revived >= len(executions) - 2  # the future slots came back (one may have passed meanwhile)


async def test_trigger_of_a_paused_job_is_refused(store, queue, config) -> None:
    jobs = Jobs(store, queue, config)
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="@hourly"))
    await jobs.pause(job.id)
    with pytest.raises(ValidationError, match="paused"):
        await jobs.trigger(job.id)
