"""`job create --priority` and `job update --priority` as subprocesses: stored and shown; a bad
value exits 2 naming the flag, nothing written."""

from __future__ import annotations

import json

import pytest

from tests.acceptance.test_cli_bad_input import _refused


async def test_create_and_update_take_a_priority(cli, store) -> None:  # type: ignore[no-untyped-def]
    made = cli("job", "create", "--task", "noop", "--cron", "* * * * *", "--priority", "9", "--json")
    assert made.returncode == 0, made.stderr
    job_id = json.loads(made.stdout)["job"]["id"]
    assert await store.db.fetchval("SELECT priority FROM jobs WHERE id = $1", job_id) == 9
    written = await store.db.fetch("SELECT priority FROM executions WHERE job_id = $1", job_id)
    assert written and {r["priority"] for r in written} == {9}

    updated = cli("job", "update", job_id, "--priority", "2")
    assert updated.returncode == 0, updated.stderr
    assert await store.db.fetchval("SELECT priority FROM jobs WHERE id = $1", job_id) == 2
    assert "--priority" in cli("job", "create", "--help").stdout


@pytest.mark.parametrize("value", ["10", "-1", "high", "true", "5.5", ""])
async def test_a_bad_priority_exits_2_naming_the_flag(cli, store, value) -> None:  # type: ignore[no-untyped-def]
    _refused(cli("job", "create", "--task", "noop", "--priority", value), "--priority")
    made = cli("job", "create", "--task", "noop", "--cron", "@daily", "--json")
    _refused(cli("job", "update", json.loads(made.stdout)["job"]["id"], "--priority", value), "--priority")
    assert await store.db.fetchval("SELECT count(*) FROM jobs WHERE priority <> 5") == 0
