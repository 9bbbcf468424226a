"""tz database changes and per-job DST overrides, on real Postgres and Redis.

A tz database upgrade is simulated with core.schedule.zone_rules (the same zone name, other
rules) and a replaced tzdb.installed_version: jobs are materialised under the "old" rules and
version, then recomputed under the real rules and a new version.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from schedulerd import metrics, tzchange, tzdb
from schedulerd.core.schedule import zone_rules
from schedulerd.errors import ValidationError
from schedulerd.jobs import Jobs, JobSpec, schedule_of
from schedulerd.materialiser import materialise_jobs
from schedulerd.tzdb import TzDatabase

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
        moving, _ = await jobs.create(JobSpec(task="noop", cron="0 * * * *", timezone=NY))
        same, _ = await jobs.create(JobSpec(task="noop", cron="0 * * * *", timezone="UTC"))
        paused, _ = await jobs.create(JobSpec(task="noop", cron="10 * * * *", timezone=NY))
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
            await jobs.create(JobSpec(task="noop", cron="10 * * * *", timezone=NY))
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
    job, _ = await jobs.create(JobSpec(task="noop", cron="* * * * *"))
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
    job, _ = await jobs.create(JobSpec(task="noop", cron=cron, timezone=NY, dst_repeated=repeated, dst_missing=missing))
    written = await materialise_at(store, config, job, utc(now))
    assert written == [utc(t) for t in expected]
    saved = await store.job_get(job.id)
    assert (saved.dst_repeated, saved.dst_missing) == (repeated, missing)


async def test_a_skipped_spring_forward_hour_is_written_for_a_cadence_only_when_shifted(jobs, store, config) -> None:
    skip, _ = await jobs.create(JobSpec(task="noop", cron="30 * * * *", timezone=NY))  # cadence: skip by the rule
    shift, _ = await jobs.create(JobSpec(task="noop", cron="30 * * * *", timezone=NY, dst_missing="shift"))
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
        await jobs.create(spec)
    assert raised.value.field == field
    assert await store.db.fetchval("SELECT count(*) FROM jobs") == 0


async def test_a_job_whose_zone_left_the_tz_database_is_kept_and_logged(jobs, store, queue, config, monkeypatch) -> None:
    monkeypatch.setattr(tzdb, "installed_version", lambda: "2000a")
    gone, _ = await jobs.create(JobSpec(task="noop", cron="0 * * * *", timezone="Asia/Kolkata"))
    other, _ = await jobs.create(JobSpec(task="noop", cron="0 * * * *", timezone="UTC"))
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
