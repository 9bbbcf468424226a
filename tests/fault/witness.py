"""Witness tasks for the fault suite, loaded in daemons with
SCHEDULERD_DAEMON_TASK_MODULES=tests.fault.witness (daemons run with the repository as cwd).

Every attempt writes what it saw to Postgres (the daemon's own database, tables made by the
`witness` fixture): `witness_events` (execution, fence, attempt, pid, event, Postgres time) and
a fenced sink, `witness_sink`, that accepts an apply only with a fence no lower than the highest
it has seen for that execution (Kleppmann's fencing token, checked by the target, not the client).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from typing import Any

import asyncpg

from schedulerd.tasks.registry import TaskContext, task

_pool: asyncpg.Pool | None = None
_pool_lock = asyncio.Lock()
# A witness write that meets a failover (the primary lost or switched over) is tried again on
# the new primary rather than failing the attempt: the handler's own bookkeeping must not add
# attempts the scheduler did not cause. The apply is judged by the sink's fence either way.
_UNAVAILABLE = (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError, asyncpg.OperatorInterventionError,
                asyncpg.ReadOnlySQLTransactionError, asyncpg.InternalClientError)  # fmt: skip
_RETRY_FOR_S = 30.0

SCHEMA = """
CREATE TABLE IF NOT EXISTS witness_events (
    token uuid PRIMARY KEY, execution_id uuid NOT NULL, fence bigint NOT NULL, attempt integer NOT NULL,
    pid integer NOT NULL, event text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS witness_sink (
    execution_id uuid PRIMARY KEY, fence bigint NOT NULL, applied_at timestamptz NOT NULL);
"""

# The same fence again is the same attempt (a write retried after its reply was lost): accepted.
_APPLY = """
INSERT INTO witness_sink (execution_id, fence, applied_at) VALUES ($1, $2, clock_timestamp())
ON CONFLICT (execution_id) DO UPDATE SET fence = excluded.fence, applied_at = excluded.applied_at
    WHERE witness_sink.fence <= excluded.fence
RETURNING fence
"""


async def _db() -> asyncpg.Pool:
    global _pool
    async with _pool_lock:
        if _pool is None:
            _pool = await asyncpg.create_pool(os.environ["SCHEDULERD_DATABASE_URL"], min_size=1, max_size=4)
    return _pool


async def _write(query: str, *args: Any) -> Any:
    deadline = time.monotonic() + _RETRY_FOR_S
    while True:
        try:
            async with (await _db()).acquire() as connection:
                try:
                    return await connection.fetchval(query, *args)
                except _UNAVAILABLE:
                    connection.terminate()  # not handed out again: the next try connects afresh
                    raise
        except _UNAVAILABLE:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _event(ctx: TaskContext, event: str) -> None:
    # One token per event, kept across _write's tries: an insert that committed but whose reply
    # was lost to the failover is not recorded twice (it read as a handler started twice).
    await _write(
        "INSERT INTO witness_events (token, execution_id, fence, attempt, pid, event) VALUES ($1, $2, $3, $4, $5, $6) "
        "ON CONFLICT (token) DO NOTHING",
        uuid.uuid4(), ctx.execution_id, ctx.fence, ctx.attempt, os.getpid(), event,
    )  # fmt: skip


@task("witness.record")
async def record(ctx: TaskContext, params: dict[str, Any]) -> None:
    """Record the start, sleep params["sleep_s"] (asyncio) or block params["block_s"] (a blocking
    sleep that starves the event loop), then apply to the fenced sink and record the result."""
    await _event(ctx, "start")
    if params.get("sleep_s"):
        await asyncio.sleep(float(params["sleep_s"]))
    if params.get("block_s"):
        time.sleep(float(params["block_s"]))
    # Shielded: a worker that lost its lease cancels the handler, but a write already on its way
    # to the sink must still be judged by the sink's fence, and what it said recorded.
    await asyncio.shield(_apply(ctx))


async def _apply(ctx: TaskContext) -> None:
    applied = await _write(_APPLY, ctx.execution_id, ctx.fence)
    await _event(ctx, "applied" if applied is not None else "rejected")


@task("witness.poison")
async def poison(ctx: TaskContext, params: dict[str, Any]) -> None:
    """Record the start, then SIGKILL the worker process that runs it: every time."""
    await _event(ctx, "start")
    os.kill(os.getpid(), signal.SIGKILL)
