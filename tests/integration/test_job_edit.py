"""Editing a job in place (Jobs.update): one transaction that cancels the unstarted occurrences
the new spec does not produce, keeps those it produces at the same UTC instant (ids stable),
writes the new ones with the new version, and answers the diff of the next runs. The running
execution finishes as it started; racing the materialiser, a claim or a pause serialises."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from schedulerd.errors import ConflictError, NotFoundError, StaleVersionError, ValidationError
from schedulerd.intake import EditKey
from schedulerd.jobs import Edit, Jobs, JobSpec
from schedulerd.materialiser import Materialiser
from schedulerd.models import ExecutionStatus
from schedulerd.store import Store
from schedulerd.tasks.registry import TaskContext, task
from tests.conftest import create_job
from tests.integration.conftest import settle

seen: list[tuple[UUID, dict[str, Any]]] = []
release = asyncio.Event()


@task("test.edit_probe")
async def edit_probe(ctx: TaskContext, params: dict[str, Any]) -> None:
    seen.append((ctx.execution_id, params))
    if params.get("wait"):
        await release.wait()


@pytest.fixture(autouse=True)
def _fresh() -> None:
    seen.clear()
    release.clear()


@pytest.fixture
def jobs(store, queue, config) -> Jobs:
    return Jobs(store, queue, config)


async def _rows(store: Store, job_id: UUID) -> list[Any]:
    return await store.db.fetch(
        "SELECT id, scheduled_for, status, reason, job_version, due_at FROM executions WHERE job_id = $1 ORDER BY scheduled_for",
        job_id,
    )


async def _snapshot(store: Store) -> tuple[list[Any], list[Any]]:
    return (await store.db.fetch("SELECT * FROM jobs ORDER BY id"),
            await store.db.fetch("SELECT * FROM executions ORDER BY id"))  # fmt: skip


async def test_an_edit_keeps_cancels_and_writes_occurrences_by_utc_instant(jobs, store, queue) -> None:
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="*/10 * * * *", params={"v": 1}))
    before = {r["scheduled_for"]: r for r in await _rows(store, job.id)}
    edit = await jobs.update(job.id, {"cron": "*/20 * * * *", "params": {"v": 2}})
    assert edit.job.version == 2 and edit.job.params == {"v": 2} and edit.job.cron == "*/20 * * * *"
    after = await _rows(store, job.id)
    live = [r for r in after if r["status"] in ("pending", "queued")]
    cancelled = [r for r in after if r["status"] == "cancelled"]
    assert live and cancelled and all(r["reason"] == "edited" for r in cancelled)
    assert all(r["scheduled_for"].minute % 20 == 0 for r in live)
    assert all(r["scheduled_for"].minute % 20 != 0 for r in cancelled)
    # kept rows keep their ids, and take the new version
    assert all(before[r["scheduled_for"]]["id"] == r["id"] and r["job_version"] == 2 for r in live)
    assert edit.cancelled == len(cancelled) and edit.written == 0
    assert [r.at.minute % 20 for r in edit.kept] == [0] * len(edit.kept) and edit.removed and not edit.added
    # the removed ones stay in Redis, but a claim never starts a cancelled row
    claimed = await store.execution_claim_many([r["id"] for r in cancelled], 30.0, "w")
    assert claimed == []


async def test_an_edit_across_the_march_change_shows_the_labelled_diff(jobs) -> None:
    # 01:30 does not exist in London on 2027-03-28 (01:00 GMT -> 02:00 BST): the old run shifts to 02:00.
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="30 1 25-31 3 *", timezone="Europe/London"))
    edit = await jobs.update(job.id, {"cron": "30 2 25-31 3 *"}, dry_run=True)
    removed = {r.at: r.labels for r in edit.removed}
    added = {r.at: r.labels for r in edit.added}
    assert removed[datetime(2027, 3, 28, 1, 0, tzinfo=UTC)] == ("dst_shifted",)
    assert added[datetime(2027, 3, 28, 1, 30, tzinfo=UTC)] == ()  # 02:30 BST exists
    assert added[datetime(2027, 3, 25, 2, 30, tzinfo=UTC)] == ()  # 02:30 GMT
    assert datetime(2027, 3, 29, 0, 30, tzinfo=UTC) in removed  # 01:30 BST


async def test_a_dry_run_and_an_invalid_edit_write_nothing(jobs, store) -> None:
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="*/10 * * * *"))
    snapshot = await _snapshot(store)
    planned = await jobs.update(job.id, {"cron": "*/20 * * * *"}, dry_run=True)
    assert planned.dry_run and planned.cancelled > 0 and planned.job.version == 2
    assert await _snapshot(store) == snapshot
    for changes, field in [({"cron": "not a cron"}, "cron"), ({"timezone": "Mars/Olympus"}, "timezone"),
                           ({"task": "other"}, "task"), ({"run_at": datetime.now(UTC)}, "run_at"),
                           ({"max_attempts": 0}, "max_attempts"), ({"delay_s": 5.0}, "delay_s"), ({}, "changes"),
                           ({"labels": {"bad key": "x"}}, "labels")]:  # fmt: skip
        with pytest.raises(ValidationError) as refused:
            await jobs.update(job.id, changes)
        assert refused.value.field == field
    assert await _snapshot(store) == snapshot


async def test_a_one_off_moves_to_its_new_instant(jobs, store, make_job) -> None:
    at = datetime.now(UTC) + timedelta(hours=1)
    job, first = await make_job(run_at=at)
    with pytest.raises(ValidationError, match="cron"):
        await jobs.update(job.id, {"cron": "* * * * *"})
    edit = await jobs.update(job.id, {"run_at": at + timedelta(hours=1)})
    rows = await _rows(store, job.id)
    assert [(r["id"] == first.id, r["status"], r["reason"]) for r in rows] == [(True, "cancelled", "edited"),
                                                                              (False, "pending", None)]  # fmt: skip
    assert rows[1]["job_version"] == 2 and edit.written == 1


async def test_params_apply_to_kept_occurrences_and_the_running_one_finishes_as_it_started(
    jobs, store, queue, make_worker
) -> None:
    job, first = await create_job(jobs, JobSpec(task="test.edit_probe", params={"wait": True, "v": 1}))
    worker = make_worker()
    await worker.run_once()
    for _ in range(100):
        if seen:
            break
        await asyncio.sleep(0.02)
    assert seen == [(first[0].id, {"wait": True, "v": 1})]
    edit = await jobs.update(job.id, {"params": {"v": 2}})
    assert edit.cancelled == 0 and edit.written == 0  # the running one is neither cancelled nor rewritten
    release.set()
    await settle(worker)
    done = await store.execution_get(first[0].id)
    assert done is not None and done.status == ExecutionStatus.SUCCEEDED and done.job_version == 1
    # a later run of the same job reads the new params
    cron, _ = await create_job(jobs, JobSpec(task="test.edit_probe", cron="* * * * *", params={"v": 1}))
    await jobs.update(cron.id, {"params": {"v": 3}})
    triggered = await jobs.trigger(cron.id)
    assert triggered.job_version == 2
    await worker.run_once()
    await settle(worker)
    assert (triggered.id, {"v": 3}) in seen


async def test_tenancy_deleted_and_if_match(jobs) -> None:
    job, _ = await create_job(jobs, JobSpec(task="noop", tenant="acme", cron="@hourly"))
    with pytest.raises(NotFoundError):
        await jobs.update(job.id, {"name": "x"}, tenant="other")
    with pytest.raises(StaleVersionError):
        await jobs.update(job.id, {"name": "x"}, tenant="acme", if_version=2)
    assert (await jobs.update(job.id, {"name": "x"}, tenant="acme", if_version=1)).job.version == 2
    await jobs.delete(job.id)
    with pytest.raises(ConflictError, match="deleted"):
        await jobs.update(job.id, {"name": "y"}, tenant="acme")


async def test_an_idempotency_key_replays_the_answer_and_refuses_another_body(jobs, store, config) -> None:
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="*/10 * * * *"))

    def answer(edit: Edit) -> dict[str, Any]:
        return {"version": edit.job.version, "cancelled": edit.cancelled}

    def key(digest: bytes) -> EditKey:
        return EditKey("default", "k1", digest, answer, config.api.idempotency_ttl_s)

    first = await jobs.update(job.id, {"cron": "*/20 * * * *"}, claim=key(b"a"), if_version=1)
    assert first.replayed is None and first.job.version == 2
    again = await jobs.update(job.id, {"cron": "*/20 * * * *"}, claim=key(b"a"), if_version=1)
    assert again.replayed == {"version": 2, "cancelled": first.cancelled}
    assert (await store.job_get(job.id)).version == 2  # type: ignore[union-attr]
    with pytest.raises(ConflictError) as refused:
        await jobs.update(job.id, {"cron": "*/30 * * * *"}, claim=key(b"b"))
    assert refused.value.field == "idempotency_key"


async def test_concurrent_edits_serialise_on_the_row(jobs, store) -> None:
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="*/10 * * * *"))
    a, b = await asyncio.gather(jobs.update(job.id, {"name": "a"}), jobs.update(job.id, {"cron": "*/20 * * * *"}))
    assert {a.job.version, b.job.version} == {2, 3}
    final = await store.job_get(job.id)
    assert final is not None and final.version == 3 and final.cron == "*/20 * * * *" and final.name == "a"
    live = [r for r in await _rows(store, job.id) if r["status"] in ("pending", "queued")]
    assert live and all(r["scheduled_for"].minute % 20 == 0 for r in live)


async def test_an_edit_racing_the_materialiser_writes_each_occurrence_once(jobs, store, queue, config) -> None:
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="*/10 * * * *"))
    await store.db.execute("UPDATE jobs SET materialised_to = materialised_to - interval '2 hours' WHERE id = $1", job.id)
    materialiser = Materialiser(store, queue, config.materialiser, dispatch_horizon_s=config.dispatcher.horizon_s)
    await asyncio.gather(jobs.update(job.id, {"cron": "*/15 * * * *"}), materialiser.run_once())
    await materialiser.run_once()
    live = [r for r in await _rows(store, job.id) if r["status"] in ("pending", "queued")]
    instants = [r["scheduled_for"] for r in live]
    assert len(instants) == len(set(instants)) and all(t.minute % 15 == 0 for t in instants)
    assert all(r["job_version"] == 2 for r in live)


async def test_an_edit_racing_a_claim_either_runs_or_cancels_never_both(jobs, store) -> None:
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="*/10 * * * *"))
    rows = await _rows(store, job.id)
    odd = [r for r in rows if r["scheduled_for"].minute % 20 != 0][0]
    await store.db.execute("UPDATE executions SET status = 'queued', due_at = now() - interval '1 s' WHERE id = $1", odd["id"])
    claim = store.execution_claim_many([odd["id"]], 30.0, "w")
    claimed, _ = await asyncio.gather(claim, jobs.update(job.id, {"cron": "*/20 * * * *"}))
    final = await store.execution_get(odd["id"])
    assert final is not None
    if claimed:
        assert final.status == ExecutionStatus.RUNNING and final.reason is None
    else:
        assert final.status == ExecutionStatus.CANCELLED and final.reason == "edited"


async def test_an_edit_of_a_paused_job_decides_what_resume_gives_back(jobs, store) -> None:
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="*/10 * * * *"))
    await jobs.pause(job.id)
    edit = await jobs.update(job.id, {"cron": "*/20 * * * *"})
    assert edit.written == 0
    await jobs.resume(job.id)
    live = [r for r in await _rows(store, job.id) if r["status"] in ("pending", "queued")]
    assert live and all(r["scheduled_for"].minute % 20 == 0 for r in live)
    # and editing back gives the odd slots back, not lost to their cancelled rows
    await jobs.update(job.id, {"cron": "*/10 * * * *"})
    live = [r for r in await _rows(store, job.id) if r["status"] in ("pending", "queued")]
    assert any(r["scheduled_for"].minute % 20 != 0 for r in live)
    instants = [r["scheduled_for"] for r in await _rows(store, job.id)]
    assert len(instants) == len(set(instants))


async def test_the_client_edits_by_its_own_argument_names(store, queue, config) -> None:
    from schedulerd.client import Client

    client = Client(store, queue, config, owned=False)
    made = await client.enqueue("noop", cron="*/10 * * * *", tz="UTC")
    edit = await client.update_job(made.job_id, tz="Europe/Paris", window="1m", timeout="30s", params={"v": 2})
    assert (edit.job.timezone, edit.job.window_s, edit.job.timeout_s, edit.job.version) == ("Europe/Paris", 60.0, 30.0, 2)
    for arguments, name in [({"tz": "Nowhere/Land"}, "tz"), ({"window": "soon"}, "window"), ({"task": "log"}, "task"),
                            ({"in_": "5m"}, "in_"), ({"at": "2030-01-01T00:00:00Z"}, "at")]:  # fmt: skip
        with pytest.raises(ValidationError) as refused:
            await client.update_job(made.job_id, **arguments)
        assert refused.value.field == name, arguments
    planned = await client.update_job(made.job_id, dry_run=True, cron="*/20 * * * *")
    assert planned.dry_run and (await store.job_get(made.job_id)).version == 2  # type: ignore[union-attr]


async def test_an_edit_racing_a_pause_leaves_nothing_to_run(jobs, store) -> None:
    for _ in range(3):
        job, _ = await create_job(jobs, JobSpec(task="noop", cron="*/10 * * * *"))
        await asyncio.gather(jobs.update(job.id, {"cron": "*/5 * * * *"}), jobs.pause(job.id))
        live = [r for r in await _rows(store, job.id) if r["status"] in ("pending", "queued")]
        assert live == []
        await jobs.resume(job.id)
        live = [r for r in await _rows(store, job.id) if r["status"] in ("pending", "queued")]
        assert live and all(r["scheduled_for"].minute % 5 == 0 for r in live)
        assert any(r["scheduled_for"].minute % 10 == 5 for r in live)  # the edit's own slots, given back or written


async def test_labels_are_edited_and_a_bounded_job_keeps_its_schedule(jobs, store) -> None:
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="*/10 * * * *", labels={"team": "a"}))
    assert (await jobs.update(job.id, {"labels": {"team": "b", "env": "prod"}})).job.labels == {"team": "b", "env": "prod"}
    bounded, first = await create_job(jobs, JobSpec(task="noop", cron="*/10 * * * *", max_runs=3))
    with pytest.raises(ValidationError) as refused:
        await jobs.update(bounded.id, {"cron": "*/20 * * * *"})
    assert refused.value.field == "cron"
    edit = await jobs.update(bounded.id, {"params": {"v": 2}})
    live = [r for r in await _rows(store, bounded.id) if r["status"] in ("pending", "queued")]
    assert edit.written == 0 and edit.cancelled == 0 and len(live) == len(first) == 3
    assert all(r["job_version"] == 2 for r in live)
    ended = await jobs.update(job.id, {"cron": "*/5 * * * *"})
    assert ended.written > 0
