"""Postgres's cost per execution of each hot-path statement, alone: `scripts/bench statements
[--count N] [--batch B]`. On a throwaway database, N executions of one instant are written pending,
then dispatched (execution_dispatch_due, as the dispatcher does), claimed (execution_claim_many,
B ids at a time, as a worker does) and finished as successes (execution_finish_many, B at a time,
which writes a batch of successes with execution_succeed_many), each phase on one connection of
the pool the daemon runs it on (the claim and the finish on the worker's pool, with its generic
plans: Store.worker_db), whose backend's CPU time (/proc/<pid>/schedstat: so Postgres must run
on this host), WAL bytes and heap-only share of updates are read before and after, and this
process's own CPU time: the client's side of each statement (encoding its arguments, decoding its
rows into the worker's models), which a replica pays.

Nothing else shares the statements' backend, so a change to one statement's SQL shows in its own
row, without the noise of a whole spike: profile here, then confirm with `scripts/bench compare`."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import asyncpg

from bench import EMBEDDED_DIR, INSERT_EXECUTIONS, INSERT_JOBS, _with_database  # beside this file
from bench_machine import calibration_line
from schedulerd.config import DispatcherConfig, JobsConfig
from schedulerd.embedded import scratch_servers
from schedulerd.models import Claim, Outcome
from schedulerd.store import Store, migrate

JOBS = 100
# Updates of executions and how many were heap-only, summed over its partitions.
UPDATES = """
SELECT coalesce(sum(n_tup_upd), 0)::bigint AS updates, coalesce(sum(n_tup_hot_upd), 0)::bigint AS hot
FROM pg_stat_user_tables WHERE relname LIKE 'executions%'
"""


@dataclass(frozen=True)
class PhaseCost:
    name: str
    cpu_us: float  # the backend's CPU per execution
    client_cpu_us: float  # this process's CPU per execution: the Store call as a worker makes it
    wall_us: float  # the caller's wall time per execution (round trips included)
    wal_bytes: float  # WAL written per execution
    hot_share: float | None  # heap-only updates / updates (None: no update)


def _backend_cpu_s(pid: int) -> float:
    """CPU seconds a local process has run, in nanoseconds' resolution (not clock ticks)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


async def _updates(db: asyncpg.Pool, stats: asyncpg.Connection) -> tuple[int, int]:
    await db.execute("SELECT pg_stat_force_next_flush()")
    await db.execute("SELECT 1")  # the forced flush has run before this reply, so `stats` sees it
    row = await stats.fetchrow(UPDATES)
    return row["updates"], row["hot"]


async def _phase(
    name: str, count: int, db: asyncpg.Pool, stats: asyncpg.Connection, run: Callable[[], Awaitable[None]]
) -> PhaseCost:
    """`run`'s cost, on `db`: a pool of one connection, whose backend runs all of it."""
    pid = await db.fetchval("SELECT pg_backend_pid()")
    updates_before, hot_before = await _updates(db, stats)
    wal_before = await db.fetchval("SELECT pg_current_wal_insert_lsn()")
    cpu_before, client_before, started = _backend_cpu_s(pid), time.process_time(), time.perf_counter()
    await run()
    cpu_s, client_s = _backend_cpu_s(pid) - cpu_before, time.process_time() - client_before
    wall_s = time.perf_counter() - started
    wal = await db.fetchval("SELECT pg_current_wal_insert_lsn() - $1::pg_lsn", wal_before)
    updates_after, hot_after = await _updates(db, stats)
    updates = updates_after - updates_before
    return PhaseCost(name, 1e6 * cpu_s / count, 1e6 * client_s / count, 1e6 * wall_s / count, float(wal) / count,
                     (hot_after - hot_before) / updates if updates else None)  # fmt: skip


async def measure(admin_url: str, count: int, batch: int) -> list[PhaseCost]:
    """Dispatch, claim and finish `count` executions; the cost of each phase."""
    db_name = f"schedulerd_bench_statements_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(admin_url)
    await admin.execute(f'CREATE DATABASE "{db_name}"')
    database_url = _with_database(admin_url, db_name)
    try:
        await migrate(database_url)
        # The worker's pool opens one connection and, used one statement at a time, keeps to it.
        store = await Store.connect(database_url, min_size=1, max_size=1, worker_pool=True)
        stats = await asyncpg.connect(database_url)
        try:
            return await _measure(store, stats, count, batch)
        finally:
            await stats.close()
            await store.close()
    finally:
        await admin.execute(f'DROP DATABASE "{db_name}" WITH (FORCE)')
        await admin.close()


async def _measure(store: Store, stats: asyncpg.Connection, count: int, batch: int) -> list[PhaseCost]:
    jobs = JobsConfig()
    due = await store.db.fetchval("SELECT clock_timestamp() + interval '1 second'")
    job_ids = [r["id"] for r in await store.db.fetch(
        INSERT_JOBS, due, JOBS, jobs.max_attempts, jobs.backoff_base_s, jobs.backoff_factor, jobs.backoff_max_s,
        jobs.timeout_s,
    )]  # fmt: skip
    await store.db.execute(INSERT_EXECUTIONS, due, count, 0.0, job_ids)
    await store.db.execute("CHECKPOINT")  # every phase starts its pages' full-page images alike
    await asyncio.sleep(max(0.0, (due - await store.db.fetchval("SELECT clock_timestamp()")).total_seconds()))
    dispatcher = DispatcherConfig()
    queued: list[uuid.UUID] = []
    claims: list[Claim] = []
    finished = 0

    async def dispatch() -> None:
        while enqueued := await store.execution_dispatch_due(dispatcher.horizon_s, dispatcher.batch_size):
            queued.extend(e.execution_id for e in enqueued)

    async def claim() -> None:
        for i in range(0, len(queued), batch):
            claims.extend(await store.execution_claim_many(queued[i : i + batch], 60.0, "bench-statements"))

    async def finish() -> None:
        nonlocal finished
        for i in range(0, len(claims), batch):
            outcomes = [Outcome(c.id, c.fence, c.task, "succeeded", "succeeded") for c in claims[i : i + batch]]
            finished += len(await store.execution_finish_many(outcomes))

    phases = [await _phase("dispatch", count, store.db, stats, dispatch)]
    phases.append(await _phase("claim", count, store.worker_db, stats, claim))
    phases.append(await _phase("finish", count, store.worker_db, stats, finish))
    if not (len(queued) == len(claims) == finished == count):
        raise RuntimeError(f"dispatched {len(queued)}, claimed {len(claims)}, finished {finished} of {count}")
    return phases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench statements", description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100_000, help="executions (default 100000)")
    parser.add_argument("--batch", type=int, default=256, help="ids per claim and per finish (default 256: the worker's)")
    args = parser.parse_args(argv)
    with scratch_servers(EMBEDDED_DIR) as servers:
        print(calibration_line(servers.admin_url), flush=True)
        phases = asyncio.run(measure(servers.admin_url, args.count, args.batch))
    for p in phases:
        hot = "-" if p.hot_share is None else f"{100 * p.hot_share:.0f} %"
        print(f"{p.name:9s} Postgres CPU {p.cpu_us:6.1f} us, client CPU {p.client_cpu_us:6.1f} us, wall {p.wall_us:6.1f} us, "
              f"WAL {p.wal_bytes:5.0f} B per execution; heap-only updates {hot}")  # fmt: skip
    print(f"in all    Postgres CPU {sum(p.cpu_us for p in phases):6.1f} us, client CPU "
          f"{sum(p.client_cpu_us for p in phases):6.1f} us per execution")
    print(json.dumps({"count": args.count, "batch": args.batch, "phases": [asdict(p) for p in phases]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
