"""Store: one async method per query in queries/*.sql, returning dataclasses; plus migrations."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from uuid import UUID

import asyncpg
# An execution id from its text, as the driver returns ids: a uuid.UUID subclass (equal, hashing
# and ordering alike) whose parse runs in C, 0.15 us against uuid.UUID's 1.0 (the worker parses
# every popped id).
from asyncpg.pgproto.pgproto import UUID as parsed_id

from schedulerd.config import DatabaseConfig
from schedulerd.core.flow import NO_CAPS, Caps
from schedulerd.core.ids import EARLIEST, covering_days, scheduled_for_bounds
from schedulerd.errors import ConflictError
from schedulerd.models import (
    ApiToken, Attempt, AttemptOutcome, CancelPlan, Claim, Enqueue, Execution, ExecutionStatus, FailedExecution, Finished, Forecast,
    IdempotencyRecord, Job, JobAction, JobFilter, LastExecution,
    LateExecution, LeaseWindow, MinuteStats, Outcome, PARK_REASONS, Redrive, Sealed, SecretEntry, SigningKeyEntry, TenantQuota, TenantStats,
    TzMovedJob, TzRecompute,
)  # fmt: skip
from schedulerd.store.sql import QUERIES

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
# How far back the all-tenant listing looks, step by step, before it reads everything.
LIST_LOOKBACKS = (timedelta(days=1), timedelta(days=7), timedelta(days=31), None)
# How often a replica waiting for another's tz recompute asks again for its lock.
TZ_LOCK_POLL_S = 0.5
# A server that became a standby (a failover demoted it) refuses writes with this.
STANDBY_ERRORS: tuple[type[BaseException], ...] = (asyncpg.ReadOnlySQLTransactionError,)
# The connection broke or hung: it is closed rather than used again. After a failover also: no
# host of a multi-host URL is writable yet (TargetServerAttributeNotMatched, an
# InternalClientError), a pooled connection whose server died mid-reply is left in a protocol
# state asyncpg cannot leave ("cannot switch to state ..."), and a connection to a server that is
# now a standby refuses writes: a fresh connection finds the new primary.
BROKEN_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError, TimeoutError, asyncpg.InterfaceError, asyncpg.PostgresConnectionError, asyncpg.InternalClientError,
    *STANDBY_ERRORS,
)  # fmt: skip
# A write that failed with one of these may succeed unchanged when tried again on a fresh
# connection: the connection broke or hung (or reached a standby), the server is restarting, a
# lock wait gave up.
RETRYABLE_ERRORS: tuple[type[BaseException], ...] = BROKEN_CONNECTION_ERRORS + (
    asyncpg.QueryCanceledError, asyncpg.TransactionRollbackError, asyncpg.LockNotAvailableError,
    asyncpg.OperatorInterventionError, asyncpg.InsufficientResourcesError,
)  # fmt: skip
# Any other error from Postgres refused the statement for what it carries: the same rows fail again.
REFUSED_ERRORS: tuple[type[BaseException], ...] = (asyncpg.PostgresError,)
# Every error a Store call may raise: from Postgres, the driver or the network.
POSTGRES_ERRORS: tuple[type[BaseException], ...] = (
    OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError,
)  # fmt: skip
CopySink = Callable[[bytes], Awaitable[None]]
# An application's own connection, for enqueueing inside its transaction (Client, Intake).
Connection = asyncpg.Connection


def _minutes(rows: Sequence[Any]) -> tuple[list[MinuteStats], datetime]:
    """execution_minutes_* rows as records, and the Postgres now every row carries."""
    stats = [MinuteStats(r["minute"], r["scheduled"], r["started"], r["succeeded"], r["failed"], r["lag_p50_s"],
                         r["lag_p99_s"]) for r in rows]  # fmt: skip
    return stats, rows[0]["now"]


def _took_effect(rows: Sequence[Any]) -> list[Finished]:
    """A finish's rows that took effect, each with its retry's queue entry when queued again."""
    return [(r["id"], r["status"], Enqueue(r["id"], r["due_at"], r["tenant"], r["priority"])
             if r["status"] == ExecutionStatus.QUEUED else None) for r in rows]  # fmt: skip


def _yoyo_url(database_url: str) -> str:
    """yoyo names its driver in the scheme; asyncpg URLs have none."""
    scheme, _, rest = database_url.partition("://")
    return f"postgresql+psycopg://{rest}" if scheme in ("postgres", "postgresql") else database_url


async def single_host_url(database_url: str) -> str:
    """The URL with one host: for a multi-host URL ([database].url naming every node of an HA
    formation), the host that asyncpg reaches with it, which target_session_attrs=read-write makes
    the primary. yoyo parses URLs itself and takes one host only."""
    parts = urlsplit(database_url)
    if "," not in parts.netloc:
        return database_url
    connection = await asyncpg.connect(database_url)
    try:
        host, port = connection._addr  # noqa: SLF001 (asyncpg has no public name for the address it chose)
    finally:
        await connection.close()
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo + '@' if userinfo else ''}{f'[{host}]' if ':' in host else host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


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
    """Apply pending migrations; returns how many were applied (0 when current). yoyo (and the
    psycopg driver it takes) is loaded only when something is pending: once loaded, a replica
    holds them (9 MB) for its whole life."""
    if not await migrations_pending(database_url):
        return 0
    return await asyncio.to_thread(_migrate_sync, await single_host_url(database_url))


async def migrations_pending(database_url: str) -> list[str]:
    """The migrations not yet applied, in order, read from yoyo's own record of the applied ones."""
    connection = await asyncpg.connect(database_url)
    try:
        applied = set() if await connection.fetchval("SELECT to_regclass('_yoyo_migration') IS NULL") else {
            r["migration_id"] for r in await connection.fetch("SELECT migration_id FROM _yoyo_migration")
        }  # fmt: skip
    finally:
        await connection.close()
    return [m for m in sorted(p.stem for p in MIGRATIONS_DIR.glob("*.sql")) if m not in applied]


# TCP keepalive on both ends of every pooled connection, so a peer that vanished without a reset
# (a dead host, a dropped NAT entry) is noticed in about a minute even on an idle connection.
# Keepalive cannot see a half-open connection behind a proxy that still answers for it (pgbouncer,
# HAProxy, a NAT gateway): there every statement is bounded by the pool's statement_timeout_s, and
# the hot path's by its own shorter timeouts (Store._fetch_bounded).
KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_COUNT = 30, 10, 3
# jit off: every statement here is short and runs again and again, and JIT compiles anew at each
# execution whose estimated cost passes jit_above_cost; a background scan estimated over a large
# partition spent ~110 ms compiling to run in 9 (docs/benchmarks.md "Background scans").
SERVER_SETTINGS = {
    "tcp_keepalives_idle": str(KEEPALIVE_IDLE_S), "tcp_keepalives_interval": str(KEEPALIVE_INTERVAL_S),
    "tcp_keepalives_count": str(KEEPALIVE_COUNT), "jit": "off",
}  # fmt: skip
# The worker's batched writes (the claim, the heartbeat, the finish: Store._fetch_bounded) run on
# a pool of their own whose connections keep one generic plan per statement. On the shared pool
# Postgres planned them afresh at every execution whenever batches were small (its custom plan
# for a few ids is estimated cheaper than the generic one, so it never settles on the generic),
# about a millisecond of planning per statement: most of Postgres's CPU at 1,000 executions/s
# (docs/benchmarks.md "One plan per statement"). Every plan_cache_mode-generic plan of these
# statements reads by the ids' index (tests/integration/test_worker_plans.py). Four connections:
# the pop's claim, the finish loop, the heartbeat loop, and one for a retry on a fresh connection.
WORKER_SERVER_SETTINGS = {**SERVER_SETTINGS, "plan_cache_mode": "force_generic_plan"}
WORKER_POOL_SIZE = 4


def worker_statement(name: str, bounds: tuple[datetime, datetime]) -> str:
    """Query `name` with its /*days*/ marks holding `bounds` (its [$low, $high) of scheduled_for)
    widened to whole UTC days, as constants the planner prunes partitions by (why: leases.sql,
    execution_claim_many). One text, so one prepared statement and plan, per span of days. The
    constants are formatted from datetimes, never from input."""
    query = QUERIES[name]
    days = covering_days(*bounds)
    if days is None:
        return query
    first, end = (day.isoformat() for day in days)
    return query.replace("/*days*/", f"AND e.scheduled_for >= '{first}' AND e.scheduled_for < '{end}'")


def _keepalive(connection: asyncpg.Connection) -> None:
    """Client-side keepalive on the connection's socket (asyncpg has no option for it)."""
    sock = connection._transport.get_extra_info("socket") if getattr(connection, "_transport", None) else None  # noqa: SLF001
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return  # a Unix socket needs none
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", KEEPALIVE_IDLE_S), ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL_S), ("TCP_KEEPCNT", KEEPALIVE_COUNT)):
        if hasattr(socket, option):  # Linux names; other systems keep their defaults
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


def _json_value(text: str) -> Any:
    """A jsonb value as Python. An empty object (the params of a job given none) skips the parser: a
    fresh {} costs a claimed row about 0.1 us against json.loads's 2 through the codec."""
    return {} if text == "{}" else json.loads(text)


async def _init_connection(connection: asyncpg.Connection) -> None:
    _keepalive(connection)
    await connection.set_type_codec("jsonb", encoder=json.dumps, decoder=_json_value, schema="pg_catalog")


async def _keep_session(connection: asyncpg.Connection) -> None:
    """Skip asyncpg's per-release RESET ALL/UNLISTEN round trip: we keep no session state
    (open transactions are still rolled back by the pool). Measured: ~7% of a busy worker."""


class _PooledConnection(asyncpg.Connection):
    """Closes itself when a statement finds it broken (BROKEN_CONNECTION_ERRORS), whichever
    path ran it, so the pool never hands it out again and the caller's retry gets a fresh
    connection: after a failover, one on the new primary."""

    async def execute(self, *args: Any, **kwargs: Any) -> str:
        return await self._closing_if_broken(super().execute(*args, **kwargs))

    async def executemany(self, *args: Any, **kwargs: Any) -> None:
        return await self._closing_if_broken(super().executemany(*args, **kwargs))

    async def fetch(self, *args: Any, **kwargs: Any) -> list[asyncpg.Record]:
        return await self._closing_if_broken(super().fetch(*args, **kwargs))

    async def fetchrow(self, *args: Any, **kwargs: Any) -> asyncpg.Record | None:
        return await self._closing_if_broken(super().fetchrow(*args, **kwargs))

    async def fetchval(self, *args: Any, **kwargs: Any) -> Any:
        return await self._closing_if_broken(super().fetchval(*args, **kwargs))

    async def _closing_if_broken(self, statement: Awaitable[Any]) -> Any:
        try:
            return await statement
        except BROKEN_CONNECTION_ERRORS:
            if not self.is_closed():
                self.terminate()
            raise


class Store:
    """Methods run on a pool, or on one connection inside `transaction()`."""

    def __init__(
        self, db: asyncpg.Pool | asyncpg.Connection, reads: Store | None = None,
        worker_db: asyncpg.Pool | None = None,
    ) -> None:  # fmt: skip
        self.db = db
        # Where read-only views (the API's lists and lookups) go: a replica's pool, or this store.
        self.reads: Store = reads or self
        # Where the worker's batched writes go: their own pool (WORKER_SERVER_SETTINGS), or db.
        self.worker_db: asyncpg.Pool | asyncpg.Connection = worker_db or db
        # Connections of its own pool kept between the worker's writes (_fetch_bounded), the last
        # one used on top. Taking a connection from an asyncpg pool with a timeout and giving it
        # back costs a replica ~140 us of CPU a statement (the acquire runs in a task of its own,
        # the release in a shielded one): one claim and one finish per batch paid it.
        self._held: list[asyncpg.pool.PoolConnectionProxy] = []

    @classmethod
    async def connect(
        cls, database_url: str, *, min_size: int = 2, max_size: int = 10, read_url: str = "",
        statement_timeout_s: float = DatabaseConfig.statement_timeout_s, worker_pool: bool = False,
    ) -> Store:  # fmt: skip
        """A pool on the primary; with read_url (a read replica, [database].read_url) a second
        pool of the same size there, for `reads`; with worker_pool, WORKER_POOL_SIZE connections
        more on the primary for the worker's batched writes. A statement unanswered for
        statement_timeout_s raises TimeoutError and its connection is closed (_PooledConnection),
        so no caller, the background loops included, waits forever on a connection that went
        half-open."""
        options = {
            "init": _init_connection, "reset": _keep_session, "connection_class": _PooledConnection,
            "command_timeout": statement_timeout_s,
        }  # fmt: skip
        pools: list[asyncpg.Pool] = []
        try:
            pools.append(await asyncpg.create_pool(
                database_url, min_size=min_size, max_size=max_size, server_settings=SERVER_SETTINGS, **options
            ))  # fmt: skip
            worker_db = None
            if worker_pool:
                worker_db = await asyncpg.create_pool(
                    database_url, min_size=1, max_size=WORKER_POOL_SIZE, server_settings=WORKER_SERVER_SETTINGS, **options
                )  # fmt: skip
                pools.append(worker_db)
            reads = None
            if read_url and read_url != database_url:
                replica = await asyncpg.create_pool(
                    read_url, min_size=1, max_size=max_size, server_settings=SERVER_SETTINGS, **options
                )  # fmt: skip
                pools.append(replica)
                reads = cls(replica)
        except BaseException:
            for pool in pools:
                await pool.close()
            raise
        return cls(pools[0], reads, worker_db)

    async def close(self) -> None:
        if self.reads is not self:
            await self.reads.close()
        while self._held:  # a pool closes only once every connection taken from it is back
            await self.worker_db.release(self._held.pop())  # type: ignore[union-attr]
        if self.worker_db is not self.db:
            await self.worker_db.close()
        await self.db.close()

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Store]:
        """A Store bound to one connection; everything in the block commits together."""
        async with self.db.acquire() as connection, connection.transaction():
            yield Store(connection)

    async def clock_now(self) -> datetime:
        return await self.db.fetchval(QUERIES["clock_now"])

    # --- jobs -------------------------------------------------------------------------------

    async def job_get(self, job_id: UUID) -> Job | None:
        row = await self.db.fetchrow(QUERIES["job_get"], job_id)
        return Job.from_row(row) if row else None

    async def job_get_many(self, job_ids: Sequence[UUID]) -> dict[UUID, Job]:
        return {r["id"]: Job.from_row(r) for r in await self.db.fetch(QUERIES["job_get_many"], list(job_ids))}

    async def job_lock(self, job_id: UUID) -> Job | None:
        row = await self.db.fetchrow(QUERIES["job_lock"], job_id)
        return Job.from_row(row) if row else None

    async def job_lock_shared(self, job_id: UUID) -> Job | None:
        """Inside a transaction: the job, held against pause, resume and delete until the commit."""
        row = await self.db.fetchrow(QUERIES["job_lock_shared"], job_id)
        return Job.from_row(row) if row else None

    async def job_lock_for_edit(self, job_id: UUID) -> Job | None:
        """Inside a transaction: the job (deleted ones too), locked FOR UPDATE until the commit."""
        row = await self.db.fetchrow(QUERIES["job_lock_for_edit"], job_id)
        return Job.from_row(row) if row else None

    async def job_update(
        self, job_id: UUID, values: dict[str, Any], labels: dict[str, str] | None, cursor: datetime | None,
        tzdata_version: str | None, written: int = 0,
    ) -> Job | None:  # fmt: skip
        """Write an edited definition (`values` as jobs.validate returns them), one version up."""
        v = values
        try:
            row = await self.db.fetchrow(
                QUERIES["job_update"], job_id, v["name"], v["params_json"], v["schedule_kind"], v["run_at"], v["cron"],
                v["timezone"], v["misfire_policy"], v["catch_up_limit"], v["window_s"], v["max_attempts"],
                v["backoff_base_s"], v["backoff_factor"], v["backoff_max_s"], v["timeout_s"], v["dst_repeated"],
                v["dst_missing"], v["overlap"], None if labels is None else json.dumps(labels), cursor, tzdata_version,
                written, v["priority"], v["concurrency_key"], v["concurrency_limit"], v["rate_key"], v["rate_limit"],
                v["rate_window_s"], v["notify_url"], v["notify_on"], v["pause_after_failures"],
            )  # fmt: skip
        except asyncpg.UniqueViolationError as exc:
            if exc.constraint_name != "jobs_tenant_source_name":
                raise
            # A name is the key of a job declared in a schedules file (its source): renaming one
            # onto another's would make two jobs answer to one declaration.
            raise ConflictError("name", f"another job of the same source already has the name {v['name']!r}") from None
        return Job.from_row(row) if row else None

    async def job_set_enabled(
        self, job_id: UUID, enabled: bool, cursor: datetime, note: str | None = None, by: str | None = None
    ) -> Job | None:
        """Pause (with a note and who) or resume (clears them)."""
        row = await self.db.fetchrow(QUERIES["job_set_enabled"], job_id, enabled, cursor, note, by)
        return Job.from_row(row) if row else None

    async def job_source_lock(self, tenant: str, source: str) -> None:
        """Inside a transaction: hold the apply lock of (tenant, source) until it ends."""
        await self.db.execute(QUERIES["job_source_lock"], tenant, source)

    async def job_lock_source(self, tenant: str, source: str) -> list[tuple[Job, int | None]]:
        """Inside a transaction: hold the apply lock of (tenant, source), then lock that source's
        live jobs (in id order), each with the version the last apply left it at."""
        await self.job_source_lock(tenant, source)
        rows = await self.db.fetch(QUERIES["job_lock_source"], tenant, source)
        return [(Job.from_row(r), r["applied_version"]) for r in rows]

    async def job_mark_applied_many(self, job_ids: Sequence[UUID], source: str) -> None:
        """These jobs belong to `source`, as its apply left them (their current version)."""
        await self.db.execute(QUERIES["job_mark_applied_many"], list(job_ids), source)

    async def job_delete(self, job_id: UUID) -> Job | None:
        row = await self.db.fetchrow(QUERIES["job_delete"], job_id)
        return Job.from_row(row) if row else None

    async def job_due_for_materialising(self, horizon_s: float, limit: int) -> tuple[list[Job], datetime | None]:
        """Locked jobs whose cursor is behind, and Postgres's now (None when there are none)."""
        rows = await self.db.fetch(QUERIES["job_due_for_materialising"], horizon_s, limit)
        return Job.from_rows(rows), (rows[0]["now"] if rows else None)

    async def job_advance_cursor_many(self, cursors: Sequence[tuple[UUID, datetime, int, bool]], tzdata_version: str) -> None:
        """(job, new cursor, occurrences written, done) for each job."""
        await self.db.execute(
            QUERIES["job_advance_cursor_many"], [c[0] for c in cursors], [c[1] for c in cursors], tzdata_version,
            [c[2] for c in cursors], [c[3] for c in cursors],
        )  # fmt: skip

    async def job_horizon(self) -> tuple[datetime | None, datetime]:
        """(least-advanced cursor of enabled cron jobs or None, Postgres's now)."""
        row = await self.db.fetchrow(QUERIES["job_horizon"])
        return row["horizon"], row["now"]

    async def job_horizon_tenant(self, tenant: str) -> tuple[datetime | None, datetime]:
        """(least-advanced cursor of this tenant's enabled cron jobs or None, Postgres's now)."""
        row = await self.db.fetchrow(QUERIES["job_horizon_tenant"], tenant)
        return row["horizon"], row["now"]

    # --- executions: writes on behalf of jobs ------------------------------------------------

    async def execution_insert_many(
        self, occurrences: Sequence[tuple[UUID, UUID, str, datetime, datetime]], horizon_s: float,
        origin: str = "scheduled",
    ) -> list[Execution]:
        """Insert (id, job_id, tenant, scheduled_for, due_at) rows of one origin (scheduled |
        trigger | backfill), skipping taken slots; returns the new rows (ZADD the queued ones
        after commit)."""
        columns = list(zip(*occurrences)) if occurrences else [[], [], [], [], []]
        rows = await self.db.fetch(QUERIES["execution_insert_many"], *columns, horizon_s, origin)
        return Execution.from_rows(rows)

    async def execution_edit_lock(self, job_id: UUID, after: datetime) -> list[Any]:
        """(id, scheduled_for, status, reason, movable) of the job's scheduled occurrences after
        `after`, the movable ones locked until the transaction ends. Inside a transaction."""
        return await self.db.fetch(QUERIES["execution_edit_lock"], job_id, after)

    async def execution_edit_many(
        self, edits: Sequence[tuple[UUID, datetime, str, datetime]], version: int, horizon_s: float, priority: int = 5
    ) -> list[Execution]:
        """Apply (id, scheduled_for, action, due_at) edits to rows execution_edit_lock locked; the
        rows kept or revived take `priority` (the edited job's). Returns those rows (ZADD the
        queued ones after commit)."""
        columns = [list(c) for c in zip(*edits)] if edits else [[], [], [], []]
        rows = await self.db.fetch(QUERIES["execution_edit_many"], *columns, version, horizon_s, priority)
        return Execution.from_rows(rows)

    async def execution_cancel_for_job(self, job_id: UUID, reason: str) -> int:
        return len(await self.db.fetch(QUERIES["execution_cancel_for_job"], job_id, reason))

    async def execution_cancel(self, execution_id: UUID, tenant: str | None, by: str) -> tuple[Execution, str] | None:
        """Cancel one unsettled execution (a running one is asked to stop): the row as it is now and
        its status before; None when it is missing, another tenant's or already settled."""
        row = await self.db.fetchrow(QUERIES["execution_cancel"], execution_id, tenant, by, *scheduled_for_bounds([execution_id]))
        return (Execution.from_row(row), row["was"]) if row else None

    async def execution_cancel_page(
        self, tenant: str, statuses: Sequence[str], *, job_id: UUID | None, selector: dict[str, str] | None,
        due_from: datetime | None, due_to: datetime | None, limit: int, by: str,
    ) -> list[tuple[UUID, str]]:  # fmt: skip
        """Cancel (or ask to stop) up to `limit` matching executions; (id, status before) of each."""
        rows = await self.db.fetch(
            QUERIES["execution_cancel_page"], tenant, list(statuses), job_id, selector, due_from, due_to, limit, by
        )  # fmt: skip
        return [(r["id"], r["was"]) for r in rows]

    async def execution_cancel_plan(
        self, tenant: str, statuses: Sequence[str], *, job_id: UUID | None, selector: dict[str, str] | None,
        due_from: datetime | None, due_to: datetime | None, sample: int,
    ) -> CancelPlan:  # fmt: skip
        row = await self.db.fetchrow(
            QUERIES["execution_cancel_plan"], tenant, list(statuses), job_id, selector, due_from, due_to, sample
        )  # fmt: skip
        return CancelPlan(row["total"], row["running"], row["sample"])

    async def job_selected_page(
        self, tenant: str, selector: dict[str, str], *, after: UUID | None, limit: int, enabled: bool | None
    ) -> list[UUID]:
        """Ids of a tenant's undeleted jobs matching a label selector, in id order, after `after`."""
        return [r["id"] for r in await self.db.fetch(QUERIES["job_selected_page"], tenant, selector, after, limit, enabled)]

    async def job_selected_count(self, tenant: str, selector: dict[str, str], *, enabled: bool | None) -> tuple[int, int]:
        """(jobs matching, their unstarted executions): a bulk action's dry run."""
        row = await self.db.fetchrow(QUERIES["job_selected_count"], tenant, selector, enabled)
        return row["jobs"], row["unstarted"]

    async def job_action_insert(
        self, action_id: UUID, tenant: str, action: str, selector: dict[str, str], filter: dict[str, Any],
        jobs_count: int, executions_count: int, actor: str,
    ) -> JobAction:  # fmt: skip
        row = await self.db.fetchrow(
            QUERIES["job_action_insert"], action_id, tenant, action, selector, filter, jobs_count, executions_count, actor
        )  # fmt: skip
        return JobAction.from_row(row)

    async def job_action_list(self, tenant: str, *, before: tuple[datetime, UUID] | None, limit: int) -> list[JobAction]:
        at, action_id = before if before is not None else (None, None)
        return JobAction.from_rows(await self.db.fetch(QUERIES["job_action_list"], tenant, at, action_id, limit))

    async def execution_revive_for_job(self, job_id: UUID, horizon_s: float) -> list[Execution]:
        return Execution.from_rows(await self.db.fetch(QUERIES["execution_revive_for_job"], job_id, horizon_s))

    async def execution_missed(
        self, grace_s: float, limit: int, job_ids: Sequence[UUID] | None = None, *, down_after_s: float = 15.0
    ) -> list[Any]:
        return await self.db.fetch(QUERIES["execution_missed"], grace_s, limit, job_ids, down_after_s)

    async def execution_skip_many(self, skips: Sequence[tuple[UUID, str]]) -> dict[UUID, str]:
        """Skip (id, late reason) pairs; returns the late reason of each skipped id."""
        ids = [s[0] for s in skips]
        rows = await self.db.fetch(QUERIES["execution_skip_many"], ids, [s[1] for s in skips], *scheduled_for_bounds(ids))
        return {r["id"]: r["late_reason"] for r in rows}

    async def execution_replay_many(self, replays: Sequence[tuple[UUID, float, str]]) -> list[tuple[Enqueue, str]]:
        """Replay (id, delay_s, late reason); returns each replayed entry with its late reason."""
        ids = [r[0] for r in replays]
        rows = await self.db.fetch(
            QUERIES["execution_replay_many"], ids, [r[1] for r in replays], [r[2] for r in replays],
            *scheduled_for_bounds(ids),
        )  # fmt: skip
        return [(Enqueue(r["id"], r["due_at"], r["tenant"], r["priority"]), r["late_reason"]) for r in rows]

    # --- executions: reads ------------------------------------------------------------------
    async def execution_get(self, execution_id: UUID) -> Execution | None:
        row = await self.db.fetchrow(QUERIES["execution_get"], execution_id, *scheduled_for_bounds([execution_id]))
        return Execution.from_row(row) if row else None

    async def execution_list(
        self, *, tenant: str | None = None, job_id: UUID | None = None, status: str | None = None, limit: int = 50
    ) -> list[Execution]:
        """Newest first (by scheduled time). A tenant's or a job's are read through their indexes
        in that order; every tenant's are read a widening time range at a time (the last day, week,
        month, then everything), so the newest page never sorts the whole history."""
        steps = (None,) if tenant is not None or job_id is not None else LIST_LOOKBACKS
        for lookback in steps:
            since = EARLIEST if lookback is None else datetime.now(UTC) - lookback
            rows = await self.db.fetch(QUERIES["execution_list"], tenant, job_id, status, limit, since)
            if len(rows) >= limit:
                break
        return Execution.from_rows(rows)

    async def attempt_list(self, execution_id: UUID) -> list[Attempt]:
        rows = await self.db.fetch(QUERIES["attempt_list"], execution_id, *scheduled_for_bounds([execution_id]))
        return Attempt.from_rows(rows)

    # --- executions: the loops' statements ---------------------------------------------------

    async def _fetch_walking_index(self, query: str, *args: Any) -> list[asyncpg.Record]:
        """A walk of a lane index in its own order (ORDER BY its columns ... LIMIT), read by that
        index whatever the statistics say. A partition filled seconds ago has none yet (reltuples
        -1 until autovacuum's next pass, a minute away), and planned on a guess the walk read every
        row of the lane and sorted them all, at every page: a 200,000 spike's dispatch batch of
        5,000 cost 370 ms instead of 215, the sweeper's overdue page 180 ms instead of 4. With
        sorting priced out, the only plan left is the index's own order, stopping at the LIMIT."""
        if isinstance(self.db, asyncpg.Pool):
            async with self.db.acquire() as connection, connection.transaction():
                await connection.execute("SET LOCAL enable_sort = off")
                return await connection.fetch(query, *args)
        await self.db.execute("SET LOCAL enable_sort = off")  # inside the caller's transaction
        try:
            return await self.db.fetch(query, *args)
        finally:
            await self.db.execute("SET LOCAL enable_sort TO DEFAULT")

    async def execution_dispatch_due(self, horizon_s: float, limit: int) -> list[Enqueue]:
        rows = await self._fetch_walking_index(QUERIES["execution_dispatch_due"], horizon_s, limit)
        return [Enqueue(r["id"], r["due_at"], r["tenant"], r["priority"]) for r in rows]

    async def _fetch_bounded(self, query: str, *args: Any, timeout_s: float | None) -> list[asyncpg.Record]:
        """A worker's write that must not hang: bounded by timeout_s, and a connection that
        timed out or broke is closed rather than returned to the pool, so the caller's retry runs
        on a fresh one (a half-open connection would otherwise take every retry's timeout). On
        the worker's own pool, a connection whose statement succeeded is kept for the next write
        (_held); after any error it goes back to the pool, which settles whatever the error left
        (a cancelled query). The shared pool gets every connection back: others wait for them."""
        db = self.worker_db
        if timeout_s is None or not isinstance(db, asyncpg.Pool):
            return await db.fetch(query, *args, timeout=timeout_s)
        connection = self._held.pop() if self._held else await db.acquire(timeout=timeout_s)
        kept = False
        try:
            rows = await connection.fetch(query, *args, timeout=timeout_s)
            kept = db is not self.db
            return rows
        except BROKEN_CONNECTION_ERRORS:
            with contextlib.suppress(asyncpg.InterfaceError):  # a connection that broke is already let go
                connection.terminate()
            raise
        finally:
            if kept:
                self._held.append(connection)
            else:
                await db.release(connection)

    async def execution_claim_many(
        self, execution_ids: Sequence[str | UUID], lease_s: float, worker: str, *, late_after_s: float = 60.0,
        down_after_s: float = 15.0, timeout_s: float | None = None, adopt: bool = False, guarded: bool = False,
        due_by: datetime | None = None, limited: bool = False, caps: Caps = NO_CAPS,
    ) -> list[Claim]:  # fmt: skip
        """Claim what is still claimable; a first attempt past late_after_s records its late reason.
        adopt: also take back rows already running under `worker` (after a claim whose reply was lost).
        guarded: under job_lock_overlap, claim guarded jobs' executions too, each recorded as its
        job's running one (execution_claim_guarded). due_by: the instant due-ness is judged at
        (the pop's, Redis TIME); None: Postgres's clock. Without `limited`, executions counted
        against a concurrency limit (a key, or one of `caps`) are left to flow_claims.claim_limited."""
        ids = list(execution_ids)
        bounds = scheduled_for_bounds(ids)
        rows = await self._fetch_bounded(
            worker_statement("execution_claim_many", bounds), ids, lease_s, worker, *bounds,
            late_after_s, down_after_s, adopt, guarded, due_by, limited, list(caps.tasks),
            [t for t, n in caps.tenants.items() if n > 0], caps.tenant_default > 0, timeout_s=timeout_s,
        )  # fmt: skip
        return Claim.from_rows(rows)

    async def execution_lock_due(self, limit: int) -> list[str]:
        """Lock up to `limit` due executions nobody holds, oldest first. Inside a transaction."""
        return [str(r["id"]) for r in await self.db.fetch(QUERIES["execution_lock_due"], limit)]

    async def execution_claim_due(
        self, limit: int, lease_s: float, worker: str, *, late_after_s: float = 60.0, down_after_s: float = 15.0,
        caps: Caps = NO_CAPS,
    ) -> tuple[list[Claim], list[str]]:
        """The fallback while Redis is unreachable: (claims of allow jobs, ids of due executions of
        guarded or limited jobs: for the claims under their locks). One transaction: the rows locked
        first (SKIP LOCKED) are the ones claimed by id, so whatever the claim leaves is a guarded
        or limited job's."""
        async with self.transaction() as tx:
            due = await tx.execution_lock_due(limit)
            claims = await tx.execution_claim_many(
                due, lease_s, worker, late_after_s=late_after_s, down_after_s=down_after_s, caps=caps
            ) if due else []  # fmt: skip
        claimed = {str(c.id) for c in claims}
        return claims, [i for i in due if i not in claimed]

    async def execution_heartbeat_many(
        self, held: Sequence[tuple[UUID, int]], lease_s: float, *, timeout_s: float | None = None
    ) -> dict[UUID, bool]:
        """Extend leases; returns the ids whose lease still holds, each with whether it was asked
        to stop (a cancel request, or the overlap policy cancel_other)."""
        ids = [h[0] for h in held]
        bounds = scheduled_for_bounds(ids)
        rows = await self._fetch_bounded(
            worker_statement("execution_heartbeat_many", bounds), ids, [h[1] for h in held], lease_s, *bounds,
            timeout_s=timeout_s,
        )  # fmt: skip
        return {r["id"]: r["cancel_requested"] for r in rows}

    async def execution_finish_many(self, outcomes: Sequence[Outcome], *, timeout_s: float | None = None) -> list[Finished]:
        """Record outcomes guarded by fence; returns what each that took effect did (models.Finished).
        A batch of successes only goes through execution_succeed_many, its cheaper statement."""
        if all(o.outcome == AttemptOutcome.SUCCEEDED and o.status == ExecutionStatus.SUCCEEDED for o in outcomes):
            return await self.execution_succeed_many(outcomes, timeout_s=timeout_s)
        ids = [o.execution_id for o in outcomes]
        bounds = scheduled_for_bounds(ids)
        rows = await self._fetch_bounded(
            worker_statement("execution_finish_many", bounds),
            ids,
            [o.fence for o in outcomes],
            [str(o.status) for o in outcomes],
            [str(o.outcome) for o in outcomes],
            [o.error for o in outcomes],
            [o.retry_delay_s for o in outcomes],
            [o.detail for o in outcomes],
            *bounds,
            timeout_s=timeout_s,
        )
        return _took_effect(rows)

    async def execution_succeed_many(self, outcomes: Sequence[Outcome], *, timeout_s: float | None = None) -> list[Finished]:
        """execution_finish_many for successes only (callers use that: it routes a batch here)."""
        ids = [o.execution_id for o in outcomes]
        bounds = scheduled_for_bounds(ids)
        rows = await self._fetch_bounded(
            worker_statement("execution_succeed_many", bounds), ids, [o.fence for o in outcomes],
            [o.detail for o in outcomes], *bounds, timeout_s=timeout_s,
        )  # fmt: skip
        return [(r[0], ExecutionStatus.SUCCEEDED, None) for r in rows]

    async def execution_hand_back_many(self, held: Sequence[tuple[UUID, int]]) -> list[Enqueue]:
        ids = [h[0] for h in held]
        rows = await self.db.fetch(QUERIES["execution_hand_back_many"], ids, [h[1] for h in held], *scheduled_for_bounds(ids))
        return [Enqueue(r["id"], r["due_at"], r["tenant"], r["priority"]) for r in rows]

    async def execution_park_many(
        self, held: Sequence[tuple[UUID, int]], delays_s: Sequence[float], reason: str, *, late_grace_s: float
    ) -> tuple[list[Enqueue], list[str]]:
        """Hand claimed executions back unrun (attempt not used); returns them for ZADD, and the
        late reason of each first attempt this made late (the one `reason` implies)."""
        ids = [h[0] for h in held]
        rows = await self.db.fetch(
            QUERIES["execution_park_many"], ids, [h[1] for h in held], list(delays_s), reason, late_grace_s,
            *scheduled_for_bounds(ids),
        )  # fmt: skip
        return [Enqueue(r["id"], r["due_at"], r["tenant"], r["priority"]) for r in rows], [r["newly_late"] for r in rows if r["newly_late"]]

    async def execution_lease_window(self, after: tuple[datetime, UUID], limit: int) -> LeaseWindow:
        """Up to `limit` rows of the active lane due by now, after `after` in (due_at, id) order:
        those running under an expired lease, and where the next window starts."""
        rows = await self._fetch_walking_index(QUERIES["execution_lease_window"], after[0], after[1], limit)
        last = next((r for r in rows if r["from_end"] == 1), None)
        return LeaseWindow(
            [(r["id"], r["scheduled_for"]) for r in rows if r["lapsed"]],
            (last["due_at"], last["id"]) if last is not None and last["walked"] == limit else None,
        )

    async def execution_reclaim_expired(
        self, limit: int, lapsed: Sequence[tuple[UUID, datetime]], *, live_holder_grace_s: float = 0.0,
        down_after_s: float = 15.0,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """Reclaim expired leases among `lapsed` (execution_lease_window's) and the limited lane;
        the executions handed back: id, job_id, tenant, attempt, fence, worker, status, due_at. A
        replica seen within down_after_s keeps its expired leases live_holder_grace_s longer."""
        ids, scheduled_for = [i for i, _ in lapsed], [s for _, s in lapsed]
        rows = await self.db.fetch(
            QUERIES["execution_reclaim_expired"], limit, live_holder_grace_s, down_after_s, ids, scheduled_for
        )  # fmt: skip
        return [dict(r) for r in rows]

    # --- overlap policies: call the job_lock_* ones inside a transaction (schedulerd/overlap_claims.py) --

    async def job_lock_overlap(self, execution_ids: Sequence[str | UUID]) -> list[UUID]:
        ids = list(execution_ids)
        return [r["id"] for r in await self.db.fetch(QUERIES["job_lock_overlap"], ids, *scheduled_for_bounds(ids))]

    async def job_guarded_of(self, execution_ids: Sequence[str | UUID]) -> list[UUID]:
        ids = list(execution_ids)
        return [r["id"] for r in await self.db.fetch(QUERIES["job_guarded_of"], ids, *scheduled_for_bounds(ids))]

    async def job_lock_many(self, job_ids: Sequence[UUID]) -> list[UUID]:
        return [r["id"] for r in await self.db.fetch(QUERIES["job_lock_many"], list(job_ids))]

    async def execution_overlap_state(
        self, execution_ids: Sequence[str | UUID], job_ids: Sequence[UUID], due_by: datetime | None = None
    ) -> list[Any]:
        """Rows: id, job_id, scheduled_for, overlap, busy, running_for (the running one's
        scheduled_for), cancel_requested, waiting_id and waiting_for (oldest first per job). due_by: see
        execution_claim_many."""
        ids = list(execution_ids)
        return await self.db.fetch(
            QUERIES["execution_overlap_state"], ids, list(job_ids), *scheduled_for_bounds(ids), due_by
        )

    async def execution_claim_guarded(
        self, execution_ids: Sequence[UUID], lease_s: float, worker: str, *, late_after_s: float = 60.0,
        down_after_s: float = 15.0, due_by: datetime | None = None,
    ) -> list[Claim]:  # fmt: skip
        """Under job_lock_overlap: the claim (execution_claim_many) of executions an overlap verdict started."""
        return await self.execution_claim_many(
            execution_ids, lease_s, worker, late_after_s=late_after_s, down_after_s=down_after_s, guarded=True,
            due_by=due_by, limited=True,
        )  # fmt: skip

    async def execution_skip_overlap(self, execution_ids: Sequence[UUID]) -> set[UUID]:
        ids = list(execution_ids)
        return {r["id"] for r in await self.db.fetch(QUERIES["execution_skip_overlap"], ids, *scheduled_for_bounds(ids))}

    async def execution_wait_overlap(self, execution_ids: Sequence[UUID]) -> set[UUID]:
        ids = list(execution_ids)
        return {r["id"] for r in await self.db.fetch(QUERIES["execution_wait_overlap"], ids, *scheduled_for_bounds(ids))}

    async def execution_request_cancel(self, job_ids: Sequence[UUID]) -> set[UUID]:
        return {r["id"] for r in await self.db.fetch(QUERIES["execution_request_cancel"], list(job_ids))}

    async def execution_release_waiting(self, job_ids: Sequence[UUID]) -> list[tuple[Enqueue, str]]:
        """The occurrences released, each with its job's overlap policy."""
        rows = await self.db.fetch(QUERIES["execution_release_waiting"], list(job_ids))
        return [(Enqueue(r["id"], r["due_at"], r["tenant"], r["priority"]), r["overlap"]) for r in rows]

    # --- concurrency limits: call these inside a transaction (schedulerd/flow_claims.py) ----------

    async def flow_lock(self, lock_ids: Sequence[int]) -> None:
        await self.db.execute(QUERIES["flow_lock"], sorted(set(lock_ids)))

    async def flow_running(self, tenants: Sequence[str], tasks: Sequence[str]) -> list[tuple[str, str, str | None, int]]:
        """(tenant, task, concurrency key, running) for the tenants or task types asked about."""
        rows = await self.db.fetch(QUERIES["flow_running"], list(tenants), list(tasks))
        return [(r["tenant"], r["task"], r["concurrency_key"], r["running"]) for r in rows]

    async def flow_candidates(self, execution_ids: Sequence[str | UUID], due_by: datetime | None) -> list[Any]:
        """Rows: id, tenant, scheduled_for, task, concurrency_key, concurrency_limit, overlap, enabled (due order)."""
        ids = list(execution_ids)
        return await self.db.fetch(QUERIES["flow_candidates"], ids, *scheduled_for_bounds(ids), due_by)

    async def execution_wait_slot(self, execution_ids: Sequence[UUID]) -> set[UUID]:
        ids = list(execution_ids)
        return {r["id"] for r in await self.db.fetch(QUERIES["execution_wait_slot"], ids, *scheduled_for_bounds(ids))}

    async def execution_waiting_slot(
        self, keys: Sequence[tuple[str, str]], tasks: Sequence[str], tenants: Sequence[str], limit: int
    ) -> list[Any]:
        """Rows: id, tenant, scheduled_for, task, concurrency_key, concurrency_limit (oldest first)."""
        return await self.db.fetch(
            QUERIES["execution_waiting_slot"], [k[0] for k in keys], [k[1] for k in keys], list(tasks), list(tenants), limit
        )  # fmt: skip

    async def execution_release_slot(self, execution_ids: Sequence[UUID], late_after_s: float) -> list[Enqueue]:
        """Queued, due now; each Enqueue scored by its scheduled time (in due order ahead of later work)."""
        ids = list(execution_ids)
        rows = await self.db.fetch(QUERIES["execution_release_slot"], ids, *scheduled_for_bounds(ids), late_after_s)
        return [Enqueue(r["id"], r["scheduled_for"], r["tenant"], r["priority"]) for r in rows]

    async def execution_parked_counts(self) -> dict[str, int]:
        """Executions held back unrun now, by reason (every park reason and concurrency_limit, 0s included)."""
        counts = dict.fromkeys(PARK_REASONS, 0)
        counts.update({r["reason"]: r["n"] for r in await self.db.fetch(QUERIES["execution_parked_counts"])})
        return counts

    async def flow_waiting_scopes(self, limit: int) -> list[tuple[str, str, str | None, int | None]]:
        rows = await self.db.fetch(QUERIES["flow_waiting_scopes"], limit)
        return [(r["tenant"], r["task"], r["concurrency_key"], r["concurrency_limit"]) for r in rows]

    async def job_recent_durations(self, job_ids: Sequence[UUID], per_job: int) -> dict[UUID, list[float]]:
        """Durations (seconds) of each job's latest finished attempts, newest first."""
        durations: dict[UUID, list[float]] = {job_id: [] for job_id in job_ids}
        for row in await self.db.fetch(QUERIES["job_recent_durations"], list(job_ids), per_job):
            durations[row["job_id"]].append(row["duration_s"])
        return durations

    async def job_overlap_stalled(self, limit: int) -> list[UUID]:
        return [r["id"] for r in await self.db.fetch(QUERIES["job_overlap_stalled"], limit)]

    async def execution_queued_overdue(
        self, grace_s: float, limit: int, after: tuple[datetime, UUID] = (datetime(1970, 1, 1, tzinfo=UTC), UUID(int=0))
    ) -> list[Enqueue]:
        """Queued executions overdue by more than grace_s, in (due_at, id) order after `after`."""
        rows = await self._fetch_walking_index(QUERIES["execution_queued_overdue"], grace_s, limit, after[0], after[1])
        return [Enqueue(r["id"], r["due_at"], r["tenant"], r["priority"]) for r in rows]

    async def execution_queued_early(self, execution_ids: Sequence[str | UUID], due_by: datetime) -> list[Enqueue]:
        """Of these popped ids, the queued ones not yet due at due_by (the pop's instant)."""
        ids = list(execution_ids)
        rows = await self.db.fetch(QUERIES["execution_queued_early"], ids, *scheduled_for_bounds(ids), due_by)
        return [Enqueue(r["id"], r["due_at"], r["tenant"], r["priority"]) for r in rows]

    async def execution_queued_page(self, after: tuple[datetime, UUID], limit: int) -> list[Enqueue]:
        rows = await self._fetch_walking_index(QUERIES["execution_queued_page"], after[0], after[1], limit)
        return [Enqueue(r["id"], r["due_at"], r["tenant"], r["priority"]) for r in rows]

    async def execution_overview(self) -> dict[str, Any]:
        return dict(await self.db.fetchrow(QUERIES["execution_overview"]))

    # --- tenants, tokens and the API's reads ------------------------------------------------

    async def tenant_insert(self, name: str) -> bool:
        """False when the name is taken."""
        return await self.db.fetchrow(QUERIES["tenant_insert"], name) is not None

    async def token_insert(self, token_id: UUID, tenant: str, token_hash: bytes) -> bool:
        """False when there is no such tenant."""
        return await self.db.fetchrow(QUERIES["token_insert"], token_id, tenant, token_hash) is not None

    async def token_authenticate(self, token_hash: bytes) -> tuple[UUID, str] | None:
        """(token id, tenant) of the live token with this hash."""
        row = await self.db.fetchrow(QUERIES["token_authenticate"], token_hash)
        return (row["id"], row["tenant"]) if row else None

    async def token_list(self, tenant: str) -> list[ApiToken]:
        return ApiToken.from_rows(await self.db.fetch(QUERIES["token_list"], tenant))

    async def token_revoke(self, token_id: UUID, tenant: str | None) -> ApiToken | None:
        """None when there is no such token (for this tenant, when one is given)."""
        row = await self.db.fetchrow(QUERIES["token_revoke"], token_id, tenant)
        return ApiToken.from_row(row) if row else None

    async def tenant_quota_set(self, tenant: str, in_flight: int) -> TenantQuota:
        return TenantQuota.from_row(await self.db.fetchrow(QUERIES["tenant_quota_set"], tenant, in_flight))

    async def tenant_quota_clear(self, tenant: str) -> TenantQuota | None:
        """The quota removed; None when the tenant had none set."""
        row = await self.db.fetchrow(QUERIES["tenant_quota_clear"], tenant)
        return TenantQuota.from_row(row) if row else None

    async def tenant_quota_list(self) -> list[TenantQuota]:
        return TenantQuota.from_rows(await self.db.fetch(QUERIES["tenant_quota_list"]))

    # --- secrets and signing keys (sealed: keyring.py) -----------------------------------------

    async def secrets_lock_tenant(self, scope: str) -> None:
        """Inside a transaction: hold `scope` (a tenant, or "signing/" + tenant) until the commit."""
        await self.db.execute(QUERIES["secrets_lock_tenant"], scope)

    async def secret_count(self, tenant: str, name: str) -> tuple[int, bool]:
        """(secrets the tenant holds, whether one is named `name`)."""
        row = await self.db.fetchrow(QUERIES["secret_count"], tenant, name)
        return row["held"], bool(row["exists"])

    async def secret_put(self, tenant: str, name: str, key_id: str, sealed: bytes) -> SecretEntry:
        return SecretEntry.from_row(await self.db.fetchrow(QUERIES["secret_put"], tenant, name, key_id, sealed))

    async def secret_list(self, tenant: str) -> list[SecretEntry]:
        return SecretEntry.from_rows(await self.db.fetch(QUERIES["secret_list"], tenant))

    async def secret_get_many(self, tenant: str, names: Sequence[str]) -> list[Sealed]:
        return Sealed.from_rows(await self.db.fetch(QUERIES["secret_get_many"], tenant, list(names)))

    async def secret_delete(self, tenant: str, name: str) -> SecretEntry | None:
        row = await self.db.fetchrow(QUERIES["secret_delete"], tenant, name)
        return SecretEntry.from_row(row) if row else None

    async def secret_sealed_by_other_keys(self, key_id: str, limit: int) -> list[tuple[str, Sealed]]:
        """(tenant, sealed secret) of up to `limit` secrets sealed with a key other than `key_id`."""
        rows = await self.db.fetch(QUERIES["secret_sealed_by_other_keys"], key_id, limit)
        return [(r["tenant"], Sealed(r["name"], r["key_id"], r["sealed"])) for r in rows]

    async def secret_reseal(self, tenant: str, name: str, old_key_id: str, key_id: str, sealed: bytes) -> None:
        await self.db.execute(QUERIES["secret_reseal"], tenant, name, old_key_id, key_id, sealed)

    async def signing_key_prune(self, tenant: str) -> None:
        await self.db.execute(QUERIES["signing_key_prune"], tenant)

    async def signing_key_retire_older(self, tenant: str, grace_s: float) -> None:
        await self.db.execute(QUERIES["signing_key_retire_older"], tenant, grace_s)

    async def signing_key_insert(self, key_id: str, tenant: str, sealed_with: str, sealed: bytes) -> SigningKeyEntry:
        row = await self.db.fetchrow(QUERIES["signing_key_insert"], key_id, tenant, sealed_with, sealed)
        return SigningKeyEntry.from_row(row)

    async def signing_key_list(self, tenant: str) -> list[SigningKeyEntry]:
        return SigningKeyEntry.from_rows(await self.db.fetch(QUERIES["signing_key_list"], tenant))

    async def signing_key_live(self, tenant: str) -> list[Sealed]:
        return Sealed.from_rows(await self.db.fetch(QUERIES["signing_key_live"], tenant))

    async def signing_key_delete(self, tenant: str, key_id: str) -> SigningKeyEntry | None:
        row = await self.db.fetchrow(QUERIES["signing_key_delete"], tenant, key_id)
        return SigningKeyEntry.from_row(row) if row else None

    async def signing_key_sealed_by_other_keys(self, key_id: str, limit: int) -> list[tuple[str, Sealed]]:
        """(tenant, sealed signing key) of up to `limit` keys sealed with a key other than `key_id`."""
        rows = await self.db.fetch(QUERIES["signing_key_sealed_by_other_keys"], key_id, limit)
        return [(r["tenant"], Sealed(r["id"], r["key_id"], r["sealed"])) for r in rows]

    async def signing_key_reseal(self, signing_key_id: str, old_key_id: str, key_id: str, sealed: bytes) -> None:
        await self.db.execute(QUERIES["signing_key_reseal"], signing_key_id, old_key_id, key_id, sealed)

    async def idempotency_prune(self, ttl_s: float, batch_size: int = 10000) -> int:
        """Delete idempotency keys past their TTL, a batch at a time; returns how many."""
        total = 0
        while True:
            status = await self.db.execute(QUERIES["idempotency_prune"], ttl_s, batch_size)
            deleted = int(status.rsplit(" ", 1)[1])
            total += deleted
            if deleted < batch_size:
                return total

    async def job_page(
        self, tenant: str, *, deleted: bool, after: tuple[datetime, UUID] | None, limit: int,
        find: JobFilter | None = None,
    ) -> list[Job]:  # fmt: skip
        """A tenant's jobs newest first, after the cursor, matching `find`."""
        return await self._job_page(tenant, deleted, after, limit, find)

    async def job_page_any_tenant(
        self, *, deleted: bool, after: tuple[datetime, UUID] | None, limit: int, find: JobFilter | None = None
    ) -> list[Job]:
        """job_page over every tenant's jobs (the operator's CLI)."""
        return await self._job_page(None, deleted, after, limit, find)

    async def _job_page(
        self, tenant: str | None, deleted: bool, after: tuple[datetime, UUID] | None, limit: int, find: JobFilter | None
    ) -> list[Job]:
        after = after or (datetime.max.replace(tzinfo=UTC), UUID(int=(1 << 128) - 1))
        f = find or JobFilter()
        pattern = f.name_prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%" \
            if f.name_prefix is not None else None  # fmt: skip
        rows = await self.db.fetch(
            QUERIES["job_page" if tenant is not None else "job_page_any_tenant"], tenant, deleted, after[0], after[1],
            limit, pattern, f.task, f.kind, f.labels or None,
            list(f.states) if f.states is not None else None,
        )  # fmt: skip
        return Job.from_rows(rows)

    async def job_settled_many(self, job_ids: Sequence[UUID]) -> set[UUID]:
        """The one-offs among these jobs whose run is final (none unfinished)."""
        return {r["id"] for r in await self.db.fetch(QUERIES["job_settled_many"], list(job_ids))}

    async def job_last_executions(self, job_ids: Sequence[UUID]) -> dict[UUID, LastExecution]:
        rows = await self.db.fetch(QUERIES["job_last_executions"], list(job_ids))
        return {r["job_id"]: LastExecution.from_row(r) for r in rows}

    async def execution_page(
        self, tenant: str, *, job_id: UUID | None, status: str | None, since: datetime | None,
        until: datetime | None, after: tuple[datetime, UUID] | None, limit: int, phase: str | None = None,
    ) -> list[Execution]:
        """Newest first, or with phase "past" only those started or settled; phase "upcoming":
        those not yet started, soonest first. The bounds are always bound (no "IS NULL OR") so
        the cursor stays an index condition on executions_tenant_recent."""
        if phase == "upcoming":
            return await self.execution_page_upcoming(tenant, job_id=job_id, status=status, since=since, until=until,
                                                      after=after, limit=limit)  # fmt: skip
        lowest, highest = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)
        after = after or (highest, UUID(int=(1 << 128) - 1))
        rows = await self.db.fetch(QUERIES["execution_page"], tenant, job_id, status, since or lowest, until or highest,
                                   after[0], after[1], limit, phase == "past")  # fmt: skip
        return Execution.from_rows(rows)

    async def execution_page_upcoming(
        self, tenant: str, *, job_id: UUID | None, status: str | None, since: datetime | None,
        until: datetime | None, after: tuple[datetime, UUID] | None, limit: int,
    ) -> list[Execution]:
        """Not yet started, soonest scheduled first, read forward from `since` (or the cursor)."""
        lowest, highest = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)
        after = after or (lowest, UUID(int=0))
        rows = await self.db.fetch(QUERIES["execution_page_upcoming"], tenant, job_id, status, since or lowest,
                                   until or highest, after[0], after[1], limit)  # fmt: skip
        return Execution.from_rows(rows)

    async def execution_minutes_tenant(self, tenant: str, minutes: int) -> tuple[list[MinuteStats], datetime]:
        """The tenant's last `minutes` UTC minutes, oldest first; and Postgres's now."""
        return _minutes(await self.db.fetch(QUERIES["execution_minutes_tenant"], tenant, minutes))

    async def execution_minutes_fleet(self, minutes: int) -> tuple[list[MinuteStats], datetime]:
        """Every tenant's last `minutes` UTC minutes, oldest first; and Postgres's now."""
        return _minutes(await self.db.fetch(QUERIES["execution_minutes_fleet"], minutes))

    async def execution_tenant_recent_stats(self, tenant: str, window_s: float) -> TenantStats:
        row = await self.db.fetchrow(QUERIES["execution_tenant_recent_stats"], tenant, window_s)
        p50, p90, p99 = row["lag_percentiles_s"] or (None, None, None)
        as_float = lambda v: None if v is None else float(v)  # noqa: E731 - numeric comes back as Decimal
        return TenantStats(
            dict(row["by_status"]), as_float(p50), as_float(p90), as_float(p99), as_float(row["lag_max_s"]), row["started"]
        )

    async def execution_oldest_due(self) -> tuple[datetime | None, datetime]:
        """(earliest due time of an unstarted execution, fleet-wide, or None; Postgres's now)."""
        row = await self.db.fetchrow(QUERIES["execution_oldest_due"])
        return row["oldest_due_at"], row["now"]

    async def execution_oldest_due_tenant(self, tenant: str) -> tuple[datetime | None, datetime]:
        """(earliest due time of this tenant's due, unstarted executions, or None; Postgres's now)."""
        row = await self.db.fetchrow(QUERIES["execution_oldest_due_tenant"], tenant)
        return row["oldest_due_at"], row["now"]

    async def replica_report(
        self, worker_id: str, hostname: str, pid: int, roles: Sequence[str], version: str, started_at: datetime
    ) -> None:
        await self.db.execute(QUERIES["replica_report"], worker_id, hostname, pid, list(roles), version, started_at)

    async def replica_get(self, worker_id: str) -> dict[str, Any] | None:
        row = await self.db.fetchrow(QUERIES["replica_get"], worker_id)
        return dict(row) if row is not None else None

    async def replica_claim(
        self, worker_id: str, hostname: str, pid: int, roles: Sequence[str], version: str, started_at: datetime,
        *, seen_at: datetime | None,
    ) -> bool:  # fmt: skip
        """Register this replica under worker_id if its row still shows `seen_at` (None: no row)."""
        row = await self.db.fetchrow(QUERIES["replica_claim"], worker_id, hostname, pid, list(roles), version, started_at, seen_at)
        return row is not None

    async def replica_list(self, seen_within_s: float) -> list[dict[str, Any]]:
        return [dict(r) for r in await self.db.fetch(QUERIES["replica_list"], seen_within_s)]

    async def execution_due_soon(self, within_s: float, up_to: int) -> int:
        """Executions not yet started due within within_s, counted up to up_to."""
        return await self.db.fetchval(QUERIES["execution_due_soon"], within_s, up_to)

    async def execution_recent_lag(self, within_s: float) -> dict[str, Any]:
        return dict(await self.db.fetchrow(QUERIES["execution_recent_lag"], within_s))

    # --- retention: one partition per UTC day ---------------------------------------------------

    async def maintenance_lock(self, lock_timeout_s: float) -> bool:
        """Inside a transaction: True when this replica may maintain partitions now."""
        row = await self.db.fetchrow(QUERIES["maintenance_lock"], f"{int(lock_timeout_s * 1000)}ms")
        return bool(row["held"])

    async def partition_ensure(self, day: date) -> bool | None:
        """True: created; False: it existed; None: deferred, its rows in the default partition
        include queued or running ones (they are never moved under a worker)."""
        return await self.db.fetchval(QUERIES["partition_ensure"], day)

    async def partition_lock(self, day: date) -> int | None:
        """Inside a transaction: lock the day's partitions against writers; its unfinished
        executions (None: no partition)."""
        return await self.db.fetchval(QUERIES["partition_lock"], day)

    async def partition_days(self) -> list[date]:
        return [r["day"] for r in await self.db.fetch(QUERIES["partition_days"])]

    async def partition_default_days(self, *, before: date) -> list[date]:
        return [r["day"] for r in await self.db.fetch(QUERIES["partition_default_days"], before)]

    async def partition_drop(self, day: date) -> None:
        await self.db.execute(QUERIES["partition_drop"], day)

    async def execution_unfinished_between(self, low: datetime, high: datetime) -> int:
        return await self.db.fetchval(QUERIES["execution_unfinished_between"], low, high)

    async def partition_export_executions(self, low: datetime, high: datetime, output: CopySink) -> None:
        """Stream executions scheduled in [low, high) as CSV with a header into `output`."""
        await self._copy_out(QUERIES["partition_export_executions"], low, high, output)

    async def partition_export_attempts(self, low: datetime, high: datetime, output: CopySink) -> None:
        """Stream the attempts of executions scheduled in [low, high) as CSV with a header into `output`."""
        await self._copy_out(QUERIES["partition_export_attempts"], low, high, output)

    async def _copy_out(self, query: str, low: datetime, high: datetime, output: CopySink) -> None:
        # COPY (query) takes no statement terminator.
        await self.db.copy_from_query(query.rstrip(";"), low, high, output=output, format="csv", header=True)

    async def server_is_primary(self) -> bool:
        return await self.db.fetchval(QUERIES["server_is_primary"])

    async def migration_applied(self) -> set[str]:
        return {r["migration_id"] for r in await self.db.fetch(QUERIES["migration_applied"])}

    async def migration_missing(self) -> list[str]:
        """Migrations this code ships that the database lacks: every one on a database that was
        never migrated (no yoyo table yet), so callers can say "run schedulerd migrate"."""
        try:
            applied = await self.migration_applied()
        except asyncpg.UndefinedTableError:
            applied = set()
        return sorted({p.stem for p in MIGRATIONS_DIR.glob("*.sql")} - applied)

    # --- dead letters: list and redrive failed executions ------------------------------------

    async def execution_failed_page(
        self, tenant: str | None, *, job_id: UUID | None = None, task: str | None = None, error: str | None = None,
        since: datetime | None = None, until: datetime | None = None, after: tuple[datetime, UUID] | None = None,
        limit: int = 50,
    ) -> list[FailedExecution]:
        """Failed executions, most recently failed first; tenant None means every tenant."""
        lowest, highest = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)
        after = after or (highest, UUID(int=(1 << 128) - 1))
        rows = await self.db.fetch(
            QUERIES["execution_failed_page"], tenant, job_id, task, error, since or lowest, until or highest,
            after[0], after[1], limit,
        )  # fmt: skip
        return [FailedExecution(Execution.from_row(r), r["task"]) for r in rows]

    async def execution_redrive_many(
        self, execution_ids: Sequence[UUID], tenant: str | None, *, per_s: float, horizon_s: float, by: str
    ) -> list[tuple[Enqueue, str]]:
        """Redrive the failed ones among these ids (in order, spread at per_s); returns each
        (entry for ZADD, new status)."""
        rows = await self.db.fetch(QUERIES["execution_redrive_many"], list(execution_ids), tenant, per_s, horizon_s, by)
        return [(Enqueue(r["id"], r["due_at"], r["tenant"], r["priority"]), r["status"]) for r in rows]

    async def redrive_list(self, execution_id: UUID) -> list[Redrive]:
        return Redrive.from_rows(await self.db.fetch(QUERIES["redrive_list"], execution_id))

    # --- late occurrences and the due forecast -----------------------------------------------

    async def execution_late_page(
        self, *, grace_s: float, since: datetime, tenant: str | None = None, job_id: UUID | None = None,
        late_reason: str | None = None, limit: int = 50, down_after_s: float = 15.0,
    ) -> list[LateExecution]:  # fmt: skip
        rows = await self.db.fetch(
            QUERIES["execution_late_page"], grace_s, tenant, job_id, since, late_reason, limit, down_after_s
        )
        return [LateExecution(Execution.from_row(r), r["why"]) for r in rows]

    async def execution_near(self, job_id: UUID, at: datetime, within_s: float) -> Execution | None:
        row = await self.db.fetchrow(QUERIES["execution_near"], job_id, at, within_s)
        return Execution.from_row(row) if row else None

    async def execution_due_forecast(self, windows_s: Sequence[int], tenant: str | None = None) -> Forecast:
        """Counts due within each of four windows (seconds, narrowest first), per tenant."""
        if len(windows_s) != 4 or list(windows_s) != sorted(windows_s):
            raise ValueError(f"the forecast takes four windows, narrowest first; got {windows_s}")
        rows = await self.db.fetch(QUERIES["execution_due_forecast"], *[float(w) for w in windows_s], tenant)
        by_tenant = {
            r["tenant"]: (r["within_1"], r["within_2"], r["within_3"], r["within_4"]) for r in rows if r["tenant"] is not None
        }
        return Forecast(rows[0]["now"], tuple(windows_s), by_tenant)

    async def execution_late_counts(self, within_s: float) -> dict[str, int]:
        rows = await self.db.fetch(QUERIES["execution_late_counts"], within_s)
        return {r["late_reason"]: r["n"] for r in rows}

    # --- tz database changes (schedulerd/tzchange.py) ------------------------------------------

    @contextlib.asynccontextmanager
    async def tz_locked(self) -> AsyncIterator[Store]:
        """A Store on one connection holding the tz recompute lock (waits for another replica's
        recompute to finish); its transaction() runs on that connection."""
        async with self.db.acquire() as connection:
            held = _OnConnection(connection)
            await held.tz_lock()
            try:
                yield held
            finally:
                await held.tz_unlock()

    async def tz_lock(self) -> None:
        """Wait for the tz recompute lock, however long another replica's recompute takes."""
        while not await self.tz_try_lock():
            await asyncio.sleep(TZ_LOCK_POLL_S)

    async def tz_try_lock(self) -> bool:
        """Take the tz recompute lock for this session if it is free."""
        return bool(await self.db.fetchval(QUERIES["tz_try_lock"]))

    async def tz_unlock(self) -> None:
        await self.db.execute(QUERIES["tz_unlock"])

    async def job_tz_stale(self, tzdata_version: str, after: UUID, limit: int) -> tuple[list[Job], datetime | None]:
        """Locked live cron jobs recorded with another tz database, by id after `after`; and Postgres's now."""
        rows = await self.db.fetch(QUERIES["job_tz_stale"], tzdata_version, after, limit)
        return Job.from_rows(rows), (rows[0]["now"] if rows else None)

    async def execution_future_lock(self, job_ids: Sequence[UUID], after: datetime) -> list[Any]:
        """(job_id, id, scheduled_for, movable) of these jobs' scheduled occurrences after `after`,
        the movable (never started) ones locked until the transaction ends. Inside a transaction."""
        return await self.db.fetch(QUERIES["execution_future_lock"], list(job_ids), after)

    async def execution_delete_tz_stale(self, slots: Sequence[tuple[UUID, datetime]]) -> set[UUID]:
        """Delete these (id, scheduled_for) occurrences, locked by execution_future_lock in this
        transaction; returns the ids deleted."""
        rows = await self.db.fetch(QUERIES["execution_delete_tz_stale"], [s[0] for s in slots], [s[1] for s in slots])
        return {r["id"] for r in rows}

    async def job_set_tzdata_version(self, job_ids: Sequence[UUID], tzdata_version: str) -> None:
        await self.db.execute(QUERIES["job_set_tzdata_version"], list(job_ids), tzdata_version)

    async def tz_recompute_insert(self, tzdata_version: str, tzdata_source: str, worker: str) -> TzRecompute:
        return TzRecompute.from_row(await self.db.fetchrow(QUERIES["tz_recompute_insert"], tzdata_version, tzdata_source, worker))

    async def tz_recompute_finish(self, recompute_id: int, jobs_checked: int, jobs_moved: int) -> None:
        await self.db.execute(QUERIES["tz_recompute_finish"], recompute_id, jobs_checked, jobs_moved)

    async def tz_moved_job_insert_many(self, recompute_id: int, moved: Sequence[TzMovedJob]) -> None:
        await self.db.execute(
            QUERIES["tz_moved_job_insert_many"], recompute_id, [m.job_id for m in moved], [m.tenant for m in moved],
            [m.old_version for m in moved], [m.removed for m in moved], [m.added for m in moved],
            [json.dumps(m.moves) for m in moved],
        )  # fmt: skip

    async def tz_recompute_last(self) -> TzRecompute | None:
        row = await self.db.fetchrow(QUERIES["tz_recompute_last"])
        return TzRecompute.from_row(row) if row else None

    async def tz_moved_job_list(self, recompute_id: int, *, tenant: str | None = None, limit: int = 1000) -> list[TzMovedJob]:
        rows = await self.db.fetch(QUERIES["tz_moved_job_list"], recompute_id, tenant, limit)
        return TzMovedJob.from_rows(rows)

    async def job_tzdata_versions(self) -> dict[str | None, int]:
        """Live cron jobs per recorded tz database version."""
        return {r["tzdata_version"]: r["jobs"] for r in await self.db.fetch(QUERIES["job_tzdata_versions"])}


    # --- the front door: batched creates, idempotency keys, task types (schedulerd/intake.py) ---

    async def job_insert_many(
        self, columns: Sequence[Sequence[Any]], created_at: datetime, execution_ids: Sequence[UUID | None],
        horizon_s: float, *, queue_now: bool,
    ) -> set[UUID]:  # fmt: skip
        """Insert jobs given column-wise (intake.JOB_COLUMNS order, params as JSON text), all
        created at `created_at`, each one-off with its execution (`execution_ids`, aligned with
        the rows; None for a cron job), scheduled and due at its run_at. Returns the ids written
        pending (the dispatcher will queue them); the others are queued: ZADD them after the commit."""
        # $1-$21 the first columns, $22-$25 the batch's settings, $26- the columns added after them.
        # A column that is NULL in every row goes as an empty array (unnest pads it with NULLs):
        # most jobs set few of the optional fields, and each NULL costs encoding and parsing.
        columns = [[] if column.count(None) == len(column) else column for column in columns]
        return set(await self.db.fetchval(
            QUERIES["job_insert_many"], *columns[:21], created_at, execution_ids, horizon_s, queue_now, *columns[21:]
        ))  # fmt: skip

    async def execution_of_jobs(self, job_ids: Sequence[UUID]) -> dict[UUID, list[tuple[UUID, datetime, str]]]:
        """Each job's executions as (id, due_at, status), in scheduled order."""
        by_job: dict[UUID, list[tuple[UUID, datetime, str]]] = {}
        for r in await self.db.fetch(QUERIES["execution_of_jobs"], list(job_ids)):
            by_job.setdefault(r["job_id"], []).append((r["id"], r["due_at"], r["status"]))
        return by_job

    async def debounce_make_many(self, keys: Sequence[tuple[str, str]]) -> None:
        await self.db.execute(QUERIES["debounce_make_many"], [k[0] for k in keys], [k[1] for k in keys])

    async def debounce_lock_many(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], tuple[UUID, datetime] | None]:
        """Inside a transaction, after debounce_make_many: hold these (tenant, key) debounces until
        the commit, each with the (execution id, scheduled_for) it points to, if any."""
        rows = await self.db.fetch(QUERIES["debounce_lock_many"], [k[0] for k in keys], [k[1] for k in keys])
        return {(r["tenant"], r["key"]): (r["execution_id"], r["scheduled_for"]) if r["execution_id"] else None for r in rows}

    async def debounce_get_many(self, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], tuple[UUID, UUID]]:
        """{(tenant, key): (job id, execution id)} each key shares now."""
        rows = await self.db.fetch(QUERIES["debounce_get_many"], [k[0] for k in keys], [k[1] for k in keys])
        return {(r["tenant"], r["key"]): (r["job_id"], r["execution_id"]) for r in rows}

    async def debounce_extend_many(
        self, moves: Sequence[tuple[UUID, datetime, datetime, str, str | None]]
    ) -> dict[UUID, tuple[UUID, str, str, datetime]]:
        """Move (execution id, scheduled_for, new due, params JSON, traceparent) still unstarted;
        returns {execution id: (job id, tenant, status, due_at)} of those moved."""
        ids = [m[0] for m in moves]
        rows = await self.db.fetch(
            QUERIES["debounce_extend_many"], ids, [m[1] for m in moves], [m[2] for m in moves], [m[3] for m in moves],
            *scheduled_for_bounds(ids), [m[4] for m in moves],
        )  # fmt: skip
        return {r["id"]: (r["job_id"], r["tenant"], r["status"], r["due_at"]) for r in rows}

    async def debounce_point_many(self, points: Sequence[tuple[str, str, UUID, UUID, datetime]]) -> None:
        """(tenant, key, job id, execution id, scheduled_for): what each key shares now."""
        columns = list(zip(*points))
        await self.db.execute(QUERIES["debounce_point_many"], *[list(c) for c in columns])

    async def debounce_forget_old(self, older_than_s: float) -> int:
        return int((await self.db.execute(QUERIES["debounce_forget_old"], older_than_s)).split()[-1])

    async def execution_committed(self, execution_ids: Sequence[UUID]) -> list[Enqueue]:
        ids = list(execution_ids)
        rows = await self.db.fetch(QUERIES["execution_committed"], ids, *scheduled_for_bounds(ids))
        return [Enqueue(r["id"], r["due_at"], r["tenant"], r["priority"]) for r in rows]

    async def idempotency_claim_many(
        self, claims: Sequence[tuple[str, str, bytes, UUID, str]], ttl_s: float
    ) -> set[tuple[str, str]]:
        """Take (tenant, key, request_hash, job_id, response JSON) keys; returns the (tenant, key) taken."""
        columns = list(zip(*claims)) if claims else [[], [], [], [], []]
        rows = await self.db.fetch(QUERIES["idempotency_claim_many"], *columns, ttl_s)
        return {(r["tenant"], r["key"]) for r in rows}

    async def idempotency_get_many(
        self, keys: Sequence[tuple[str, str]], ttl_s: float
    ) -> dict[tuple[str, str], IdempotencyRecord]:
        rows = await self.db.fetch(QUERIES["idempotency_get_many"], [k[0] for k in keys], [k[1] for k in keys], ttl_s)
        return {(r["tenant"], r["key"]): IdempotencyRecord.from_row(r) for r in rows}

    async def task_type_report(self, names: Sequence[str], worker_id: str) -> None:
        await self.db.execute(QUERIES["task_type_report"], list(names), worker_id)

    async def task_type_live(self, seen_within_s: float) -> set[str]:
        return {r["name"] for r in await self.db.fetch(QUERIES["task_type_live"], seen_within_s)}

    # --- notifications (schedulerd/notifier.py): settings, transitions, the outbox -----------------

    async def notify_setting_get(self, tenant: str) -> dict[str, Any] | None:
        row = await self.db.fetchrow(QUERIES["notify_setting_get"], tenant)
        return dict(row) if row else None

    async def notify_setting_put(self, tenant: str, url: str, events: Sequence[str]) -> dict[str, Any]:
        return dict(await self.db.fetchrow(QUERIES["notify_setting_put"], tenant, url, list(events)))

    async def notify_setting_delete(self, tenant: str) -> bool:
        return await self.db.fetchval(QUERIES["notify_setting_delete"], tenant) is not None

    async def notify_failed_candidates(self, lookback_s: float, per_tenant: int) -> list[dict[str, Any]]:
        return [dict(r) for r in await self.db.fetch(QUERIES["notify_failed_candidates"], lookback_s, per_tenant)]

    async def notify_late_candidates(self, lookback_s: float, limit: int) -> list[dict[str, Any]]:
        return [dict(r) for r in await self.db.fetch(QUERIES["notify_late_candidates"], lookback_s, limit)]

    async def notify_recovery_candidates(self, before_s: float, limit: int) -> list[dict[str, Any]]:
        return [dict(r) for r in await self.db.fetch(QUERIES["notify_recovery_candidates"], before_s, limit)]

    async def notification_insert(
        self, notification_id: UUID, tenant: str, job_id: UUID, execution_id: UUID, round_: int, event: str,
        finished_at: datetime | None, url: str | None, payload_json: str, status: str,
    ) -> bool:  # fmt: skip
        """Record a judged transition; False when (execution, round, event) was recorded already."""
        return await self.db.fetchval(
            QUERIES["notification_insert"], notification_id, tenant, execution_id, round_, event, finished_at, url,
            payload_json, status, job_id,
        ) is not None  # fmt: skip

    async def notify_job_failed(self, job_id: UUID, tenant: str, finished_at: datetime, scheduled_for: datetime) -> None:
        await self.db.execute(QUERIES["notify_job_failed"], job_id, tenant, finished_at, scheduled_for)

    async def notify_job_recovered(self, job_id: UUID, failed_at: datetime) -> bool:
        return await self.db.fetchval(QUERIES["notify_job_recovered"], job_id, failed_at) is not None

    async def notify_job_streak(self, job_id: UUID, tenant: str, since: datetime) -> None:
        await self.db.execute(QUERIES["notify_job_streak"], job_id, since, tenant)

    async def notify_job_recent_ends(self, job_id: UUID, count: int, history_s: float) -> list[str]:
        return [r["status"] for r in await self.db.fetch(QUERIES["notify_job_recent_ends"], job_id, count, history_s)]

    async def notification_claim_due(self, limit: int, hold_s: float) -> list[dict[str, Any]]:
        return [dict(r) for r in await self.db.fetch(QUERIES["notification_claim_due"], limit, hold_s)]

    async def notification_record(
        self, notification_id: UUID, attempt: int, status: str, http_status: int | None, error: str | None,
        retry_in_s: float | None,
    ) -> bool:  # fmt: skip
        return await self.db.fetchval(
            QUERIES["notification_record"], notification_id, attempt, status, http_status, error, retry_in_s
        ) is not None  # fmt: skip

    async def notification_page(self, tenant: str, limit: int) -> list[dict[str, Any]]:
        return [dict(r) for r in await self.db.fetch(QUERIES["notification_page"], tenant, limit)]

    async def notification_prune(self, older_than_s: float) -> int:
        done = await self.db.execute(QUERIES["notification_prune"], older_than_s)
        return int(done.split()[-1])


class _OnConnection(Store):
    """A Store bound to one held connection: transaction() opens a transaction on it."""

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Store]:
        async with self.db.transaction():
            yield self
