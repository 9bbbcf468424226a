"""A create whose commit outcome is unknown (the connection broke at the commit: a failover, a
restart): the intake asks Postgres once it answers again and either reads back what committed or
writes it again, so every job exists once and the caller gets its ids, through every door that
owns its transaction (the Client's enqueue and enqueue_many, the API's SharedBatches)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import asyncpg
import pytest

from schedulerd import Client, Enqueued
from schedulerd.config import Config
from schedulerd.queue import DelayQueue
from schedulerd.store import Store


class _Lost:
    """Breaks the next `times` writes with a connection error, after the commit (`committed`) or
    before it: what a client sees when the primary dies with the COMMIT in flight. The one-statement
    write breaks only on `store`'s pool (any_store: on every pool, as the API server's own)."""

    def __init__(
        self, store: Store, monkeypatch: pytest.MonkeyPatch, *, committed: bool, times: int = 1, any_store: bool = False
    ) -> None:
        self.left = times
        self.committed = committed
        self.any_store = any_store
        real_transaction, real_insert = Store.transaction, Store.job_insert_many
        lost = self

        @contextlib.asynccontextmanager
        async def transaction(self_: Store) -> AsyncIterator[Store]:
            async with real_transaction(self_) as tx:
                yield tx
                if lost.left and not lost.committed:
                    lost.left -= 1
                    raise ConnectionResetError("connection lost before the commit")
            if lost.left:
                lost.left -= 1
                raise ConnectionResetError("connection lost with the commit's reply")

        async def job_insert_many(self_: Store, *args: Any, **kwargs: Any) -> set[Any]:
            ours = isinstance(self_.db, asyncpg.Pool) and (lost.any_store or self_.db is store.db)
            if ours and lost.left and not lost.committed:  # the one-statement write, outside a transaction
                lost.left -= 1
                raise ConnectionResetError("connection lost before the statement ran")
            written = await real_insert(self_, *args, **kwargs)
            if ours and lost.left:
                lost.left -= 1
                raise ConnectionResetError("connection lost with the statement's reply")
            return written

        monkeypatch.setattr(Store, "transaction", transaction)
        monkeypatch.setattr(Store, "job_insert_many", job_insert_many)


@pytest.fixture
def make_client(store: Store, queue: DelayQueue, config: Config) -> Callable[..., Client]:
    def make(**database: Any) -> Client:
        return Client(store, queue, replace(config, database=replace(config.database, **database)), owned=False)

    return make


async def _jobs_named(store: Store, name: str) -> int:
    return await store.db.fetchval("SELECT count(*) FROM jobs WHERE name = $1", name)


@pytest.mark.parametrize("committed", [True, False], ids=["reply-lost", "not-committed"])
@pytest.mark.parametrize("shape", ["one-off", "one-off-keyed", "cron"])
async def test_a_create_whose_connection_broke_exists_once(
    make_client: Callable[..., Client], store: Store, queue: DelayQueue, monkeypatch: pytest.MonkeyPatch,
    committed: bool, shape: str, redis_prefix: str,
) -> None:  # fmt: skip
    client = make_client()
    name = f"{shape}-{committed}-{redis_prefix}"
    options: dict[str, Any] = {"cron": "* * * * *"} if shape == "cron" else {"in_": "1s"}
    if shape == "one-off-keyed":
        options["idempotency_key"] = name
    lost = _Lost(store, monkeypatch, committed=committed)
    done = await client.enqueue("noop", {"n": 1}, name=name, **options)
    assert lost.left == 0  # the fault did happen
    assert isinstance(done, Enqueued) and not done.replayed
    assert await _jobs_named(store, name) == 1
    job = await store.job_get(done.job_id)
    assert job is not None and job.name == name
    written = await store.db.fetch("SELECT id FROM executions WHERE job_id = $1", done.job_id)
    assert {e.id for e in done.executions} == {r["id"] for r in written} and written
    if shape != "cron":  # due in a second: in Redis, as after a create that met no fault
        assert await queue.client.zscore(queue.queue_key("default"), str(done.execution_id)) is not None


async def test_a_batch_whose_reply_was_lost_is_answered_item_by_item(
    make_client: Callable[..., Client], store: Store, monkeypatch: pytest.MonkeyPatch, redis_prefix: str
) -> None:
    client = make_client()
    _Lost(store, monkeypatch, committed=True, times=2)  # the reply, then the first retry's question too
    names = [f"batch-{redis_prefix}-{i}" for i in range(20)]
    results = await client.enqueue_many(
        [{"task": "noop", "name": n, "in_": "1h"} for n in names] + [{"task": "no-such-task", "name": "refused"}]
    )  # fmt: skip
    assert [r.ok for r in results] == [True] * 20 + [False]
    assert sum([await _jobs_named(store, n) for n in names]) == 20
    assert len({r.job_id for r in results if isinstance(r, Enqueued)}) == 20


async def test_past_commit_retry_s_the_error_reaches_the_caller(
    make_client: Callable[..., Client], store: Store, monkeypatch: pytest.MonkeyPatch, redis_prefix: str
) -> None:
    client = make_client(commit_retry_s=0)
    _Lost(store, monkeypatch, committed=False)
    with pytest.raises(ConnectionResetError):
        await client.enqueue("noop", name=f"given-up-{redis_prefix}")
    assert await _jobs_named(store, f"given-up-{redis_prefix}") == 0
