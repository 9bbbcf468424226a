"""Schedules as code (apply.Apply through Client.apply): the plan, one transaction, the same
declarations applied twice changing nothing, prune, drift, bad input writing nothing, tenants
apart, and an apply racing an edit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from schedulerd.apply import DriftError
from schedulerd.client import Client
from schedulerd.config import Config
from schedulerd.errors import ConflictError, ValidationError
from schedulerd.models import ExecutionStatus
from schedulerd.queue import DelayQueue
from schedulerd.store import Store

NIGHTLY = {"name": "nightly", "task": "noop", "cron": "0 2 * * *", "timezone": "Europe/London", "params": {"v": 1}}
EVERY = {"name": "every-10", "task": "noop", "cron": "*/10 * * * *", "labels": {"team": "billing"},
         "retry": {"max_attempts": 5}}  # fmt: skip


@pytest.fixture
async def client(store: Store, queue: DelayQueue, config: Config) -> AsyncIterator[Client]:
    client = Client(store, queue, config, owned=False)
    yield client
    await client.close()


async def _live(store: Store, tenant: str = "default") -> dict[str, Any]:
    rows = await store.db.fetch(
        "SELECT name, id, version, applied_version, source, cron, params FROM jobs "
        "WHERE tenant = $1 AND deleted_at IS NULL", tenant)  # fmt: skip
    return {r["name"]: r for r in rows}


async def test_plan_apply_and_a_second_apply_that_changes_nothing(client: Client, store: Store, queue: DelayQueue) -> None:
    plan = await client.apply([NIGHTLY, EVERY], source="ops", plan=True)
    assert [a.name for a in plan.added] == ["every-10", "nightly"] and not plan.applied
    assert plan.added[1].next_runs and await _live(store) == {}
    done = await client.apply([NIGHTLY, EVERY], source="ops")
    assert done.applied and len(done.added) == 2
    live = await _live(store)
    assert {r["source"] for r in live.values()} == {"ops"} and all(r["applied_version"] == r["version"] == 1 for r in live.values())
    queued = await store.db.fetchval("SELECT count(*) FROM executions WHERE job_id = $1", live["every-10"]["id"])
    assert queued > 0
    again = await client.apply([NIGHTLY, EVERY], source="ops", plan=True)
    assert (len(again.added), len(again.changed), len(again.removed)) == (0, 0, 0)
    assert sorted(again.unchanged) == ["every-10", "nightly"]
    twice = await client.apply([NIGHTLY, EVERY], source="ops")
    assert (len(twice.added), len(twice.changed), len(twice.removed)) == (0, 0, 0)
    assert await _live(store) == live


async def test_a_change_carries_the_next_runs_diff_and_moves_the_occurrences(client: Client, store: Store) -> None:
    await client.apply([NIGHTLY, EVERY], source="ops")
    before = await _live(store)
    moved = {**EVERY, "cron": "*/20 * * * *"}
    plan = await client.apply([NIGHTLY, moved], source="ops", plan=True)
    (change,) = plan.changed
    assert change.name == "every-10" and change.fields == ("cron",) and change.edit.dry_run
    assert change.edit.removed and change.edit.kept and not change.edit.added
    assert (await _live(store))["every-10"]["version"] == 1
    done = await client.apply([NIGHTLY, moved], source="ops")
    after = await _live(store)
    assert after["every-10"]["id"] == before["every-10"]["id"] and after["every-10"]["version"] == 2
    assert after["every-10"]["applied_version"] == 2 and after["every-10"]["cron"] == "*/20 * * * *"
    assert len(done.changed) == 1
    cancelled = await store.db.fetchval("SELECT count(*) FROM executions WHERE job_id = $1 AND status = 'cancelled' "
                                        "AND reason = 'edited'", after["every-10"]["id"])  # fmt: skip
    assert cancelled > 0
    assert not (await client.apply([NIGHTLY, moved], source="ops")).changed


async def test_prune_deletes_only_the_undeclared_jobs_of_the_same_source(client: Client, store: Store) -> None:
    await client.apply([NIGHTLY, EVERY], source="ops")
    await client.apply([{**NIGHTLY, "name": "other"}], source="elsewhere")
    kept = await client.apply([NIGHTLY], source="ops")
    assert [r.name for r in kept.undeclared] == ["every-10"] and not kept.removed
    assert set(await _live(store)) == {"nightly", "every-10", "other"}
    pruned = await client.apply([NIGHTLY], source="ops", prune=True)
    assert [r.name for r in pruned.removed] == ["every-10"]
    assert set(await _live(store)) == {"nightly", "other"}
    unstarted = await store.db.fetchval(
        "SELECT count(*) FROM executions e JOIN jobs j ON j.id = e.job_id WHERE j.name = 'every-10' "
        "AND e.status IN ('pending', 'queued')")  # fmt: skip
    assert unstarted == 0
    assert not (await client.apply([NIGHTLY], source="ops", prune=True)).removed


async def test_an_edit_elsewhere_is_drift_refused_unless_forced(client: Client, store: Store) -> None:
    await client.apply([NIGHTLY, EVERY], source="ops")
    job_id = (await _live(store))["every-10"]["id"]
    await client.update_job(job_id, params={"by": "hand"})
    plan = await client.apply([NIGHTLY, EVERY], source="ops", plan=True)
    assert [d.name for d in plan.drifted] == ["every-10"] and plan.drifted[0].fields == ("params",)
    with pytest.raises(DriftError) as refused:
        await client.apply([{**NIGHTLY, "params": {"v": 2}}, EVERY], source="ops")
    assert "every-10" in str(refused.value)
    live = await _live(store)
    assert live["every-10"]["params"] == {"by": "hand"} and live["nightly"]["params"] == {"v": 1}  # all or nothing
    forced = await client.apply([NIGHTLY, EVERY], source="ops", force=True)
    assert [c.name for c in forced.changed] == ["every-10"] and forced.changed[0].drifted
    live = await _live(store)
    assert live["every-10"]["params"] == {} and live["every-10"]["applied_version"] == live["every-10"]["version"] == 3
    assert not (await client.apply([NIGHTLY, EVERY], source="ops", plan=True)).drifted


@pytest.mark.parametrize(
    ("declarations", "named"),
    [
        ([NIGHTLY, {**EVERY, "colour": "red"}], "job 'every-10': colour"),
        ([NIGHTLY, {**EVERY, "retry": {"tries": 3}}], "job 'every-10': retry.tries"),
        ([NIGHTLY, {**EVERY, "cron": "nope"}], "job 'every-10': cron"),
        ([NIGHTLY, {**EVERY, "task": "no.such.task"}], "job 'every-10': task"),
        ([NIGHTLY, {"task": "noop", "cron": "* * * * *"}], "job 2: name"),
        ([NIGHTLY, NIGHTLY], "job 'nightly': name"),
        ([NIGHTLY, {"name": "now", "task": "noop"}], "job 'now': cron"),
    ],
)
async def test_bad_input_names_the_job_and_key_and_writes_nothing(
    client: Client, store: Store, declarations: list[dict[str, Any]], named: str
) -> None:  # fmt: skip
    with pytest.raises(ValidationError) as refused:
        await client.apply(declarations, source="ops")
    assert named in str(refused.value)
    assert await _live(store) == {}


async def test_a_file_names_itself_in_a_refusal_and_gives_its_source(client: Client, store: Store, tmp_path: Path) -> None:
    bad = tmp_path / "nightly.toml"
    bad.write_text('[[job]]\nname = "a"\ntask = "noop"\ncron = "0 2 * * *"\nwhen = "soon"\n')
    with pytest.raises(ValidationError) as refused:
        await client.apply(bad)
    assert str(bad) in str(refused.value) and "job 'a': when" in str(refused.value)
    good = tmp_path / "reports.toml"
    good.write_text('source = "team-reports"\n[[job]]\nname = "a"\ntask = "noop"\ncron = "0 2 * * *"\n'
                    '[job.retry]\nmax_attempts = 4\n')  # fmt: skip
    plan = await client.apply(good)
    assert plan.source == "team-reports" and (await _live(store))["a"]["source"] == "team-reports"


async def test_a_change_an_edit_refuses_is_named_and_nothing_is_written(client: Client, store: Store) -> None:
    await client.apply([NIGHTLY, EVERY], source="ops")
    with pytest.raises(ValidationError) as refused:
        await client.apply([{**NIGHTLY, "params": {"v": 9}}, {**EVERY, "max_runs": 3}], source="ops")
    assert "job 'every-10': max_runs" in str(refused.value)
    assert (await _live(store))["nightly"]["params"] == {"v": 1}


async def test_tenants_are_apart(client: Client, store: Store) -> None:
    await client.apply([NIGHTLY], source="ops", tenant="acme")
    other = await client.apply([EVERY], source="ops", tenant="globex", prune=True)
    assert [a.name for a in other.added] == ["every-10"] and not other.removed
    assert set(await _live(store, "acme")) == {"nightly"} and set(await _live(store, "globex")) == {"every-10"}
    assert (await client.apply([NIGHTLY], source="ops", tenant="acme", plan=True)).unchanged == ["nightly"]


async def test_an_apply_racing_an_edit_either_sees_it_as_drift_or_is_followed_by_it(client: Client, store: Store) -> None:
    await client.apply([NIGHTLY, EVERY], source="ops")
    job_id = (await _live(store))["every-10"]["id"]
    changed = {**EVERY, "params": {"v": "file"}}
    outcome, _ = await asyncio.gather(
        client.apply([NIGHTLY, changed], source="ops"), client.update_job(job_id, params={"v": "hand"}),
        return_exceptions=True,
    )  # fmt: skip
    row = (await _live(store))["every-10"]
    if isinstance(outcome, DriftError):  # the edit went first: the apply refused to overwrite it
        assert row["params"] == {"v": "hand"} and row["version"] == 2 and row["applied_version"] == 1
    else:  # the apply went first; the edit, serialised after it, is the drift the next plan names
        assert not isinstance(outcome, BaseException)
        assert row["params"] == {"v": "hand"} and row["version"] == 3 and row["applied_version"] == 2
    assert [d.name for d in (await client.apply([NIGHTLY, changed], source="ops", plan=True)).drifted] == ["every-10"]


async def test_two_applies_racing_add_each_name_once(client: Client, store: Store) -> None:
    results = await asyncio.gather(*(client.apply([NIGHTLY, EVERY], source="ops") for _ in range(3)))
    assert sum(len(r.added) for r in results) == 2
    assert len(await store.db.fetch("SELECT id FROM jobs WHERE deleted_at IS NULL")) == 2
    statuses = await store.db.fetch("SELECT DISTINCT status FROM executions")
    assert {r["status"] for r in statuses} <= {ExecutionStatus.PENDING, ExecutionStatus.QUEUED}


async def test_renaming_a_declared_job_onto_another_of_its_source_is_a_conflict(client: Client, store: Store) -> None:
    await client.apply([NIGHTLY, EVERY], source="ops")
    job_id = (await _live(store))["every-10"]["id"]
    with pytest.raises(ConflictError) as refused:
        await client.update_job(job_id, name="nightly")
    assert refused.value.field == "name"
    await client.update_job(job_id, name="renamed")  # a free name: the job leaves the declaration's key
    plan = await client.apply([NIGHTLY, EVERY], source="ops", plan=True)
    assert [a.name for a in plan.added] == ["every-10"] and [r.name for r in plan.undeclared] == ["renamed"]


async def test_notifications_are_declared_changed_and_left_alone_when_unchanged(client: Client, store: Store) -> None:
    declared = {**NIGHTLY, "notify": {"url": "https://hooks.example.com/ops", "on": ["failure"]}, "pause_after_failures": 3}
    await client.apply([declared], source="ops")
    again = await client.apply([declared], source="ops")
    assert again.unchanged == ["nightly"] and not again.changed
    changed = await client.apply([{**declared, "notify": {"url": "https://hooks.example.com/ops", "on": ["failure", "late"]},
                                   "pause_after_failures": 5}], source="ops")  # fmt: skip
    assert [(c.name, c.fields) for c in changed.changed] == [("nightly", ("notify_on", "pause_after_failures"))]
    row = await store.db.fetchrow("SELECT notify_url, notify_on, pause_after_failures FROM jobs WHERE name = 'nightly'")
    assert tuple(row) == ("https://hooks.example.com/ops", ["failure", "late"], 5)
    with pytest.raises(ValidationError) as refused:
        await client.apply([{**declared, "notify": {"url": "http://127.0.0.1/x"}}], source="ops")
    assert refused.value.field == "job 'nightly': notify_url"
