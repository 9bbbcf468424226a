"""At-least-once under faults: a worker process SIGKILLed mid-handler, Redis losing its data."""

from __future__ import annotations

import asyncio
import signal
import time
from datetime import UTC, datetime, timedelta

from schedulerd.models import ExecutionStatus
from tests.conftest import wait_for


async def test_killed_worker_lease_is_reclaimed_and_the_job_runs_again(make_job, store, start_daemon) -> None:
    _, execution = await make_job("sleep", params={"seconds": 3})
    first = start_daemon("replica-1")

    async def running_on_first():
        row = await store.execution_get(execution.id)
        return row.status == ExecutionStatus.RUNNING and row.worker == "replica-1" and row

    claimed = await wait_for(running_on_first, timeout_s=20)
    first.signal(signal.SIGKILL)
    killed_at = time.monotonic()
    start_daemon("replica-2")

    async def finished():
        row = await store.execution_get(execution.id)
        return row.status == ExecutionStatus.SUCCEEDED and row

    final = await wait_for(finished, timeout_s=30)
    recovery_s = time.monotonic() - killed_at
    attempts = await store.attempt_list(execution.id)
    print(f"\nkilled mid-handler: recovered in {recovery_s:.1f} s (lease 2 s + sleep 3 s), attempts={len(attempts)}")
    assert [(a.fence, a.outcome, a.worker) for a in attempts] == [
        (claimed.fence, "lease_expired", "replica-1"),
        (claimed.fence + 1, "succeeded", "replica-2"),
    ]
    assert final.attempt == 2
    assert recovery_s < 2 + 3 + 5  # one lease, the handler, and slack for a loaded machine


async def test_redis_losing_its_data_mid_run_loses_nothing(make_job, store, queue, start_daemon) -> None:
    start = datetime.now(UTC) + timedelta(seconds=2)
    executions = [(await make_job("noop", run_at=start + timedelta(milliseconds=10 * i)))[1] for i in range(300)]
    start_daemon("replica-1")
    start_daemon("replica-2")
    await asyncio.sleep((start - datetime.now(UTC)).total_seconds() + 1)  # a third have run
    flushed_at = datetime.now(UTC)
    await queue.delete_all()  # FLUSHALL, as far as this deployment's keys go

    async def all_finished():
        rows = await store.db.fetch("SELECT status, count(*) FROM executions GROUP BY status")
        counts = {r["status"]: r["count"] for r in rows}
        return counts.get("succeeded") == len(executions) and counts

    await wait_for(all_finished, timeout_s=30)
    lag = await store.db.fetchrow(
        """SELECT max(first_started_at - due_at) AS worst, max(attempt) AS attempts,
                  max(first_started_at) FILTER (WHERE due_at <= $1) AS last_before
           FROM executions""",
        flushed_at,
    )
    recovered = await store.db.fetchval(
        "SELECT max(first_started_at - due_at) FROM executions WHERE due_at > $1", flushed_at
    )
    print(f"\nredis flushed: 300/300 succeeded, max attempts {lag['attempts']}, "
          f"worst lag after the flush {recovered.total_seconds():.2f} s, overall {lag['worst'].total_seconds():.2f} s")
    assert lag["attempts"] == 1  # nothing ran twice
    assert recovered < timedelta(seconds=3)  # the epoch marker triggers a reconcile at once
