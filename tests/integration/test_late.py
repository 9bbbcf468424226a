"""Late and missed occurrences on real Postgres and Redis: every occurrence that did not start
within its grace gets a late reason (misfire judge, parks, late claims, pause), counted once in
schedulerd_late_occurrences_total, listed by LateRuns.list and explained by LateRuns.why."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
from prometheus_client import REGISTRY

from schedulerd.config import Config
from schedulerd.jobs import Jobs, JobSpec
from schedulerd.late_runs import LateRuns
from schedulerd.materialiser import Materialiser
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from schedulerd.worker import Worker
from tests.conftest import create_job
from tests.integration.conftest import run_until_idle, settle


def late_count(reason: str) -> float:
    return REGISTRY.get_sample_value("schedulerd_late_occurrences_total", {"reason": reason}) or 0.0


@pytest.fixture
async def no_replicas(store: Store) -> Store:
    """The replicas table is the fleet's heartbeat record: start each test from an empty one."""
    await store.db.execute("DELETE FROM replicas")
    return store


async def report_replica(store: Store, worker_id: str, started_ago_s: float, seen_ago_s: float,
                         roles: tuple[str, ...] = ("worker",)) -> None:  # fmt: skip
    """A replica row as the observer writes it, placed in the past."""
    await store.db.execute(
        "INSERT INTO replicas (worker_id, hostname, pid, roles, version, started_at, last_seen_at) "
        "VALUES ($1, 'host', 1, $2, 'test', now() - make_interval(secs => $3), now() - make_interval(secs => $4))",
        worker_id, list(roles), started_ago_s, seen_ago_s,
    )  # fmt: skip


async def fell_due_minutes_ago(store: Store, job_id: UUID, minutes: int) -> None:
    """Rows were written ahead, then nobody ran them: move them `minutes` into the past (an id
    carries its scheduled_for, so it moves too)."""
    await store.db.execute(
        "UPDATE executions SET id = schedulerd_execution_id(scheduled_for - make_interval(mins => $2)), "
        "scheduled_for = scheduled_for - make_interval(mins => $2), "
        "due_at = due_at - make_interval(mins => $2) WHERE job_id = $1", job_id, minutes,
    )  # fmt: skip


def materialiser(store: Store, queue: DelayQueue, config: Config) -> Materialiser:
    return Materialiser(store, queue, config.materialiser, dispatch_horizon_s=config.dispatcher.horizon_s,
                        late_config=config.late)  # fmt: skip


async def late_rows(store: Store, job_id: UUID) -> list[Any]:
    return await store.db.fetch(
        "SELECT status, reason, late_reason FROM executions WHERE job_id = $1 AND late_reason IS NOT NULL "
        "ORDER BY scheduled_for", job_id,
    )  # fmt: skip


async def test_occurrences_missed_while_no_replica_ran_are_scheduler_down(no_replicas, queue, config) -> None:
    store = no_replicas
    job, _ = await create_job(Jobs(store, queue, config), JobSpec(task="noop", cron="* * * * *", misfire_policy="run_once"))
    await fell_due_minutes_ago(store, job.id, 6)
    before = late_count("scheduler_down")

    result = await materialiser(store, queue, config).run_once()

    rows = await late_rows(store, job.id)
    assert result.replayed == 1 and result.skipped >= 4
    assert {r["late_reason"] for r in rows} == {"scheduler_down"}
    assert sorted({(r["status"], r["reason"]) for r in rows}) == [("queued", "late_replay"), ("skipped", "misfire_skip")]
    assert late_count("scheduler_down") == before + len(rows) == before + result.replayed + result.skipped


async def test_missed_while_replicas_ran_is_misfire_skip_or_backlog_and_a_heartbeat_gap_is_down(
    no_replicas, queue, config
) -> None:
    store = no_replicas
    jobs = Jobs(store, queue, config)
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="* * * * *", misfire_policy="catch_up", catch_up_limit=2))
    await fell_due_minutes_ago(store, job.id, 10)
    # Replica a ran until 8 minutes ago and went silent; b started 4 minutes ago and is alive.
    await report_replica(store, "a", started_ago_s=3600, seen_ago_s=8 * 60)
    await report_replica(store, "b", started_ago_s=4 * 60, seen_ago_s=1)
    await report_replica(store, "c-no-worker-role", started_ago_s=3600, seen_ago_s=1, roles=("materialiser",))

    await materialiser(store, queue, config).run_once()

    rows = await store.db.fetch(
        "SELECT extract(epoch FROM now() - scheduled_for) AS ago_s, status, late_reason FROM executions "
        "WHERE job_id = $1 AND late_reason IS NOT NULL ORDER BY scheduled_for", job.id,
    )  # fmt: skip
    down_after_s = config.late.down_after_s
    for row in rows:
        ago_s = float(row["ago_s"])
        if 4 * 60 < ago_s < 8 * 60 - down_after_s:  # between a's silence and b's start: nobody ran
            assert row["late_reason"] == "scheduler_down", row
        elif ago_s < 4 * 60 - 1:  # b was running: the fleet was up, only behind
            assert row["late_reason"] == ("backlog" if row["status"] == "queued" else "misfire_skip"), row
    assert [r["late_reason"] for r in rows if r["status"] == "queued"] == ["backlog", "backlog"]  # the latest two run
    assert any(r["late_reason"] == "scheduler_down" for r in rows)


def worker(store: Store, queue: DelayQueue, config: Config, **overrides: Any) -> Worker:
    grace_s = overrides.pop("late_grace_s", config.materialiser.misfire_grace_s)
    return Worker(store, queue, replace(config.worker, **overrides), "late-worker", horizon_s=config.dispatcher.horizon_s,
                  late_grace_s=grace_s, late_config=config.late)  # fmt: skip


async def test_a_park_past_the_grace_is_tenant_cap_and_counted_once(no_replicas, queue, config, make_job) -> None:
    store = no_replicas
    _, first = await make_job("sleep", params={"seconds": 0.3})
    _, second = await make_job("sleep", params={"seconds": 0.3})
    capped = worker(store, queue, config, task_concurrency={"sleep": 1}, defer_s=2.0, late_grace_s=0.5)
    before = late_count("tenant_cap")

    assert await capped.run_once() == 1  # one runs; the other is parked for 1-2 s, past its 0.5 s grace
    (parked,) = [e for e in (await store.execution_get(first.id), await store.execution_get(second.id)) if e.attempt == 0]
    assert parked.reason == "task_limit" and parked.late_reason == "tenant_cap"
    assert late_count("tenant_cap") == before + 1

    await settle(capped)
    done = await run_until_idle(capped, store, parked.id)
    assert done.status == "succeeded" and done.late_reason == "tenant_cap"
    assert late_count("tenant_cap") == before + 1  # parked and then started late: still one late occurrence


async def test_a_park_within_the_grace_records_nothing(no_replicas, queue, config, make_job) -> None:
    store = no_replicas
    await make_job("sleep", params={"seconds": 0.2})
    await make_job("sleep", params={"seconds": 0.2})
    capped = worker(store, queue, config, task_concurrency={"sleep": 1}, defer_s=0.2)  # grace 60 s

    await capped.run_once()
    await settle(capped)

    assert await store.db.fetchval("SELECT count(*) FROM executions WHERE late_reason IS NOT NULL") == 0


@pytest.mark.parametrize("replica_up, expected", [(False, "scheduler_down"), (True, "backlog")])
async def test_a_first_attempt_claimed_past_its_grace_records_why(
    no_replicas, queue, config, make_job, replica_up, expected
) -> None:
    store = no_replicas
    _, execution = await make_job("noop", run_at=datetime.now(UTC) - timedelta(minutes=2))  # due 2 minutes ago
    if replica_up:
        await report_replica(store, "up", started_ago_s=600, seen_ago_s=1)
    before = late_count(expected)
    on_time = late_count("scheduler_down" if replica_up else "backlog")

    done = await run_until_idle(worker(store, queue, config), store, execution.id)

    assert done.status == "succeeded" and done.late_reason == expected
    assert late_count(expected) == before + 1
    assert late_count("scheduler_down" if replica_up else "backlog") == on_time


async def test_on_time_claims_record_nothing(no_replicas, queue, config, make_job) -> None:
    store = no_replicas
    _, execution = await make_job("noop")
    done = await run_until_idle(worker(store, queue, config), store, execution.id)
    assert done.status == "succeeded" and done.late_reason is None


async def test_pause_marks_paused_resume_clears_the_future_and_counts_the_stretch(no_replicas, queue, config) -> None:
    store = no_replicas
    jobs = Jobs(store, queue, config)
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="* * * * *"))
    await fell_due_minutes_ago(store, job.id, 10)  # ten occurrences fell due, unrun, before the pause
    await jobs.pause(job.id)
    assert await store.db.fetchval(
        "SELECT count(*) FROM executions WHERE job_id = $1 AND late_reason IS DISTINCT FROM 'paused'", job.id
    ) == 0
    await store.db.execute("UPDATE jobs SET updated_at = now() - interval '10 minutes' WHERE id = $1", job.id)
    before = late_count("paused")

    await jobs.resume(job.id)

    assert late_count("paused") == before + 10  # one per minute of the paused stretch
    future = await store.db.fetch("SELECT late_reason, status FROM executions WHERE job_id = $1 AND scheduled_for > now()", job.id)
    assert future and all(r["late_reason"] is None and r["status"] in ("pending", "queued") for r in future)
    listed = await LateRuns(store, config).list(since=datetime.now(UTC) - timedelta(hours=1), job_id=job.id, limit=100)
    assert len(listed) >= 8 and {x.why for x in listed} == {"paused"}
    assert all(x.execution.status == "cancelled" for x in listed)


async def test_the_late_list_filters_and_shows_occurrences_still_waiting(no_replicas, queue, config, make_job) -> None:
    store = no_replicas
    five_minutes_ago = datetime.now(UTC) - timedelta(minutes=5)
    ours, waiting = await make_job("noop", tenant="acme", run_at=five_minutes_ago)
    theirs, other = await make_job("noop", tenant="globex", run_at=five_minutes_ago)
    _, on_time = await make_job("noop", tenant="acme")
    await store.db.execute("UPDATE executions SET late_reason = 'breaker_open', reason = 'breaker_open', "
                           "due_at = now() + interval '1 minute' WHERE id = $1", other.id)  # fmt: skip
    runs = LateRuns(store, config)
    an_hour_ago = datetime.now(UTC) - timedelta(hours=1)

    everything = await runs.list(since=an_hour_ago)
    acme = await runs.list(since=an_hour_ago, tenant="acme")
    by_reason = await runs.list(since=an_hour_ago, reason="breaker_open")
    by_job = await runs.list(since=an_hour_ago, job_id=theirs.id)
    recent_only = await runs.list(since=datetime.now(UTC) - timedelta(minutes=1))

    assert {(x.execution.id, x.why) for x in everything} == {(waiting.id, "scheduler_down"), (other.id, "breaker_open")}
    assert [x.execution.id for x in acme] == [waiting.id]  # another tenant's late run is not listed
    assert [x.execution.id for x in by_reason] == [other.id] == [x.execution.id for x in by_job]
    assert recent_only == []
    assert on_time.id not in {x.execution.id for x in everything}
    assert ours.id == waiting.job_id


async def test_why_explains_a_skipped_occurrence_a_late_run_and_an_on_time_run(no_replicas, queue, config, make_job) -> None:
    store = no_replicas
    jobs = Jobs(store, queue, config)
    runs = LateRuns(store, config)
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="*/10 * * * *", misfire_policy="skip"))
    await fell_due_minutes_ago(store, job.id, 60)
    await materialiser(store, queue, config).run_once()
    skipped = await store.db.fetchrow(
        "SELECT * FROM executions WHERE job_id = $1 AND status = 'skipped' ORDER BY scheduled_for LIMIT 1", job.id
    )

    answer = await runs.why(await store.job_get(job.id), skipped["scheduled_for"] + timedelta(minutes=3))

    assert answer.scheduled_for == skipped["scheduled_for"] and answer.execution is not None
    assert answer.execution.id == skipped["id"] and answer.late_reason == "scheduler_down"
    assert "did not run: skipped (reason misfire_skip)" in answer.answer and "no scheduler replica" in answer.answer

    one_off, execution = await make_job("noop")
    await store.db.execute("UPDATE executions SET due_at = now() - interval '2 minutes' WHERE id = $1", execution.id)
    await run_until_idle(worker(store, queue, config), store, execution.id)
    late_answer = await runs.why(one_off, execution.scheduled_for)
    assert late_answer.late_reason == "scheduler_down" and late_answer.answer.startswith("it ran late")

    on_time_job, on_time = await make_job("noop")
    await run_until_idle(worker(store, queue, config), store, on_time.id)
    on_time_answer = await runs.why(on_time_job, on_time.scheduled_for + timedelta(seconds=30))
    assert on_time_answer.late_reason is None and on_time_answer.answer.startswith("it ran:")


async def test_why_says_when_nothing_was_scheduled_or_written(no_replicas, queue, config) -> None:
    store = no_replicas
    jobs = Jobs(store, queue, config)
    runs = LateRuns(store, config)
    yearly, _ = await create_job(jobs, JobSpec(task="noop", cron="0 0 1 1 *"))
    mid_year = datetime(2026, 6, 15, 2, 0, tzinfo=UTC)
    assert (await runs.why(yearly, mid_year)).scheduled_for is None
    assert "no occurrence was scheduled within a day" in (await runs.why(yearly, mid_year)).answer

    hourly, _ = await create_job(jobs, JobSpec(task="noop", cron="0 * * * *"))
    before_creation = await runs.why(hourly, hourly.created_at - timedelta(hours=3))
    assert before_creation.execution is None and "did not exist yet" in before_creation.answer

    await jobs.pause(hourly.id)
    await store.db.execute("UPDATE jobs SET updated_at = now() - interval '30 hours', created_at = now() - interval '40 hours' "
                           "WHERE id = $1", hourly.id)  # fmt: skip
    paused = await runs.why(await store.job_get(hourly.id), datetime.now(UTC) - timedelta(hours=20))
    assert paused.execution is None and paused.late_reason == "paused" and "was paused" in paused.answer
