"""`--overlap` and the overrun line of `job show` through the CLI, and overlap policies enforced by
two daemon replicas, as a user runs them."""

from __future__ import annotations

import json
from uuid import UUID

import pytest

from schedulerd.jobs import Jobs
from tests.conftest import wait_for
from tests.integration.test_overrun import add_history




async def test_overlap_flag_is_stored_listed_and_shown(cli, store) -> None:  # type: ignore[no-untyped-def]
    created = cli("job", "create", "--task", "sleep", "--cron", "*/5 * * * *", "--overlap", "cancel_other", "--json")
    assert created.returncode == 0, created.stderr
    job_id = json.loads(created.stdout)["job"]["id"]
    assert json.loads(created.stdout)["job"]["overlap"] == "cancel_other"

    listed = cli("job", "list")
    assert "OVERLAP" in listed.stdout.splitlines()[0]
    assert any(job_id in line and "cancel_other" in line for line in listed.stdout.splitlines())
    shown = cli("job", "show", job_id)
    assert "overlap          cancel_other" in shown.stdout and "overrun          -" in shown.stdout

    refused = cli("job", "create", "--task", "noop", "--overlap", "queue_all")
    assert refused.returncode == 2 and "--overlap" in refused.stderr and "invalid choice" in refused.stderr
    assert await store.db.fetchval("SELECT count(*) FROM jobs") == 1


async def test_job_show_warns_of_an_overrun(cli, store) -> None:  # type: ignore[no-untyped-def]
    created = cli("job", "create", "--task", "sleep", "--cron", "*/5 * * * *", "--json")
    job = json.loads(created.stdout)["job"]
    await add_history(store, UUID(job["id"]), job["tenant"], [255.0] * 4)

    shown = cli("job", "show", job["id"])
    (line,) = [line for line in shown.stdout.splitlines() if line.startswith("overrun")]
    assert "WARNING" in line and "p95 255 s of 300 s interval = 85%, warn at 80%" in line
    as_json = json.loads(cli("job", "show", job["id"], "--json").stdout)
    assert as_json["overrun"]["warning"] is True and as_json["overrun"]["p95_s"] == 255.0


@pytest.mark.timeout(120)
async def test_two_replicas_enforce_skip_and_buffer_one(cli, store, queue, config, start_daemon) -> None:  # type: ignore[no-untyped-def]
    start_daemon("replica-1")
    start_daemon("replica-2")
    jobs = {}
    for policy in ("skip", "buffer_one"):
        created = cli("job", "create", "--task", "sleep", "--params", '{"seconds": 3}', "--overlap", policy, "--json")
        jobs[policy] = json.loads(created.stdout)["job"]["id"]

    async def first_running(job_id: str) -> bool:
        return await store.db.fetchval("SELECT count(*) FROM executions WHERE job_id = $1 AND status = 'running'", UUID(job_id)) == 1

    for job_id in jobs.values():
        await wait_for(lambda: first_running(job_id), timeout_s=30, interval_s=0.2)
        for _ in range(3):  # three more occurrences come due while it runs (in-process: a CLI start can take seconds)
            # At once: two replicas may pop them microseconds apart and judge them in either order,
            # and the oldest still waits (tests/integration/test_overlap.py has that interleaving).
            await Jobs(store, queue, config).trigger(UUID(job_id))

    async def fates(job_id: str) -> list[tuple[str, str | None]]:
        rows = await store.db.fetch("SELECT status, reason FROM executions WHERE job_id = $1 ORDER BY scheduled_for", UUID(job_id))
        return [(r["status"], r["reason"]) for r in rows]

    async def settled() -> bool:
        every = [await fates(j) for j in jobs.values()]
        return all(s in ("succeeded", "skipped") for f in every for s, _ in f)

    await wait_for(settled, timeout_s=60, interval_s=0.5)
    assert await fates(jobs["skip"]) == [("succeeded", None)] + [("skipped", "overlap")] * 3
    buffered = await fates(jobs["buffer_one"])
    assert buffered == [("succeeded", None), ("succeeded", "overlap_buffered"), ("skipped", "overlap"), ("skipped", "overlap")]
    # Never two at once: each run started after the previous one finished.
    rows = await store.db.fetch(
        "SELECT first_started_at, finished_at FROM executions WHERE job_id = $1 AND status = 'succeeded' ORDER BY first_started_at",
        UUID(jobs["buffer_one"]),
    )
    assert rows[1]["first_started_at"] >= rows[0]["finished_at"]
