"""The worker's batched writes run on a pool of their own, planned once: each statement keeps a
generic plan (Store.connect(worker_pool=True)), every such plan reads the rows by their ids,
whatever the batch, the statistics or the table's size, and holds only the partitions of its
ids' days (store.worker_statement), however many partitions there are. The writes keep their
connection from one statement to the next, and leave it when it breaks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import asyncpg
import pytest

from schedulerd.core.ids import scheduled_for_bounds
from schedulerd.models import AttemptOutcome, ExecutionStatus, Outcome
from schedulerd.store import RETRYABLE_ERRORS, Store
from schedulerd.store.store import worker_statement
from schedulerd.store.sql import QUERIES
from tests.conftest import MakeJob

ROWS = 20_000
# $2 queued executions of job $1, a millisecond apart and all due, in one UTC day's partition at
# any time of day: in the first $2 ms after midnight they go just before it (yesterday's partition,
# or the default one). Spread over two days, a plan would meet a partition of a few rows, which
# the planner rightly reads whole once analysed.
INSERT_QUEUED = """
INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status, enqueued_at)
SELECT schedulerd_execution_id(t), $1, 'default', t, t, 'queued', clock_timestamp()
FROM (SELECT clock_timestamp() AS now, date_trunc('day', clock_timestamp(), 'UTC') AS midnight) c,
     generate_series(1, $2) g,
     LATERAL (SELECT CASE WHEN c.now - make_interval(secs => $2 / 1000.0) > c.midnight THEN c.now
                          ELSE c.midnight - interval '1 second' END - make_interval(secs => g / 1000.0) AS t) s
RETURNING id
"""
WORKER_WRITES = ["execution_claim_many", "execution_heartbeat_many", "execution_succeed_many", "execution_finish_many"]


@pytest.fixture
async def worker_store(database_url: str, store: Store) -> AsyncIterator[Store]:
    """A Store as the daemon makes it for a worker (after `store` emptied the tables)."""
    worker_store = await Store.connect(database_url, min_size=1, max_size=2, worker_pool=True)
    yield worker_store
    await worker_store.close()


async def _queued(store: Store, make_job: MakeJob, count: int) -> list[UUID]:
    job, _ = await make_job("noop", run_at=None)
    return [r["id"] for r in await store.db.fetch(INSERT_QUEUED, job.id, count)]


async def test_the_worker_writes_keep_one_generic_plan(worker_store: Store, make_job: MakeJob) -> None:
    # Batches of two: on the shared pool each of these statements would be planned again every time.
    ids = await _queued(worker_store, make_job, 40)
    for start in range(0, len(ids), 2):
        claims = await worker_store.execution_claim_many(ids[start : start + 2], 30.0, "plans", timeout_s=5.0)
        held = [(c.id, c.fence) for c in claims]
        assert len(await worker_store.execution_heartbeat_many(held, 30.0, timeout_s=5.0)) == 2
        outcomes = [Outcome(c.id, c.fence, c.task, ExecutionStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED) for c in claims]
        assert len(await worker_store.execution_finish_many(outcomes, timeout_s=5.0)) == 2

    # One at a time, so every statement ran on the one connection the worker's writes keep.
    assert (await worker_store._fetch_bounded("SHOW plan_cache_mode", timeout_s=5.0))[0][0] == "force_generic_plan"
    prepared = await worker_store._fetch_bounded(
        "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements", timeout_s=5.0
    )  # fmt: skip
    plans = {r["statement"]: (r["generic_plans"], r["custom_plans"]) for r in prepared}
    for name in ("execution_claim_many", "execution_heartbeat_many", "execution_succeed_many"):
        # One text per span of days: the rows' one day (INSERT_QUEUED).
        texts = {worker_statement(name, scheduled_for_bounds(ids[start : start + 2])) for start in range(0, len(ids), 2)}
        assert sum(plans[text][0] for text in texts) == 20 and all(plans[text][1] == 0 for text in texts), name
    async with worker_store.db.acquire() as connection:  # the shared pool plans as Postgres chooses
        assert await connection.fetchval("SHOW plan_cache_mode") == "auto"


def _scans(plan: dict[str, Any]) -> list[str]:
    """The scans of executions' partitions that ran, each as `Node (index)`."""
    found = []
    scan = "Scan" in plan["Node Type"] and (plan.get("Relation Name") or "").startswith("executions")
    if scan and plan["Actual Loops"] > 0:
        found.append(f"{plan['Node Type']} ({plan.get('Index Name', '-')})")
    for child in plan.get("Plans", []):
        found += _scans(child)
    return found


def _arguments(name: str, ids: list[UUID], fences: list[int]) -> list[Any]:
    bounds = scheduled_for_bounds(ids)
    none = [None] * len(ids)
    return {
        "execution_claim_many": [ids, 30.0, "plans", *bounds, 60.0, 15.0, False, False, None, False, [], [], False],
        "execution_heartbeat_many": [ids, fences, 30.0, *bounds],
        "execution_succeed_many": [ids, fences, none, *bounds],
        "execution_finish_many": [ids, fences, ["succeeded"] * len(ids), ["succeeded"] * len(ids), none, none, none, *bounds],
    }[name]


@pytest.mark.parametrize("analysed", [False, True], ids=["no-statistics", "analysed"])
@pytest.mark.parametrize("name", WORKER_WRITES)
async def test_a_generic_plan_of_a_worker_write_reads_by_id(store: Store, make_job: MakeJob, name: str, analysed: bool) -> None:
    ids = await _queued(store, make_job, ROWS)
    batch = ids[:: ROWS // 10]  # ten ids spread over the whole range
    fences = [0] * len(batch)
    if name != "execution_claim_many":
        claims = await store.execution_claim_many(batch, 30.0, "plans")
        fences = [{c.id: c.fence for c in claims}[i] for i in batch]
    if analysed:
        await store.db.execute("ANALYZE executions")

    async with store.db.acquire() as connection:
        await connection.execute("SET plan_cache_mode = force_generic_plan")
        try:
            statement = worker_statement(name, scheduled_for_bounds(batch))
            text = await connection.fetchval("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, *_arguments(name, batch, fences))
        finally:
            await connection.execute("RESET plan_cache_mode")
    plan = json.loads(text)[0]["Plan"]

    scans = _scans(plan)
    assert scans and all("pkey" in s for s in scans), scans
    assert plan["Shared Hit Blocks"] + plan["Shared Read Blocks"] <= 60 * len(batch), scans  # ~20,000 rows span ~500 pages


async def _locked_partitions(connection: Any, statement: str, arguments: list[Any]) -> set[str]:
    """The partitions of executions that running `statement` (its generic plan) locks."""
    async with connection.transaction():
        await connection.fetch(statement, *arguments)
        rows = await connection.fetch(
            "SELECT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
            " WHERE l.pid = pg_backend_pid() AND c.relkind = 'r' AND c.relname LIKE 'executions\\_p%'"
        )
    return {r["relname"] for r in rows}


@pytest.mark.parametrize("name", WORKER_WRITES)
async def test_a_worker_write_locks_only_its_days_partitions(store: Store, make_job: MakeJob, name: str) -> None:
    today = datetime.now(UTC).date()
    ahead = [today + timedelta(days=n) for n in range(1, 31)]  # a month of partitions, as premake_days = 30 makes
    created = [day for day in ahead if await store.partition_ensure(day)]
    ids = (await _queued(store, make_job, 10))[:4]
    bounds = scheduled_for_bounds(ids)
    days = {f"executions_p{(bounds[0] + timedelta(days=d)).date():%Y%m%d}" for d in range((bounds[1] - bounds[0]).days + 2)}

    try:
        async with store.db.acquire() as connection:
            await connection.execute("SET plan_cache_mode = force_generic_plan")
            try:
                arguments = _arguments(name, ids, [0] * len(ids))
                narrowed = await _locked_partitions(connection, worker_statement(name, bounds), arguments)
                everything = await _locked_partitions(connection, QUERIES[name], arguments)
            finally:
                await connection.execute("RESET plan_cache_mode")
    finally:
        for day in created:  # the next test finds the partitions it found before this one
            await store.partition_drop(day)
    assert narrowed and narrowed <= days, narrowed
    assert len(everything) >= 31  # the same statement without its days' constants: every partition


async def test_a_worker_write_reaches_rows_in_the_default_partition(worker_store: Store, make_job: MakeJob) -> None:
    # A day older than every partition: its rows live in executions_default.
    job, _ = await make_job("noop", run_at=None)
    long_ago = datetime.now(UTC) - timedelta(days=400)
    [execution] = await worker_store.db.fetch(
        "INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status, enqueued_at)"
        " VALUES (schedulerd_execution_id($2), $1, 'default', $2, $2, 'queued', clock_timestamp()) RETURNING id",
        job.id, long_ago,
    )  # fmt: skip
    [claim] = await worker_store.execution_claim_many([execution["id"]], 30.0, "plans", timeout_s=5.0)
    assert await worker_store.execution_heartbeat_many([(claim.id, claim.fence)], 30.0, timeout_s=5.0) == {claim.id: False}
    outcome = Outcome(claim.id, claim.fence, claim.task, ExecutionStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED)
    assert [f[0] for f in await worker_store.execution_finish_many([outcome], timeout_s=5.0)] == [claim.id]
    assert await worker_store.db.fetchval(
        "SELECT tableoid::regclass::text || ' ' || status FROM executions WHERE id = $1", claim.id
    ) == "executions_default succeeded"


async def test_the_worker_writes_keep_their_connection_and_leave_it_when_it_breaks(
    worker_store: Store, store: Store, make_job: MakeJob
) -> None:
    ids = await _queued(worker_store, make_job, 3)
    backend = "SELECT pg_backend_pid()"
    claims = await worker_store.execution_claim_many(ids[:1], 30.0, "held", timeout_s=5.0)
    first = (await worker_store._fetch_bounded(backend, timeout_s=5.0))[0][0]
    claims += await worker_store.execution_claim_many(ids[1:2], 30.0, "held", timeout_s=5.0)
    assert len(claims) == 2 and (await worker_store._fetch_bounded(backend, timeout_s=5.0))[0][0] == first

    # Its backend is gone (a restart, a failover): the next write fails as retryable, and the
    # one after it runs on a fresh connection, its claim and the earlier ones' leases intact.
    await store.db.execute("SELECT pg_terminate_backend($1)", first)
    with pytest.raises(RETRYABLE_ERRORS):
        await worker_store.execution_claim_many(ids[2:], 30.0, "held", timeout_s=5.0)
    claims += await worker_store.execution_claim_many(ids[2:], 30.0, "held", timeout_s=5.0)
    assert len(claims) == 3 and (await worker_store._fetch_bounded(backend, timeout_s=5.0))[0][0] != first
    assert len(await worker_store.execution_heartbeat_many([(c.id, c.fence) for c in claims], 30.0, timeout_s=5.0)) == 3

    # A statement Postgres refuses gives its connection back to the pool, where the next write
    # finds one; closing the store (the fixture) hands the kept one back so the pool can close.
    with pytest.raises(asyncpg.PostgresError):
        await worker_store._fetch_bounded("SELECT 1 / 0", timeout_s=5.0)
    outcomes = [Outcome(c.id, c.fence, c.task, ExecutionStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED) for c in claims]
    assert len(await worker_store.execution_finish_many(outcomes, timeout_s=5.0)) == 3


async def test_on_the_shared_pool_the_worker_writes_give_their_connection_back(
    database_url: str, store: Store, make_job: MakeJob
) -> None:
    shared = await Store.connect(database_url, min_size=1, max_size=1)  # no pool of their own
    try:
        ids = await _queued(shared, make_job, 1)
        assert len(await shared.execution_claim_many(ids, 30.0, "shared", timeout_s=5.0)) == 1
        assert await asyncio.wait_for(shared.db.fetchval("SELECT 1"), 5.0) == 1  # the one connection is free
    finally:
        await shared.close()
