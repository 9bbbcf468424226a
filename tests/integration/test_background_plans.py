"""The background loops' scans stay as small as what they look for, whatever the statistics say.
Statistics lag a table that grows fast (a fresh install taking a million one-off jobs, a
benchmark): planned from them, filters on jobs were seq scans over every job, and the reclaim
could walk every execution of every job, at every pass of the sweeper and the notifier, slower
each pass as the tables grew."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import pytest

from schedulerd.models import AttemptOutcome, Claim, ExecutionStatus, Outcome
from schedulerd.store import Store
from schedulerd.store.sql import QUERIES

JOBS = 20_000
# $1 one-off jobs; with $2, each waiting on an occurrence and watching failures and late runs.
INSERT_JOBS = """
INSERT INTO jobs (id, tenant, name, task, params, schedule_kind, run_at, max_attempts, backoff_base_s, backoff_factor,
                  backoff_max_s, timeout_s, overlap_waiting, notify_on, pause_after_failures)
SELECT gen_random_uuid(), 'default', 'plan-' || g, 'noop', '{}', 'at', clock_timestamp(), 3, 1, 2, 60, 30,
       CASE WHEN $2 THEN gen_random_uuid() END, CASE WHEN $2 THEN '{failure,late}'::text[] END, CASE WHEN $2 THEN 3 END
FROM generate_series(1, $1) g
"""
# (query, its arguments): each reads jobs in the sweeper or the notifier, through a partial index
# or one probe per row it has found elsewhere.
BACKGROUND_SCANS: list[tuple[str, list[Any]]] = [
    ("job_overlap_stalled", [1000]),
    ("notify_failed_candidates", [21600.0, 100]),
    ("notify_late_candidates", [21600.0, 100]),
    ("notify_recovery_candidates", [21600.0, 100]),
]
# A walk over the jobs (a seq scan, or the primary key in its order) reads every page of the
# table (about 700) or more; what these queries look for fits in a few dozen.
BUFFERS_AT_MOST = 150


@pytest.fixture
async def stale_statistics(store: Store) -> AsyncIterator[None]:
    """Statistics that say every job waits and watches, over jobs none of which does now."""
    await store.db.execute("ALTER TABLE jobs SET (autovacuum_enabled = off)")
    try:
        await store.db.execute(INSERT_JOBS, JOBS, True)
        await store.db.execute("ANALYZE jobs")
        await store.db.execute("UPDATE jobs SET overlap_waiting = NULL, notify_on = NULL, pause_after_failures = NULL")
        await store.db.execute("VACUUM jobs")  # no dead index entries left to read; the statistics stay
        # A few failing jobs for the recovery check to look up (none has recovered).
        await store.db.execute(
            "INSERT INTO notify_jobs (job_id, tenant, failed_at, failed_scheduled_for) "
            "SELECT id, tenant, clock_timestamp(), clock_timestamp() FROM jobs ORDER BY id LIMIT 5"
        )  # fmt: skip
        yield
    finally:
        await store.db.execute("ALTER TABLE jobs RESET (autovacuum_enabled)")


# The daemon's statements are prepared: after five executions Postgres may keep a generic plan,
# made without the parameters' values. Each query is judged under both.
PLAN_MODES = ["force_custom_plan", "force_generic_plan"]


async def _explain(store: Store, mode: str, name: str, *args: Any) -> dict[str, Any]:
    """EXPLAIN (ANALYZE, BUFFERS) of a query of store/queries, planned as `mode` says."""
    async with store.db.acquire() as connection:
        await connection.execute(f"SET plan_cache_mode = {mode}")
        try:
            text = await connection.fetchval("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + QUERIES[name], *args)
        finally:
            await connection.execute("RESET plan_cache_mode")
    return json.loads(text)[0]["Plan"]


def _scans_of_jobs(plan: dict[str, Any]) -> Iterator[str]:
    """The scans of jobs that ran (a plan may hold others that its one-time filters skipped)."""
    if plan.get("Relation Name") == "jobs" and plan["Actual Loops"] > 0:
        yield f"{plan['Node Type']} ({plan.get('Index Name', '-')})"
    for child in plan.get("Plans", []):
        yield from _scans_of_jobs(child)


@pytest.mark.parametrize("mode", PLAN_MODES)
@pytest.mark.parametrize(("name", "args"), BACKGROUND_SCANS, ids=[name for name, _ in BACKGROUND_SCANS])
@pytest.mark.usefixtures("stale_statistics")
async def test_a_background_scan_reads_what_it_looks_for_not_every_job(
    store: Store, name: str, args: list[Any], mode: str
) -> None:
    plan = await _explain(store, mode, name, *args)

    scans = list(_scans_of_jobs(plan))
    assert scans, f"{name} does not read jobs any more: update this test"
    assert [s for s in scans if s.startswith("Seq Scan")] == [], scans
    assert plan["Shared Hit Blocks"] + plan["Shared Read Blocks"] <= BUFFERS_AT_MOST, scans
    assert await getattr(store, name)(*args) == []


INSERT_RUNS = """
INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status, enqueued_at)
SELECT schedulerd_execution_id(t), (SELECT id FROM jobs ORDER BY id OFFSET g % 20 LIMIT 1), 'default', t, t, 'queued',
       clock_timestamp()
FROM generate_series(1, $1) g, LATERAL (SELECT clock_timestamp() - make_interval(secs => 60 + g / 1000.0) AS t) s
RETURNING id
"""


def _scans(plan: dict[str, Any], relation_prefix: str) -> Iterator[dict[str, Any]]:
    if (plan.get("Relation Name") or "").startswith(relation_prefix) and plan["Actual Loops"] > 0:
        yield plan
    for child in plan.get("Plans", []):
        yield from _scans(child, relation_prefix)


def _succeeded(claim: Claim) -> Outcome:
    return Outcome(claim.id, claim.fence, claim.task, ExecutionStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED)


async def _histories(store: Store) -> None:
    """Twenty jobs with 250 runs each, all but ten finished; those ten were held by a worker that
    vanished. Statistics taken while every run was queued."""
    await store.db.execute(INSERT_JOBS, 20, False)
    ids = [r["id"] for r in await store.db.fetch(INSERT_RUNS, 5000)]
    await store.db.execute("ANALYZE jobs, executions")
    for start in range(0, len(ids), 500):
        claims = await store.execution_claim_many(ids[start:start + 500], 30.0, "gone")
        finished = [c for c in claims if c.id not in ids[:10]]
        await store.execution_finish_many([_succeeded(c) for c in finished])
    await store.db.execute("UPDATE executions SET lease_until = clock_timestamp() - interval '1 hour' WHERE status = 'running'")


@pytest.mark.parametrize("mode", PLAN_MODES)
async def test_the_reclaim_finds_lapsed_leases_before_it_reads_their_jobs(store: Store, mode: str) -> None:
    # The reclaim must not walk each job's whole history to find the ten.
    await _histories(store)

    lapsed = (await store.execution_lease_window((datetime(1970, 1, 1, tzinfo=UTC), UUID(int=0)), 20_000)).lapsed
    assert len(lapsed) == 10  # the walk of the lane found them, unlocked

    plan = await _explain(store, mode, "execution_reclaim_expired", 1000, 15.0, 15.0, *map(list, zip(*lapsed)))

    by_job = [s for s in _scans(plan, "executions") if "job_id" in s.get("Index Name", "")]
    assert by_job == [], "the reclaim walked jobs' histories"
    assert [s["Actual Loops"] for s in _scans(plan, "jobs")] == [10]  # one lookup per lapsed lease
    assert await store.db.fetchval("SELECT count(*) FROM executions WHERE status = 'queued'") == 10


@pytest.mark.parametrize("mode", PLAN_MODES)
async def test_the_misfire_check_reads_overdue_runs_not_histories(store: Store, mode: str) -> None:
    await _histories(store)
    # Cron jobs' histories, and statistics that know the lanes hold only the ten running rows
    # (status alone says nothing an index can use).
    await store.db.execute("UPDATE jobs SET schedule_kind = 'cron', cron = '* * * * *', timezone = 'UTC', run_at = NULL")
    await store.db.execute("VACUUM ANALYZE jobs, executions")

    plan = await _explain(store, mode, "execution_missed", 60.0, 1000, None, 15.0)

    assert plan["Shared Hit Blocks"] + plan["Shared Read Blocks"] <= 60  # the 5,000 runs span ~250 pages
    assert plan["Actual Rows"] == 0  # every run started


async def test_the_store_never_compiles_a_statement(store: Store) -> None:
    # JIT compiles anew at every execution whose estimate passes jit_above_cost: ~110 ms of CPU
    # for a background scan over a large partition that runs in 9.
    assert await store.db.fetchval("SHOW jit") == "off"

