"""Cron jobs end to end in Postgres and Redis: materialising, misfires, smearing, job controls."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from schedulerd.core.schedule import smear_offset_s
from schedulerd.errors import NotFoundError, ValidationError
from schedulerd.jobs import Jobs, JobSpec, next_runs
from schedulerd.materialiser import Materialiser
from tests.conftest import create_job


@pytest.fixture
def jobs(store, queue, config) -> Jobs:
    return Jobs(store, queue, config)


def materialiser(store, queue, config, **overrides) -> Materialiser:  # type: ignore[no-untyped-def]
    return Materialiser(store, queue, replace(config.materialiser, **overrides), dispatch_horizon_s=config.dispatcher.horizon_s)


async def test_creating_a_cron_job_materialises_its_first_horizon(jobs, store, queue, config) -> None:
    job, executions = await create_job(jobs, JobSpec(task="noop", cron="* * * * *", timezone="Europe/London"))

    horizon_s = config.materialiser.horizon_s
    assert abs(len(executions) - horizon_s / 60) <= 1
    instants = [e.scheduled_for for e in executions]
    assert instants == sorted(instants) and all(t.second == 0 for t in instants)
    assert instants[:5] == next_runs(job, datetime.now(UTC) - timedelta(seconds=1), 5) or instants[:5] == next_runs(job, job.created_at, 5)
    queued = [e for e in executions if e.status == "queued"]
    assert queued and all(e.due_at <= datetime.now(UTC) + timedelta(seconds=config.dispatcher.horizon_s) for e in queued)
    assert await queue.missing([str(e.id) for e in queued]) == []
    saved = await store.job_get(job.id)
    assert saved.materialised_to == max(instants)


async def test_materialisers_racing_write_each_occurrence_once(jobs, store, queue, config) -> None:
    for _ in range(20):
        await create_job(jobs, JobSpec(task="noop", cron="*/5 * * * *"))
    await store.db.execute("DELETE FROM executions")
    await store.db.execute("UPDATE jobs SET materialised_to = now() - interval '1 minute'")

    first, second = materialiser(store, queue, config, batch_size=3), materialiser(store, queue, config, batch_size=3)
    results = await asyncio.gather(first.run_once(), second.run_once())

    duplicates = await store.db.fetchval(
        "SELECT count(*) FROM (SELECT 1 FROM executions GROUP BY job_id, scheduled_for HAVING count(*) > 1) d"
    )
    per_job = await store.db.fetch("SELECT job_id, count(*) FROM executions GROUP BY job_id")
    assert duplicates == 0
    assert len(per_job) == 20 and len({r["count"] for r in per_job}) == 1
    assert sum(r.written for r in results) == sum(r["count"] for r in per_job)
    assert await first.run_once() == (await first.run_once())  # nothing left to do: idempotent


async def test_a_job_first_materialised_late_still_gets_the_occurrences_since_it_was_created(store, queue, config) -> None:
    """A job whose cursor was never set (inserted by SQL, or the materialiser was busy) owes every
    occurrence since its creation: written late, they are judged by its misfire policy, not dropped."""
    job, _ = await create_job(Jobs(store, queue, config), JobSpec(task="noop", cron="* * * * *", misfire_policy="catch_up"))
    await store.db.execute("DELETE FROM executions")
    await store.db.execute(
        "UPDATE jobs SET materialised_to = NULL, created_at = date_trunc('minute', now()) - interval '4 minutes 30 seconds'"
    )

    await materialiser(store, queue, config).run_once()

    owed = await store.db.fetchval(
        "SELECT count(*) FROM executions WHERE job_id = $1 AND scheduled_for <= now()", job.id
    )
    assert owed >= 4  # the minutes since creation, none silently skipped


async def test_each_misfire_policy_after_the_materialiser_was_down(jobs, store, queue, config) -> None:
    made = {}
    for policy in ("skip", "run_once", "catch_up"):
        job, _ = await create_job(jobs, JobSpec(task="noop", cron="* * * * *", misfire_policy=policy, catch_up_limit=3))
        made[policy] = job
    # The whole fleet was down for ten minutes, longer than the (shortened) horizon.
    await store.db.execute("DELETE FROM executions")
    await store.db.execute("UPDATE jobs SET materialised_to = date_trunc('minute', now()) - interval '10 minutes'")

    result = await materialiser(store, queue, config).run_once()

    def count(rows, **where):  # type: ignore[no-untyped-def]
        return sum(all(r[k] == v for k, v in where.items()) for r in rows)

    for policy, job in made.items():
        rows = await store.db.fetch(
            "SELECT status, reason FROM executions WHERE job_id = $1 AND scheduled_for < now() - interval '60 seconds'", job.id
        )
        late, skipped = count(rows, reason="late_replay"), count(rows, status="skipped", reason="misfire_skip")
        assert late + skipped == len(rows) >= 8, policy
        assert late == {"skip": 0, "run_once": 1, "catch_up": 3}[policy], policy
    assert result.replayed == 4
    replays = await store.db.fetch("SELECT id, due_at FROM executions WHERE reason = 'late_replay' ORDER BY due_at")
    spread = (replays[-1]["due_at"] - replays[0]["due_at"]).total_seconds()
    assert spread == pytest.approx(3 / config.materialiser.replay_per_s, abs=0.05)  # rate-limited
    assert await queue.missing([str(r["id"]) for r in replays]) == []


async def test_missed_rows_are_judged_when_the_scheduler_was_down_inside_the_horizon(jobs, store, queue, config) -> None:
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="* * * * *", misfire_policy="run_once"))
    # Rows were written ahead, then nobody ran them: pretend they fell due over the last 5 minutes
    # (an id carries its scheduled_for, so it moves too).
    await store.db.execute(
        "UPDATE executions SET id = schedulerd_execution_id(scheduled_for - interval '6 minutes'),"
        " scheduled_for = scheduled_for - interval '6 minutes', due_at = due_at - interval '6 minutes'"
    )

    result = await materialiser(store, queue, config).run_once()

    assert result.replayed == 1 and result.skipped >= 4
    statuses = await store.db.fetch(
        "SELECT status, count(*) FROM executions WHERE due_at < now() - interval '60 seconds' GROUP BY status"
    )
    assert {r["status"] for r in statuses} == {"skipped"}  # the late one was moved to now


async def test_smearing_shifts_every_run_by_one_stable_offset(jobs, store) -> None:
    job, executions = await create_job(jobs, JobSpec(task="noop", cron="0 * * * *", window_s=300))
    offset = timedelta(seconds=smear_offset_s(str(job.id), 300))
    assert {e.due_at - e.scheduled_for for e in executions} == {offset}
    assert all(e.scheduled_for.minute == 0 for e in executions)
    assert next_runs(job, job.created_at, 3) == [e.due_at for e in executions[:3]]


async def test_pause_resume_delete_and_trigger(jobs, store, queue, make_worker) -> None:
    job, executions = await create_job(jobs, JobSpec(task="noop", cron="*/10 * * * *"))
    paused, cancelled = await jobs.pause(job.id)
    assert not paused.enabled and cancelled == len(executions)
    assert await store.db.fetchval("SELECT count(*) FROM executions WHERE status <> 'cancelled'") == 0

    resumed = await jobs.resume(job.id)
    assert resumed.enabled
    live = await store.db.fetchval("SELECT count(*) FROM executions WHERE status IN ('pending', 'queued')")
    assert abs(live - len(executions)) <= 1

    triggered = await jobs.trigger(job.id)
    assert triggered.status == "queued" and triggered.scheduled_for <= datetime.now(UTC)
    worker = make_worker()
    assert await worker.run_once() == 1

    deleted, cancelled = await jobs.delete(job.id)
    assert deleted.deleted_at is not None and cancelled == live
    with pytest.raises(NotFoundError):
        await jobs.pause(job.id)
    assert (await store.job_get(job.id)).deleted_at is not None  # history stays


async def test_one_tenant_cannot_steer_another_tenants_job(jobs) -> None:
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="@hourly", tenant="team-a"))
    for action in (jobs.get, jobs.pause, jobs.resume, jobs.delete, jobs.trigger):
        with pytest.raises(NotFoundError, match="not found"):
            await action(job.id, tenant="team-b")


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        (JobSpec(task="noop", cron="61 * * * *"), "cron", "out of range 0-59"),
        (JobSpec(task="noop", cron="*/0 * * * *"), "cron", "step must be at least 1"),
        (JobSpec(task="noop", cron="0 0 31 2 *"), "cron", "never fires"),
        (JobSpec(task="noop", cron="* * * *"), "cron", "expected 5 fields"),
        (JobSpec(task="noop", cron="@hourly", timezone="Mars/Olympus"), "timezone", "unknown time zone"),
        (JobSpec(task="noop", cron="@hourly", timezone="+02:00"), "timezone", "UTC offset"),
        (JobSpec(task="noop", cron="@hourly", timezone="../../etc/passwd"), "timezone", "not an IANA zone"),
        (JobSpec(task="noop", cron="@hourly", misfire_policy="sometimes"), "misfire_policy", "one of"),
        (JobSpec(task="noop", cron="@hourly", window_s=90000), "window", "between 0 and 24 h"),
        (JobSpec(task="noop", cron="@hourly", run_at=datetime(2030, 1, 1, tzinfo=UTC)), "run_at", "not both"),
    ],
)
async def test_bad_cron_jobs_are_refused_and_write_nothing(jobs, store, spec, field, message) -> None:
    with pytest.raises(ValidationError, match=message) as raised:
        await create_job(jobs, spec)
    assert raised.value.field == field
    assert await store.db.fetchval("SELECT count(*) FROM jobs") == 0
    assert await store.db.fetchval("SELECT count(*) FROM executions") == 0


@pytest.mark.parametrize(("policy", "runs"), [("run_once", 1), ("catch_up", 2)])
async def test_a_policy_runs_what_it_keeps_when_one_jobs_missed_rows_exceed_the_batch(
    jobs, store, queue, config, policy: str, runs: int
) -> None:
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="* * * * *", misfire_policy=policy, catch_up_limit=2))
    await store.db.execute("DELETE FROM executions")
    await store.db.execute("UPDATE jobs SET materialised_to = date_trunc('minute', now()) - interval '10 minutes'")
    small = materialiser(store, queue, config, misfire_batch_size=3)  # about ten missed rows, judged 3 at a time

    for _ in range(8):
        await small.run_once()

    rows = await store.db.fetch(
        "SELECT scheduled_for, status, reason FROM executions WHERE job_id = $1 AND scheduled_for < now() - interval '60 seconds'"
        " ORDER BY scheduled_for", job.id,
    )  # fmt: skip
    assert len(rows) >= 8 and all(r["reason"] in ("late_replay", "misfire_skip") for r in rows)
    assert [r["reason"] for r in rows[-runs:]] == ["late_replay"] * runs  # the latest ones, and no others
    assert sum(r["reason"] == "late_replay" for r in rows) == runs
