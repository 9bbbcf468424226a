"""Item 5: Postgres restarted mid-run (pg_ctl stop -m immediate: every connection cut, crash
recovery on start) on a private embedded server. The replicas ride it out with backoff (same
processes, no crash loop), and nothing is lost."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from uuid import UUID

import pytest

from schedulerd.models import AttemptOutcome
from schedulerd.store import Store
from schedulerd.worker import Worker
from tests.fault.conftest import check, insert_workload, wait_settled

OUTAGE_S = 3.0


@pytest.mark.timeout(150)
async def test_postgres_restart_mid_run_loses_nothing(fleet, private_postgres) -> None:
    store = await Store.connect(private_postgres.url, min_size=1, max_size=4)
    try:
        fleet.start(2, SCHEDULERD_DATABASE_URL=private_postgres.url)
        await fleet.ready()
        pids = fleet.pids()
        _, first = await insert_workload(store, 1000, start_in_s=1.0, spread_s=15.0, task="sleep", params={"seconds": 0.2})
        await asyncio.sleep((first - await store.clock_now()).total_seconds() + 5)
        await store.close()
        down_at = await asyncio.to_thread(lambda: (private_postgres.crash(), time.time())[1])
        await asyncio.sleep(OUTAGE_S)
        await asyncio.to_thread(private_postgres.start)
        up = time.time()
        store = await Store.connect(private_postgres.url, min_size=1, max_size=4)
        counts = await wait_settled(store, timeout_s=60)
        figures = await check(store)
        # Recovery: from Postgres answering again to the first attempt started after it.
        first_start_after = await store.db.fetchval(
            "SELECT extract(epoch FROM min(started_at)) FROM attempts WHERE started_at > to_timestamp($1)", up
        ) or await store.db.fetchval("SELECT extract(epoch FROM min(started_at)) FROM executions WHERE started_at > to_timestamp($1)", up)
        logs = fleet.logs()
        errors = logs.count('.error"')
        # asyncpg's pool logs its own tracebacks (stdlib logging, not JSON) while it cannot
        # restore its connection floor: noise, not a crash.
        raw_tracebacks = logs.count("Failed to restore the pool connection floor")
        print(figures.line(f"Postgres crashed (immediate) and restarted after {OUTAGE_S:g} s", by_status=counts,
                           outage_s=round(up - down_at, 2), first_start_after_restart_s=round(float(first_start_after) - up, 3),
                           loop_errors_logged=errors, asyncpg_pool_tracebacks=raw_tracebacks, daemons_restarted=0 if fleet.pids() == pids else "yes"))  # fmt: skip
        assert all(r.alive for r in fleet.replicas.values()) and fleet.pids() == pids  # rode it out, no crash loop
        if counts != {"succeeded": 1000}:  # show how the lost ones went
            for row in await store.db.fetch(
                """SELECT a.execution_id, a.fence, a.worker, a.outcome, a.started_at, a.finished_at FROM attempts a
                   JOIN executions e ON e.id = a.execution_id WHERE e.status <> 'succeeded' ORDER BY 1, 2 LIMIT 9"""
            ):
                print(dict(row))
        assert counts == {"succeeded": 1000} and figures.lost == 0, counts
        assert figures.succeeded_twice == 0 and figures.overlaps == 0, figures
        assert figures.max_starts <= 2, figures  # leases that expired during the outage ran again, once
        assert float(first_start_after) - up < 10  # backoff is capped at 10 s
        assert '"daemon.stopped"' not in logs
    finally:
        await store.close()


async def test_a_stale_outcome_in_the_same_batch_does_not_poison_the_finish_loop(store, queue, config) -> None:
    """What the restart above exposed: a worker whose outcome write failed (Postgres away) keeps
    it for the next flush; meanwhile the lease expired and the same worker claimed the execution
    again. The worker holds one outcome per execution, the newest: the fresh one (fence 2)
    replaces the stale one (fence 1), which would only be fenced out, and the write succeeds
    (before, both shared a batch and failed the whole statement again and again)."""
    (execution_id,), _ = await insert_workload(store, 1, start_in_s=0.0, task="noop")
    await store.db.execute("UPDATE executions SET status = 'queued' WHERE id = $1", execution_id)
    worker = Worker(store, queue, config.worker, "replica-x", horizon_s=300)
    try:
        (first,), _ = await store.execution_claim_due(10, 30, "replica-x")
        worker._record(first, AttemptOutcome.SUCCEEDED, None)  # not written: Postgres was away
        await store.db.execute("UPDATE executions SET lease_until = clock_timestamp() - interval '1 s' WHERE id = $1", execution_id)
        window = await store.execution_lease_window((datetime(1970, 1, 1, tzinfo=UTC), UUID(int=0)), 100)
        assert len(await store.execution_reclaim_expired(10, window.lapsed)) == 1
        await store.db.execute("UPDATE executions SET due_at = clock_timestamp() WHERE id = $1", execution_id)
        (second,), _ = await store.execution_claim_due(10, 30, "replica-x")
        worker._record(second, AttemptOutcome.SUCCEEDED, None)

        assert await worker.flush_outcomes() == 1  # the fresh one; the stale one was replaced
        assert worker.stats.fenced_out == 0 and not worker._outcomes
        final = await store.execution_get(execution_id)
        assert (final.status, final.fence) == ("succeeded", 2)
        assert [(a.fence, a.outcome) for a in await store.attempt_list(execution_id)] == [(1, "lease_expired"), (2, "succeeded")]
    finally:
        worker._threads.shutdown(wait=False)
