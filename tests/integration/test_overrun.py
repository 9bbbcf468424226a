"""Overrun warnings against real Postgres: a cron job's recent durations judged against its
interval, the worker's background check (metric and log), and short runs costing nothing."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from uuid import UUID

from structlog.testing import capture_logs

from schedulerd import metrics
from schedulerd.core.ids import execution_id
from schedulerd.overrun_watch import OverrunWatch, overruns
from schedulerd.store import Store


async def add_history(store: Store, job_id: UUID, tenant: str, durations_s: list[float], every_s: float = 300.0) -> None:
    """Finished past executions of a job, newest first, each with one attempt of the given
    duration (a succeeded attempt is recorded on its execution row alone, as the worker does)."""
    now = await store.clock_now()
    for k, duration_s in enumerate(durations_s, start=1):
        scheduled_for = now - timedelta(seconds=every_s * k + 1)
        new_id = execution_id(scheduled_for)
        finished_at = scheduled_for + timedelta(seconds=duration_s)
        await store.db.execute(
            "INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status, attempt, fence, started_at, "
            "first_started_at, finished_at, worker) VALUES ($1, $2, $3, $4, $4, 'succeeded', 1, 1, $4, $4, $5, 'w')",
            new_id, job_id, tenant, scheduled_for, finished_at,
        )  # fmt: skip


def warnings_counted(task: str) -> float:
    return metrics.OVERRUN_WARNINGS.labels(task)._value.get()


async def test_a_job_whose_runs_near_its_interval_is_flagged(make_job, store, config) -> None:
    slow, _ = await make_job("sleep", cron="*/5 * * * *", params={"seconds": 1})
    quick, _ = await make_job("log", cron="*/5 * * * *")
    once, _ = await make_job("noop")
    await add_history(store, slow.id, slow.tenant, [250.0] * 12 + [120.0] * 3)
    await add_history(store, quick.id, quick.tenant, [10.0] * 19 + [290.0])  # one slow run in 20 is not the p95

    judged = await overruns(store, [slow, quick, once], config.jobs, await store.clock_now())

    assert judged[slow.id].warning and judged[slow.id].p95_s == 250.0 and judged[slow.id].interval_s == 300.0
    assert judged[slow.id].samples == 15
    assert not judged[quick.id].warning and judged[quick.id].p95_s == 10.0
    assert once.id not in judged  # a one-off job has no interval


async def test_sample_is_the_latest_attempts_only(make_job, store, config) -> None:
    job, _ = await make_job("sleep", cron="*/5 * * * *", params={"seconds": 1})
    # Newest first: 20 quick recent runs, then 20 slow old ones beyond the sample.
    await add_history(store, job.id, job.tenant, [10.0] * 20 + [280.0] * 20)
    judged = await overruns(store, [job], config.jobs, await store.clock_now())
    assert judged[job.id].samples == config.jobs.overrun_samples and not judged[job.id].warning


async def test_worker_checks_after_a_long_attempt_and_warns_in_log_and_metric(make_job, store, config) -> None:
    job, _ = await make_job("sleep", cron="*/5 * * * *", params={"seconds": 1})
    await add_history(store, job.id, job.tenant, [260.0] * 5)
    watch = OverrunWatch(store, config.jobs)
    before = warnings_counted("sleep")

    with capture_logs() as logs:
        watch.attempt_finished(job.id, 1.0)  # short: nothing is looked at
        assert not watch._tasks
        watch.attempt_finished(job.id, 260.0)
        await asyncio.gather(*watch._tasks)
        watch.attempt_finished(job.id, 260.0)  # looked at a moment ago: not again
        assert not watch._tasks

    assert warnings_counted("sleep") == before + 1
    (warning,) = [e for e in logs if e["event"] == "overrun.warning"]
    assert warning["job_id"] == str(job.id) and warning["interval_s"] == 300.0 and warning["p95_s"] == 260.0


async def test_no_warning_for_a_job_with_room_to_spare(make_job, store, config) -> None:
    job, _ = await make_job("log", cron="0 * * * *")
    await add_history(store, job.id, job.tenant, [60.0] * 5, every_s=3600.0)
    before = warnings_counted("log")
    judged = await OverrunWatch(store, config.jobs).check(job.id)
    assert judged is not None and not judged.warning and round(judged.ratio, 4) == round(60 / 3600, 4)
    assert warnings_counted("log") == before
