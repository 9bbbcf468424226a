"""Overlap policies against real Postgres and Redis: skip, buffer_one, cancel_other, racing
replicas, a dead worker's waiting occurrence, the Redis fallback, and allow left as it was."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from schedulerd import metrics, overlap_claims
from schedulerd.jobs import Jobs
from schedulerd.models import AttemptOutcome, Execution, ExecutionStatus
from tests.conftest import wait_for
from tests.integration.conftest import settle


async def _job_with_occurrences(make_job, store, queue, config, count: int, *, policy: str, seconds: float = 0.3):  # type: ignore[no-untyped-def]
    """A job with `count` due executions: its own, then manual triggers (each its own slot)."""
    job, first = await make_job("sleep", params={"seconds": seconds}, overlap=policy)
    more = [await Jobs(store, queue, config).trigger(job.id) for _ in range(count - 1)]
    return job, [first, *more]


async def _get(store, execution: Execution) -> Execution:  # type: ignore[no-untyped-def]
    found = await store.execution_get(execution.id)
    assert found is not None
    return found


async def test_skip_marks_an_occurrence_due_while_the_previous_runs(make_job, make_worker, store, queue, config) -> None:
    _, (first, second) = await _job_with_occurrences(make_job, store, queue, config, 2, policy="skip")
    # worker-a pops and claims the first only (its batch is one), then worker-b pops the second.
    worker_a, worker_b = make_worker("worker-a", batch_size=1), make_worker("worker-b")
    assert await worker_a.run_once() == 1
    assert await worker_b.run_once() == 0

    skipped = await _get(store, second)
    assert (skipped.status, skipped.reason, skipped.attempt) == ("skipped", "overlap", 0)
    await settle(worker_a)
    assert (await _get(store, first)).status == ExecutionStatus.SUCCEEDED


async def test_racing_replicas_never_start_two_executions_of_one_guarded_job(make_job, store, queue, config) -> None:
    for policy in ("skip", "buffer_one", "cancel_other"):
        for _ in range(10):
            _, executions = await _job_with_occurrences(make_job, store, queue, config, 4, policy=policy)
            ids = [str(e.id) for e in executions]
            # Four replicas each claim one of the job's executions at the same moment.
            judged = await asyncio.gather(*(overlap_claims.claim_guarded(store, [i], 30.0, f"replica-{n}") for n, i in enumerate(ids)))
            assert sum(len(j.claims) for j in judged) == 1, policy
            assert sum(j.settled for j in judged) == 3, policy
            statuses = [(await _get(store, e)).status for e in executions]
            # One runs; at most one waits (none for skip, and none for cancel_other when the newest
            # won the race: an older occurrence never stops a newer run); the rest are skipped.
            assert statuses.count("running") == 1 and statuses.count("pending") <= (policy != "skip"), policy
            assert statuses.count("skipped") + statuses.count("pending") == 3, policy
            if policy == "buffer_one":
                assert statuses.count("pending") == 1


async def test_buffer_one_starts_the_waiting_occurrence_when_the_running_one_finishes(
    make_job, make_worker, store, queue, config
) -> None:
    job, (first, second, third) = await _job_with_occurrences(make_job, store, queue, config, 3, policy="buffer_one", seconds=0.5)
    running = (await overlap_claims.claim_guarded(store, [str(first.id)], 30.0, "worker-a")).claims
    assert [c.id for c in running] == [first.id]
    worker = make_worker("worker-b")
    assert await worker.run_once() == 0  # pops the two others: one waits, one is skipped

    waiting, skipped = await _get(store, second), await _get(store, third)
    assert (waiting.status, waiting.reason) == ("pending", "overlap_buffered")
    assert (skipped.status, skipped.reason) == ("skipped", "overlap")
    assert await store.db.fetchval("SELECT overlap_waiting FROM jobs WHERE id = $1", job.id) == second.id

    # The running one finishes (through the worker's finish path, which releases the waiting one).
    (claim,) = running
    worker_a = make_worker("worker-a")
    worker_a._record(claim, AttemptOutcome.SUCCEEDED, None)
    started_at = time.monotonic()
    assert await worker_a.flush_outcomes() == 1
    assert (await _get(store, second)).status == ExecutionStatus.QUEUED
    assert await worker.run_once() == 1  # in Redis again at once, due now
    assert time.monotonic() - started_at < 1.0
    await settle(worker)
    done = await _get(store, second)
    assert done.status == ExecutionStatus.SUCCEEDED and done.first_started_at is not None


async def test_buffer_one_keeps_the_oldest_waiting_whichever_replica_judges_first(make_job, store, queue, config) -> None:
    """Two replicas pop a job's occurrences microseconds apart and judge them in either order: the
    newer one judged first waits, then the older one takes its place (the documented order)."""
    job, (first, older, newer) = await _job_with_occurrences(make_job, store, queue, config, 3, policy="buffer_one")
    assert older.scheduled_for < newer.scheduled_for
    assert (await overlap_claims.claim_guarded(store, [str(first.id)], 30.0, "replica-1")).claims
    assert (await overlap_claims.claim_guarded(store, [str(newer.id)], 30.0, "replica-2")).settled == 1
    assert (await _get(store, newer)).reason == "overlap_buffered"
    judged = await overlap_claims.claim_guarded(store, [str(older.id)], 30.0, "replica-3")
    assert judged.settled == 1 and not judged.claims
    waiting, replaced = await _get(store, older), await _get(store, newer)
    assert (waiting.status, waiting.reason) == ("pending", "overlap_buffered")
    assert (replaced.status, replaced.reason) == ("skipped", "overlap")
    assert await store.db.fetchval("SELECT overlap_waiting FROM jobs WHERE id = $1", job.id) == older.id


async def test_buffer_one_waiting_occurrence_survives_a_dead_worker(make_job, make_worker, store, queue, config, sweeper) -> None:
    _, (first, second) = await _job_with_occurrences(make_job, store, queue, config, 2, policy="buffer_one")
    # A worker claims the first and dies: nobody heartbeats or finishes it.
    assert len((await overlap_claims.claim_guarded(store, [str(first.id)], 0.3, "doomed")).claims) == 1
    worker = make_worker("worker-b")
    assert await worker.run_once() == 0
    assert (await _get(store, second)).reason == "overlap_buffered"

    await asyncio.sleep(0.4)  # the lease expires
    result = await sweeper.run_once()
    assert result.reclaimed == 1 and result.released == 1
    assert await queue.missing([str(second.id)], [second.tenant]) == []

    async def second_done() -> Any:
        await worker.run_once()
        await settle(worker)
        return (await _get(store, second)).status == ExecutionStatus.SUCCEEDED

    await wait_for(second_done)
    # The dead worker's execution was retried after it (its retry came due while the second ran: it waited).
    reclaimed = await _get(store, first)
    assert reclaimed.attempt >= 1


async def test_cancel_other_stops_the_running_handler_then_starts_the_new_occurrence(
    make_job, make_worker, store, queue, config
) -> None:
    _, (first, second) = await _job_with_occurrences(make_job, store, queue, config, 2, policy="cancel_other", seconds=30)
    worker_a, worker_b = make_worker("worker-a", batch_size=1), make_worker("worker-b")
    assert await worker_a.run_once() == 1 and first.id in worker_a.running
    assert await worker_b.run_once() == 0

    assert (await _get(store, second)).reason == "overlap_buffered"
    assert (await _get(store, first)).cancel_requested_at is not None

    # The next heartbeat carries the request: the handler is cancelled and recorded as such.
    await worker_a.heartbeat_once()
    await settle(worker_a)
    cancelled = await _get(store, first)
    assert (cancelled.status, cancelled.reason) == ("cancelled", "overlap")
    (attempt,) = await store.attempt_list(first.id)
    assert attempt.outcome == "cancelled" and "cancel_other" in (attempt.error or "")

    assert await worker_b.run_once() == 1
    assert second.id in worker_b.running
    row = await _get(store, second)
    assert row.status == ExecutionStatus.RUNNING


async def test_guarded_jobs_are_judged_on_the_redis_fallback_path(make_job, make_worker, store, queue, config) -> None:
    _, (first, second) = await _job_with_occurrences(make_job, store, queue, config, 2, policy="skip")
    _, (free_a, free_b) = await _job_with_occurrences(make_job, store, queue, config, 2, policy="allow")
    worker = make_worker()
    worker.redis_down_since = time.monotonic()  # as if Redis stopped answering: claim from Postgres
    worker._next_redis_probe = time.monotonic() + 60
    assert await worker.run_once() == 3  # both allow executions, and one of the guarded job's
    fates = sorted([(await _get(store, e)).status for e in (first, second)])
    assert fates == ["running", "skipped"]
    assert {(await _get(store, e)).status for e in (free_a, free_b)} == {"running"}
    await settle(worker)


async def test_allow_jobs_still_run_side_by_side(make_job, make_worker, store, queue, config) -> None:
    job, (first, second) = await _job_with_occurrences(make_job, store, queue, config, 2, policy="allow", seconds=0.3)
    assert job.overlap == "allow"
    worker = make_worker()
    assert await worker.run_once() == 2
    await settle(worker)
    assert [(await _get(store, e)).status for e in (first, second)] == ["succeeded", "succeeded"]
    assert await store.db.fetchval("SELECT overlap_running FROM jobs WHERE id = $1", job.id) is None


async def test_overlap_is_validated_and_stored(make_job, store) -> None:
    from schedulerd.errors import ValidationError

    try:
        await make_job("noop", overlap="queue_all")
    except ValidationError as exc:
        assert exc.field == "overlap"
    else:
        raise AssertionError("an unknown overlap policy was accepted")
    assert await store.db.fetchval("SELECT count(*) FROM jobs") == 0
    job, _ = await make_job("noop", overlap="cancel_other")
    stored = await store.job_get(job.id)
    assert stored is not None and stored.overlap == "cancel_other"


async def test_cancel_other_on_a_dead_worker_cancels_it_at_reclaim_and_starts_the_new_one(
    make_job, make_worker, store, queue, config, sweeper
) -> None:
    _, (first, second) = await _job_with_occurrences(make_job, store, queue, config, 2, policy="cancel_other")
    assert len((await overlap_claims.claim_guarded(store, [str(first.id)], 0.3, "doomed")).claims) == 1
    before = metrics.OVERLAP_DECISIONS.labels("cancel_other", "cancel_requested")._value.get()
    worker = make_worker("worker-b")
    assert await worker.run_once() == 0
    assert metrics.OVERLAP_DECISIONS.labels("cancel_other", "cancel_requested")._value.get() == before + 1

    await asyncio.sleep(0.4)  # the worker asked to stop is dead: its lease runs out
    result = await sweeper.run_once()
    assert result.released == 1
    stopped = await _get(store, first)
    assert (stopped.status, stopped.reason) == ("cancelled", "overlap")  # not retried: a newer one replaced it
    assert [a.outcome for a in await store.attempt_list(first.id)] == ["lease_expired"]

    async def second_done() -> Any:
        await worker.run_once()
        await settle(worker)
        return (await _get(store, second)).status == ExecutionStatus.SUCCEEDED

    await wait_for(second_done)
