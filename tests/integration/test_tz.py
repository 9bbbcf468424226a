"""tz database changes and per-job DST overrides, on real Postgres and Redis.

A tz database upgrade is simulated with core.schedule.zone_rules (the same zone name, other
rules) and a replaced tzdb.installed_version: jobs are materialised under the "old" rules and
version, then recomputed under the real rules and a new version.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from uuid import UUID
from zoneinfo import ZoneInfo

import pytest

from schedulerd import metrics, tzchange, tzdb
from schedulerd.core.schedule import zone_rules
from schedulerd.errors import ValidationError
from schedulerd.jobs import Jobs, JobSpec, schedule_of
from schedulerd.materialising import materialise_jobs
from schedulerd.models import Claim
from schedulerd.store import Store
from schedulerd.tzdb import TzDatabase
from tests.conftest import create_job

NY = "America/New_York"
NEW = TzDatabase("2099b", "simulated")


@pytest.fixture
async def jobs(store, queue, config) -> Jobs:
    await store.db.execute("TRUNCATE tz_recomputes CASCADE")
    return Jobs(store, queue, config)


def old_new_york() -> timezone:
    """'Old tzdata': New York half an hour off the real rules, so every instant of an hourly job moves."""
    real = datetime.now(ZoneInfo(NY)).utcoffset()
    assert real is not None
    return timezone(real + timedelta(minutes=30), "OLD")


def old_rules(name: str) -> timezone | ZoneInfo:
    return old_new_york() if name == NY else ZoneInfo(name)


async def future_slots(store, job_id) -> list[datetime]:  # type: ignore[no-untyped-def]
    rows = await store.db.fetch(
        "SELECT scheduled_for FROM executions WHERE job_id = $1 AND status IN ('pending', 'queued') "
        "AND scheduled_for > now() ORDER BY scheduled_for", job_id)
    return [r["scheduled_for"] for r in rows]


def counter(metric) -> float:  # type: ignore[no-untyped-def]
    return metric._value.get()


async def test_a_tz_database_change_moves_future_occurrences_and_reports_them(jobs, store, queue, config, monkeypatch) -> None:
    monkeypatch.setattr(tzdb, "installed_version", lambda: "2000a")
    with zone_rules(old_rules):
        moving, _ = await create_job(jobs, JobSpec(task="noop", cron="0 * * * *", timezone=NY))
        same, _ = await create_job(jobs, JobSpec(task="noop", cron="0 * * * *", timezone="UTC"))
        paused, _ = await create_job(jobs, JobSpec(task="noop", cron="10 * * * *", timezone=NY))
        old_instants = await future_slots(store, moving.id)
    await jobs.pause(paused.id)
    # One occurrence of the moving job has started: a recompute never touches it.
    started = await store.db.fetchval(
        "UPDATE executions SET status = 'running', attempt = 1, fence = 1 WHERE id = (SELECT id FROM executions "
        "WHERE job_id = $1 ORDER BY scheduled_for DESC LIMIT 1) RETURNING id", moving.id)
    assert all(t.minute == 30 for t in old_instants) or all(t.minute != 0 for t in old_instants)
    jobs_moved_before, occurrences_before = counter(metrics.TZ_JOBS_MOVED), counter(metrics.TZ_OCCURRENCES_MOVED)
    monkeypatch.setattr(tzdb, "installed_version", lambda: NEW.version)

    # Occurrences due within the dispatch horizon are queued and enqueued; make that all of them.
    wide = replace(config, dispatcher=replace(config.dispatcher, horizon_s=config.materialiser.horizon_s))
    result = await tzchange.recompute(store, queue, wide, "replica-1", NEW)

    assert result.jobs_checked == 3 and result.recompute_id is not None
    assert set(result.moved_job_ids) == {moving.id, paused.id}
    fresh = await store.job_get(moving.id)
    expected = schedule_of(fresh).occurrences(datetime.now(UTC), fresh.materialised_to)
    now_slots = await future_slots(store, moving.id)
    assert now_slots and set(now_slots) <= set(expected) and not set(now_slots) & set(old_instants)
    assert all(t.astimezone(ZoneInfo(NY)).minute == 0 for t in now_slots)  # on the hour again, by the real rules
    assert await store.db.fetchval("SELECT status FROM executions WHERE id = $1", started) == "running"
    queued = await store.db.fetch("SELECT id FROM executions WHERE job_id = $1 AND status = 'queued'", moving.id)
    assert queued and await queue.missing([str(r["id"]) for r in queued]) == []
    # Every job now records the new version; the unaffected one kept its rows.
    versions = await store.db.fetch("SELECT id, tzdata_version FROM jobs")
    assert {r["tzdata_version"] for r in versions} == {NEW.version}
    moved = {m.job_id: m for m in await store.tz_moved_job_list(result.recompute_id)}
    report = moved[moving.id]
    assert report.old_version == "2000a" and report.removed == len(old_instants) - 1 and report.added >= report.removed
    old_at, new_at = report.moves[0]
    # 30 minutes apart; which way the first pair points depends on the minute of the hour the test runs in
    assert abs(datetime.fromisoformat(new_at) - datetime.fromisoformat(old_at)) == timedelta(minutes=30)
    last = await store.tz_recompute_last()
    assert (last.jobs_checked, last.jobs_moved, last.tzdata_version, last.worker) == (3, 2, "2099b", "replica-1")
    assert last.finished_at is not None
    assert counter(metrics.TZ_JOBS_MOVED) - jobs_moved_before == 2
    assert counter(metrics.TZ_OCCURRENCES_MOVED) - occurrences_before == result.occurrences_moved > 0
    # The paused job's cancelled slots were resolved with the old rules: resume writes the new ones.
    await jobs.resume(paused.id)
    resumed = await future_slots(store, paused.id)
    assert resumed and all(t.astimezone(ZoneInfo(NY)).minute == 10 for t in resumed)
    # Nothing left to do: a second start records no recompute.
    again = await tzchange.recompute(store, queue, config, "replica-2", NEW)
    assert (again.recompute_id, again.jobs_checked, again.moved_job_ids) == (None, 0, [])


async def test_replicas_starting_together_recompute_once(jobs, store, queue, config, monkeypatch) -> None:
    monkeypatch.setattr(tzdb, "installed_version", lambda: "2000a")
    with zone_rules(old_rules):
        for _ in range(30):
            await create_job(jobs, JobSpec(task="noop", cron="10 * * * *", timezone=NY))
    monkeypatch.setattr(tzdb, "installed_version", lambda: NEW.version)

    results = await asyncio.gather(*(tzchange.recompute(store, queue, config, f"replica-{i}", NEW, batch_size=7)
                                      for i in range(3)))  # fmt: skip

    assert sorted(r.jobs_checked for r in results) == [0, 0, 30]
    assert await store.db.fetchval("SELECT count(*) FROM tz_recomputes") == 1
    assert await store.db.fetchval("SELECT count(*) FROM tz_moved_jobs") == 30
    duplicates = await store.db.fetchval(
        "SELECT count(*) FROM (SELECT 1 FROM executions GROUP BY job_id, scheduled_for HAVING count(*) > 1) d")
    assert duplicates == 0


async def test_materialising_with_another_version_marks_the_job_mixed(jobs, store, queue, config, monkeypatch) -> None:
    monkeypatch.setattr(tzdb, "installed_version", lambda: "2000a")
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="* * * * *"))
    assert (await store.job_get(job.id)).tzdata_version == "2000a"
    # A replica still on the old version keeps materialising; one on a newer version writes next.
    monkeypatch.setattr(tzdb, "installed_version", lambda: "2099b")
    async with store.transaction() as tx:
        locked = await tx.job_lock(job.id)
        await materialise_jobs(tx, [locked], locked.materialised_to + timedelta(minutes=5), config.materialiser,
                               config.dispatcher.horizon_s)  # fmt: skip
    assert (await store.job_get(job.id)).tzdata_version == "mixed"  # differs from every version: recomputed at start
    result = await tzchange.recompute(store, queue, config, "replica-1", NEW)
    assert result.jobs_checked == 1 and result.moved_job_ids == []  # UTC: nothing moved
    assert (await store.job_get(job.id)).tzdata_version == NEW.version


async def materialise_at(store, config, job, now: datetime) -> list[datetime]:  # type: ignore[no-untyped-def]
    """Write a job's occurrences as if the materialiser ran at `now` (a fake clock), two days ahead."""
    await store.db.execute("DELETE FROM executions WHERE job_id = $1", job.id)
    await store.db.execute("UPDATE jobs SET materialised_to = $2 WHERE id = $1", job.id, now)  # written up to the fake now
    async with store.transaction() as tx:
        locked = await tx.job_lock(job.id)
        await materialise_jobs(tx, [locked], now, replace(config.materialiser, horizon_s=2 * 86400), config.dispatcher.horizon_s)
    rows = await store.db.fetch("SELECT scheduled_for FROM executions WHERE job_id = $1 ORDER BY scheduled_for", job.id)
    return [r["scheduled_for"] for r in rows]


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# New York in 2027: spring forward on 03-14 (02:00-02:59 missing), fall back on 11-07 (01:00-01:59 twice).
@pytest.mark.parametrize(("cron", "repeated", "missing", "now", "expected"), [
    ("30 2 * * *", None, "skip", "2027-03-13 12:00", ["2027-03-15 06:30"]),  # no run on 03-14
    ("30 2 * * *", None, None, "2027-03-13 12:00", ["2027-03-14 07:00", "2027-03-15 06:30"]),  # the rule: 03:00 EDT
    ("30 1 * * *", "both", None, "2027-11-06 12:00", ["2027-11-07 05:30", "2027-11-07 06:30", "2027-11-08 06:30"]),
    ("30 1 * * *", None, None, "2027-11-06 12:00", ["2027-11-07 05:30", "2027-11-08 06:30"]),  # the rule: first pass
])
async def test_dst_overrides_decide_what_the_materialiser_writes(jobs, store, config, cron, repeated, missing, now,
                                                                  expected) -> None:  # fmt: skip
    job, _ = await create_job(jobs, JobSpec(task="noop", cron=cron, timezone=NY, dst_repeated=repeated, dst_missing=missing))
    written = await materialise_at(store, config, job, utc(now))
    assert written == [utc(t) for t in expected]
    saved = await store.job_get(job.id)
    assert (saved.dst_repeated, saved.dst_missing) == (repeated, missing)


async def test_a_skipped_spring_forward_hour_is_written_for_a_cadence_only_when_shifted(jobs, store, config) -> None:
    skip, _ = await create_job(jobs, JobSpec(task="noop", cron="30 * * * *", timezone=NY))  # cadence: skip by the rule
    shift, _ = await create_job(jobs, JobSpec(task="noop", cron="30 * * * *", timezone=NY, dst_missing="shift"))
    night = utc("2027-03-14 04:00")  # 23:00 EST on 03-13
    skipped = await materialise_at(store, config, skip, night)
    shifted = await materialise_at(store, config, shift, night)
    assert utc("2027-03-14 07:00") not in skipped and utc("2027-03-14 07:00") in shifted  # 02:30 -> 03:00 EDT
    assert len(shifted) == len(skipped) + 1


@pytest.mark.parametrize(("spec", "field", "message"), [
    (JobSpec(task="noop", cron="@daily", dst_repeated="twice"), "dst_repeated", "must be one of first, both"),
    (JobSpec(task="noop", cron="@daily", dst_missing="later"), "dst_missing", "must be one of shift, skip"),
    (JobSpec(task="noop", dst_missing="skip"), "dst_missing", "applies to cron jobs only"),
])
async def test_bad_dst_overrides_are_refused_and_write_nothing(jobs, store, spec, field, message) -> None:
    with pytest.raises(ValidationError, match=message) as raised:
        await create_job(jobs, spec)
    assert raised.value.field == field
    assert await store.db.fetchval("SELECT count(*) FROM jobs") == 0


async def test_a_job_whose_zone_left_the_tz_database_is_kept_and_logged(jobs, store, queue, config, monkeypatch) -> None:
    monkeypatch.setattr(tzdb, "installed_version", lambda: "2000a")
    gone, _ = await create_job(jobs, JobSpec(task="noop", cron="0 * * * *", timezone="Asia/Kolkata"))
    other, _ = await create_job(jobs, JobSpec(task="noop", cron="0 * * * *", timezone="UTC"))
    before = await future_slots(store, gone.id)

    def without_kolkata(name: str) -> ZoneInfo:
        if name == "Asia/Kolkata":
            raise ValueError("no such zone in this tz database")
        return ZoneInfo(name)

    with zone_rules(without_kolkata):
        result = await tzchange.recompute(store, queue, config, "replica-1", NEW)

    assert result.jobs_checked == 2 and result.moved_job_ids == []
    assert await future_slots(store, gone.id) == before  # nothing deleted
    assert (await store.job_get(gone.id)).tzdata_version == "2000a"  # tried again at the next start
    assert (await store.job_get(other.id)).tzdata_version == NEW.version


async def moving_job(jobs, store, monkeypatch):  # type: ignore[no-untyped-def]
    """An hourly New York job written under the 'old' rules (every instant moves), and its first
    future occurrence (id, scheduled_for), made claimable now: its due time is brought forward, as
    if its instant came while the recompute runs (which judges scheduled_for, not due_at). The new
    version is installed after."""
    monkeypatch.setattr(tzdb, "installed_version", lambda: "2000a")
    with zone_rules(old_rules):
        job, _ = await create_job(jobs, JobSpec(task="noop", cron="0 * * * *", timezone=NY))
    first = await store.db.fetchrow(
        "UPDATE executions SET due_at = now() WHERE id = (SELECT id FROM executions WHERE job_id = $1 "
        "AND scheduled_for > now() ORDER BY scheduled_for LIMIT 1) RETURNING id, scheduled_for", job.id)
    monkeypatch.setattr(tzdb, "installed_version", lambda: NEW.version)
    return job, first


async def partner_of(store, recompute_id: int | None, job_id, old: datetime) -> datetime | None:  # type: ignore[no-untyped-def]
    """The instant the recompute moved `old` to, if it moved it."""
    if recompute_id is None:
        return None
    for m in await store.tz_moved_job_list(recompute_id):
        for before, after in m.moves if m.job_id == job_id else []:
            if before and datetime.fromisoformat(before) == old:
                return datetime.fromisoformat(after) if after else None
    return None


async def rows_at(store, job_id, at: datetime) -> list:  # type: ignore[no-untyped-def]
    return await store.db.fetch("SELECT id, status FROM executions WHERE job_id = $1 AND scheduled_for = $2", job_id, at)


async def test_a_claim_racing_a_recompute_never_runs_one_occurrence_twice(jobs, store, queue, config, monkeypatch) -> None:
    job, first = await moving_job(jobs, store, monkeypatch)
    claim: asyncio.Task[list[Claim]] | None = None
    real_delete = Store.execution_delete_tz_stale

    async def claim_then_delete(self: Store, slots: list[tuple[UUID, datetime]]) -> set[UUID]:
        # Between the recompute's read and its writes, the first occurrence comes due and is
        # claimed (the pop's instant is its due time); the recompute goes on once that claim has
        # committed or waits on a lock.
        nonlocal claim
        claim = asyncio.ensure_future(store.execution_claim_many([first["id"]], 30, "worker-1"))
        for _ in range(500):
            waiting = await store.db.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")
            if claim.done() or waiting:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the claim neither finished nor waited on a lock")
        return await real_delete(self, slots)

    monkeypatch.setattr(Store, "execution_delete_tz_stale", claim_then_delete)
    result = await tzchange.recompute(store, queue, config, "replica-1", NEW)
    assert claim is not None
    claimed = await claim

    partner = await partner_of(store, result.recompute_id, job.id, first["scheduled_for"])
    runs = len(claimed) + (len(await rows_at(store, job.id, partner)) if partner else 0)
    assert runs == 1  # the old instant claimed and kept, or deleted and its new instant written: never both
    assert claimed == []  # here: the claim waited for the recompute's commit and found the row gone
    assert await store.db.fetchval(
        "SELECT count(*) FROM executions WHERE job_id = $1 AND status = 'running'", job.id) == len(claimed)


async def test_an_occurrence_started_before_a_recompute_stays_and_its_new_instant_is_not_written(
    jobs, store, queue, config, monkeypatch
) -> None:  # fmt: skip
    job, first = await moving_job(jobs, store, monkeypatch)
    before = await future_slots(store, job.id)
    claimed = await store.execution_claim_many([first["id"]], 30, "worker-1")
    assert [c.id for c in claimed] == [first["id"]]

    result = await tzchange.recompute(store, queue, config, "replica-1", NEW)

    assert [r["status"] for r in await rows_at(store, job.id, first["scheduled_for"])] == ["running"]
    assert result.moved_job_ids == [job.id]
    assert await partner_of(store, result.recompute_id, job.id, first["scheduled_for"]) is None
    # Every other occurrence moved; one row per occurrence still, the started one among them.
    slots = await store.db.fetch(
        "SELECT scheduled_for FROM executions WHERE job_id = $1 AND scheduled_for > now() ORDER BY scheduled_for", job.id)
    assert len(slots) == len(before)
    assert all(s["scheduled_for"].astimezone(ZoneInfo(NY)).minute == 0
               for s in slots if s["scheduled_for"] != first["scheduled_for"])
    assert (await store.job_get(job.id)).tzdata_version == NEW.version


@pytest.mark.parametrize("reason", ["task_limit", "rate_limited", "breaker_open", "late_replay"])
async def test_parked_and_replayed_occurrences_are_recomputed(jobs, store, queue, config, monkeypatch, reason) -> None:
    job, first = await moving_job(jobs, store, monkeypatch)
    if reason == "late_replay":
        assert len(await store.execution_replay_many([(first["id"], 5.0, "scheduler_down")])) == 1
    else:  # claimed, then handed back unrun by a tenant's cap, a rate limit or an open breaker
        [claim] = await store.execution_claim_many([first["id"]], 30, "worker-1")
        parked, _ = await store.execution_park_many([(claim.id, claim.fence)], [5.0], reason, late_grace_s=60.0)
        assert len(parked) == 1
    assert await store.db.fetchval("SELECT reason FROM executions WHERE id = $1", first["id"]) == reason

    result = await tzchange.recompute(store, queue, config, "replica-1", NEW)

    partner = await partner_of(store, result.recompute_id, job.id, first["scheduled_for"])
    assert await rows_at(store, job.id, first["scheduled_for"]) == []  # the old instant is gone
    assert partner is not None and len(await rows_at(store, job.id, partner)) == 1  # and its new one written
    slots = await future_slots(store, job.id)
    assert slots and all(t.astimezone(ZoneInfo(NY)).minute == 0 for t in slots)


async def test_a_replica_waits_out_a_recompute_longer_than_the_statement_bound(database_url, queue, config) -> None:
    """The lock is waited for by polling: a wait inside one statement would give up after
    statement_timeout_s, and the replica would go on without recomputing."""
    bounded = await Store.connect(database_url, min_size=1, max_size=2, statement_timeout_s=1.0)
    try:
        async with bounded.db.acquire() as other_replica:
            await other_replica.execute("SELECT pg_advisory_lock(hashtext('schedulerd.tz_recompute'))")
            waiting = asyncio.ensure_future(tzchange.recompute(bounded, queue, config, "replica-b", NEW))
            await asyncio.sleep(2.5)  # past the bound
            assert not waiting.done()
            await other_replica.execute("SELECT pg_advisory_unlock(hashtext('schedulerd.tz_recompute'))")
            result = await asyncio.wait_for(waiting, 10)
        assert result.jobs_checked == 0
    finally:
        await bounded.close()
