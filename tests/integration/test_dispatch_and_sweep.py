"""Dispatcher, sweeper and the write path against real Postgres and Redis."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import UUID

from schedulerd.dispatcher import Dispatcher
from schedulerd.jobs import Jobs, JobSpec
from schedulerd.models import ExecutionStatus
from schedulerd.queue import DelayQueue, score_ms
from tests.conftest import create_job
from tests.integration.conftest import run_until_idle


async def test_write_path_enqueues_a_job_due_inside_the_horizon(make_job, queue) -> None:
    _, execution = await make_job(run_at=datetime.now(UTC) + timedelta(seconds=30))
    assert execution.status == ExecutionStatus.QUEUED and execution.enqueued_at is not None
    score = await queue.client.zscore(queue.queue_key("default"), str(execution.id))
    assert score == score_ms(execution.due_at) >= execution.due_at.timestamp() * 1000


async def test_dispatcher_moves_pending_executions_into_the_queue(make_job, store, queue, config) -> None:
    later = datetime.now(UTC) + timedelta(seconds=config.dispatcher.horizon_s + 60)
    _, execution = await make_job(run_at=later)
    assert execution.status == ExecutionStatus.PENDING
    assert await queue.missing([str(execution.id)]) == [str(execution.id)]

    near = Dispatcher(store, queue, config.dispatcher)
    assert await near.run_once() == 0
    wide = Dispatcher(store, queue, replace(config.dispatcher, horizon_s=config.dispatcher.horizon_s + 120, batch_size=2))
    assert await wide.run_once() == 1
    assert (await store.execution_get(execution.id)).status == ExecutionStatus.QUEUED
    assert await queue.missing([str(execution.id)]) == []
    assert await wide.run_once() == 0  # already queued: not dispatched twice


async def test_job_is_accepted_when_redis_is_down_and_the_sweeper_enqueues_it(
    store, queue, sweeper, config, make_worker
) -> None:
    unreachable = DelayQueue.connect("redis://127.0.0.1:1/0", "nowhere")
    job, (execution,) = await create_job(Jobs(store, unreachable, config), JobSpec(task="noop"))
    await unreachable.close()
    assert execution.status == ExecutionStatus.QUEUED  # committed before the failed ZADD
    assert await queue.missing([str(execution.id)]) == [str(execution.id)]

    await sweeper.run_once()  # first sweep: full reconcile from Postgres
    assert await queue.missing([str(execution.id)]) == []
    assert (await run_until_idle(make_worker(), store, execution.id)).status == ExecutionStatus.SUCCEEDED


async def test_sweeper_re_enqueues_overdue_executions_missing_from_redis(make_job, store, queue, sweeper, config) -> None:
    await sweeper.run_once()  # settle the epoch so the next sweep is an ordinary one
    _, execution = await make_job(run_at=datetime.now(UTC) - timedelta(seconds=config.sweeper.grace_s + 1))
    await queue.client.zrem(queue.queue_key("default"), str(execution.id))  # the entry got lost

    result = await sweeper.run_once()

    assert result.re_enqueued == 1 and result.reconciled == 0
    assert await queue.missing([str(execution.id)]) == []


async def test_lost_epoch_triggers_a_full_reconcile(make_job, store, queue, sweeper) -> None:
    executions = [(await make_job(run_at=datetime.now(UTC) + timedelta(seconds=60 + i)))[1] for i in range(30)]
    await sweeper.run_once()
    await queue.delete_all()  # what FLUSHALL or an empty restart does to our keys

    result = await sweeper.run_once()

    assert result.reconciled == 30
    assert await queue.missing([str(e.id) for e in executions]) == []
    assert await queue.client.get(queue.epoch_key)


async def test_worker_reports_a_lost_epoch(make_job, store, queue, sweeper, make_worker) -> None:
    await sweeper.run_once()
    worker = make_worker()
    lost = []
    worker.on_epoch_lost = lambda: lost.append(True)
    await worker.run_once()
    assert lost == []
    await queue.delete_all()
    await worker.run_once()
    assert lost == [True]


async def test_sweeper_fails_an_expired_lease_with_attempts_spent(make_job, make_worker, store, sweeper) -> None:
    _, execution = await make_job("sleep", params={"seconds": 30}, max_attempts=1)
    worker = make_worker()
    assert await worker.run_once() == 1
    # Expired past the grace a live holder gets: worker-a may still be recorded alive (by this
    # test or an earlier one in the same database), and this is about a lease no one will renew.
    await store.db.execute("UPDATE executions SET lease_until = now() - interval '1 hour'")

    result = await sweeper.run_once()

    assert (result.reclaimed, result.failed) == (0, 1)
    final = await store.execution_get(execution.id)
    assert final.status == ExecutionStatus.FAILED and "lease expired: worker worker-a" in final.last_error
    (attempt,) = await store.attempt_list(execution.id)
    assert attempt.outcome == "lease_expired"


async def test_sweeper_never_undoes_a_completion(make_job, make_worker, store, sweeper) -> None:
    _, execution = await make_job("noop")
    worker = make_worker()
    final = await run_until_idle(worker, store, execution.id)
    assert final.status == ExecutionStatus.SUCCEEDED
    # Even with a (stale) lease time in the past, a finished row is not reclaimed.
    await store.db.execute("UPDATE executions SET lease_until = now() - interval '1 second'")
    assert (await sweeper.run_once()).reclaimed == 0
    assert (await store.execution_get(execution.id)).status == ExecutionStatus.SUCCEEDED


async def test_with_redis_unreachable_workers_claim_from_postgres_and_leases_still_come_back(
    make_job, store, config
) -> None:
    from schedulerd.sweeper import Sweeper
    from schedulerd.worker import Worker

    unreachable = DelayQueue.connect("redis://127.0.0.1:1/0", "nowhere", timeout_s=0.2)
    try:
        executions = [(await make_job("sleep", params={"seconds": 30}, backoff_base_s=0))[1] for _ in range(3)]
        worker = Worker(store, unreachable, replace(config.worker, redis_probe_s=60), "fallback", horizon_s=300)
        assert await worker.run_once() == 3  # straight from Postgres
        assert worker.redis_down_since is not None
        rows = [await store.execution_get(e.id) for e in executions]
        assert {(r.status, r.worker, r.fence) for r in rows} == {("running", "fallback", 1)}
        assert await worker.run_once() == 0  # nothing else is due; nothing is claimed twice

        # The worker dies; its leases expire; the sweeper hands them back without Redis.
        for running in list(worker.running.values()):
            running.task.cancel()
        await store.db.execute("UPDATE executions SET lease_until = now() - interval '1 hour'")  # past any grace
        result = await Sweeper(store, unreachable, config.sweeper).run_once()
        assert result.reclaimed == 3
        await asyncio.sleep(config.jobs.backoff_base_s + 0.05)  # reclaims come back after a jittered delay
        successor = Worker(store, unreachable, config.worker, "successor", horizon_s=300)
        assert await successor.run_once() == 3
        for running in list(successor.running.values()):
            running.task.cancel()
        worker._threads.shutdown(wait=False)
        successor._threads.shutdown(wait=False)
    finally:
        await unreachable.close()


async def test_sweeper_repairs_an_entry_whose_tenant_is_missing_from_the_index(make_job, store, queue, sweeper) -> None:
    """A queued, overdue execution whose entry is in its tenant's queue while the tenant is not in
    the shard's tenants set is served by no pop: the sweeper re-indexes it."""
    from schedulerd.queue import score_ms

    _, execution = await make_job("noop")
    await sweeper.run_once()  # the first sweep reconciles everything: the check comes after it
    await store.db.execute("UPDATE executions SET due_at = due_at - interval '10 seconds' WHERE id = $1", execution.id)
    await queue.client.zadd(queue.queue_key(execution.tenant, execution.id),
                            {str(execution.id): score_ms(execution.due_at) - 10_000})  # fmt: skip
    await queue.client.zrem(queue.tenants_key, execution.tenant)
    assert (await queue.pop_due(10)).execution_ids == []

    result = await sweeper.run_once()

    assert result.re_enqueued == 1
    assert (await queue.pop_due(10)).execution_ids == [str(execution.id)]


async def test_overdue_repair_walks_past_a_backlog_larger_than_a_page(store, queue, config) -> None:
    """Entries lost behind a backlog of overdue queued executions (all in Redis, waiting for
    workers) are re-added within a few sweeps, not once the backlog has drained."""
    from dataclasses import replace

    from schedulerd.dispatcher import Dispatcher
    from schedulerd.sweeper import Sweeper
    from tests.fault.conftest import insert_workload

    page = 20
    backlog = 247  # 13 pages: more than any one sweep reads
    ids, _ = await insert_workload(store, backlog, start_in_s=-60.0, spread_s=30.0)
    await Dispatcher(store, queue, config.dispatcher).run_once()
    sweeper = Sweeper(store, queue, replace(config.sweeper, batch_size=page))
    await sweeper.run_once()  # the first sweep reconciles everything: the losses come after it
    lost = ids[-3:]  # the newest overdue: behind every page of the backlog
    for execution_id in lost:
        await queue.client.zrem(queue.queue_key("fault", execution_id), str(execution_id))
    assert await queue.missing([str(i) for i in lost], ["fault"] * 3) == [str(i) for i in lost]

    repaired = [(await sweeper.run_once()).re_enqueued for _ in range(12)]

    # Bounded work per sweep (one page: the reconciling sweep read page 1, these read 2 to 13,
    # the last with the lost ones), and the walk reaches the end of the backlog.
    assert repaired == [0] * 11 + [3], repaired
    assert await queue.missing([str(i) for i in lost], ["fault"] * 3) == []


async def test_lapsed_leases_behind_a_backlog_larger_than_a_window_come_back_within_a_few_sweeps(store, queue, config) -> None:
    """Running executions hide among the active lane's queued ones: a sweep reads a window of it
    and the next sweep the one after, so each sweep's work is bounded and a lapsed lease behind a
    backlog of any size still comes back, within backlog / window sweeps."""
    from schedulerd.sweeper import LEASE_WINDOW_BATCHES, Sweeper
    from tests.fault.conftest import insert_workload

    batch = 10
    window = batch * LEASE_WINDOW_BATCHES
    ids, _ = await insert_workload(store, 2 * window + 50, start_in_s=-60.0, spread_s=30.0)  # due in id order
    await store.db.execute("UPDATE executions SET status = 'queued', enqueued_at = clock_timestamp() WHERE id = ANY($1)", ids)
    lapsed = ids[-2:]  # due last: behind two windows of queued rows
    await store.db.execute(
        "UPDATE executions SET status = 'running', attempt = 1, fence = 1, worker = 'gone', started_at = now(),"
        " lease_until = now() - interval '1 hour' WHERE id = ANY($1)", lapsed,
    )  # fmt: skip
    sweeper = Sweeper(store, queue, replace(config.sweeper, batch_size=batch, live_holder_grace_s=0.0))

    reclaimed = [(await sweeper.run_once()).reclaimed for _ in range(4)]

    assert reclaimed == [0, 0, 2, 0], reclaimed  # windows 1 and 2 hold none; the third does; then round again
    assert {(await store.execution_get(i)).status for i in lapsed} == {ExecutionStatus.QUEUED}


async def test_a_lease_window_reports_where_the_next_one_starts(store) -> None:
    from tests.fault.conftest import insert_workload

    ids, _ = await insert_workload(store, 25, start_in_s=-60.0, spread_s=10.0)
    await store.db.execute("UPDATE executions SET status = 'queued' WHERE id = ANY($1)", ids)
    await store.db.execute(
        "UPDATE executions SET status = 'running', lease_until = now() - interval '1 s' WHERE id = ANY($1)", ids[3:5]
    )  # fmt: skip
    start = (datetime(1970, 1, 1, tzinfo=UTC), UUID(int=0))

    first = await store.execution_lease_window(start, 10)
    second = await store.execution_lease_window(first.resume_after, 10)
    third = await store.execution_lease_window(second.resume_after, 10)

    assert sorted(i for i, _ in first.lapsed) == sorted(ids[3:5]) and second.lapsed == third.lapsed == []
    assert first.resume_after is not None and second.resume_after is not None
    assert third.resume_after is None  # the lane's end: the next window starts from the beginning again
