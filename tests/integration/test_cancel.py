"""Cancels against real Postgres and Redis: one execution in each state (pending, queued, a retry
waiting for its backoff, running on another worker), the running one's every later write (finish,
reclaim, hand-back, park), the race with the finish, bulk cancel by filter with its dry run, bulk
job actions by label selector with their record, and tenancy."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import pytest

from schedulerd import cancels as cancels_module
from schedulerd.cancels import CancelFilter, Cancels
from schedulerd.errors import NotFoundError, TooLateError, ValidationError
from schedulerd.job_actions import Action, JobActions
from schedulerd.jobs import Jobs
from schedulerd.models import AttemptOutcome, Execution, ExecutionStatus
from tests.conftest import wait_for
from tests.integration.conftest import settle

BY = "test:alice"


async def _get(store: Any, execution_id: UUID) -> Execution:
    found = await store.execution_get(execution_id)
    assert found is not None
    return found


async def _labelled(store: Any, job_id: UUID, **labels: str) -> None:
    """Labels set in SQL: the column is there; labels on create are another door's work."""
    await store.db.execute("UPDATE jobs SET labels = $2 WHERE id = $1", job_id, labels)


def _later(minutes: int = 30) -> datetime:
    return datetime.now(UTC) + timedelta(minutes=minutes)


async def test_pending_and_queued_ones_end_cancelled_at_once_and_are_never_claimed(make_job, make_worker, store) -> None:
    _, pending = await make_job("noop", run_at=_later())
    _, queued = await make_job("noop")
    assert (pending.status, queued.status) == ("pending", "queued")
    cancels = Cancels(store)
    for execution in (pending, queued):
        done = await cancels.cancel(execution.id, "default", by=BY)
        assert not done.stop_requested
        assert (done.execution.status, done.execution.reason) == ("cancelled", "cancelled")
        assert done.execution.finished_at is not None and done.execution.cancel_requested_at is not None
    # The queued one's id is still in Redis: the pop returns it, the claim refuses it (the fence).
    worker = make_worker("worker-a")
    assert await worker.run_once() == 0
    assert (await _get(store, queued.id)).status == "cancelled"
    assert await store.attempt_list(queued.id) == []


async def test_a_retry_waiting_for_its_backoff_is_cancelled(make_job, make_worker, store) -> None:
    _, execution = await make_job("fail", max_attempts=5, backoff_base_s=30.0)
    worker = make_worker("worker-a")
    assert await worker.run_once() == 1
    await settle(worker)
    waiting = await _get(store, execution.id)
    assert waiting.status in ("queued", "pending") and waiting.attempt == 1
    done = await Cancels(store).cancel(execution.id, "default", by=BY)
    assert (done.execution.status, done.execution.reason) == ("cancelled", "cancelled")
    assert [a.outcome for a in await store.attempt_list(execution.id)] == ["failed"]


async def test_a_running_one_on_another_worker_stops_at_the_next_heartbeat_and_is_not_retried(
    make_job, make_worker, store, config
) -> None:
    _, execution = await make_job("sleep", params={"seconds": 30}, max_attempts=5)
    holder, other = make_worker("replica-a"), make_worker("replica-b")
    stop = asyncio.Event()
    loops = [asyncio.create_task(w.run(stop)) for w in (holder, other)]
    try:
        await wait_for(lambda: _status(store, execution.id, "running"))
        # The cancel comes through another connection (an API replica), not through the holder.
        done = await Cancels(store).cancel(execution.id, "default", by=BY)
        assert done.stop_requested and done.execution.status == "running"
        asked_at = asyncio.get_running_loop().time()
        finished = await wait_for(lambda: _status(store, execution.id, "cancelled"), timeout_s=5.0)
        # Within a heartbeat interval (plus the finish's linger), well inside the lease.
        assert asyncio.get_running_loop().time() - asked_at < config.worker.heartbeat_s + 1.0
        assert finished.reason == "cancelled" and finished.attempt == 1
        (attempt,) = await store.attempt_list(execution.id)
        assert attempt.outcome == "cancelled" and BY in (attempt.error or "")
        await asyncio.sleep(0.3)  # no retry comes: neither replica claims it again
        assert (await _get(store, execution.id)).status == "cancelled"
        assert len(await store.attempt_list(execution.id)) == 1
    finally:
        stop.set()
        await asyncio.gather(*loops, return_exceptions=True)


async def _status(store: Any, execution_id: UUID, status: str) -> Execution | None:
    execution = await _get(store, execution_id)
    return execution if execution.status == status else None


async def test_a_cancel_of_a_dead_workers_execution_ends_cancelled_at_reclaim(make_job, store, sweeper) -> None:
    _, execution = await make_job("sleep", params={"seconds": 30}, max_attempts=5)
    (claim,) = await store.execution_claim_many([str(execution.id)], 0.3, "doomed")
    await Cancels(store).cancel(execution.id, "default", by=BY)
    await asyncio.sleep(0.4)  # the worker asked to stop is dead: its lease runs out
    await sweeper.run_once()
    stopped = await _get(store, execution.id)
    assert (stopped.status, stopped.reason) == ("cancelled", "cancelled")
    assert [a.outcome for a in await store.attempt_list(execution.id)] == ["lease_expired"]
    assert claim.fence == stopped.fence


async def test_a_hand_back_or_a_park_of_a_cancelled_one_ends_it_cancelled(make_job, store) -> None:
    _, handed = await make_job("sleep", params={"seconds": 30})
    _, parked = await make_job("sleep", params={"seconds": 30})
    claims = {c.id: c for c in await store.execution_claim_many([str(handed.id), str(parked.id)], 30.0, "worker-a")}
    for execution in (handed, parked):
        await Cancels(store).cancel(execution.id, "default", by=BY)
    assert await store.execution_hand_back_many([(handed.id, claims[handed.id].fence)]) == []
    assert await store.execution_park_many([(parked.id, claims[parked.id].fence)], [0.0], "task_limit", late_grace_s=60.0) == ([], [])
    for execution in (handed, parked):
        row = await _get(store, execution.id)
        assert (row.status, row.reason) == ("cancelled", "cancelled"), execution.id


async def test_a_retry_decided_after_the_cancel_is_cancelled_but_a_success_stands(make_job, make_worker, store) -> None:
    _, failing = await make_job("noop", max_attempts=5)
    _, succeeding = await make_job("noop", max_attempts=5)
    worker = make_worker("worker-a")
    claims = {c.id: c for c in await store.execution_claim_many([str(failing.id), str(succeeding.id)], 30.0, "worker-a")}
    for execution in (failing, succeeding):
        await Cancels(store).cancel(execution.id, "default", by=BY)
    # Both handlers ended before any heartbeat carried the request.
    worker._record(claims[failing.id], AttemptOutcome.FAILED, "boom")
    worker._record(claims[succeeding.id], AttemptOutcome.SUCCEEDED, None)
    assert await worker.flush_outcomes() == 2
    no_retry, stands = await _get(store, failing.id), await _get(store, succeeding.id)
    assert (no_retry.status, no_retry.reason) == ("cancelled", "cancelled")
    assert [a.outcome for a in await store.attempt_list(failing.id)] == ["failed"]
    assert (stands.status, stands.reason) == ("succeeded", None)


async def test_a_cancel_racing_the_finish_either_is_too_late_or_asked_first(make_job, make_worker, store) -> None:
    for _ in range(10):
        _, execution = await make_job("noop")
        (claim,) = await store.execution_claim_many([str(execution.id)], 30.0, "worker-a")
        worker = make_worker("worker-a")
        worker._record(claim, AttemptOutcome.SUCCEEDED, None)
        cancelled, _ = await asyncio.gather(
            Cancels(store).cancel(execution.id, "default", by=BY), worker.flush_outcomes(), return_exceptions=True
        )  # fmt: skip
        assert (await _get(store, execution.id)).status == "succeeded"  # the handler finished first: it stands
        if isinstance(cancelled, TooLateError):
            assert cancelled.status == "succeeded" and "already succeeded" in str(cancelled)
        else:
            assert not isinstance(cancelled, BaseException) and cancelled.stop_requested


async def test_a_second_cancel_gives_the_same_answer_and_a_settled_one_is_too_late(make_job, make_worker, store) -> None:
    _, execution = await make_job("noop", run_at=_later())
    cancels = Cancels(store)
    first = await cancels.cancel(execution.id, "default", by=BY)
    again = await cancels.cancel(execution.id, "default", by="test:bob")
    assert again.execution == first.execution
    _, done = await make_job("noop")
    worker = make_worker("worker-a")
    assert await worker.run_once() == 1
    await settle(worker)
    with pytest.raises(TooLateError, match="already succeeded") as refused:
        await cancels.cancel(done.id, "default", by=BY)
    assert refused.value.status == "succeeded"


async def test_another_tenants_execution_is_not_found(make_job, store) -> None:
    _, execution = await make_job("noop", run_at=_later(), tenant="acme")
    with pytest.raises(NotFoundError):
        await Cancels(store).cancel(execution.id, "globex", by=BY)
    with pytest.raises(NotFoundError):
        await Cancels(store).cancel(UUID(int=execution.id.int ^ 1), "acme", by=BY)
    assert (await _get(store, execution.id)).status == "pending"
    done = await Cancels(store).cancel_matching("globex", CancelFilter(), dry_run=False, by=BY)
    assert done.matched == 0 and (await _get(store, execution.id)).status == "pending"


async def test_bulk_cancel_by_label_counts_first_then_cancels_as_many_in_pages(make_job, store, monkeypatch) -> None:
    monkeypatch.setattr(cancels_module, "CANCEL_PAGE", 2)
    billing = [await make_job("noop", run_at=_later(m)) for m in (10, 20, 30)]
    ops = [await make_job("noop", run_at=_later(m)) for m in (10, 20)]
    for job, _ in billing:
        await _labelled(store, job.id, team="billing", env="prod")
    for job, _ in ops:
        await _labelled(store, job.id, team="ops", env="prod")
    (billing_job, _), *_ = billing
    _, extra = await make_job("noop", run_at=_later(40))  # unlabelled: never matches
    which = CancelFilter(selector={"team": "billing"})
    cancels = Cancels(store)
    plan = await cancels.cancel_matching("default", which, dry_run=True, by=BY)
    assert plan.dry_run and plan.matched == 3 and plan.stop_requested == 0 and plan.action is None
    assert sorted(UUID(s["id"]) for s in plan.sample) == sorted(e.id for _, e in billing)
    assert {(await _get(store, e.id)).status for _, e in billing} == {"pending"}  # the dry run wrote nothing
    done = await cancels.cancel_matching("default", which, dry_run=False, by=BY)
    assert done.matched == plan.matched
    assert {((row := await _get(store, e.id)).status, row.reason) for _, e in billing} == {("cancelled", "cancelled")}
    assert {(await _get(store, e.id)).status for _, e in ops} | {(await _get(store, extra.id)).status} == {"pending"}
    assert done.action is not None and done.action.actor == BY and done.action.executions_count == 3
    assert done.action.selector == {"team": "billing"} and done.action.filter["statuses"] == ["pending", "queued"]
    # A due range narrows it: only the ops run due within the next quarter hour.
    due = CancelFilter(selector={"env": "prod"}, due_to=_later(15))
    assert (await cancels.cancel_matching("default", due, dry_run=False, by=BY)).matched == 1
    assert billing_job.id is not None


async def test_bulk_cancel_asks_running_ones_to_stop_when_told_to(make_job, store) -> None:
    job, execution = await make_job("sleep", params={"seconds": 30})
    await store.execution_claim_many([str(execution.id)], 30.0, "worker-a")
    cancels = Cancels(store)
    assert (await cancels.cancel_matching("default", CancelFilter(job_id=job.id), dry_run=True, by=BY)).matched == 0
    running = CancelFilter(job_id=job.id, statuses=("running",))
    assert (await cancels.cancel_matching("default", running, dry_run=True, by=BY)).stop_requested == 1
    done = await cancels.cancel_matching("default", running, dry_run=False, by=BY)
    assert (done.matched, done.stop_requested) == (1, 1)
    row = await _get(store, execution.id)
    assert row.status == "running" and row.cancel_requested_at is not None
    with pytest.raises(ValidationError, match="status"):
        CancelFilter(statuses=("succeeded",))


async def test_bulk_pause_by_selector_records_who_and_when(make_job, store, queue, config) -> None:
    billing = [await make_job("noop", run_at=_later(m), tenant="acme") for m in (10, 20)]
    (other, other_run) = await make_job("noop", run_at=_later(10), tenant="acme")
    (foreign, foreign_run) = await make_job("noop", run_at=_later(10), tenant="globex")
    for job, _ in billing:
        await _labelled(store, job.id, team="billing")
    await _labelled(store, other.id, team="ops")
    await _labelled(store, foreign.id, team="billing")
    await store.db.execute("DELETE FROM job_actions WHERE tenant IN ('acme', 'globex')")
    actions = JobActions(Jobs(store, queue, config), Cancels(store))
    plan = await actions.run("acme", Action.PAUSE, {"team": "billing"}, dry_run=True, by=BY)
    assert (plan.jobs, plan.executions, plan.record) == (2, 2, None)
    assert await store.job_action_list("acme", before=None, limit=10) == []
    done = await actions.run("acme", Action.PAUSE, {"team": "billing"}, dry_run=False, by=BY)
    assert (done.jobs, done.executions) == (plan.jobs, plan.executions)
    for job, execution in billing:
        assert not (await store.job_get(job.id)).enabled  # type: ignore[union-attr]
        row = await _get(store, execution.id)
        assert (row.status, row.reason) == ("cancelled", "paused")  # what a single pause does
    assert (await _get(store, other_run.id)).status == "pending"
    assert (await _get(store, foreign_run.id)).status == "pending"  # another tenant's: never matched
    (record,) = await store.job_action_list("acme", before=None, limit=10)
    assert (record.action, record.selector, record.jobs_count, record.executions_count, record.actor) == (
        "pause", {"team": "billing"}, 2, 2, BY)  # fmt: skip
    assert abs((record.at - datetime.now(UTC)).total_seconds()) < 60
    assert await store.job_action_list("globex", before=None, limit=10) == []
    # Resume takes the paused ones; one-offs cannot be resumed, so they are reported skipped.
    resumed = await actions.run("acme", Action.RESUME, {"team": "billing"}, dry_run=False, by=BY)
    assert resumed.jobs == 0 and sorted(resumed.skipped) == sorted(j.id for j, _ in billing)


async def test_bulk_trigger_delete_and_cancel_by_selector(make_job, store, queue, config) -> None:
    jobs = [await make_job("noop", run_at=_later(m)) for m in (10, 20)]
    for job, _ in jobs:
        await _labelled(store, job.id, team="search")
    actions = JobActions(Jobs(store, queue, config), Cancels(store))
    triggered = await actions.run("default", Action.TRIGGER, {"team": "search"}, dry_run=False, by=BY)
    assert (triggered.jobs, triggered.executions) == (2, 2)
    cancelled = await actions.run("default", Action.CANCEL, {"team": "search"}, dry_run=False, by=BY)
    assert cancelled.executions == 4  # each job's own run and its trigger
    deleted = await actions.run("default", Action.DELETE, {"team": "search"}, dry_run=False, by=BY)
    assert (deleted.jobs, deleted.executions) == (2, 0)
    for job, _ in jobs:
        assert (await store.job_get(job.id)).deleted_at is not None  # type: ignore[union-attr]
    assert (await actions.run("default", Action.PAUSE, {"team": "search"}, dry_run=True, by=BY)).jobs == 0
    statuses = {e.status for e in await store.execution_list(tenant="default")}
    assert statuses == {ExecutionStatus.CANCELLED}


async def test_the_client_cancels_one_many_and_acts_on_jobs_by_selector(make_job, store, queue, config) -> None:
    from schedulerd.client import Client

    client = Client(store, queue, config, owned=False)
    _, pending = await make_job("noop", run_at=_later())
    cancelled = await client.cancel(pending.id)
    assert (cancelled.status, cancelled.reason) == ("cancelled", "cancelled")
    assert (await client.cancel(str(pending.id))) == cancelled
    job, queued = await make_job("noop", run_at=_later(20))
    await _labelled(store, job.id, team="billing")
    plan = await client.cancel_many(label="team=billing")
    assert plan.dry_run and plan.matched == 1
    with pytest.raises(ValidationError, match="due_from"):
        await client.cancel_many(label="team=billing", due_from="yesterday")
    paused = await client.job_action("pause", {"team": "billing"}, dry_run=False, by="client:test")
    assert (paused.jobs, paused.executions, paused.record.actor) == (1, 1, "client:test")  # type: ignore[union-attr]
    assert (await _get(store, queued.id)).reason == "paused"
    with pytest.raises(ValidationError, match="action"):
        await client.job_action("explode", "team=billing")
