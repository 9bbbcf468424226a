"""The CLI and the daemon as subprocesses, as a user runs them."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from schedulerd.models import ExecutionStatus
from tests.conftest import wait_for




@pytest.mark.parametrize(
    ("expression", "zone", "start", "expected_utc"),
    [
        # Fall back: a fixed 01:30 runs once, at its first occurrence (EDT).
        ("30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z", ["2026-11-01T05:30:00+00:00", "2026-11-02T06:30:00+00:00"]),
        # Spring forward: a 02:30 that does not exist runs at the end of the gap, 03:00 EDT.
        ("30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z", ["2026-03-08T07:00:00+00:00", "2026-03-09T06:30:00+00:00"]),
        # A zone whose clocks jump at midnight: 00:00 runs at the first instant after the gap.
        ("0 0 * * *", "America/Santiago", "2026-09-05T12:00:00Z", ["2026-09-06T04:00:00+00:00", "2026-09-07T03:00:00+00:00"]),
    ],
)
def test_cron_next_shows_the_dst_rule(cli, expression, zone, start, expected_utc) -> None:
    shown = cli("cron", "next", expression, "--tz", zone, "--from", start, "--count", "2", "--json")
    assert shown.returncode == 0, shown.stderr
    runs = json.loads(shown.stdout)
    assert [r["utc"] for r in runs] == expected_utc
    assert all(datetime.fromisoformat(r["local"]) == datetime.fromisoformat(r["utc"]) for r in runs)


def test_cadence_schedules_keep_real_time_through_dst(cli) -> None:
    shown = cli("cron", "next", "0 * * * *", "--tz", "America/New_York", "--from", "2026-11-01T04:00:00Z", "--count", "25", "--json")
    local_days = [datetime.fromisoformat(r["local"]).date().isoformat() for r in json.loads(shown.stdout)]
    assert local_days.count("2026-11-01") == 24  # the 25th run of that day is 2026-11-02 00:00 local... of the next window
    utc = [datetime.fromisoformat(r["utc"]) for r in json.loads(shown.stdout)]
    assert all((b - a).total_seconds() == 3600 for a, b in zip(utc, utc[1:]))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["job", "create", "--task", "nope"], "task: unknown task type 'nope'"),
        (["job", "create", "--task", "log", "--params", "{bad"], "--params: Expecting property name"),
        (["job", "create", "--task", "log", "--at", "2026-12-01T09:00"], "--at: '2026-12-01T09:00' has no UTC offset"),
        (["job", "create", "--task", "log", "--in", "5x"], "--in: '5x' is not a duration"),
        (["job", "create", "--task", "log", "--cron", "*/0 * * * *"], "cron: bad cron expression"),
        (["job", "create", "--task", "log", "--cron", "@daily", "--tz", "Nowhere/Land"], "--tz: unknown time zone 'Nowhere/Land'"),
        (["job", "create", "--task", "log", "--params", json.dumps({"x": "a" * 70000})], "params: is 70009 bytes; the limit is 65536"),
        (["cron", "next", "0 0 30 2 *"], "never fires"),
        (["executions", "show", "not-a-uuid"], "id: 'not-a-uuid' is not a valid id"),
    ],
)
async def test_bad_input_exits_2_with_a_precise_message_and_writes_nothing(cli, store, args, message) -> None:
    refused = cli(*args)
    assert refused.returncode == 2, refused
    assert message in refused.stderr
    assert await store.db.fetchval("SELECT count(*) FROM jobs") == 0


def test_missing_objects_exit_1(cli) -> None:
    missing = cli("executions", "show", "00000000-0000-0000-0000-000000000000")
    assert missing.returncode == 1 and "not found" in missing.stderr


def test_creating_a_cron_job_prints_its_next_runs_in_zone_and_utc(cli) -> None:
    created = cli("job", "create", "--task", "noop", "--cron", "0 9 * * MON-FRI", "--tz", "Europe/London")
    assert created.returncode == 0, created.stderr
    lines = created.stdout.splitlines()
    assert "'0 9 * * MON-FRI' in Europe/London" in lines[1]
    runs = lines[2:]
    assert len(runs) == 5 and all("09:00:00 GMT (+0000)" in r and r.rstrip().endswith("09:00:00.000Z") for r in runs)


async def test_one_off_job_runs_about_on_time_through_the_daemon(cli, store, start_daemon) -> None:
    start_daemon("replica-1")
    created = cli("job", "create", "--task", "log", "--in", "2s", "--json")
    execution_id = json.loads(created.stdout)["executions"][0]["id"]

    async def succeeded():
        listed = json.loads(cli("executions", "list", "--json").stdout)
        return listed and listed[0]["status"] == ExecutionStatus.SUCCEEDED and listed[0]

    row = await wait_for(succeeded, timeout_s=30, interval_s=0.5)
    assert row["id"] == execution_id
    lag_s = (datetime.fromisoformat(row["first_started_at"]) - datetime.fromisoformat(row["scheduled_for"])).total_seconds()
    assert 0 <= lag_s < 2
    shown = cli("executions", "show", execution_id)
    assert "succeeded" in shown.stdout and "replica-1" in shown.stdout


@pytest.mark.timeout(200)
async def test_every_minute_cron_job_runs_once_a_minute_on_time(cli, store, start_daemon) -> None:
    start_daemon("replica-1")
    start_daemon("replica-2")
    created = cli("job", "create", "--task", "noop", "--cron", "* * * * *", "--json")
    job_id = json.loads(created.stdout)["job"]["id"]

    async def two_runs():
        rows = await store.db.fetch(
            "SELECT scheduled_for, first_started_at, attempt FROM executions WHERE job_id = $1 AND status = 'succeeded' ORDER BY scheduled_for",
            __import__("uuid").UUID(job_id),
        )
        return len(rows) >= 2 and rows

    rows = await wait_for(two_runs, timeout_s=150, interval_s=1)
    lags = [(r["first_started_at"] - r["scheduled_for"]).total_seconds() for r in rows]
    print(f"\nevery-minute cron: {len(rows)} runs, start lags {[round(x, 3) for x in lags]} s")
    assert (rows[1]["scheduled_for"] - rows[0]["scheduled_for"]).total_seconds() == 60
    assert all(0 <= lag < 2 for lag in lags) and all(r["attempt"] == 1 for r in rows)
    assert all(r["scheduled_for"] <= datetime.now(UTC) for r in rows)


async def test_status_reports_queue_horizon_and_outcomes(cli, make_job) -> None:
    assert cli("job", "create", "--task", "noop", "--cron", "@hourly").returncode == 0
    shown = cli("status", "--json")
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert 5.5 * 3600 <= report["materialiser_horizon_s"] <= 6 * 3600
    assert report["queue_depth"] >= 0 and set(report) >= {"oldest_queued_due_age_s", "last_hour_by_status"}


async def test_late_runs_are_listed_and_explained(cli, store, queue, config) -> None:  # type: ignore[no-untyped-def]
    from uuid import UUID

    from schedulerd.materialiser import Materialiser

    created = cli("job", "create", "--task", "noop", "--cron", "*/10 * * * *", "--misfire", "skip", "--json")
    job_id = json.loads(created.stdout)["job"]["id"]
    # Nobody ran the last hour of occurrences (no replica reported): the judge skips them as scheduler_down.
    await store.db.execute("DELETE FROM replicas")
    await store.db.execute("UPDATE executions SET id = schedulerd_execution_id(scheduled_for - interval '1 hour'), "
                           "scheduled_for = scheduled_for - interval '1 hour', "
                           "due_at = due_at - interval '1 hour' WHERE job_id = $1", UUID(job_id))  # fmt: skip
    await Materialiser(store, queue, config.materialiser, dispatch_horizon_s=config.dispatcher.horizon_s).run_once()
    first = await store.db.fetchval("SELECT min(scheduled_for) FROM executions WHERE status = 'skipped'")

    table = cli("executions", "list", "--late", "--job", job_id, "--since", "2h")
    listed = cli("executions", "list", "--late", "--reason", "scheduler_down", "--json")
    why = cli("job", "why", job_id, "--at", (first + timedelta(minutes=1)).isoformat())
    why_json = cli("job", "why", job_id, "--at", first.isoformat(), "--json")

    assert table.returncode == 0, table.stderr
    assert "LATE_REASON" in table.stdout and "scheduler_down" in table.stdout and "misfire_skip" in table.stdout
    rows = json.loads(listed.stdout)
    assert len(rows) >= 5 and {r["late_reason"] for r in rows} == {"scheduler_down"}
    assert why.returncode == 0, why.stderr
    assert "late reason          scheduler_down" in why.stdout and "it did not run: skipped" in why.stdout
    answer = json.loads(why_json.stdout)
    assert answer["scheduled_for"] == first.isoformat() and answer["execution"]["status"] == "skipped"
    assert cli("executions", "list", "--late", "--reason", "paused", "--json").stdout.strip() == "[]"
    in_last_hour = json.loads(cli("status", "--json").stdout)["late_last_hour_by_reason"]
    assert in_last_hour["scheduler_down"] == await store.db.fetchval(
        "SELECT count(*) FROM executions WHERE late_reason = 'scheduler_down' AND scheduled_for > now() - interval '1 hour'"
    ) >= 4


@pytest.mark.parametrize(("args", "message"), [
    (["job", "why", "00000000-0000-0000-0000-000000000000", "--at", "02:00"], "not found"),
    (["job", "why", "not-a-uuid", "--at", "02:00"], "id: 'not-a-uuid' is not a valid id"),
    (["executions", "list", "--since", "1h"], "--since: applies only with --late"),
    (["executions", "list", "--late", "--since", "last week"], "--since: 'last week' is neither"),
    (["executions", "list", "--late", "--status", "failed"], "--status: cannot be combined with --late"),
])  # fmt: skip
def test_bad_late_queries_are_refused(cli, args, message) -> None:  # type: ignore[no-untyped-def]
    refused = cli(*args)
    assert refused.returncode in (1, 2) and message in refused.stderr, refused


async def test_why_refuses_a_bad_time_naming_at(cli) -> None:  # type: ignore[no-untyped-def]
    job_id = json.loads(cli("job", "create", "--task", "noop", "--cron", "0 2 * * *", "--json").stdout)["job"]["id"]
    refused = cli("job", "why", job_id, "--at", "25:00")
    assert refused.returncode == 2 and "--at: '25:00' is not a wall-clock time" in refused.stderr


async def test_status_shows_the_due_forecast(cli, make_job) -> None:  # type: ignore[no-untyped-def]
    await make_job("noop", run_at=datetime.now(UTC) + timedelta(seconds=30))
    await make_job("noop", run_at=datetime.now(UTC) + timedelta(minutes=10))
    report = json.loads(cli("status", "--json").stdout)
    assert report["due_next"] == {"1m": 1, "5m": 1, "15m": 2, "60m": 2}
    assert "due next" in cli("status").stdout


def test_token_list_and_revoke(cli) -> None:  # type: ignore[no-untyped-def]
    made = cli("tenant", "create", "tokens-cli")
    assert made.returncode == 0, made.stderr
    second = cli("token", "create", "tokens-cli")
    token_id = second.stdout.split("token ", 1)[1].split(" ", 1)[0]
    listed = json.loads(cli("token", "list", "tokens-cli", "--json").stdout)
    assert len(listed) == 2 and all(t["revoked_at"] is None for t in listed) and "token_hash" not in listed[0]
    revoked = cli("token", "revoke", token_id)
    assert revoked.returncode == 0 and f"token {token_id} of tenant tokens-cli revoked" in revoked.stdout
    listed = json.loads(cli("token", "list", "tokens-cli", "--json").stdout)
    assert sum(t["revoked_at"] is not None for t in listed) == 1
    assert cli("token", "revoke", "00000000-0000-0000-0000-000000000000").returncode == 1
    assert cli("token", "revoke", "nope").returncode == 2


def test_job_create_with_a_debounce_key_shares_one_execution(cli) -> None:  # type: ignore[no-untyped-def]
    made = [json.loads(cli("job", "create", "--task", "noop", "--params", json.dumps({"n": n}), "--debounce-key", "report-7",
                           "--debounce-window", "1m", "--json").stdout) for n in range(3)]  # fmt: skip
    assert len({m["job"]["id"] for m in made}) == 1 and made[-1]["job"]["params"] == {"n": 2}
    assert len({m["executions"][0]["id"] for m in made}) == 1
