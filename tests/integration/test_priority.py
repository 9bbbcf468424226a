"""Priorities end to end on real Postgres and Redis: stored on jobs and executions, queued in
their band, kept by retries, moved by an edit, honoured by the worker's pop and by the claim
from Postgres while Redis is down."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

from schedulerd.jobs import Jobs, JobSpec
from schedulerd.models import Enqueue, ExecutionStatus
from tests.conftest import create_job
from tests.integration.conftest import settle


async def test_a_one_off_carries_its_priority_into_its_execution_and_band(make_job, store, queue) -> None:
    job, execution = await make_job("noop", priority=9, tenant="acme")
    assert job.priority == 9 and execution.priority == 9
    assert (await store.job_get(job.id)).priority == 9
    assert await queue.client.zscore(queue.queue_key("acme", priority=9), str(execution.id)) is not None
    assert await queue.client.zscore(queue.queue_key("acme"), str(execution.id)) is None
    _, plain = await make_job("noop", tenant="acme")
    assert plain.priority == 5 and await queue.client.zscore(queue.queue_key("acme"), str(plain.id)) is not None


async def test_cron_occurrences_take_the_job_priority_and_an_edit_moves_the_unstarted_ones(store, queue, config) -> None:
    jobs = Jobs(store, queue, config)
    job, executions = await create_job(jobs, JobSpec(task="noop", cron="* * * * *", priority=2))
    assert executions and all(e.priority == 2 for e in executions)

    edit = await jobs.update(job.id, {"priority": 8})

    assert edit.job.priority == 8 and edit.job.version == 2
    rows = await store.db.fetch("SELECT id, priority, status FROM executions WHERE job_id = $1", job.id)
    assert rows and all(r["priority"] == 8 for r in rows if r["status"] in ("pending", "queued"))
    queued = [r for r in rows if r["status"] == "queued"]
    assert queued and await queue.missing([str(r["id"]) for r in queued], ["default"] * len(queued), [8] * len(queued)) == []


async def test_the_worker_claims_a_due_9_before_a_backlog_of_5s(make_job, make_worker, store, queue, config) -> None:
    backlog_job, _ = await make_job("noop")
    now = await store.clock_now()
    rows = [(uuid.uuid4(), backlog_job.id, "default", now - timedelta(seconds=5, microseconds=i), now - timedelta(seconds=5))
            for i in range(500)]  # fmt: skip
    backlog = await store.execution_insert_many(rows, config.dispatcher.horizon_s)
    await queue.add([Enqueue(e.id, e.due_at, e.tenant, e.priority) for e in backlog], only_new=True)
    worker = make_worker(concurrency=8, batch_size=8)
    assert await worker.run_once() == 8  # the backlog is being served
    await settle(worker)
    _, urgent = await make_job("noop", priority=9)

    await worker.run_once()

    assert urgent.id in worker.running or (await store.execution_get(urgent.id)).status != ExecutionStatus.QUEUED
    await settle(worker)


async def test_a_retry_goes_back_to_its_band(make_job, make_worker, store, queue) -> None:
    _, execution = await make_job("fail", priority=9, max_attempts=3)
    worker = make_worker()
    await worker.run_once()
    await settle(worker)
    retried = await store.execution_get(execution.id)
    assert retried.status == ExecutionStatus.QUEUED and retried.attempt == 1 and retried.priority == 9
    assert await queue.client.zscore(queue.queue_key("default", priority=9), str(execution.id)) is not None


async def test_the_claim_from_postgres_takes_priority_then_due_order(make_job, make_worker, store, config) -> None:
    """Redis down: execution_lock_due takes the 9s first, then the 5s oldest first, the 1s last,
    and never one not yet due."""
    jobs = {p: (await make_job("noop", priority=p, run_at=(await store.clock_now()) + timedelta(hours=1)))[0] for p in (1, 5, 9)}
    now = await store.clock_now()

    def occurrences(priority: int, count: int, ago_s: float) -> list:
        return [(uuid.uuid4(), jobs[priority].id, "default", now - timedelta(seconds=ago_s, microseconds=i),
                 now - timedelta(seconds=ago_s) + timedelta(milliseconds=i)) for i in range(count)]  # fmt: skip

    ones, fives, nines = occurrences(1, 3, 30), occurrences(5, 5, 20), occurrences(9, 2, 1)
    for rows in (ones, fives, nines):
        await store.execution_insert_many(rows, config.dispatcher.horizon_s)
    later_nine = await store.execution_insert_many(
        [(uuid.uuid4(), jobs[9].id, "default", now + timedelta(minutes=5), now + timedelta(minutes=5))], config.dispatcher.horizon_s
    )  # fmt: skip

    # (the claim returns its rows in no order: the order is which rows a batch takes)
    claims, _ = await store.execution_claim_due(4, 30, "w")
    assert {c.id for c in claims} == {r[0] for r in nines + fives[:2]}
    claims, _ = await store.execution_claim_due(5, 30, "w")
    assert {c.id for c in claims} == {r[0] for r in fives[2:] + ones[:2]}
    claims, _ = await store.execution_claim_due(100, 30, "w")
    assert {c.id for c in claims} == {ones[2][0]}  # the not-yet-due 9 stays
    assert later_nine[0].id not in {c.id for c in claims}

    worker = make_worker()
    worker.redis_down_since = worker._next_redis_probe = float("inf")  # pop nothing: claim from Postgres
    assert await worker.run_once() == 0  # nothing else is due
    assert time.monotonic() < worker._next_redis_probe


async def test_the_client_takes_a_priority_as_an_argument_and_as_a_task_default(store, queue, config) -> None:
    from schedulerd import Client, ValidationError, task

    client = Client(store, queue, config, owned=False)
    done = await client.enqueue("noop", priority=9)
    assert (await store.execution_get(done.execution_id)).priority == 9

    @task("test.priority_default", priority=8)
    async def urgent_task(ctx, params) -> None:  # type: ignore[no-untyped-def]
        return None

    by_default = await urgent_task.enqueue(client)
    assert (await store.execution_get(by_default.execution_id)).priority == 8
    overridden = await urgent_task.enqueue(client, priority=2)
    assert (await store.execution_get(overridden.execution_id)).priority == 2
    for bad in (10, -1, "high", True):
        try:
            await client.enqueue("noop", priority=bad)
        except ValidationError as exc:
            assert exc.field == "priority", exc
        else:
            raise AssertionError(f"priority={bad!r} was accepted")
    edit = await client.update_job(done.job_id, priority=3)
    assert edit.job.priority == 3


async def test_the_bench_priority_probe_reads_both_lags(store, queue, config, make_worker) -> None:
    """scripts/bench spike --priority-probe's two halves, on a tiny backlog: the 9 starts first."""
    import sys
    from datetime import UTC, datetime
    from pathlib import Path

    from schedulerd import Client

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import bench

    client = Client(store, queue, config, owned=False)
    for _ in range(20):
        await client.enqueue("noop", tenant="bench")
    ids = await bench._priority_probe(client, datetime.now(UTC))
    worker = make_worker(concurrency=1, batch_size=1)
    await worker.run_once()
    await settle(worker)
    probed = await bench._probe_result(store.db, ids)  # type: ignore[arg-type]
    assert probed["priority_probe_urgent_lag_ms"] is not None and probed["priority_probe_control_lag_ms"] is None
    assert probed["priority_probe_backlog_behind"] == 20  # the backlog it passed (the probes are not counted)


async def test_an_apply_file_declares_and_changes_a_priority(store, queue, config) -> None:
    from schedulerd import Client, ValidationError

    client = Client(store, queue, config, owned=False)
    declared = {"name": "urgent", "task": "noop", "cron": "* * * * *", "priority": 9}
    done = await client.apply([declared], source="ops")
    assert done.added[0].job.priority == 9
    again = await client.apply([declared], source="ops", plan=True)
    assert not again.changed and again.unchanged == ["urgent"]
    moved = await client.apply([{**declared, "priority": 4}], source="ops")
    assert [c.fields for c in moved.changed] == [("priority",)] and moved.changed[0].edit.job.priority == 4
    rows = await store.db.fetch("SELECT priority FROM executions WHERE status IN ('pending', 'queued')")
    assert rows and {r["priority"] for r in rows} == {4}
    try:
        await client.apply([{**declared, "priority": "high"}], source="ops")
    except ValidationError as exc:
        assert "priority" in exc.field, exc
    else:
        raise AssertionError("an apply file with priority 'high' was accepted")
