"""`executions cancel` (by id, or by filter with --plan) and the bulk job actions `job pause|resume|
trigger|delete|cancel --label` as a user runs them (subprocesses against real Postgres and Redis)."""

from __future__ import annotations

import json
import uuid


def _created(cli, *args: str) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    made = cli("job", "create", "--task", "noop", *args, "--json")
    assert made.returncode == 0, made.stderr
    body = json.loads(made.stdout)
    return body["job"]["id"], body["executions"][0]["id"] if body.get("executions") else ""


async def _execution_of(store, job_id: str) -> str:  # type: ignore[no-untyped-def]
    return str(await store.db.fetchval("SELECT id FROM executions WHERE job_id = $1", uuid.UUID(job_id)))


async def test_cancel_by_id_then_again_and_too_late(cli, store) -> None:  # type: ignore[no-untyped-def]
    job_id, _ = _created(cli, "--in", "1h")
    execution_id = await _execution_of(store, job_id)
    first = cli("executions", "cancel", execution_id)
    assert first.returncode == 0 and f"execution {execution_id} cancelled" in first.stdout, first.stderr
    again = cli("executions", "cancel", execution_id, "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["reason"] == "cancelled"
    await store.db.execute("UPDATE executions SET status = 'succeeded', reason = NULL WHERE id = $1", uuid.UUID(execution_id))
    late = cli("executions", "cancel", execution_id)
    assert late.returncode == 1 and "already succeeded" in late.stderr


async def test_cancel_by_label_plans_then_cancels_as_many(cli, store) -> None:  # type: ignore[no-untyped-def]
    billing = [_created(cli, "--in", f"{m}m", "--tenant", "acme")[0] for m in (10, 20)]
    other = _created(cli, "--in", "10m", "--tenant", "acme")[0]
    for job_id in billing:
        await store.db.execute("UPDATE jobs SET labels = $2 WHERE id = $1", uuid.UUID(job_id), {"team": "billing"})
    plan = cli("executions", "cancel", "--tenant", "acme", "--label", "team=billing", "--plan")
    assert plan.returncode == 0 and "plan: 2 executions would be cancelled" in plan.stdout, plan.stderr + plan.stdout
    done = cli("executions", "cancel", "--tenant", "acme", "--label", "team=billing", "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["matched"] == 2, done.stderr
    assert json.loads(done.stdout)["action"]["actor"].startswith("cli")
    assert await store.db.fetchval("SELECT status FROM executions WHERE job_id = $1", uuid.UUID(other)) == "pending"


def test_cancel_errors_name_the_flag(cli) -> None:  # type: ignore[no-untyped-def]
    cases = [
        ([], "id: ", "give execution ids"),
        (["--label", "team"], "--label: ", "key=value"),
        (["--due-from", "2026-01-01T00:00"], "--due-from: ", "offset"),
        (["--job", "nope"], "--job: ", ""),
        ([str(uuid.uuid4()), "--job", str(uuid.uuid4())], "id: ", "not both"),
    ]
    for args, flag, message in cases:
        refused = cli("executions", "cancel", *args)
        assert refused.returncode == 2 and flag in refused.stderr and message in refused.stderr, (args, refused.stderr)
    assert cli("executions", "cancel", str(uuid.uuid4())).returncode == 1  # not found


async def test_job_pause_by_label_with_a_plan_and_a_record(cli, store) -> None:  # type: ignore[no-untyped-def]
    billing = [_created(cli, "--cron", "@hourly", "--tenant", "globex")[0] for _ in range(2)]
    other = _created(cli, "--cron", "@hourly", "--tenant", "globex")[0]
    for job_id in billing:
        await store.db.execute("UPDATE jobs SET labels = $2 WHERE id = $1", uuid.UUID(job_id), {"team": "billing"})
    plan = cli("job", "pause", "--label", "team=billing", "--tenant", "globex", "--plan")
    assert plan.returncode == 0 and "plan: pause 2 jobs matching team=billing" in plan.stdout, plan.stderr + plan.stdout
    assert all(json.loads(cli("job", "show", j, "--json").stdout)["enabled"] for j in billing)
    done = cli("job", "pause", "--label", "team=billing", "--tenant", "globex", "--by", "alice", "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert (body["jobs"], body["record"]["actor"], body["record"]["action"]) == (2, "alice", "pause")
    assert not any(json.loads(cli("job", "show", j, "--json").stdout)["enabled"] for j in billing)
    assert json.loads(cli("job", "show", other, "--json").stdout)["enabled"]
    resumed = cli("job", "resume", "--label", "team=billing", "--tenant", "globex")
    assert resumed.returncode == 0 and "resume: 2 jobs matching team=billing" in resumed.stdout, resumed.stdout
    # The single-job form keeps working; an id and --label together are refused.
    assert cli("job", "pause", other).returncode == 0
    both = cli("job", "pause", other, "--label", "team=billing")
    assert both.returncode == 2 and "not both" in both.stderr
    assert cli("job", "pause", other, "--plan").returncode == 2
    cancel = cli("job", "cancel", "--label", "team=billing", "--tenant", "globex", "--plan")
    assert cancel.returncode == 0 and "plan: cancel 2 jobs" in cancel.stdout, cancel.stdout
