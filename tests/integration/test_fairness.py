"""Tenant fairness with a real daemon: a quiet tenant's executions start on time while a noisy
tenant has 100,000 executions due at the same instant (the pop serves tenants round robin)."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from statistics import quantiles

from schedulerd.models import Enqueue
from tests.conftest import wait_for

NOISY, QUIET = 100_000, 200


async def test_quiet_tenant_starts_on_time_beside_a_storm(store, queue, config, make_job, start_daemon) -> None:
    noisy_job, _ = await make_job("noop", tenant="noisy")
    quiet_job, _ = await make_job("noop", tenant="quiet")
    daemon = start_daemon("fair-1", SCHEDULERD_WORKER_CONCURRENCY="256", SCHEDULERD_WORKER_BATCH_SIZE="256")

    # Everything falls due at one instant, far enough ahead to write 100,000 rows first.
    now = await store.clock_now()
    due_at = now + timedelta(seconds=20)
    written_at = time.monotonic()
    quiet_ids = []
    for start in range(0, NOISY, 10_000):
        # Distinct scheduled_for (the slot is unique per job), one due_at: a true storm.
        rows = [(uuid.uuid4(), noisy_job.id, "noisy", due_at - timedelta(microseconds=i), due_at)
                for i in range(start, start + 10_000)]  # fmt: skip
        inserted = await store.execution_insert_many(rows, config.dispatcher.horizon_s)
        await queue.add([Enqueue(e.id, e.due_at, e.tenant) for e in inserted], only_new=True)
        if start == NOISY // 2:  # the quiet tenant's work arrives in the middle of the storm's
            rows = [(uuid.uuid4(), quiet_job.id, "quiet", due_at - timedelta(microseconds=i), due_at) for i in range(QUIET)]
            inserted = await store.execution_insert_many(rows, config.dispatcher.horizon_s)
            await queue.add([Enqueue(e.id, e.due_at, e.tenant) for e in inserted], only_new=True)
            quiet_ids = [e.id for e in inserted]
    assert await store.clock_now() < due_at, f"writing the storm took {time.monotonic() - written_at:.1f} s: too slow"

    async def quiet_started() -> list[float] | None:
        rows = await store.db.fetch(
            "SELECT extract(epoch FROM first_started_at - due_at)::float8 AS lag FROM executions "
            "WHERE tenant = 'quiet' AND id = ANY($1::uuid[]) AND first_started_at IS NOT NULL", quiet_ids
        )
        return [r["lag"] for r in rows] if len(rows) == QUIET else None

    lags = await wait_for(quiet_started, timeout_s=90, interval_s=0.2)
    noisy_done = await store.db.fetchval(
        "SELECT count(*) FROM executions WHERE tenant = 'noisy' AND first_started_at IS NOT NULL"
    )
    await wait_for(lambda: _noisy_started(store, NOISY // 2), timeout_s=120, interval_s=0.5)
    noisy_lags = [r["lag"] for r in await store.db.fetch(
        "SELECT extract(epoch FROM first_started_at - due_at)::float8 AS lag FROM executions "
        "WHERE tenant = 'noisy' AND first_started_at IS NOT NULL AND due_at = $1", due_at
    )]  # fmt: skip
    p99 = quantiles(lags, n=100)[98]
    print(
        f"\nfairness: quiet tenant {QUIET} executions beside {NOISY:,} noisy ones due at the same instant: "
        f"start lag p50 {quantiles(lags, n=100)[49] * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {max(lags) * 1000:.0f} ms; "
        f"the noisy tenant had {noisy_done:,} started when the quiet one was done, and its p50 lag so far is "
        f"{quantiles(noisy_lags, n=100)[49]:.2f} s over {len(noisy_lags):,} started"
    )
    assert p99 < 0.5, f"quiet tenant p99 start lag {p99:.3f} s"
    assert daemon.process.poll() is None, daemon.log_text()[-2000:]


async def _noisy_started(store, at_least: int) -> bool:  # type: ignore[no-untyped-def]
    started = await store.db.fetchval("SELECT count(*) FROM executions WHERE tenant = 'noisy' AND first_started_at IS NOT NULL")
    return started >= at_least
