"""`schedulerd job create --from-file`: NDJSON in bulk, from a file or standard input; each
refused line is named by number with its field, writes nothing, and makes the exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

from schedulerd.store import Store


async def test_from_file_creates_every_valid_line_and_names_each_refused_one(cli, store: Store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lines = [json.dumps({"task": "noop", "params": {"i": i}}) for i in range(2500)]
    lines[9] = json.dumps({"task": "noop", "retry": {"max_attempts": 0}})  # line 10
    lines[99] = '{"task": "noop", '  # line 100: not JSON
    lines[1499] = json.dumps({"task": "no_such_task"})  # line 1500: refused by the intake
    lines[1999] = json.dumps({"task": "noop", "cron": "@hourly", "timezone": "Mars/Olympus"})  # line 2000
    lines[2000] = json.dumps({"task": "log", "cron": "*/10 * * * *", "tenant": "acme", "idempotency_key": "ten-minutes"})
    lines[2001] = ""  # a blank line is skipped, not refused
    path = tmp_path / "jobs.ndjson"
    path.write_text("\n".join(lines) + "\n")

    done = cli("job", "create", "--from-file", str(path), "--tenant", "bulk", "--json")
    assert done.returncode == 2, done.stderr
    report = json.loads(done.stdout)
    assert report["created"] == 2495 and report["lines"] == 2499
    assert [(r["line"], r["field"]) for r in report["refused"]] == [
        (10, "retry.max_attempts"), (100, "line"), (1500, "task"), (2000, "timezone")
    ]
    assert "line 10: retry.max_attempts:" in done.stderr and "line 1500: task: unknown task type 'no_such_task'" in done.stderr
    assert "4 of 2499 lines refused" in done.stderr
    assert await store.db.fetchval("SELECT count(*) FROM jobs WHERE tenant = 'bulk'") == 2494
    assert await store.db.fetchval("SELECT count(*) FROM jobs WHERE tenant = 'acme' AND cron IS NOT NULL") == 1

    # Again from standard input: the keyed line is replayed, not created twice.
    again = cli("job", "create", "--from-file", "-", stdin=lines[2000] + "\n" + json.dumps({"task": "noop"}) + "\n")
    assert again.returncode == 0, again.stderr
    assert "1 job created, 1 replayed" in again.stdout
    assert await store.db.fetchval("SELECT count(*) FROM jobs WHERE tenant = 'acme'") == 1


def test_from_file_refuses_flags_that_do_not_apply_and_unreadable_files(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with_task = cli("job", "create", "--from-file", "-", "--task", "noop", stdin="")
    assert with_task.returncode == 2 and "--task: does not apply with --from-file" in with_task.stderr
    missing = cli("job", "create", "--from-file", str(tmp_path / "absent.ndjson"))
    assert missing.returncode == 2 and "--from-file: cannot read" in missing.stderr
    neither = cli("job", "create")
    assert neither.returncode == 2 and "--task: is required" in neither.stderr
    (tmp_path / "latin1.ndjson").write_bytes(b'{"task": "noop", "name": "caf\xe9"}\n')
    not_utf8 = cli("job", "create", "--from-file", str(tmp_path / "latin1.ndjson"))
    assert not_utf8.returncode == 2 and "is not UTF-8" in not_utf8.stderr and "Traceback" not in not_utf8.stderr


async def test_single_create_accepts_a_task_type_only_the_workers_know(cli, store: Store) -> None:  # type: ignore[no-untyped-def]
    unknown = cli("job", "create", "--task", "billing.invoice")
    assert unknown.returncode == 2 and "task: unknown task type 'billing.invoice'" in unknown.stderr
    await store.task_type_report(["billing.invoice"], "replica-with-billing")
    known = cli("job", "create", "--task", "billing.invoice", "--json")
    assert known.returncode == 0, known.stderr
    assert json.loads(known.stdout)["job"]["task"] == "billing.invoice"
