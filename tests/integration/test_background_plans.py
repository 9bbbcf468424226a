"""The background loops' scans of jobs walk their small partial indexes whatever the statistics
say. Statistics lag a table that grows fast (a fresh install taking a million one-off jobs, a
benchmark): planned from them, these filters were seq scans over every job, at every pass of the
sweeper and the notifier, slower each pass as the table grew."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from schedulerd.store import Store
from schedulerd.store.sql import QUERIES

JOBS = 5000
INSERT_JOBS = """
INSERT INTO jobs (id, tenant, name, task, params, schedule_kind, run_at, max_attempts, backoff_base_s, backoff_factor,
                  backoff_max_s, timeout_s, overlap_waiting, notify_on, pause_after_failures)
SELECT gen_random_uuid(), 'default', 'plan-' || g, 'noop', '{}', 'at', clock_timestamp(), 3, 1, 2, 60, 30,
       gen_random_uuid(), '{failure,late}', 3
FROM generate_series(1, $1) g
"""
# (query, its arguments): each reads jobs through a partial index in the sweeper or the notifier.
BACKGROUND_SCANS: list[tuple[str, list[Any]]] = [
    ("job_overlap_stalled", [1000]),
    ("notify_failed_candidates", [21600.0, 100]),
    ("notify_late_candidates", [21600.0, 100]),
]


@pytest.fixture
async def stale_statistics(store: Store) -> AsyncIterator[None]:
    """Statistics that say every job waits and watches, over jobs none of which does now."""
    await store.db.execute("ALTER TABLE jobs SET (autovacuum_enabled = off)")
    try:
        await store.db.execute(INSERT_JOBS, JOBS)
        await store.db.execute("ANALYZE jobs")
        await store.db.execute("UPDATE jobs SET overlap_waiting = NULL, notify_on = NULL, pause_after_failures = NULL")
        yield
    finally:
        await store.db.execute("ALTER TABLE jobs RESET (autovacuum_enabled)")


def _scans_of_jobs(plan: dict[str, Any]) -> Iterator[str]:
    """The scans of jobs that ran (a plan may hold others that its one-time filters skipped)."""
    if plan.get("Relation Name") == "jobs" and plan["Actual Loops"] > 0:
        yield f"{plan['Node Type']} ({plan.get('Index Name', '-')})"
    for child in plan.get("Plans", []):
        yield from _scans_of_jobs(child)


@pytest.mark.parametrize(("name", "args"), BACKGROUND_SCANS, ids=[name for name, _ in BACKGROUND_SCANS])
@pytest.mark.usefixtures("stale_statistics")
async def test_a_background_scan_of_jobs_uses_its_partial_index(store: Store, name: str, args: list[Any]) -> None:
    plan = json.loads(await store.db.fetchval("EXPLAIN (ANALYZE, FORMAT JSON) " + QUERIES[name], *args))[0]["Plan"]

    scans = list(_scans_of_jobs(plan))
    assert scans, f"{name} does not read jobs any more: update this test"
    assert [s for s in scans if s.startswith("Seq Scan")] == [], scans
    assert await getattr(store, name)(*args) == []
