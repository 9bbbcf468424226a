"""The worker against real Postgres and Redis: claims, fences, retries, timeouts."""

from __future__ import annotations

import asyncio
import socket
import statistics
import uuid
from dataclasses import fields, replace
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from schedulerd import PermanentError, health
from schedulerd.core.ids import execution_id as new_execution_id
from schedulerd.models import AttemptOutcome, Claim, Enqueue, ExecutionStatus, Outcome
from schedulerd.store.sql import QUERIES
from schedulerd.sweeper import Sweeper
from schedulerd.tasks.registry import TaskContext, task
from schedulerd.store import parsed_id
from schedulerd.worker.loop import CLAIM_TRIES
from tests.integration.conftest import run_until_idle, settle

seen_contexts: list[TaskContext] = []


@task("test.record_context")
async def record_context(ctx: TaskContext, params: dict[str, Any]) -> None:
    seen_contexts.append(ctx)


@task("test.sync_square")
def sync_square(ctx: TaskContext, params: dict[str, Any]) -> None:
    """A plain function: must run in the thread pool, not on the loop."""
    import threading

    assert threading.current_thread() is not threading.main_thread()
    if params["n"] * params["n"] != params["expect"]:
        raise ValueError("wrong square")


async def test_job_runs_once_and_records_its_attempt(make_job, make_worker, store) -> None:
    job, execution = await make_job("test.record_context", params={"k": 1})
    assert execution.status == ExecutionStatus.QUEUED
    worker = make_worker()

    finished = await run_until_idle(worker, store, execution.id)

    assert finished.status == ExecutionStatus.SUCCEEDED
    assert finished.attempt == 1 and finished.fence == 1
    assert finished.first_started_at >= finished.scheduled_for
    attempts = await store.attempt_list(execution.id)
    assert [(a.attempt, a.fence, a.outcome, a.worker) for a in attempts] == [(1, 1, "succeeded", "worker-a")]
    ctx = seen_contexts[-1]
    assert (ctx.execution_id, ctx.job_id, ctx.attempt, ctx.fence) == (execution.id, job.id, 1, 1)
    assert ctx.scheduled_for == execution.scheduled_for


async def test_sync_handler_runs_in_thread_pool(make_job, make_worker, store) -> None:
    _, ok = await make_job("test.sync_square", params={"n": 3, "expect": 9})
    _, bad = await make_job("test.sync_square", params={"n": 3, "expect": 10}, max_attempts=1)
    worker = make_worker()
    assert (await run_until_idle(worker, store, ok.id)).status == ExecutionStatus.SUCCEEDED
    failed = await run_until_idle(worker, store, bad.id)
    assert failed.status == ExecutionStatus.FAILED
    assert "ValueError: wrong square" in failed.last_error


inline_calls: list[tuple[TaskContext, asyncio.Task[Any] | None]] = []


@task("test.inline_count", inline=True)
def inline_count(ctx: TaskContext, params: dict[str, Any]) -> dict[str, int] | None:
    """Inline: runs on the event loop, in the pop loop's own step (no task of its own)."""
    inline_calls.append((ctx, asyncio.current_task()))
    if params.get("fail_on") == ctx.attempt:
        raise ValueError(f"failed attempt {ctx.attempt}")
    if params.get("permanent"):
        raise PermanentError("no point", detail={"why": "bad params"})
    return {"n": params.get("n", 0)} if "n" in params else None


async def test_an_inline_handler_runs_on_the_loop_and_is_recorded_as_any_other(make_job, make_worker, store) -> None:
    """task(inline=True): no thread, no task of its own; its value is the detail, an error fails
    the attempt and is retried as usual, a PermanentError ends it, and nothing holds its slot."""
    _, counted = await make_job("test.inline_count", params={"n": 7})
    _, retried = await make_job("test.inline_count", params={"fail_on": 1})
    _, permanent = await make_job("test.inline_count", params={"permanent": True})
    worker = make_worker()
    inline_calls.clear()
    assert (await run_until_idle(worker, store, counted.id)).status == ExecutionStatus.SUCCEEDED
    assert [a.detail for a in await store.attempt_list(counted.id)] == ['{"n": 7}']
    # In the step that started its claim (this test's own task drives run_once), not a task of its own.
    assert inline_calls and all(running_in is asyncio.current_task() for _, running_in in inline_calls)
    assert (await run_until_idle(worker, store, retried.id)).status == ExecutionStatus.SUCCEEDED
    attempts = await store.attempt_list(retried.id)
    assert [(a.attempt, a.outcome) for a in attempts] == [(1, "failed"), (2, "succeeded")]
    assert "ValueError: failed attempt 1" in (attempts[0].error or "")
    gone = await run_until_idle(worker, store, permanent.id)
    assert gone.status == ExecutionStatus.FAILED and gone.attempt == 1 and "not retried (permanent): no point" in gone.last_error
    assert not worker.running and worker.admission.by_task["test.inline_count"] == 0


def test_inline_is_refused_for_an_async_handler() -> None:
    with pytest.raises(ValueError, match="inline=True is for plain functions"):

        @task("test.inline_async", inline=True)
        async def _inline_async(ctx: TaskContext, params: dict[str, Any]) -> None: ...


async def test_claim_race_has_exactly_one_winner_per_execution(make_job, store) -> None:
    executions = [(await make_job())[1] for _ in range(200)]
    ids = [str(e.id) for e in executions]

    claims_a, claims_b = await asyncio.gather(
        store.execution_claim_many(ids, 10.0, "worker-a"), store.execution_claim_many(ids, 10.0, "worker-b")
    )

    won_a, won_b = {c.id for c in claims_a}, {c.id for c in claims_b}
    assert not won_a & won_b
    assert won_a | won_b == {e.id for e in executions}
    assert all(c.fence == 1 and c.attempt == 1 for c in claims_a + claims_b)


async def test_a_claim_whose_reply_was_lost_is_adopted_by_its_worker_only(make_job, store) -> None:
    """A claim can commit while its reply is lost with the connection: the worker claims again
    with adopt, taking back the rows running under its own id without charging another attempt."""
    ids = [str((await make_job())[1].id) for _ in range(3)]
    (lost,) = await store.execution_claim_many(ids[:1], 10.0, "worker-a")  # committed; reply never read
    await store.execution_claim_many(ids[1:2], 10.0, "worker-b")  # someone else's

    claims = await store.execution_claim_many(ids, 10.0, "worker-a", adopt=True)

    by_id = {str(c.id): c for c in claims}
    assert set(by_id) == {ids[0], ids[2]}  # its own lost claim and the unclaimed one, not worker-b's
    assert (by_id[ids[0]].attempt, by_id[ids[0]].fence) == (lost.attempt, lost.fence)  # no second start counted
    assert await store.execution_claim_many(ids, 10.0, "worker-c", adopt=True) == []


async def test_a_claim_that_gave_up_is_adopted_when_its_ids_come_back(make_job, make_worker, store, monkeypatch) -> None:
    """Every try of a claim commits and loses its reply: the worker gives up and hands the ids
    back to the queue; the next pop brings them back, and its claim adopts them, so the attempt
    runs (attempt 1, fence 1) instead of waiting, running under the worker's id, for the sweeper."""
    _, execution = await make_job("test.record_context", max_attempts=1)
    worker = make_worker()
    claim = store.execution_claim_many
    tries = 0

    async def reply_lost(*args: Any, **kwargs: Any) -> Any:
        nonlocal tries
        tries += 1
        await claim(*args, **kwargs)  # committed
        raise TimeoutError  # but its answer never came

    monkeypatch.setattr(store, "execution_claim_many", reply_lost)
    with pytest.raises(TimeoutError):
        await worker.run_once()
    assert tries == CLAIM_TRIES
    assert (await store.execution_get(execution.id)).status == ExecutionStatus.RUNNING
    monkeypatch.setattr(store, "execution_claim_many", claim)

    finished = await run_until_idle(worker, store, execution.id)

    assert (finished.status, finished.attempt, finished.fence) == (ExecutionStatus.SUCCEEDED, 1, 1)
    assert [a.outcome for a in await store.attempt_list(execution.id)] == ["succeeded"]


async def test_duplicate_enqueue_runs_once(make_job, make_worker, queue, store) -> None:
    _, execution = await make_job("sleep", params={"seconds": 0.2})
    worker_a, worker_b = make_worker("worker-a"), make_worker("worker-b")
    assert await worker_a.run_once() == 1
    # A second dispatcher (or a reconcile) puts the same execution back while it runs.
    await queue.add([_enqueue(execution)], only_new=True)
    await queue.add([_enqueue(execution)], only_new=False)

    assert await worker_b.run_once() == 0
    assert worker_b.stats.dropped == 1
    await settle(worker_a)

    finished = await store.execution_get(execution.id)
    assert finished.status == ExecutionStatus.SUCCEEDED and finished.attempt == 1
    assert len(await store.attempt_list(execution.id)) == 1


async def test_stale_fence_cannot_finish_or_heartbeat(make_job, make_worker, store, sweeper) -> None:
    _, execution = await make_job("sleep", params={"seconds": 30})
    zombie = make_worker("zombie")
    assert await zombie.run_once() == 1
    # The zombie froze: its lease runs out and the sweeper hands the execution back.
    await store.db.execute("UPDATE executions SET lease_until = now() - interval '1 second' WHERE id = $1", execution.id)
    assert (await sweeper.run_once()).reclaimed == 1

    # Waking up, the zombie's heartbeat finds the lease lost and cancels its handler...
    assert await zombie.heartbeat_once() == 0
    await settle(zombie)
    assert zombie.stats.lease_lost == 1 and not zombie.running
    # ...and a completion with its old fence changes nothing.
    stale = Outcome(execution.id, 1, "sleep", ExecutionStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED)
    assert await store.execution_finish_many([stale]) == []

    await asyncio.sleep(0.25)  # a reclaimed execution comes back after a jittered delay (base 0.2 s here)
    claims = await store.execution_claim_many([str(execution.id)], 10.0, "successor")
    assert [(c.fence, c.attempt) for c in claims] == [(2, 2)]
    fresh = Outcome(execution.id, 2, "sleep", ExecutionStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED)
    assert len(await store.execution_finish_many([fresh])) == 1
    attempts = await store.attempt_list(execution.id)
    assert [(a.fence, a.outcome, a.worker) for a in attempts] == [(1, "lease_expired", "zombie"), (2, "succeeded", "successor")]


async def test_retries_with_jittered_backoff_then_fails(make_job, make_worker, store, queue, config) -> None:
    _, execution = await make_job("fail", max_attempts=3)
    worker = make_worker()

    await worker.run_once()
    await settle(worker)
    after_first = await store.execution_get(execution.id)
    assert after_first.status == ExecutionStatus.QUEUED and after_first.attempt == 1
    first = (await store.attempt_list(execution.id))[0]
    delay_s = (after_first.due_at - first.finished_at).total_seconds()
    assert -0.01 <= delay_s <= config.jobs.backoff_base_s + 0.01  # full jitter: uniform in [0, base]
    score = await queue.client.zscore(queue.queue_key("default"), str(execution.id))
    assert abs(score / 1000 - after_first.due_at.timestamp()) < 0.002

    final = await run_until_idle(worker, store, execution.id)
    assert final.status == ExecutionStatus.FAILED and final.attempt == 3
    attempts = await store.attempt_list(execution.id)
    assert [a.outcome for a in attempts] == ["failed"] * 3
    assert all("TaskFailed" in a.error for a in attempts)
    assert final.finished_at is not None and "attempt 3" in final.last_error


async def test_the_claim_returns_a_claims_fields_in_its_order(store) -> None:
    """So Claim.from_rows builds each claim by position, not by 23 lookups by name."""
    async with store.db.acquire() as connection:
        statement = await connection.prepare(QUERIES["execution_claim_many"])
        assert tuple(a.name for a in statement.get_attributes()) == tuple(f.name for f in fields(Claim))


async def test_a_claim_gives_back_its_due_time_and_start_to_the_microsecond(make_job, store) -> None:
    """The claim returns the due time and the claim's instant as float seconds (a worker decodes
    one in a tenth of a timestamptz's time); Claim.due_at and .started_at are Postgres's instants
    again, to the microsecond, for a first attempt and for a retry due far from its slot."""
    _, execution = await make_job("noop")
    (first,) = await store.execution_claim_many([str(execution.id)], 30.0, "worker-a")
    row = await store.execution_get(execution.id)
    assert (first.due_at, first.started_at) == (row.due_at, row.started_at)
    assert first.start_lag_s == pytest.approx((row.started_at - row.due_at).total_seconds(), abs=1e-6) and first.start_lag_s >= 0
    retry = Outcome(first.id, first.fence, first.task, ExecutionStatus.QUEUED, AttemptOutcome.FAILED, "boom", 0.0)
    assert len(await store.execution_finish_many([retry])) == 1
    # A due time 40 days and some microseconds off its slot (the partition stays the slot's).
    await store.db.execute("UPDATE executions SET due_at = scheduled_for - interval '40 days 00:00:00.000123' WHERE id = $1",
                           execution.id)  # fmt: skip
    (second,) = await store.execution_claim_many([str(execution.id)], 30.0, "worker-a")
    row = await store.execution_get(execution.id)
    assert second.attempt == 2 and second.due_after_s == -(40 * 86400 + 0.000123)
    assert (second.scheduled_for, second.due_at, second.started_at) == (row.scheduled_for, row.due_at, row.started_at)


async def test_a_batch_of_successes_records_what_a_mixed_batch_records(make_job, store) -> None:
    """A batch of successes only has its own statement (execution_succeed_many): each row ends as
    a success in a mixed batch ends, a stale fence or a row no longer running is left alone."""
    executions = [(await make_job("noop"))[1] for _ in range(6)]
    ids = [str(e.id) for e in executions]
    first = await store.execution_claim_many(ids, 30.0, "worker-a")
    # Every attempt fails once first, so each success has an earlier error to clear.
    failed = [Outcome(c.id, c.fence, c.task, ExecutionStatus.QUEUED, AttemptOutcome.FAILED, "boom", 0.0) for c in first]
    retried = await store.execution_finish_many(failed)
    assert len(retried) == 6
    for execution_id, status, retry in retried:  # each retry comes back with its queue entry
        row = await store.execution_get(execution_id)
        assert status == "queued" and retry == Enqueue(execution_id, row.due_at, row.tenant, row.priority)
    claims = {c.id: c for c in await store.execution_claim_many(ids, 30.0, "worker-a")}
    assert len(claims) == 6
    lean_ids, mixed_ids = [e.id for e in executions[:3]], [e.id for e in executions[3:5]]

    def success(claim, detail: str | None) -> Outcome:  # type: ignore[no-untyped-def]
        return Outcome(claim.id, claim.fence, claim.task, ExecutionStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED, detail=detail)

    stale = Outcome(executions[5].id, 1, "noop", ExecutionStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED)
    lean = [success(claims[i], '{"n": 1}') for i in lean_ids] + [stale]
    took = await store.execution_succeed_many(lean)
    assert sorted(r[0] for r in took) == sorted(lean_ids) and {r[1:] for r in took} == {("succeeded", None)}
    assert await store.execution_succeed_many(lean) == []  # no longer running: nothing more

    last = claims[executions[5].id]
    mixed = [success(claims[i], '{"n": 1}') for i in mixed_ids] + [
        Outcome(last.id, last.fence, last.task, ExecutionStatus.FAILED, AttemptOutcome.FAILED, "boom again")
    ]
    assert len(await store.execution_finish_many(mixed)) == 3

    def ending(e) -> tuple:  # type: ignore[no-untyped-def]
        return (e.status, e.last_error, e.lease_until, e.finished_at is not None, e.worker, e.attempt, e.fence)

    rows = {e.id: await store.execution_get(e.id) for e in executions}
    assert {ending(rows[i]) for i in lean_ids + mixed_ids} == {("succeeded", None, None, True, "worker-a", 2, 2)}
    details = await store.db.fetch("SELECT detail FROM executions WHERE id = ANY($1::uuid[])", lean_ids + mixed_ids)
    assert {r["detail"] for r in details} == {'{"n": 1}'}
    for i in lean_ids + mixed_ids:
        attempts = await store.attempt_list(i)
        assert [(a.attempt, a.outcome, a.error) for a in attempts] == [(1, "failed", "boom"), (2, "succeeded", None)]
    assert rows[executions[5].id].status == "failed"


async def test_backoff_jitter_is_spread_across_executions(make_job, make_worker, store, config) -> None:
    executions = [(await make_job("fail", max_attempts=2))[1] for _ in range(40)]
    worker = make_worker(concurrency=64)
    await worker.run_once()
    await settle(worker)
    delays = []
    for execution in executions:
        row = await store.execution_get(execution.id)
        attempt = (await store.attempt_list(execution.id))[0]
        delays.append((row.due_at - attempt.finished_at).total_seconds())
    ceiling = config.jobs.backoff_base_s
    assert all(-0.01 <= d <= ceiling + 0.01 for d in delays)
    assert statistics.pstdev(delays) > ceiling / 10  # really random, not one shared delay


async def test_handler_timeout_counts_as_failed_attempt(make_job, make_worker, store) -> None:
    _, execution = await make_job("sleep", params={"seconds": 5}, timeout_s=0.2, max_attempts=1)
    final = await run_until_idle(make_worker(), store, execution.id)
    assert final.status == ExecutionStatus.FAILED
    (attempt,) = await store.attempt_list(execution.id)
    assert attempt.outcome == "timed_out" and attempt.error == "timed out after 0.2 s"
    assert 0.15 <= attempt.duration_s < 2


async def test_concurrency_limit_caps_claims(make_job, make_worker) -> None:
    for _ in range(5):
        await make_job("sleep", params={"seconds": 0.3})
    worker = make_worker(concurrency=2)
    assert await worker.run_once() == 2
    assert await worker.run_once() == 0  # full: pops nothing rather than claiming work it cannot start
    await settle(worker)
    assert await worker.run_once() == 2


async def test_unknown_task_on_this_worker_fails_the_attempt(make_job, make_worker, store) -> None:
    _, execution = await make_job("noop", max_attempts=1)
    await store.db.execute("UPDATE jobs SET task = 'not.loaded.here'")
    final = await run_until_idle(make_worker(), store, execution.id)
    assert final.status == ExecutionStatus.FAILED
    assert "unknown task type 'not.loaded.here'" in final.last_error


def _enqueue(execution):  # type: ignore[no-untyped-def]
    from schedulerd.models import Enqueue

    return Enqueue(execution.id, execution.due_at)


async def test_shutdown_hands_unfinished_executions_back_without_using_an_attempt(make_job, make_worker, store, queue) -> None:
    _, slow = await make_job("sleep", params={"seconds": 30})
    _, quick = await make_job("sleep", params={"seconds": 0.05})
    worker = make_worker(shutdown_grace_s=0.3)
    assert await worker.run_once() == 2

    await worker._drain()
    await worker.flush_outcomes()

    assert (await store.execution_get(quick.id)).status == ExecutionStatus.SUCCEEDED
    back = await store.execution_get(slow.id)
    assert (back.status, back.attempt, back.fence) == ("queued", 0, 1)
    (attempt,) = await store.attempt_list(slow.id)
    assert (attempt.attempt, attempt.outcome) == (1, "handed_back")
    assert await queue.missing([str(slow.id)]) == []
    claims = await store.execution_claim_many([str(slow.id)], 10.0, "next")
    assert [(c.attempt, c.fence) for c in claims] == [(1, 2)]  # the same attempt number, a newer fence


async def test_an_outcome_waiting_to_be_written_keeps_its_lease_and_readiness_follows_the_writer(
    make_job, make_worker, store, monkeypatch
) -> None:
    """While the finish write fails, the outcome stays held: the heartbeat extends its lease, the
    finish loop retries within a fraction of a second (and does not tick, so /readyz fails), and
    the outcome lands as soon as a write goes through."""
    _, execution = await make_job("noop")
    worker = make_worker("worker-a")
    assert await worker.run_once() == 1
    await asyncio.gather(*(r.task for r in worker.running.values() if r.task is not None))
    assert execution.id in worker._outcomes and not worker.running  # handler done, outcome held

    real_finish, attempts = store.execution_finish_many, 0

    async def broken(*args, **kwargs):
        nonlocal attempts
        attempts += 1
        raise ConnectionResetError("connection reset by peer")

    monkeypatch.setattr(store, "execution_finish_many", broken)
    health.forget()
    finish_age = lambda: health.expect({"worker.finish": 10.0}).ages()["worker.finish"]  # noqa: E731
    stop = asyncio.Event()
    loop = asyncio.create_task(worker._finish_loop(stop))
    await asyncio.sleep(0.6)
    assert attempts >= 3  # retried promptly, not after the loops' seconds-long backoff
    assert finish_age() >= 0.5  # no tick since the loop began: outcomes wait and no write succeeds

    before = (await store.execution_get(execution.id)).lease_until
    assert await worker.heartbeat_once() == 1  # the held outcome's lease is extended
    assert (await store.execution_get(execution.id)).lease_until > before

    monkeypatch.setattr(store, "execution_finish_many", real_finish)
    for _ in range(50):
        if not worker._outcomes:
            break
        await asyncio.sleep(0.05)
    worker._closing = True
    worker._outcome_ready.set()
    await asyncio.wait_for(loop, 5)
    assert (await store.execution_get(execution.id)).status == ExecutionStatus.SUCCEEDED
    assert finish_age() < 0.5


async def test_a_live_worker_keeps_its_outcome_through_a_table_lock_longer_than_its_lease(
    make_job, make_worker, store, queue, config, database_url
) -> None:
    """The finish and the heartbeat wait behind a lock held past the lease (2 s here); the
    sweeper's reclaim, queued behind the same lock, finds the holder's replica still reporting
    itself alive and leaves the lease to it ([sweeper].live_holder_grace_s): the outcome lands
    when the lock goes, and the handler is not run again."""
    _, execution = await make_job("noop")
    worker = make_worker("worker-a")
    assert await worker.run_once() == 1
    await asyncio.gather(*(r.task for r in worker.running.values() if r.task is not None))
    await store.replica_report("worker-a", "host", 1, ["worker"], "test", await store.clock_now())
    sweeper = Sweeper(store, queue, replace(config.sweeper, live_holder_grace_s=10.0))

    locker = await asyncpg.connect(database_url)
    try:
        async with locker.transaction():
            await locker.execute("LOCK TABLE executions IN ACCESS EXCLUSIVE MODE")
            stop = asyncio.Event()
            finishing = asyncio.create_task(worker._finish_loop(stop))
            await asyncio.sleep(0.2)
            sweeping = asyncio.create_task(sweeper.run_once())
            await asyncio.sleep(config.worker.lease_s + 1.0)  # the lease has expired behind the lock
    finally:
        await locker.close()
    swept = await asyncio.wait_for(sweeping, 10)
    worker._closing = True
    worker._outcome_ready.set()
    await asyncio.wait_for(finishing, 10)

    assert swept.reclaimed == 0 and swept.failed == 0
    done = await store.execution_get(execution.id)
    assert done.status == ExecutionStatus.SUCCEEDED and done.attempt == 1 and done.fence == 1


async def test_an_outcome_postgres_refuses_does_not_hold_back_the_others(make_job, make_worker, store) -> None:
    """One outcome in the batch carries text Postgres refuses (a NUL byte): the batch is split
    until it stands alone, the others are written, and it is recorded with a plain error."""
    executions = [(await make_job("sleep", params={"seconds": 5}))[1] for _ in range(5)]
    worker = make_worker("worker-a")
    assert await worker.run_once() == 5
    claims = [r.claim for r in worker.running.values()]
    bad = claims[2]
    for claim in claims:
        error = "boom\x00" if claim is bad else None
        outcome = AttemptOutcome.FAILED if claim is bad else AttemptOutcome.SUCCEEDED
        status = ExecutionStatus.FAILED if claim is bad else ExecutionStatus.SUCCEEDED
        worker._outcomes[claim.id] = Outcome(claim.id, claim.fence, claim.task, status, outcome, error)

    assert await worker.flush_outcomes() == 5
    assert not worker._outcomes
    by_id = {e.id: await store.execution_get(e.id) for e in executions}
    assert by_id[bad.id].status == "failed" and "could not be recorded as reported" in by_id[bad.id].last_error
    assert [e.status for i, e in by_id.items() if i != bad.id] == ["succeeded"] * 4


async def test_pooled_connections_keep_tcp_alive_on_both_ends(store) -> None:
    """A peer gone without a reset is noticed on an idle connection too: keepalive on our socket
    and on the server's (issue 15: TCP keepalive on every pool)."""
    async with store.db.acquire() as connection:
        sock = connection._con._transport.get_extra_info("socket")
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert await connection.fetchval("SHOW tcp_keepalives_idle") == "30"


async def test_an_entry_popped_before_its_rows_due_time_is_given_back_at_it(make_job, make_worker, store, queue) -> None:
    """A queue entry whose score is earlier than its row's due time (a stale score) is popped
    early; the claim refuses it, and the worker puts it back at the row's due time instead of
    dropping it (which left it to the sweeper's overdue repair, grace_s after it was due)."""
    from datetime import timedelta

    from schedulerd.models import Enqueue
    from schedulerd.queue import score_ms

    _, execution = await make_job("noop", delay_s=30.0)
    stale = Enqueue(execution.id, await store.clock_now() - timedelta(seconds=1), execution.tenant)
    await queue.add([stale], only_new=False)
    worker = make_worker()
    assert await worker.run_once() == 0
    assert worker.stats.dropped == 0
    score = await queue.client.zscore(queue.queue_key(execution.tenant, execution.id), str(execution.id))
    assert score == score_ms(execution.due_at)


def test_a_popped_id_parsed_by_asyncpg_finds_what_the_worker_holds_under_a_uuid() -> None:
    """The pop's membership check parses ids as the driver does (store.parsed_id): equal and
    hashing as uuid.UUID does, so an execution held under either kind of key is found."""
    for held in (uuid.uuid4(), new_execution_id(datetime.now(UTC)), uuid.UUID(int=0)):
        popped = parsed_id(str(held))
        assert isinstance(popped, uuid.UUID) and popped == held and hash(popped) == hash(held)
        assert popped in {held: None} and held in {popped: None} and str(popped) == str(held)
    with pytest.raises(ValueError):
        parsed_id("not-an-id")
