"""The worker's batched writes run on a pool of their own, planned once: each statement keeps a
generic plan (Store.connect(worker_pool=True)), and every such plan reads the rows by their ids,
whatever the batch, the statistics or the table's size."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import pytest

from schedulerd.core.ids import scheduled_for_bounds
from schedulerd.models import AttemptOutcome, ExecutionStatus, Outcome
from schedulerd.store import Store
from schedulerd.store.sql import QUERIES
from tests.conftest import MakeJob

ROWS = 20_000
# Queued executions of job $1, scheduled over the last $2 seconds (today's partition, and the
# default one's for any that fall before it).
INSERT_QUEUED = """
INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status, enqueued_at)
SELECT schedulerd_execution_id(t), $1, 'default', t, t, 'queued', clock_timestamp()
FROM generate_series(1, $2) g, LATERAL (SELECT clock_timestamp() - make_interval(secs => g) AS t) s
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

    # One at a time, so the pool never needed a second connection: every statement ran on this one.
    async with worker_store.worker_db.acquire() as connection:
        assert await connection.fetchval("SHOW plan_cache_mode") == "force_generic_plan"
        plans = {r["statement"]: (r["generic_plans"], r["custom_plans"])
                 for r in await connection.fetch("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")}  # fmt: skip
    for name in ("execution_claim_many", "execution_heartbeat_many", "execution_succeed_many"):
        assert plans[QUERIES[name]] == (20, 0), name
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
            text = await connection.fetchval("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + QUERIES[name], *_arguments(name, batch, fences))
        finally:
            await connection.execute("RESET plan_cache_mode")
    plan = json.loads(text)[0]["Plan"]

    scans = _scans(plan)
    assert scans and all("pkey" in s for s in scans), scans
    assert plan["Shared Hit Blocks"] + plan["Shared Read Blocks"] <= 60 * len(batch), scans  # ~20,000 rows span ~500 pages
