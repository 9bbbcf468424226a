"""The DST overrides, the labelled preview and `schedulerd tz report` through the CLI, as a user
runs them; and a daemon that recomputes, at start, jobs resolved with another tz database."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from schedulerd import tzchange, tzdb
from schedulerd.core.schedule import zone_rules
from schedulerd.jobs import Jobs, JobSpec
from schedulerd.tzdb import TzDatabase
from tests.conftest import create_job, wait_for

NY = "America/New_York"




@pytest.fixture
async def no_recomputes(store):  # type: ignore[no-untyped-def]
    await store.db.execute("TRUNCATE tz_recomputes CASCADE")


def test_cron_next_labels_what_dst_did(cli) -> None:
    shifted = cli("cron", "next", "30 2 * * *", "--tz", NY, "--from", "2026-03-07T12:00:00Z", "--count", "2", "--json")
    assert shifted.returncode == 0, shifted.stderr
    first, second = json.loads(shifted.stdout)
    assert (first["utc"], first["labels"], second["labels"]) == ("2026-03-08T07:00:00+00:00", ["dst_shifted"], [])
    assert "2026-03-08 02:30 did not exist" in first["note"] and second["note"] is None

    skipped = cli("cron", "next", "30 2 * * *", "--tz", NY, "--from", "2026-03-07T12:00:00Z", "--count", "1",
                  "--dst-missing", "skip", "--json")  # fmt: skip
    (run,) = json.loads(skipped.stdout)
    assert (run["utc"], run["labels"]) == ("2026-03-09T06:30:00+00:00", ["dst_skipped_before"])

    both = cli("cron", "next", "30 1 * * *", "--tz", NY, "--from", "2026-10-31T12:00:00Z", "--count", "2", "--dst-repeated", "both")
    assert both.returncode == 0, both.stderr
    lines = both.stdout.splitlines()
    assert "01:30:00 EDT" in lines[0] and "[dst_repeated]" in lines[0] and "first pass" in lines[0]
    assert "01:30:00 EST" in lines[1] and "second pass" in lines[1]


def test_cron_next_previews_quartz_forms_with_the_same_labels(cli) -> None:
    # London's clocks go forward on the last Sunday of March: 01:30 on that day does not exist.
    last_sunday = cli("cron", "next", "30 1 ? * SUNL", "--tz", "Europe/London", "--from", "2026-03-01T00:00:00Z",
                      "--count", "2", "--json")  # fmt: skip
    assert last_sunday.returncode == 0, last_sunday.stderr
    first, second = json.loads(last_sunday.stdout)
    assert (first["utc"], first["labels"], second["utc"], second["labels"]) == (
        "2026-03-29T01:00:00+00:00", ["dst_shifted"], "2026-04-26T00:30:00+00:00", [])
    # New York falls back on the first Sunday of November: 01:30 happens twice, runs once.
    text = cli("cron", "next", "30 1 * * SUN#1", "--tz", NY, "--from", "2026-10-05T00:00:00Z", "--count", "1")
    assert text.returncode == 0 and "[dst_deduplicated]" in text.stdout and "01:30:00 EDT" in text.stdout
    month_end = cli("cron", "next", "0 18 LW * *", "--tz", NY, "--from", "2026-05-01T00:00:00Z", "--count", "1", "--json")
    assert [r["local"] for r in json.loads(month_end.stdout)] == ["2026-05-29T18:00:00-04:00"]  # the 31st is a Sunday


def test_cron_next_previews_an_interval_from_the_start_with_no_dst_labels(cli) -> None:
    done = cli("cron", "next", "@every 1h30m", "--tz", NY, "--from", "2026-03-08T05:00:00Z", "--count", "3", "--json")
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)
    assert [r["utc"] for r in runs] == ["2026-03-08T06:30:00+00:00", "2026-03-08T08:00:00+00:00", "2026-03-08T09:30:00+00:00"]
    assert [r["local"][11:16] for r in runs] == ["01:30", "04:00", "05:30"]  # the clocks jumped; the interval did not
    assert all(r["labels"] == [] and r["note"] is None for r in runs)
    text = cli("cron", "next", "@every 1h30m", "--from", "2026-03-08T05:00:00Z", "--count", "1")
    assert text.stdout.startswith("@every 1h30m: elapsed time counted from 2026-03-08 05:00:00.000Z"), text.stdout


async def test_an_interval_job_counts_from_its_creation(cli, store) -> None:
    created = cli("job", "create", "--task", "noop", "--cron", "@every 7m", "--tz", NY, "--json")
    assert created.returncode == 0, created.stderr
    job = json.loads(created.stdout)["job"]
    anchor = datetime.fromisoformat(job["created_at"]).replace(microsecond=0)
    rows = await store.db.fetch("SELECT scheduled_for FROM executions WHERE job_id = $1 ORDER BY 1", job["id"])
    assert len(rows) == 6 * 60 // 7  # the materialiser's 6-hour horizon, written at create
    assert [r["scheduled_for"] for r in rows[:2]] == [anchor + timedelta(minutes=7), anchor + timedelta(minutes=14)]
    shown = json.loads(cli("job", "next", job["id"], "--count", "2", "--json").stdout)
    assert [datetime.fromisoformat(r["utc"]) for r in shown] == [r["scheduled_for"] for r in rows[:2]]


async def test_job_create_with_overrides_and_its_labelled_next_runs(cli, store) -> None:
    created = cli("job", "create", "--task", "log", "--cron", "30 1 * * *", "--tz", NY, "--dst-repeated", "both",
                  "--dst-missing", "skip", "--json")  # fmt: skip
    assert created.returncode == 0, created.stderr
    job = json.loads(created.stdout)["job"]
    assert (job["dst_repeated"], job["dst_missing"], job["tzdata_version"]) == ("both", "skip", tzdb.installed_version())
    shown = cli("job", "next", job["id"], "--count", "3", "--json")
    runs = json.loads(shown.stdout)
    assert len(runs) == 3 and all(set(r) == {"utc", "local", "labels", "note"} for r in runs)
    text = cli("job", "create", "--task", "log", "--cron", "0 9 * * *", "--tz", "Europe/London")
    assert text.returncode == 0 and "next runs:" in text.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["job", "create", "--task", "log", "--cron", "@daily", "--dst-repeated", "twice"], "invalid choice: 'twice'"),
    (["job", "create", "--task", "log", "--cron", "@daily", "--dst-missing", "later"], "invalid choice: 'later'"),
    (["job", "create", "--task", "log", "--dst-missing", "skip"], "--dst-missing: applies to cron jobs only"),
    (["cron", "next", "@daily", "--dst-repeated", "all"], "invalid choice: 'all'"),
])
async def test_bad_overrides_exit_2_and_write_nothing(cli, store, args, message) -> None:
    refused = cli(*args)
    assert refused.returncode == 2, refused
    assert message in refused.stderr
    assert await store.db.fetchval("SELECT count(*) FROM jobs") == 0


def old_rules(name: str) -> timezone | ZoneInfo:
    """'Old tzdata': New York half an hour off the real rules, so an hourly job's instants move."""
    real = datetime.now(ZoneInfo(NY)).utcoffset()
    assert real is not None
    return timezone(real + timedelta(minutes=30), "OLD") if name == NY else ZoneInfo(name)


async def test_tz_report_lists_the_last_recomputes_moved_jobs(cli, store, queue, config, monkeypatch, no_recomputes) -> None:
    empty = cli("tz", "report")
    assert empty.returncode == 0 and "no recompute recorded yet" in empty.stdout
    monkeypatch.setattr(tzdb, "installed_version", lambda: "2000a")
    with zone_rules(old_rules):
        job, _ = await create_job(Jobs(store, queue, config), JobSpec(task="noop", cron="0 * * * *", timezone=NY, tenant="acme"))
    await tzchange.recompute(store, queue, config, "replica-1", TzDatabase("2099b", "simulated"))

    report = json.loads(cli("tz", "report", "--json").stdout)
    assert report["last_recompute"]["tzdata_version"] == "2099b" and report["last_recompute"]["jobs_moved"] == 1
    (moved,) = report["moved_jobs"]
    assert (moved["job_id"], moved["tenant"], moved["old_version"]) == (str(job.id), "acme", "2000a")
    assert report["jobs_by_tzdata_version"] == {"2099b": 1}
    assert report["this_host"]["tzdata_version"] == tzdb.installed().version
    text = cli("tz", "report", "--tenant", "other")
    assert "1 jobs checked, 1 moved" in text.stdout and str(job.id) not in text.stdout  # another tenant's: not listed
    assert str(job.id) in cli("tz", "report").stdout


async def test_a_daemon_recomputes_jobs_of_another_tz_database_at_start(store, queue, config, start_daemon, monkeypatch,
                                                                        no_recomputes) -> None:  # fmt: skip
    monkeypatch.setattr(tzdb, "installed_version", lambda: "2000a")
    with zone_rules(old_rules):
        job, _ = await create_job(Jobs(store, queue, config), JobSpec(task="noop", cron="0 * * * *", timezone=NY))

    daemon = start_daemon("tz-replica")

    async def recomputed() -> bool:
        return await store.db.fetchval("SELECT count(*) FROM tz_recomputes WHERE finished_at IS NOT NULL") == 1

    await wait_for(recomputed, timeout_s=30)
    saved = await store.job_get(job.id)
    assert saved.tzdata_version == tzdb.installed().version
    rows = await store.db.fetch("SELECT scheduled_for FROM executions WHERE job_id = $1 AND status IN ('pending', 'queued')", job.id)
    assert rows and all(r["scheduled_for"].astimezone(ZoneInfo(NY)).minute == 0 for r in rows)
    logged = [json.loads(line) for line in daemon.log_text().splitlines() if '"tz.job_moved"' in line]
    assert len(logged) == 1 and logged[0]["job_id"] == str(job.id) and logged[0]["old_version"] == "2000a"
