"""Bounded schedules (start_at, end_at, max_runs) reaching `done` in Postgres, and finding jobs:
the list filters (name prefix, task, kind, state, label selector) with keyset paging, one tenant
never seeing another's."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from schedulerd.errors import ValidationError
from schedulerd.jobs import Jobs, JobSpec, job_filter, job_state, next_runs
from schedulerd.materialiser import Materialiser
from tests.conftest import create_job


@pytest.fixture
def jobs(store, queue, config) -> Jobs:  # type: ignore[no-untyped-def]
    return Jobs(store, queue, config)


def materialiser(store, queue, config, **overrides) -> Materialiser:  # type: ignore[no-untyped-def]
    return Materialiser(store, queue, replace(config.materialiser, **overrides), dispatch_horizon_s=config.dispatcher.horizon_s)


async def _written(store, job_id) -> list[datetime]:  # type: ignore[no-untyped-def]
    rows = await store.db.fetch("SELECT scheduled_for FROM executions WHERE job_id = $1 AND origin = 'scheduled' "
                                "ORDER BY scheduled_for", job_id)  # fmt: skip
    return [r["scheduled_for"] for r in rows]


async def test_max_runs_writes_that_many_then_the_job_is_done_and_never_written_again(jobs, store, queue, config) -> None:
    job, executions = await create_job(jobs, JobSpec(task="noop", cron="* * * * *", max_runs=3, labels={"team": "billing"}))

    assert len(executions) == 3
    saved = await store.job_get(job.id)
    assert saved.runs_written == 3 and saved.done_at is not None and saved.labels == {"team": "billing"}
    assert job_state(saved) == "done"
    assert next_runs(saved, datetime.now(UTC) - timedelta(minutes=1), 10) == sorted(e.due_at for e in executions)

    # Retention (or anyone) dropping its rows does not let it run again.
    await store.db.execute("DELETE FROM executions WHERE job_id = $1", job.id)
    await store.db.execute("UPDATE jobs SET materialised_to = now() - interval '10 minutes' WHERE id = $1", job.id)
    await materialiser(store, queue, config).run_once()
    assert await _written(store, job.id) == []
    assert (await store.job_get(job.id)).runs_written == 3


async def test_max_runs_is_counted_across_passes(jobs, store, queue, config) -> None:
    job, executions = await create_job(jobs, JobSpec(task="noop", cron="*/30 * * * *", max_runs=20))
    first = len(executions)
    assert 11 <= first <= 13  # six hours ahead
    saved = await store.job_get(job.id)
    assert saved.runs_written == first and saved.done_at is None and job_state(saved) == "enabled"

    await materialiser(store, queue, config, horizon_s=86400.0).run_once()

    written = await _written(store, job.id)
    saved = await store.job_get(job.id)
    assert len(written) == 20 == saved.runs_written and saved.done_at is not None
    assert saved.materialised_to == written[-1]
    await materialiser(store, queue, config, horizon_s=7 * 86400.0).run_once()
    assert len(await _written(store, job.id)) == 20


async def test_start_at_and_end_at_bound_the_written_occurrences(jobs, store, queue, config) -> None:
    now = await store.clock_now()
    start, end = now + timedelta(minutes=30), now + timedelta(minutes=90)
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="*/10 * * * *", start_at=start, end_at=end))

    written = await _written(store, job.id)
    assert written and all(start <= t < end for t in written) and len(written) == 6
    saved = await store.job_get(job.id)
    assert saved.done_at is not None and saved.runs_written == 6
    assert next_runs(saved, now, 20) == written  # the view's next runs: the bounded ones


async def test_a_job_whose_end_is_beyond_the_horizon_is_not_done_yet(jobs, store, queue, config) -> None:
    now = await store.clock_now()
    job, executions = await create_job(jobs, JobSpec(task="noop", cron="0 * * * *", end_at=now + timedelta(hours=30)))
    saved = await store.job_get(job.id)
    assert saved.done_at is None and len(executions) == saved.runs_written
    await materialiser(store, queue, config, horizon_s=2 * 86400.0).run_once()
    saved = await store.job_get(job.id)
    assert saved.done_at is not None
    assert all(t < now + timedelta(hours=30) for t in await _written(store, job.id))


@pytest.mark.parametrize(("spec", "field"), [
    (JobSpec(task="noop", max_runs=3), "max_runs"),
    (JobSpec(task="noop", end_at=datetime(2030, 1, 1, tzinfo=UTC)), "end_at"),
    (JobSpec(task="noop", cron="* * * * *", max_runs=0), "max_runs"),
    (JobSpec(task="noop", cron="* * * * *", start_at=datetime(2030, 1, 2, tzinfo=UTC),
             end_at=datetime(2030, 1, 1, tzinfo=UTC)), "end_at"),
    (JobSpec(task="noop", cron="* * * * *", labels={"bad key": "x"}), "labels"),
])  # fmt: skip
async def test_bad_bounds_and_labels_are_refused_naming_the_field(jobs, store, spec, field) -> None:
    with pytest.raises(ValidationError) as refused:
        await create_job(jobs, spec)
    assert refused.value.field == field
    assert await store.db.fetchval("SELECT count(*) FROM jobs") == 0


async def test_a_finished_one_off_is_done_and_hidden_by_default(jobs, store, queue, config) -> None:
    job, (execution,) = await create_job(jobs, JobSpec(task="noop", name="hello"))
    assert await store.job_settled_many([job.id]) == set()
    await store.db.execute("UPDATE executions SET status = 'succeeded', finished_at = now() WHERE id = $1", execution.id)
    assert await store.job_settled_many([job.id]) == {job.id}
    assert job_state(await store.job_get(job.id), settled=True) == "done"

    listed = await store.job_page("default", deleted=False, after=None, limit=10, find=job_filter())
    assert listed == []
    listed = await store.job_page("default", deleted=False, after=None, limit=10, find=job_filter(state="done"))
    assert [j.id for j in listed] == [job.id]


async def test_list_filters_and_keyset_paging_within_one_tenant(jobs, store, queue, config) -> None:
    made = {}
    for i in range(7):
        spec = JobSpec(task="noop", tenant="acme", name=f"report-{i}", cron="0 3 * * *" if i % 2 else None,
                       run_at=None if i % 2 else datetime.now(UTC) + timedelta(days=1),
                       labels={"team": "billing" if i < 4 else "ops", "env": "prod"})  # fmt: skip
        made[i] = (await create_job(jobs, spec))[0]
    other, _ = await create_job(jobs, JobSpec(task="noop", tenant="rival", name="report-x", labels={"team": "billing"}))
    await create_job(jobs, JobSpec(task="noop", tenant="acme", name="report_%", labels={"team": "x"}))

    async def ids(**given) -> list:  # type: ignore[no-untyped-def]
        listed = await store.job_page("acme", deleted=False, after=None, limit=100, find=job_filter(**given))
        return [j.id for j in listed]

    newest_first = [made[i].id for i in reversed(range(7))]
    assert await ids(name="report-") == newest_first
    assert await ids(name="report_") == [j for j in await ids() if j not in newest_first]  # "_" is no wildcard
    assert await ids(kind="cron") == [made[i].id for i in (5, 3, 1)]
    assert await ids(kind="one-off", name="report-") == [made[i].id for i in (6, 4, 2, 0)]
    assert await ids(label="team=billing,env=prod") == [made[i].id for i in (3, 2, 1, 0)]
    assert await ids(label="team=billing", kind="cron") == [made[i].id for i in (3, 1)]
    assert other.id not in await ids(label="team=billing")

    await jobs.pause(made[5].id)
    assert await ids(state="paused") == [made[5].id]
    assert made[5].id not in await ids(state="enabled")

    pages, after = [], None
    while True:
        page = await store.job_page("acme", deleted=False, after=after, limit=3, find=job_filter(name="report-"))
        pages.append([j.id for j in page])
        if len(page) < 3:
            break
        after = (page[-1].created_at, page[-1].id)
    assert [j for p in pages for j in p] == newest_first

    with pytest.raises(ValidationError) as refused:
        job_filter(state="finished")
    assert refused.value.field == "state"
    with pytest.raises(ValidationError) as refused:
        job_filter(label="team")
    assert refused.value.field == "label"


async def test_the_client_takes_labels_and_bounds(store, queue, config) -> None:  # type: ignore[no-untyped-def]
    from schedulerd.client import Client
    from schedulerd.intake import Refused

    client = Client(store, queue, config, owned=False)
    done = await client.enqueue("noop", cron="*/5 * * * *", labels={"team": "billing"}, max_runs=4,
                                start_at="2030-01-01T00:00:00Z", end_at=datetime(2030, 1, 2, tzinfo=UTC))  # fmt: skip
    job = await store.job_get(done.job_id)
    assert (job.labels, job.max_runs, job.start_at, job.end_at) == (
        {"team": "billing"}, 4, datetime(2030, 1, 1, tzinfo=UTC), datetime(2030, 1, 2, tzinfo=UTC))
    assert done.executions == () and job.runs_written == 0 and job.done_at is None  # nothing before start_at
    with pytest.raises(ValidationError) as refused:
        await client.enqueue("noop", max_runs=2)
    assert refused.value.field == "max_runs"
    with pytest.raises(ValidationError) as refused:
        await client.enqueue("noop", cron="@hourly", start_at="tomorrow")
    assert refused.value.field == "start_at"
    (result,) = await client.enqueue_many([{"task": "noop", "labels": "team=billing"}])
    assert isinstance(result, Refused) and result.field == "labels"
