"""Backfill, dead-letter redrive and pause notes against real Postgres and Redis (issue 9)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from prometheus_client import REGISTRY

from schedulerd.dead_letters import DeadLetters, FailedFilter
from schedulerd.errors import NotFoundError, ValidationError
from schedulerd.jobs import Jobs, JobSpec
from schedulerd.materialiser import Materialiser
from schedulerd.models import ExecutionStatus
from schedulerd.store import Store
from schedulerd.tasks.registry import TaskContext, task
from tests.conftest import create_job
from tests.integration.conftest import run_until_idle

failing: set[str] = set()  # params["key"] values whose executions fail for now


@task("test.fails_while_flagged")
async def fails_while_flagged(ctx: TaskContext, params: dict[str, Any]) -> None:
    if params["key"] in failing:
        raise RuntimeError(f"downstream {params['key']} unavailable")


@pytest.fixture
def jobs(store, queue, config) -> Jobs:
    return Jobs(store, queue, config)


@pytest.fixture
def dead_letters(store, queue, config) -> DeadLetters:
    return DeadLetters(store, queue, config)


def counted(metric: str) -> float:
    return REGISTRY.get_sample_value(metric) or 0.0


async def execution_count(store) -> int:
    return await store.db.fetchval("SELECT count(*) FROM executions")


# --- backfill ---------------------------------------------------------------------------------


async def test_backfill_creates_each_past_occurrence_once_beside_the_scheduled_runs(jobs, store, queue, config) -> None:
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="0 * * * *", timezone="Europe/London"))
    now = await store.clock_now()
    end = now.replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(hours=5)
    backfilled_before = counted("schedulerd_backfilled_occurrences_total")

    done = await jobs.backfill(job.id, start, end)

    assert done.already_backfilled == 0
    assert [e.scheduled_for for e in done.created] == [start + timedelta(hours=h) for h in range(5)]
    assert {e.origin for e in done.created} == {"backfill"} and {e.status for e in done.created} == {"queued"}
    gaps = [(b.due_at - a.due_at).total_seconds() for a, b in zip(done.created, done.created[1:])]
    assert gaps == pytest.approx([1 / config.jobs.backfill_per_s] * 4)  # spread, not all at once
    assert await queue.missing([str(e.id) for e in done.created]) == []
    assert counted("schedulerd_backfilled_occurrences_total") - backfilled_before == 5

    # The scheduled run of a backfilled instant is neither blocked nor taken by it.
    (scheduled,) = await store.execution_insert_many([(uuid.uuid4(), job.id, job.tenant, start, start)], 300.0)
    assert scheduled.origin == "scheduled" and scheduled.id not in {e.id for e in done.created}

    again = await jobs.backfill(job.id, start - timedelta(hours=1), end)  # overlaps the first: only the new hour
    assert [e.scheduled_for for e in again.created] == [start - timedelta(hours=1)]
    assert again.already_backfilled == 5


async def test_backfilled_runs_are_not_misfires_and_run(jobs, store, queue, config, make_worker) -> None:
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="*/10 * * * *", misfire_policy="skip"))
    now = await store.clock_now()
    done = await jobs.backfill(job.id, now - timedelta(hours=1), now)
    # Pretend the fleet fell far behind: the misfire pass must leave backfilled runs alone.
    await store.db.execute("UPDATE executions SET due_at = now() - interval '10 minutes' WHERE origin = 'backfill'")
    await Materialiser(store, queue, config.materialiser, dispatch_horizon_s=config.dispatcher.horizon_s).run_once()
    assert {(await store.execution_get(e.id)).status for e in done.created} == {"queued"}

    finished = await run_until_idle(make_worker(), store, done.created[0].id)
    assert finished.status == ExecutionStatus.SUCCEEDED and finished.origin == "backfill"


async def test_backfill_refuses_bad_requests_and_writes_nothing(jobs, store, config) -> None:
    cron_job, _ = await create_job(jobs, JobSpec(task="noop", cron="* * * * *", tenant="acme"))
    one_off, _ = await create_job(jobs, JobSpec(task="noop", tenant="acme"))
    now = await store.clock_now()
    before = await execution_count(store)
    cases = [
        (one_off.id, now - timedelta(hours=1), now, "acme", "only cron jobs can be backfilled"),
        (cron_job.id, now - timedelta(minutes=5), now + timedelta(minutes=5), "acme", "is in the future"),
        (cron_job.id, now - timedelta(minutes=5), now - timedelta(minutes=10), "acme", "must be after from"),
        (cron_job.id, now - timedelta(days=2), now, "acme", "more than 1000 occurrences"),
        (cron_job.id, now - timedelta(seconds=30) - timedelta(seconds=now.second), now - timedelta(seconds=now.second + 1),
         "acme", "no occurrence"),
    ]  # fmt: skip
    for job_id, start, end, tenant, message in cases:
        with pytest.raises(ValidationError, match=message) as refused:
            await jobs.backfill(job_id, start, end, tenant)
        assert refused.value.field in ("id", "from", "to")
    with pytest.raises(ValidationError) as over:
        await jobs.backfill(cron_job.id, now - timedelta(days=2), now)
    assert over.value.limit == "jobs.backfill_max_occurrences"
    with pytest.raises(NotFoundError):  # another tenant's job is "not found"
        await jobs.backfill(cron_job.id, now - timedelta(hours=1), now, "other")
    await jobs.pause(cron_job.id)
    with pytest.raises(ValidationError, match="is paused"):
        await jobs.backfill(cron_job.id, now - timedelta(hours=1), now)
    assert await execution_count(store) == before  # a pause changes statuses; nothing was added
    assert await store.db.fetchval("SELECT count(*) FROM executions WHERE origin = 'backfill'") == 0


async def test_trigger_has_a_slot_of_its_own(jobs, store) -> None:
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="* * * * *"))
    triggered = await jobs.trigger(job.id)
    assert triggered.origin == "trigger"
    # A scheduled occurrence at exactly the trigger's instant still gets written.
    (scheduled,) = await store.execution_insert_many(
        [(uuid.uuid4(), job.id, job.tenant, triggered.scheduled_for, triggered.scheduled_for)], 300.0
    )
    assert scheduled.origin == "scheduled"


# --- dead letters -----------------------------------------------------------------------------


async def test_redrive_gives_the_same_execution_a_new_attempt_budget(make_job, make_worker, store, queue, dead_letters) -> None:
    failing.add("billing")
    job, execution = await make_job("test.fails_while_flagged", params={"key": "billing"}, max_attempts=2)
    worker = make_worker()
    failed = await run_until_idle(worker, store, execution.id)
    assert (failed.status, failed.attempt, failed.fence) == ("failed", 2, 2)

    listed = await dead_letters.list(None, FailedFilter(task="test.fails_while_flagged", error="BILLING UNAVAILABLE"))
    assert [(f.execution.id, f.task) for f in listed] == [(execution.id, "test.fails_while_flagged")]

    redriven_before = counted("schedulerd_redriven_executions_total")
    done = await dead_letters.redrive([execution.id], job.tenant, by="cli:alice")
    assert counted("schedulerd_redriven_executions_total") - redriven_before == 1
    assert done.execution_ids == [execution.id] and done.not_redriven == []
    redriven = await store.execution_get(execution.id)
    assert (redriven.status, redriven.attempt, redriven.fence, redriven.redrives, redriven.reason) == ("queued", 0, 3, 1, "redrive")
    assert redriven.finished_at is None and redriven.first_started_at == failed.first_started_at
    assert await queue.missing([str(execution.id)]) == []

    failing.discard("billing")  # the downstream is back: the redriven execution succeeds
    finished = await run_until_idle(worker, store, execution.id)
    assert (finished.status, finished.attempt, finished.fence) == ("succeeded", 1, 4)
    attempts = await store.attempt_list(execution.id)
    assert [(a.attempt, a.fence, a.outcome) for a in attempts] == [(1, 1, "failed"), (2, 2, "failed"), (1, 4, "succeeded")]
    (entry,) = await store.redrive_list(execution.id)
    assert (entry.fence, entry.redriven_by, entry.attempts_before) == (3, "cli:alice", 2)
    assert "billing unavailable" in entry.error_before


async def test_redriven_execution_fails_again_after_a_full_budget(make_job, make_worker, store, dead_letters) -> None:
    failing.add("ledger")
    _, execution = await make_job("test.fails_while_flagged", params={"key": "ledger"}, max_attempts=2)
    worker = make_worker()
    await run_until_idle(worker, store, execution.id)
    await dead_letters.redrive([execution.id], None, by="cli:bob")
    again = await run_until_idle(worker, store, execution.id)
    assert (again.status, again.attempt, again.redrives) == ("failed", 2, 1)
    assert len(await store.attempt_list(execution.id)) == 4  # two budgets of two attempts


async def test_the_sweeper_counts_a_lost_attempt_against_the_new_budget(make_job, make_worker, store, sweeper,
                                                                        dead_letters) -> None:  # fmt: skip
    failing.add("stock")
    _, execution = await make_job("test.fails_while_flagged", params={"key": "stock"}, max_attempts=2)
    await run_until_idle(make_worker(), store, execution.id)
    await dead_letters.redrive([execution.id], None, by="cli:carol")
    (claim,) = await store.execution_claim_many([str(execution.id)], 10.0, "worker-that-dies")
    assert (claim.attempt, claim.fence) == (1, 4)
    await store.db.execute("UPDATE executions SET lease_until = clock_timestamp() - interval '1 second' WHERE id = $1", execution.id)

    await sweeper.run_once()

    reclaimed = await store.execution_get(execution.id)
    assert (reclaimed.status, reclaimed.attempt) == ("queued", 1)  # 1 of the new 2, not 3 of 2: not failed
    assert [a.outcome for a in await store.attempt_list(execution.id)] == ["failed", "failed", "lease_expired"]


async def test_bulk_redrive_by_filter_is_tenant_scoped_and_capped(make_job, make_worker, store, config, queue) -> None:
    failing.update({"a", "b"})
    worker = make_worker()
    made = {}
    for tenant, key in [("acme", "a"), ("acme", "a"), ("acme", "b"), ("other", "a")]:
        _, execution = await make_job("test.fails_while_flagged", params={"key": key}, max_attempts=1, tenant=tenant)
        made[execution.id] = (tenant, key)
        assert (await run_until_idle(worker, store, execution.id)).status == "failed"

    capped = DeadLetters(store, queue, replace(config, jobs=replace(config.jobs, redrive_max=1)))
    first = await capped.redrive_matching("acme", FailedFilter(error="downstream a "), by="api:acme")
    assert len(first.execution_ids) == 1 and first.more
    rest = await DeadLetters(store, queue, config).redrive_matching("acme", FailedFilter(error="downstream a "), by="api:acme")
    assert len(rest.execution_ids) == 1 and not rest.more
    redriven = set(first.execution_ids + rest.execution_ids)
    assert {made[i] for i in redriven} == {("acme", "a")}
    still_failed = {r["id"] for r in await store.db.fetch("SELECT id FROM executions WHERE status = 'failed'")}
    assert still_failed == set(made) - redriven  # acme's "b" and the other tenant's "a" untouched

    with pytest.raises(ValidationError, match="at least one"):
        await capped.redrive_matching("acme", FailedFilter(), by="api:acme")


async def test_redrive_refuses_and_writes_nothing(make_job, make_worker, store, jobs, dead_letters) -> None:
    failing.add("c")
    job, failed = await make_job("test.fails_while_flagged", params={"key": "c"}, max_attempts=1, tenant="acme")
    await run_until_idle(make_worker(), store, failed.id)
    _, queued = await make_job("noop", tenant="acme")

    with pytest.raises(ValidationError, match="only failed executions"):
        await dead_letters.redrive([failed.id, queued.id], "acme", by="api:acme")
    with pytest.raises(NotFoundError):
        await dead_letters.redrive([failed.id], "other", by="api:other")
    with pytest.raises(NotFoundError):
        await dead_letters.redrive([uuid.uuid4()], None, by="cli:x")
    await jobs.pause(job.id)
    with pytest.raises(ValidationError, match="paused"):
        await dead_letters.redrive([failed.id], None, by="cli:x")
    assert (await store.execution_get(failed.id)).status == "failed"
    assert await store.redrive_list(failed.id) == []


# --- pause notes ------------------------------------------------------------------------------


async def test_pause_note_and_who_are_kept_until_resume(jobs) -> None:
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="*/5 * * * *"))
    paused, _ = await jobs.pause(job.id, note="vendor API down, INC-42", by="alice")
    assert (paused.paused_note, paused.paused_by, paused.enabled) == ("vendor API down, INC-42", "alice", False)
    assert paused.paused_at is not None
    resumed = await jobs.resume(job.id)
    assert (resumed.paused_note, resumed.paused_by, resumed.paused_at) == (None, None, None)
    with pytest.raises(ValidationError, match="note"):
        await jobs.pause(job.id, note="x" * 501)
    assert (await jobs.get(job.id)).enabled


async def test_backfill_bounds_without_offset_or_before_2000_are_refused(jobs, store) -> None:
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="0 0 1 * *"))
    with pytest.raises(ValidationError, match="UTC offset") as naive:
        await jobs.backfill(job.id, datetime(2026, 1, 1), datetime(2026, 2, 1, tzinfo=UTC))
    assert naive.value.field == "from"
    with pytest.raises(ValidationError, match="before 2000-01-01"):
        await jobs.backfill(job.id, datetime(1999, 1, 1, tzinfo=UTC), datetime(2000, 6, 1, tzinfo=UTC))


# --- steering racing a trigger or backfill --------------------------------------------------


@pytest.mark.parametrize("steer", ["delete", "pause"])
@pytest.mark.parametrize("action", ["trigger", "backfill"])
async def test_a_delete_or_pause_racing_a_trigger_or_backfill_leaves_nothing_runnable(
    jobs, store, monkeypatch, action: str, steer: str
) -> None:
    """The delete (or pause) is sent after the trigger (backfill) judged the job and before it
    wrote its rows: either the write is refused or the steering cancels what it wrote."""
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="0 * * * *"))
    await store.db.execute("UPDATE executions SET status = 'succeeded' WHERE job_id = $1", job.id)  # only the racer's rows count
    steering: list[asyncio.Task[Any]] = []
    clock_now = Store.clock_now

    async def steer_then_read_the_clock(self: Store) -> datetime:
        if not steering:  # the job is judged; its rows are not written yet
            steering.append(asyncio.create_task(getattr(jobs, steer)(job.id)))
            await asyncio.wait(steering, timeout=0.5)  # commits at once, unless the job is held
        return await clock_now(self)

    monkeypatch.setattr(Store, "clock_now", steer_then_read_the_clock)
    now = await store.db.fetchval("SELECT clock_timestamp()")
    try:
        if action == "trigger":
            await jobs.trigger(job.id)
        else:
            await jobs.backfill(job.id, now - timedelta(hours=3), now)
    except ValidationError:
        pass  # refused: it saw the job deleted or paused
    await asyncio.gather(*steering)

    runnable = await store.db.fetchval(
        "SELECT count(*) FROM executions WHERE job_id = $1 AND status IN ('pending', 'queued', 'running')", job.id
    )
    assert steering and runnable == 0
