"""`job backfill`, `job pause --note`, `executions list --status failed` and `executions redrive`
as a user runs them (subprocesses against real Postgres and Redis)."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta



def _created_job(cli, *args: str) -> str:  # type: ignore[no-untyped-def]  # noqa: F811
    made = cli("job", "create", *args, "--json")
    assert made.returncode == 0, made.stderr
    return json.loads(made.stdout)["job"]["id"]


def test_backfill_a_range_then_again(cli, store) -> None:  # noqa: F811
    job_id = _created_job(cli, "--task", "noop", "--cron", "0 */6 * * *", "--tz", "Europe/London")
    end = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = (end - timedelta(days=1)).isoformat()

    first = cli("job", "backfill", job_id, "--from", start, "--to", end.isoformat(), "--json")
    assert first.returncode == 0, first.stderr
    created = json.loads(first.stdout)["created"]
    assert [c["origin"] for c in created] == ["backfill"] * 4
    again = cli("job", "backfill", job_id, "--from", start, "--to", end.isoformat())
    assert again.returncode == 0 and "0 executions created, 4 occurrences already backfilled" in again.stdout


def test_backfill_errors_name_the_flag(cli) -> None:  # noqa: F811
    cron_job = _created_job(cli, "--task", "noop", "--cron", "* * * * *")
    one_off = _created_job(cli, "--task", "noop", "--in", "1h")
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    cases = [
        ([cron_job, "--from", "2026-01-01T00:00:00Z", "--to", future], "--to: ", "is in the future"),
        ([cron_job, "--from", "2026-01-02T00:00:00Z", "--to", "2026-01-01T00:00:00Z"], "--to: ", "must be after from"),
        ([cron_job, "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-03T00:00:00Z"], "--to: ", "more than 1000"),
        ([cron_job, "--from", "2026-01-01T00:00", "--to", "2026-01-01T01:00:00Z"], "--from: ", "no UTC offset"),
        ([one_off, "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T01:00:00Z"], "id: ", "only cron jobs"),
    ]
    for args, field, message in cases:
        refused = cli("job", "backfill", *args)
        assert refused.returncode == 2 and field in refused.stderr and message in refused.stderr, refused.stderr


def test_pause_note_shows_in_job_show(cli) -> None:  # noqa: F811
    job_id = _created_job(cli, "--task", "noop", "--cron", "@hourly")
    paused = cli("job", "pause", job_id, "--note", "vendor outage INC-7", "--by", "alice", "--json")
    assert paused.returncode == 0, paused.stderr
    shown = json.loads(cli("job", "show", job_id, "--json").stdout)
    assert (shown["paused_note"], shown["paused_by"], shown["enabled"]) == ("vendor outage INC-7", "alice", False)
    default_by = _created_job(cli, "--task", "noop", "--cron", "@hourly")
    assert json.loads(cli("job", "pause", default_by, "--json").stdout)["paused_by"].startswith("cli")
    assert cli("job", "resume", job_id).returncode == 0
    assert json.loads(cli("job", "show", job_id, "--json").stdout)["paused_note"] is None


async def test_list_failed_and_redrive_by_id_and_by_filter(cli, store) -> None:  # noqa: F811
    ids = []
    for error in ["TimeoutError: vendor slow", "KeyError: 'sku'", "TimeoutError: vendor slow again"]:
        made = json.loads(cli("job", "create", "--task", "noop", "--in", "1h", "--json").stdout)
        execution_id = await store.db.fetchval("SELECT id FROM executions WHERE job_id = $1", uuid.UUID(made["job"]["id"]))
        # The worker's path to "failed" is covered by tests/integration; here the row is set as it leaves it.
        await store.db.execute("UPDATE executions SET status = 'failed', attempt = 3, fence = 3, last_error = $2, "
                               "finished_at = clock_timestamp() WHERE id = $1", execution_id, error)  # fmt: skip
        ids.append(str(execution_id))

    listed = cli("executions", "list", "--status", "failed", "--error", "timeouterror", "--task", "noop", "--json")
    assert listed.returncode == 0, listed.stderr
    assert sorted(e["id"] for e in json.loads(listed.stdout)) == sorted([ids[0], ids[2]])
    refused = cli("executions", "list", "--error", "x")
    assert refused.returncode == 2 and "--error: filters failed executions only" in refused.stderr

    one = cli("executions", "redrive", ids[1], "--by", "bob")
    assert one.returncode == 0 and f"execution {ids[1]} redriven" in one.stdout, one.stderr
    shown = cli("executions", "show", ids[1])
    assert "redriven" in shown.stdout and "new attempt budget after 3 attempts" in shown.stdout and "bob" in shown.stdout
    again = cli("executions", "redrive", ids[1])
    assert again.returncode == 2 and "is queued; only failed executions are redriven" in again.stderr

    bulk = cli("executions", "redrive", "--error", "vendor slow", "--json")
    assert bulk.returncode == 0, bulk.stderr
    assert sorted(json.loads(bulk.stdout)["redriven"]) == sorted([ids[0], ids[2]])
    everything = cli("executions", "redrive")
    assert everything.returncode == 2 and "at least one of" in everything.stderr
