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


# --- debounce: a burst of creates with one key yields one execution ---------------------------


async def _executions_of(store: Store, job_id: Any) -> list[Any]:
    return await store.db.fetch("SELECT id, due_at, status FROM executions WHERE job_id = $1", job_id)


async def test_a_burst_with_one_debounce_key_is_one_execution_due_a_window_after_the_last(
    make_client: Callable[..., Client], store: Store, queue: DelayQueue, redis_prefix: str
) -> None:
    client = make_client()
    key = f"customer-42-{redis_prefix}"
    first = await client.enqueue("noop", {"n": 1}, debounce_key=key, debounce_window="30s")
    results = [await client.enqueue("noop", {"n": n}, debounce_key=key, debounce_window=30) for n in range(2, 6)]
    assert {r.execution_id for r in results} == {first.execution_id} and {r.job_id for r in results} == {first.job_id}
    (execution,) = await _executions_of(store, first.job_id)
    now = await store.clock_now()
    assert 29 <= (execution["due_at"] - now).total_seconds() <= 30  # a window after the last create
    job = await store.job_get(first.job_id)
    assert job is not None and job.params == {"n": 5}  # the last create's params
    # Another tenant's same key, and another key, are creates of their own.
    other = await client.enqueue("noop", debounce_key=key, debounce_window="30s", tenant="other-tenant")
    another = await client.enqueue("noop", debounce_key=key + "-b", debounce_window="30s")
    assert len({first.execution_id, other.execution_id, another.execution_id}) == 3


async def test_a_debounced_execution_that_started_is_not_moved_the_next_create_makes_another(
    make_client: Callable[..., Client], store: Store, redis_prefix: str
) -> None:
    client = make_client()
    key = f"started-{redis_prefix}"
    first = await client.enqueue("noop", {"n": 1}, debounce_key=key, debounce_window="1s")
    await store.db.execute("UPDATE executions SET status = 'running' WHERE id = $1", first.execution_id)  # a worker claimed it
    second = await client.enqueue("noop", {"n": 2}, debounce_key=key, debounce_window="1s")
    assert second.execution_id != first.execution_id
    (started,) = await _executions_of(store, first.job_id)
    assert started["status"] == "running" and (await store.job_get(first.job_id)).params == {"n": 1}  # type: ignore[union-attr]
    third = await client.enqueue("noop", {"n": 3}, debounce_key=key, debounce_window="1s")
    assert third.execution_id == second.execution_id


async def test_concurrent_creates_with_one_new_key_share_one_execution(
    make_client: Callable[..., Client], store: Store, redis_prefix: str
) -> None:
    import asyncio

    client = make_client()
    key = f"racing-{redis_prefix}"
    # Concurrent calls: batched together (SharedBatches) and, past its in-flight limit, in
    # transactions of their own that meet on the key's row.
    results = await asyncio.gather(*(client.enqueue("noop", {"n": n}, debounce_key=key, debounce_window="1m") for n in range(40)))
    batch = await client.enqueue_many([{"task": "noop", "params": {"n": 99}, "debounce_key": key, "debounce_window": "1m"}] * 3)
    assert len({r.execution_id for r in [*results, *batch]}) == 1
    assert len(await _executions_of(store, results[0].job_id)) == 1
    assert (await store.job_get(results[0].job_id)).params == {"n": 99}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"debounce_key": "k"}, "debounce_window"),
        ({"debounce_window": "30s"}, "debounce_key"),
        ({"debounce_key": "k", "debounce_window": 0}, "debounce_window"),
        ({"debounce_key": "k", "debounce_window": "2d"}, "debounce_window"),
        ({"debounce_key": "k", "debounce_window": True}, "debounce_window"),
        ({"debounce_key": "a key", "debounce_window": "30s"}, "debounce_key"),
        ({"debounce_key": "k" * 201, "debounce_window": "30s"}, "debounce_key"),
        ({"debounce_key": "k", "debounce_window": "30s", "cron": "* * * * *"}, "debounce_key"),
        ({"debounce_key": "k", "debounce_window": "30s", "in_": "5s"}, "debounce_key"),
        ({"debounce_key": "k", "debounce_window": "30s", "idempotency_key": "i"}, "debounce_key"),
    ],
)
async def test_a_bad_debounce_is_refused_naming_the_argument_and_writes_nothing(
    make_client: Callable[..., Client], store: Store, options: dict[str, Any], field: str
) -> None:
    from schedulerd import ValidationError

    client = make_client()
    before = await store.db.fetchval("SELECT count(*) FROM debounces")
    with pytest.raises(ValidationError) as refused:
        await client.enqueue("noop", **options)
    assert refused.value.field == field
    assert await store.db.fetchval("SELECT count(*) FROM debounces") == before


async def test_a_worker_popping_a_moved_execution_at_its_old_due_time_gives_it_back_until_the_new_one(
    make_client: Callable[..., Client], make_worker: Callable[..., Any], store: Store, queue: DelayQueue, redis_prefix: str
) -> None:
    import asyncio

    from tests.integration.conftest import run_until_idle

    client = make_client()
    key = f"moved-{redis_prefix}"
    first = await client.enqueue("noop", debounce_key=key, debounce_window=0.2)  # in Redis, due in 0.2 s
    moved = await client.enqueue("noop", debounce_key=key, debounce_window=1.5)
    assert moved.execution_id == first.execution_id
    await asyncio.sleep(0.4)  # the old due time passed: Redis hands the id out, the claim finds it early
    worker = make_worker("worker-debounce")
    await worker.run_once()
    execution = await store.execution_get(first.execution_id)
    assert execution is not None and execution.status == "queued" and execution.attempt == 0
    done = await run_until_idle(worker, store, first.execution_id)
    assert done.status == "succeeded" and done.started_at is not None and done.started_at >= done.due_at
