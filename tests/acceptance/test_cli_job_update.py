"""`schedulerd job update` as a user runs it: the removed / kept / added runs, --plan writing
nothing, refusals naming the flag, --if-version, and job_version in `executions show`."""

from __future__ import annotations

import json


def _created_job(cli, *args: str) -> str:  # type: ignore[no-untyped-def]
    made = cli("job", "create", *args, "--json")
    assert made.returncode == 0, made.stderr
    return json.loads(made.stdout)["job"]["id"]


def test_update_across_the_march_change_plans_then_edits(cli, store) -> None:  # type: ignore[no-untyped-def]
    job_id = _created_job(cli, "--task", "noop", "--cron", "30 1 25-31 3 *", "--tz", "Europe/London")
    planned = cli("job", "update", job_id, "--cron", "30 2 25-31 3 *", "--plan")
    assert planned.returncode == 0, planned.stderr
    assert "would become version 2 (plan only: nothing written)" in planned.stdout
    assert "dst_shifted" in planned.stdout and "removed (" in planned.stdout and "added (" in planned.stdout
    shown = json.loads(cli("job", "show", job_id, "--json").stdout)
    assert shown["version"] == 1 and shown["cron"] == "30 1 25-31 3 *"
    done = cli("job", "update", job_id, "--cron", "30 2 25-31 3 *", "--params", '{"v": 2}', "--if-version", "1", "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["job"]["version"] == 2 and body["job"]["params"] == {"v": 2} and body["dry_run"] is False
    assert {"utc": "2027-03-28T01:00:00+00:00", "local": "2027-03-28T02:00:00+01:00", "labels": ["dst_shifted"],
            "note": body["removed"][3]["note"]} in body["removed"]  # fmt: skip
    stale = cli("job", "update", job_id, "--name", "x", "--if-version", "1")
    assert stale.returncode == 2 and "--if-version: " in stale.stderr


def test_update_refusals_name_the_flag(cli) -> None:  # type: ignore[no-untyped-def]
    cron_job = _created_job(cli, "--task", "noop", "--cron", "*/10 * * * *")
    for args, flag in [(["--cron", "nope"], "--cron: "), (["--tz", "Nowhere/Land"], "--tz: "),
                       (["--params", "[1]"], "--params: "), (["--window", "soon"], "--window: "),
                       (["--at", "2030-01-01T00:00:00Z"], "--at: "), ([], "id: ")]:  # fmt: skip
        refused = cli("job", "update", cron_job, *args)
        assert refused.returncode == 2 and flag in refused.stderr, (args, refused.stderr)
    task = cli("job", "update", cron_job, "--task", "log")
    assert task.returncode == 2 and "--task" in task.stderr


def test_executions_show_the_job_version(cli, store) -> None:  # type: ignore[no-untyped-def]
    job_id = _created_job(cli, "--task", "noop", "--cron", "*/10 * * * *")
    assert cli("job", "update", job_id, "--cron", "*/20 * * * *").returncode == 0
    listed = json.loads(cli("executions", "list", "--job", job_id, "--json").stdout)
    kept = next(e for e in listed if e["status"] in ("pending", "queued"))
    shown = cli("executions", "show", kept["id"])
    assert shown.returncode == 0 and "job_version       2" in shown.stdout
