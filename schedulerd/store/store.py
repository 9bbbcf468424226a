"""Store: one async method per query in queries.sql, returning dataclasses; plus migrations."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import asyncpg

from schedulerd.models import Attempt, Claim, Enqueue, Execution, Job, Outcome
from schedulerd.store.sql import QUERIES

MIGRATIONS_DIR = Path(__file__).with_name("migrations")


def _yoyo_url(database_url: str) -> str:
    """yoyo names its driver in the scheme; asyncpg URLs have none."""
    scheme, _, rest = database_url.partition("://")
    return f"postgresql+psycopg://{rest}" if scheme in ("postgres", "postgresql") else database_url


def _migrate_sync(database_url: str) -> int:
    from yoyo import get_backend, read_migrations

    backend = get_backend(_yoyo_url(database_url))
    try:
        migrations = read_migrations(str(MIGRATIONS_DIR))
        # yoyo's lock table serialises replicas that start at once; the loser then finds nothing to apply.
        with backend.lock():
            todo = backend.to_apply(migrations)
            backend.apply_migrations(todo)
        return len(todo)
    finally:
        backend.connection.close()


async def migrate(database_url: str) -> int:
    """Apply pending migrations; returns how many were applied (0 when current)."""
    return await asyncio.to_thread(_migrate_sync, database_url)


def _pending_sync(database_url: str) -> list[str]:
    from yoyo import get_backend, read_migrations

    backend = get_backend(_yoyo_url(database_url))
    try:
        return [m.id for m in backend.to_apply(read_migrations(str(MIGRATIONS_DIR)))]
    finally:
        backend.connection.close()


async def migrations_pending(database_url: str) -> list[str]:
    return await asyncio.to_thread(_pending_sync, database_url)


async def _init_connection(connection: asyncpg.Connection) -> None:
    await connection.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


class Store:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    @classmethod
    async def connect(cls, database_url: str, *, min_size: int = 2, max_size: int = 10) -> Store:
        pool = await asyncpg.create_pool(database_url, min_size=min_size, max_size=max_size, init=_init_connection)
        return cls(pool)

    async def close(self) -> None:
        await self.pool.close()

    # --- jobs -------------------------------------------------------------------------------

    async def job_create(
        self, job: dict[str, Any], first_execution: tuple[UUID, datetime] | None, horizon_s: float
    ) -> tuple[Job, Execution | None]:
        """Insert a job and (for one-off jobs) its execution in one transaction."""
        async with self.pool.acquire() as connection, connection.transaction():
            job_row = await connection.fetchrow(
                QUERIES["job_insert"],
                job["id"], job["tenant"], job["name"], job["task"], job["params"], job["schedule_kind"],
                job["run_at"], job["cron"], job["timezone"], job["misfire_policy"], job["catch_up_limit"],
                job["window_s"], job["max_attempts"], job["backoff_base_s"], job["backoff_factor"],
                job["backoff_max_s"], job["timeout_s"],
            )  # fmt: skip
            execution = None
            if first_execution is not None:
                execution_id, scheduled_for = first_execution
                row = await connection.fetchrow(
                    QUERIES["execution_insert"], execution_id, job["id"], job["tenant"], scheduled_for, horizon_s
                )
                execution = Execution.from_row(row)
        return Job.from_row(job_row), execution

    async def job_get(self, job_id: UUID) -> Job | None:
        row = await self.pool.fetchrow(QUERIES["job_get"], job_id)
        return Job.from_row(row) if row else None

    # --- executions: reads ------------------------------------------------------------------

    async def execution_get(self, execution_id: UUID) -> Execution | None:
        row = await self.pool.fetchrow(QUERIES["execution_get"], execution_id)
        return Execution.from_row(row) if row else None

    async def execution_list(
        self, *, tenant: str | None = None, job_id: UUID | None = None, status: str | None = None, limit: int = 50
    ) -> list[Execution]:
        rows = await self.pool.fetch(QUERIES["execution_list"], tenant, job_id, status, limit)
        return [Execution.from_row(r) for r in rows]

    async def attempt_list(self, execution_id: UUID) -> list[Attempt]:
        rows = await self.pool.fetch(QUERIES["attempt_list"], execution_id)
        return [Attempt.from_row(r) for r in rows]

    # --- executions: the loops' statements ---------------------------------------------------

    async def execution_dispatch_due(self, horizon_s: float, limit: int) -> list[Enqueue]:
        rows = await self.pool.fetch(QUERIES["execution_dispatch_due"], horizon_s, limit)
        return [Enqueue(r["id"], r["due_at"]) for r in rows]

    async def execution_claim_many(self, execution_ids: Sequence[str], lease_s: float, worker: str) -> list[Claim]:
        rows = await self.pool.fetch(QUERIES["execution_claim_many"], execution_ids, lease_s, worker)
        return [Claim.from_row(r) for r in rows]

    async def execution_heartbeat_many(
        self, held: Sequence[tuple[UUID, int]], lease_s: float
    ) -> set[UUID]:
        """Extend leases; returns the ids whose lease still holds."""
        rows = await self.pool.fetch(
            QUERIES["execution_heartbeat_many"], [h[0] for h in held], [h[1] for h in held], lease_s
        )
        return {r["id"] for r in rows}

    async def execution_finish_many(self, outcomes: Sequence[Outcome]) -> list[tuple[UUID, str, datetime]]:
        """Record outcomes guarded by fence; returns (id, new status, due_at) of those that took effect."""
        rows = await self.pool.fetch(
            QUERIES["execution_finish_many"],
            [o.execution_id for o in outcomes],
            [o.fence for o in outcomes],
            [str(o.status) for o in outcomes],
            [str(o.outcome) for o in outcomes],
            [o.error for o in outcomes],
            [o.retry_delay_s for o in outcomes],
        )
        return [(r["id"], r["status"], r["due_at"]) for r in rows]

    async def execution_reclaim_expired(self, limit: int) -> list[tuple[UUID, str, datetime]]:
        rows = await self.pool.fetch(QUERIES["execution_reclaim_expired"], limit)
        return [(r["id"], r["status"], r["due_at"]) for r in rows]

    async def execution_queued_overdue(self, grace_s: float, limit: int) -> list[Enqueue]:
        rows = await self.pool.fetch(QUERIES["execution_queued_overdue"], grace_s, limit)
        return [Enqueue(r["id"], r["due_at"]) for r in rows]

    async def execution_queued_page(self, after: tuple[datetime, UUID], limit: int) -> list[Enqueue]:
        rows = await self.pool.fetch(QUERIES["execution_queued_page"], after[0], after[1], limit)
        return [Enqueue(r["id"], r["due_at"]) for r in rows]
