"""The priority probe with a real daemon: a priority-9 one-off enqueued while the same tenant has
a backlog of 8,000 due priority-5 executions starts within 1 s; a priority-5 one-off enqueued
beside it waits its turn behind the backlog. (scripts/bench spike --priority-probe measures the
same behind 100,000.)"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

from schedulerd.models import Enqueue
from tests.conftest import wait_for

BACKLOG = 8_000


async def test_a_9_starts_within_a_second_behind_a_backlog_of_5s(store, queue, config, make_job, start_daemon) -> None:
    backlog_job, _ = await make_job("sleep", params={"seconds": 0.2}, run_at=(await store.clock_now()) + timedelta(hours=1))
    now = await store.clock_now()
    for start in range(0, BACKLOG, 4_000):
        rows = [(uuid.uuid4(), backlog_job.id, "default", now - timedelta(microseconds=i), now)
                for i in range(start, start + 4_000)]  # fmt: skip
        inserted = await store.execution_insert_many(rows, config.dispatcher.horizon_s)
        await queue.add([Enqueue(e.id, e.due_at, e.tenant, e.priority) for e in inserted], only_new=True)
    # 32 slots of 0.2 s: about 160 starts a second, so the backlog lasts most of a minute.
    daemon = start_daemon("priority-1", SCHEDULERD_WORKER_CONCURRENCY="32", SCHEDULERD_WORKER_BATCH_SIZE="32")

    async def backlog_started() -> int:
        return await store.db.fetchval("SELECT count(*) FROM executions WHERE job_id = $1 AND first_started_at IS NOT NULL",
                                       backlog_job.id)  # fmt: skip

    await wait_for(lambda: _at_least(backlog_started, 100), timeout_s=30, interval_s=0.1)
    enqueued_at = time.monotonic()
    _, urgent = await make_job("noop", priority=9)
    _, plain = await make_job("noop")

    async def urgent_started() -> float | None:
        return await store.db.fetchval(
            "SELECT extract(epoch FROM first_started_at - due_at)::float8 FROM executions WHERE id = $1 AND first_started_at IS NOT NULL",
            urgent.id, timeout=5,
        )  # fmt: skip

    lag_s = await wait_for(urgent_started, timeout_s=10, interval_s=0.02)
    waited_s = time.monotonic() - enqueued_at
    plain_started = await store.db.fetchval("SELECT first_started_at FROM executions WHERE id = $1", plain.id)
    left = BACKLOG - await backlog_started()
    print(f"\npriority probe: a priority-9 one-off behind {left:,} due priority-5 executions started "
          f"{lag_s * 1000:.0f} ms after its due time ({waited_s * 1000:.0f} ms after the enqueue began)")
    assert lag_s < 1.0, f"priority 9 started {lag_s:.3f} s late"
    assert left > 1000, "the backlog drained before the probe: it proves nothing"
    assert plain_started is None, "the priority-5 one-off enqueued beside it went before the backlog"
    assert daemon.process.poll() is None, daemon.log_text()[-2000:]


async def _at_least(count, least: int) -> bool:  # type: ignore[no-untyped-def]
    return await count() >= least
