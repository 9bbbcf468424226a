"""Bad input through every CLI flag that takes an instant, a duration, an id or a document: exit 2
naming the flag, no traceback, nothing written. And every command against a database that was
never migrated says to run `schedulerd migrate` (exit 2), instead of a driver traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.conftest import REPO_ROOT, _with_database

DEEP = "[" * 10_000 + "]" * 10_000
PAST_9999_ID = "ffffffff-ffff-8fff-bfff-ffffffffffff"  # a UUIDv8 whose embedded millisecond is in year 10889
# Instants of the kinds that left the calendar: year 1 with a positive offset, year 9999 with a
# negative one, a valid instant followed by a NUL (written as the two characters argv can carry).
YEAR_0 = "0001-01-01T00:00:00+01:00"
YEAR_10000 = "9999-12-31T23:00:00-05:00"
NOT_A_ZONE = "Nowhere/Land"


def _refused(done: subprocess.CompletedProcess[str], flag: str) -> None:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.startswith(f"schedulerd: error: {flag}: "), done.stderr


@pytest.fixture
async def cron_job(cli) -> str:  # type: ignore[no-untyped-def]
    made = cli("job", "create", "--task", "noop", "--cron", "0 2 * * *", "--json")
    assert made.returncode == 0, made.stderr
    return str(json.loads(made.stdout)["job"]["id"])


@pytest.mark.parametrize("value", [YEAR_0, YEAR_10000, "2026-12-01T09:00:00Z\x01", "9" * 70])
@pytest.mark.parametrize("command", [
    ["job", "create", "--task", "noop", "--at"],
    ["executions", "list", "--late", "--since"],
    ["executions", "list", "--status", "failed", "--since"],
    ["executions", "list", "--status", "failed", "--until"],
    ["executions", "redrive", "--until"],
    ["cron", "next", "@daily", "--from"],
])  # fmt: skip
async def test_instants_past_the_calendar_exit_2_naming_the_flag(cli, store, command, value) -> None:  # type: ignore[no-untyped-def]
    _refused(cli(*command, value), command[-1])
    assert await store.db.fetchval("SELECT count(*) FROM jobs") == 0


async def test_backfill_and_why_refuse_instants_past_the_calendar(cli, cron_job) -> None:  # type: ignore[no-untyped-def]
    for value in (YEAR_0, YEAR_10000):
        _refused(cli("job", "backfill", cron_job, "--from", value, "--to", "2026-01-01T00:00:00Z"), "--from")
        _refused(cli("job", "backfill", cron_job, "--from", "2026-01-01T00:00:00Z", "--to", value), "--to")
        _refused(cli("job", "why", cron_job, "--at", value), "--at")
    # Inside the calendar but at its very ends: answered, not a traceback.
    for value in ("0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"):
        why = cli("job", "why", cron_job, "--at", value)
        assert why.returncode == 0 and "Traceback" not in why.stderr, why.stderr


@pytest.mark.parametrize(("args", "flag"), [
    (["job", "create", "--task", "noop", "--in", "999999999999d"], "--in"),
    (["job", "create", "--task", "noop", "--in", "1" * 400 + "s"], "--in"),
    (["job", "create", "--task", "noop", "--params", json.dumps({"deep": "x"})[:-1] + ", \"d\": " + DEEP + "}"], "--params"),
    (["job", "create", "--task", "noop", "--params", DEEP], "--params"),
    (["job", "create", "--task", "noop", "--window", "999999999999d", "--cron", "@daily"], "--window"),
    (["job", "create", "--task", "noop", "--timeout", "999999999999d"], "--timeout"),
    (["job", "create", "--task", "noop", "--tz", NOT_A_ZONE], "--tz"),
    (["job", "create", "--task", "noop", "--at", "2026-12-01T09:00:00Z", "--tz", "+02:00"], "--tz"),
    (["executions", "list", "--late", "--since", "999999999999d"], "--since"),
    (["job", "create", "--task", "noop", "--debounce-key", "k"], "--debounce-window"),
    (["job", "create", "--task", "noop", "--debounce-window", "30s"], "--debounce-key"),
    (["job", "create", "--task", "noop", "--debounce-key", "k", "--debounce-window", "2d"], "--debounce-window"),
    (["job", "create", "--task", "noop", "--debounce-key", "k", "--debounce-window", "soon"], "--debounce-window"),
    (["job", "create", "--task", "noop", "--debounce-key", "k", "--debounce-window", "30s", "--in", "5s"], "--debounce-key"),
])  # fmt: skip
async def test_durations_documents_and_zones_exit_2_naming_the_flag(cli, store, args, flag) -> None:  # type: ignore[no-untyped-def]
    _refused(cli(*args), flag)
    assert await store.db.fetchval("SELECT count(*) FROM jobs") == 0


def test_ids_past_the_calendar_are_not_found_not_a_traceback(cli) -> None:  # type: ignore[no-untyped-def]
    for args in (["executions", "show", PAST_9999_ID], ["executions", "redrive", PAST_9999_ID]):
        done = cli(*args)
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode == 1 and "not found" in done.stderr, done.stderr


@pytest.mark.parametrize(("start", "first"), [
    ("0001-01-01T00:00:00Z", "0001-01-02T00:00:00+00:00"),
    ("9999-12-29T00:00:00Z", "9999-12-30T00:00:00+00:00"),
])  # fmt: skip
def test_cron_next_at_the_calendar_ends(cli, start, first) -> None:  # type: ignore[no-untyped-def]
    done = cli("cron", "next", "0 0 * * *", "--from", start, "--count", "3", "--json")
    assert done.returncode == 0, done.stderr
    runs = [r["utc"] for r in json.loads(done.stdout)]
    assert runs[0] == first and len(runs) == (3 if start.startswith("0001") else 2)
    # A zone ahead of UTC: its local 9999-12-31 00:00 is 9999-12-30 10:00 UTC, and it is there.
    ahead = cli("cron", "next", "0 0 * * *", "--tz", "Pacific/Kiritimati", "--from", "9999-12-29T00:00:00Z", "--json")
    assert [r["utc"] for r in json.loads(ahead.stdout)] == ["9999-12-29T10:00:00+00:00", "9999-12-30T10:00:00+00:00"]


def test_cron_next_with_no_runs_says_so(cli) -> None:  # type: ignore[no-untyped-def]
    done = cli("cron", "next", "0 0 1 1 *", "--from", "9999-06-01T00:00:00Z")
    assert done.returncode == 0 and "no runs after 9999-06-01" in done.stdout, done


# --- a database without migrations ------------------------------------------------------------------


@pytest.fixture
async def bare_database_url(database_url: str) -> AsyncIterator[str]:
    name = f"schedulerd_bare_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(database_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(database_url, name)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


JOB = "00000000-0000-4000-8000-000000000000"
COMMANDS = [
    ["status"], ["breakers"], ["job", "create", "--task", "noop"], ["job", "list"], ["job", "show", JOB],
    ["job", "pause", JOB], ["job", "resume", JOB], ["job", "delete", JOB], ["job", "trigger", JOB],
    ["job", "next", JOB], ["job", "backfill", JOB, "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-02T00:00:00Z"],
    ["job", "why", JOB, "--at", "02:00"], ["tz", "report"], ["executions", "list"], ["executions", "show", JOB],
    ["executions", "redrive", JOB], ["executions", "list", "--late"], ["executions", "list", "--status", "failed"],
    ["tenant", "create", "acme"], ["token", "create", "acme"], ["secret", "list"], ["secret", "delete", "X"],
    ["signing-key", "list"], ["signing-key", "retire", "k_0"],
]  # fmt: skip


def test_every_command_on_an_unmigrated_database_says_to_migrate(bare_database_url, redis_url, redis_prefix) -> None:  # type: ignore[no-untyped-def]
    env = {**os.environ, "SCHEDULERD_CONFIG": str(REPO_ROOT / "config.toml"), "SCHEDULERD_DATABASE_URL": bare_database_url,
           "SCHEDULERD_REDIS_URL": redis_url, "SCHEDULERD_REDIS_PREFIX": redis_prefix}  # fmt: skip
    for args in COMMANDS:
        done = subprocess.run([sys.executable, "-m", "schedulerd", *args], env=env, capture_output=True, text=True, timeout=60)
        assert "Traceback" not in done.stderr, (args, done.stderr)
        assert done.returncode == 2 and "run `schedulerd migrate`" in done.stderr, (args, done.stderr)
        assert "no schedulerd schema" in done.stderr, (args, done.stderr)


def test_migrate_needs_only_the_database(bare_database_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Migrating touches Postgres alone: no Redis URL and no embedded servers are needed."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("SCHEDULERD_")}
    env |= {"SCHEDULERD_CONFIG": str(tmp_path / "none.toml"), "SCHEDULERD_DATABASE_URL": bare_database_url,
            "SCHEDULERD_EMBEDDED_DATA_DIR": str(tmp_path / ".schedulerd")}  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "schedulerd", "migrate"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("applied "), done.stderr
    assert not (tmp_path / ".schedulerd").exists()  # no embedded server was started for it


@pytest.mark.parametrize(("cron", "message"), [
    ("0 0 * * 8#1", "day-of-week field '8#1': 8 is out of range 0-7"),
    ("0 0 * * FRI#6", "day-of-week field 'FRI#6': the week of the month after '#' must be 1-5, got 6"),
    ("0 0 32W * *", "day-of-month field '32W': 32 is out of range 1-31"),
    ("L 0 * * *", "minute field 'L': 'L', 'W', '#' and '?' are allowed only in the day-of-month and day-of-week fields"),
    ("0 0 * * L", "day-of-week field 'L': 'L' alone is ambiguous in day-of-week"),
    ("@every 0s", "'0s' is shorter than 1 minute"),
    ("@every 5x", "'5x' is not a duration"),
])  # fmt: skip
async def test_quartz_forms_and_intervals_exit_2_naming_the_flag(cli, store, cron, message) -> None:  # type: ignore[no-untyped-def]
    created = cli("job", "create", "--task", "noop", "--cron", cron)
    _refused(created, "--cron")
    assert message in created.stderr
    previewed = cli("cron", "next", cron)
    _refused(previewed, "expression")
    assert message in previewed.stderr
    override = cli("job", "create", "--task", "noop", "--cron", "@every 5m", "--dst-missing", "skip")
    _refused(override, "--dst-missing")
    assert "an interval is elapsed time, which DST never moves" in override.stderr
    assert await store.db.fetchval("SELECT count(*) FROM jobs") == 0
