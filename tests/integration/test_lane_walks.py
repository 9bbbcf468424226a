"""The loops' walks of a lane index (the dispatcher's pending rows, the sweeper's overdue and
reconcile pages, the observer's count of what falls due soon, the misfire policy's overdue
occurrences) read the rows inside their bound
and no more, in the index's order, on a partition that has no statistics yet: a fresh day's
partition, or one a spike filled seconds ago, is the common case, not the corner."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID

from schedulerd.store import Store
from tests.conftest import MakeJob

# $3 rows of job $1 in status $2, due $4 seconds from now (negative: overdue), a millisecond apart.
INSERT = """
INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status, enqueued_at)
SELECT schedulerd_execution_id(t), $1, 'default', t, t, $2, CASE WHEN $2 = 'queued' THEN clock_timestamp() END
FROM generate_series(1, $3) g, LATERAL (SELECT clock_timestamp() + make_interval(secs => $4 + g * 0.001) AS t) s
"""
# Heap rows read in this transaction from every executions partition (by index scans and bitmaps).
ROWS_READ = "SELECT sum(pg_stat_get_xact_tuples_fetched(inhrelid)) FROM pg_inherits WHERE inhparent = 'executions'::regclass"


async def test_dispatch_reads_no_pending_row_past_the_horizon(store: Store, make_job: MakeJob) -> None:
    job, _ = await make_job()
    await store.db.execute(INSERT, job.id, "pending", 2000, 3600.0)  # materialised an hour ahead
    await store.db.execute(INSERT, job.id, "pending", 5, -1.0)

    async with store.transaction() as tx:
        dispatched = await tx.execution_dispatch_due(60.0, 100)
        read = await tx.db.fetchval(ROWS_READ)

    assert len(dispatched) == 5
    assert read < 50, f"{read} rows read to dispatch 5"  # the walk past the horizon read 2,005


async def test_dispatch_takes_the_earliest_first(store: Store, make_job: MakeJob) -> None:
    job, _ = await make_job()
    await store.db.execute(INSERT, job.id, "pending", 300, -10.0)

    first = await store.execution_dispatch_due(60.0, 100)

    due = [e.due_at for e in first]
    assert len(first) == 100 and due == sorted(due)
    assert max(due) < min(e.due_at for e in await store.execution_dispatch_due(60.0, 1000))


async def test_an_overdue_page_reads_about_a_page(store: Store, make_job: MakeJob) -> None:
    job, _ = await make_job()
    await store.db.execute(INSERT, job.id, "queued", 1500, -60.0)

    async with store.transaction() as tx:
        page = await tx.execution_queued_overdue(2.0, 100)
        read = await tx.db.fetchval(ROWS_READ)
        rest = await tx.execution_queued_overdue(2.0, 2000, (page[-1].due_at, page[-1].execution_id))

    assert len(page) == 100 and [e.due_at for e in page] == sorted(e.due_at for e in page)
    assert read < 200, f"{read} rows read for a page of 100"  # a bitmap and a sort read all 1,500
    assert len(rest) == 1400 and rest[0].due_at > page[-1].due_at


async def test_a_reconcile_page_reads_about_a_page(store: Store, make_job: MakeJob) -> None:
    job, _ = await make_job()
    await store.db.execute(INSERT, job.id, "queued", 1500, 30.0)

    async with store.transaction() as tx:
        page = await tx.execution_queued_page((datetime(1970, 1, 1, tzinfo=UTC), UUID(int=0)), 100)
        read = await tx.db.fetchval(ROWS_READ)

    assert len(page) == 100
    assert read < 200, f"{read} rows read for a page of 100"


async def test_due_soon_counts_up_to_its_cap_and_not_past_its_window(store: Store, make_job: MakeJob) -> None:
    job, _ = await make_job()
    before = await store.execution_due_soon(60.0, 10_000)  # the job's own execution, if due
    await store.db.execute(INSERT, job.id, "pending", 2000, 3600.0)  # past the window
    await store.db.execute(INSERT, job.id, "pending", 30, 10.0)
    await store.db.execute(INSERT, job.id, "queued", 30, 1.0)

    async with store.transaction() as tx:
        capped = await tx.execution_due_soon(60.0, 50)
        read = await tx.db.fetchval(ROWS_READ)

    assert capped == 50
    assert read < 150, f"{read} rows read to count 50"
    assert await store.execution_due_soon(60.0, 10_000) == before + 60


async def test_the_misfire_scan_reads_no_occurrence_materialised_ahead(store: Store, make_job: MakeJob) -> None:
    job, _ = await make_job()
    await store.db.execute(INSERT, job.id, "pending", 2000, 3600.0)
    await store.db.execute(INSERT, job.id, "queued", 2000, 10.0)
    await store.db.execute(INSERT, job.id, "pending", 5, -120.0)

    async with store.transaction() as tx:
        await tx.execution_missed(60.0, 100)
        read = await tx.db.fetchval(ROWS_READ)

    assert read < 50, f"{read} rows read to find 5 overdue"  # the volatile bound read all 4,005
