"""The claim of a queued execution is a heap-only (HOT) update: no index of executions names a
column it changes, so the new row version is written beside the old one and no index entry is
made for it (docs/benchmarks.md "The claim as a HOT update")."""

from __future__ import annotations

import re

from schedulerd.store import Store
from tests.conftest import MakeJob

INSERT_QUEUED = """
INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status, enqueued_at)
SELECT schedulerd_execution_id(t), $1, 'default', t, t, 'queued', clock_timestamp()
FROM generate_series(1, $2) g, LATERAL (SELECT clock_timestamp() - make_interval(secs => g * 0.01) AS t) s  -- due within the late grace
RETURNING id
"""
# Row versions written in this transaction to every executions partition, and how many were HOT.
UPDATES_IN_TRANSACTION = """
SELECT sum(pg_stat_get_xact_tuples_updated(inhrelid)) AS updated,
       sum(pg_stat_get_xact_tuples_hot_updated(inhrelid)) AS hot
FROM pg_inherits WHERE inhparent = 'executions'::regclass
"""


async def test_no_index_of_executions_names_status(store: Store) -> None:
    definitions = await store.db.fetch(
        "SELECT pg_get_indexdef(indexrelid) AS definition FROM pg_index WHERE indrelid = 'executions'::regclass"
    )
    assert len(definitions) >= 10
    assert [d["definition"] for d in definitions if re.search(r"\bstatus\b", d["definition"])] == []


async def test_claiming_queued_executions_writes_no_index_entry(store: Store, make_job: MakeJob) -> None:
    job, _ = await make_job()
    ids = [r["id"] for r in await store.db.fetch(INSERT_QUEUED, job.id, 10)]

    async with store.transaction() as tx:
        claims = await tx.execution_claim_many(ids, 30.0, "worker-hot")
        counts = await tx.db.fetchrow(UPDATES_IN_TRANSACTION)

    assert sorted(c.id for c in claims) == sorted(ids)
    assert (counts["updated"], counts["hot"]) == (10, 10)


async def test_rows_inserted_together_are_claimed_together_beside_themselves(store: Store, make_job: MakeJob) -> None:
    """A batch claims a page's rows in one statement, before any old version can be pruned: each
    page keeps room for a new version of every row on it (migration 0032), or the claims that find
    none write their versions elsewhere, with an entry in every index."""
    job, _ = await make_job()
    ids = [r["id"] for r in await store.db.fetch(INSERT_QUEUED, job.id, 400)]  # a dozen pages or more

    async with store.transaction() as tx:
        claims = await tx.execution_claim_many(ids, 30.0, "worker-hot")
        counts = await tx.db.fetchrow(UPDATES_IN_TRANSACTION)

    assert len(claims) == 400
    # A claimed version is wider than the row inserted (154 -> 194-210 bytes here): at half a page
    # free about 84 % fit beside their rows; at 30 % free (before 0032) about 37 %.
    assert counts["updated"] == 400 and counts["hot"] >= 300, dict(counts)


async def test_every_executions_partition_keeps_half_of_each_page_free(store: Store) -> None:
    made = await store.db.fetchval("SELECT schedulerd_ensure_partition(current_date + 30)")  # one made after the migration
    try:
        options = await store.db.fetch(
            "SELECT c.relname, c.reloptions FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'executions'::regclass"
        )
    finally:
        if made:
            day = await store.db.fetchval("SELECT to_char(current_date + 30, 'YYYYMMDD')")
            await store.db.execute(f"DROP TABLE executions_p{day}, attempts_p{day}")
    assert made and f"executions_p{day}" in {r["relname"] for r in options}
    assert {r["relname"]: r["reloptions"] for r in options if r["reloptions"] != ["fillfactor=50"]} == {}


async def test_a_claim_under_a_concurrency_limit_is_indexed_as_limited(store: Store, make_job: MakeJob) -> None:
    # Counted at every claim under its limit's lock: the small set executions_limited answers.
    job, _ = await make_job(concurrency_key="k", concurrency_limit=5)
    ids = [r["id"] for r in await store.db.fetch(INSERT_QUEUED, job.id, 3)]

    assert await store.execution_claim_many(ids, 30.0, "worker-hot") == []  # not without the limit's lock
    claims = await store.execution_claim_many(ids, 30.0, "worker-hot", limited=True)

    assert len(claims) == 3
    lanes = await store.db.fetch("SELECT lane, status FROM executions WHERE id = ANY($1)", ids)
    assert {(r["lane"], r["status"]) for r in lanes} == {("limited", "running")}
    running = await store.flow_running(["default"], [])
    assert sum(n for _, _, _, n in running) == 3
