"""The Python producer API against real Postgres and Redis: single and batched enqueue, task
types known from the replicas' records, idempotency keys, the application's own transaction,
reading and waiting for an execution, and @task references."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from schedulerd import Client, Enqueued, JobRequest, Refused, ValidationError, task
from schedulerd.config import Config
from schedulerd.dispatcher import Dispatcher
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from schedulerd.worker import Worker
from tests.integration.conftest import run_until_idle


@pytest.fixture
async def client(store: Store, queue: DelayQueue, config: Config) -> AsyncIterator[Client]:
    yield Client(store, queue, config, owned=False)


async def _in_redis(queue: DelayQueue, execution_id: Any, tenant: str = "default") -> bool:
    return await queue.client.zscore(queue.queue_key(tenant), str(execution_id)) is not None


async def _count(store: Store, table: str) -> int:
    return await store.db.fetchval(f"SELECT count(*) FROM {table}")


async def test_enqueue_commits_the_job_and_queues_its_execution(client: Client, store: Store, queue: DelayQueue) -> None:
    done = await client.enqueue("noop", {"n": 1}, name="first", max_attempts=5, timeout="30s")
    assert isinstance(done, Enqueued) and not done.replayed
    job = await store.job_get(done.job_id)
    assert job is not None and job.params == {"n": 1} and job.max_attempts == 5 and job.timeout_s == 30.0
    assert job.schedule_kind == "now" and job.name == "first"
    (execution,) = done.executions
    assert execution.status == "queued" and await _in_redis(queue, execution.id)
    row = await client.get_execution(execution.id)
    assert row is not None and row.job_id == done.job_id and row.due_at == execution.due_at


async def test_in_is_counted_on_postgres_clock(client: Client, store: Store) -> None:
    before = await store.clock_now()
    done = await client.enqueue("noop", in_=timedelta(minutes=10))
    after = await store.clock_now()
    due = done.executions[0].due_at
    # Half a round trip of error at most; the host clock does not enter into it.
    assert before + timedelta(minutes=10) - timedelta(milliseconds=50) <= due <= after + timedelta(minutes=10, milliseconds=50)
    assert done.executions[0].status == "pending"  # beyond the 5-minute dispatch horizon


async def test_cron_job_gets_its_first_horizon(client: Client) -> None:
    done = await client.enqueue("noop", cron="*/5 * * * *", tz="Europe/London")
    assert len(done.executions) >= 70  # 6 h of every-5-minutes occurrences
    assert all(e.due_at.minute % 5 == 0 for e in done.executions)


async def test_unknown_task_is_refused_naming_the_field_and_writes_nothing(client: Client, store: Store) -> None:
    with pytest.raises(ValidationError) as refused:
        await client.enqueue("no_such_task")
    assert refused.value.field == "task" and "no_such_task" in refused.value.message
    with pytest.raises(ValidationError) as bad_delay:
        await client.enqueue("noop", in_="5x")
    assert bad_delay.value.field == "in_"
    with pytest.raises(ValidationError) as unknown_option:
        await client.enqueue("noop", run_at="2026-01-01T00:00:00Z")
    assert unknown_option.value.field == "run_at"
    assert await _count(store, "jobs") == 0


async def test_task_types_reported_by_live_workers_need_no_handler_here(
    client: Client, store: Store, config: Config
) -> None:
    with pytest.raises(ValidationError):
        await client.enqueue("billing.send_invoice")
    await store.task_type_report(["billing.send_invoice"], "replica-elsewhere")
    done = await client.enqueue("billing.send_invoice", {"invoice": 7})  # looked up again on a miss
    assert (await store.job_get(done.job_id)).task == "billing.send_invoice"  # type: ignore[union-attr]
    # A type no worker reported within the window is unknown again.
    await store.db.execute("UPDATE task_types SET last_seen_at = clock_timestamp() - interval '2 days'")
    client.task_types._read_at = float("-inf")
    with pytest.raises(ValidationError, match="registered by live workers"):
        await client.enqueue("billing.send_invoice")


async def test_a_batch_asks_once_about_a_task_type_it_does_not_know(client: Client, store: Store) -> None:
    reads = 0
    read_live = store.task_type_live

    async def counted(*args: Any) -> Any:
        nonlocal reads
        reads += 1
        return await read_live(*args)

    store.task_type_live = counted  # type: ignore[method-assign]
    await client.enqueue("noop")  # the cached list is fresh now
    reads = 0
    requests: list[Any] = [{"task": "billing.nope"} if i % 2 else {"task": "noop"} for i in range(400)]
    requests[4] = {"task": ["not", "hashable"]}
    results = await client.enqueue_many(requests, batch_size=100)
    refused = [r for r in results if isinstance(r, Refused)]
    assert len(refused) == 201 and all(r.field == "task" for r in refused)
    assert reads == 4  # one per batch (each batch is its own call), not one per item


async def test_enqueue_many_writes_the_valid_items_and_names_each_refused_one(
    client: Client, store: Store, queue: DelayQueue
) -> None:
    requests: list[Any] = [{"task": "noop", "params": {"i": i}} for i in range(2500)]
    requests[7] = {"task": "noop", "max_attempts": 0}
    requests[1200] = {"task": "noop", "at": "2026-01-01T00:00:00"}  # no offset
    requests[2400] = {"task": "noop", "colour": "red"}
    requests[2401] = JobRequest("noop", params={"via": "JobRequest"})
    results = await client.enqueue_many(requests, batch_size=1000)
    assert [r.index for r in results] == list(range(2500))
    refused = {r.index: r for r in results if isinstance(r, Refused)}
    assert set(refused) == {7, 1200, 2400}
    assert refused[7].field == "max_attempts" and refused[1200].field == "at" and refused[2400].field == "colour"
    assert await _count(store, "jobs") == 2497 and await _count(store, "executions") == 2497
    assert await queue.depth() == 2497
    accepted = results[2401]
    assert isinstance(accepted, Enqueued)
    assert (await store.job_get(accepted.job_id)).params == {"via": "JobRequest"}  # type: ignore[union-attr]


async def test_enqueue_many_queues_those_due_soon_and_leaves_the_later_ones_to_the_dispatcher(
    client: Client, store: Store, queue: DelayQueue
) -> None:
    # Interleaved, so the batch's answer (only the pending ids) must be matched per execution.
    requests = [{"task": "noop", "in_": "2h" if i % 3 == 0 else "1s"} for i in range(300)]
    results = await client.enqueue_many(requests, batch_size=120)
    assert all(isinstance(r, Enqueued) for r in results)
    statuses = {r.execution_id: r.executions[0].status for r in results if isinstance(r, Enqueued)}
    rows = {r["id"]: r["status"] for r in await store.db.fetch("SELECT id, status FROM executions")}
    assert statuses == rows
    assert sorted(statuses.values()).count("pending") == 100
    for i, result in enumerate(results):
        assert isinstance(result, Enqueued)
        assert await _in_redis(queue, result.execution_id) == (i % 3 != 0)


async def test_idempotency_keys_replay_the_first_job_and_refuse_another_request(client: Client, store: Store) -> None:
    first = await client.enqueue("noop", {"order": 1}, idempotency_key="order-1")
    again = await client.enqueue("noop", {"order": 1}, idempotency_key="order-1")
    assert again.replayed and again.job_id == first.job_id and again.execution_id == first.execution_id
    with pytest.raises(ValidationError) as conflict:
        await client.enqueue("noop", {"order": 2}, idempotency_key="order-1")
    assert conflict.value.field == "idempotency_key"
    results = await client.enqueue_many(
        [{"task": "noop", "idempotency_key": "a"}, {"task": "noop", "idempotency_key": "a"},
         {"task": "noop", "params": {"x": 1}, "idempotency_key": "a"}, {"task": "noop", "idempotency_key": "order-1"}]
    )  # fmt: skip
    assert isinstance(results[0], Enqueued) and not results[0].replayed
    assert isinstance(results[1], Enqueued) and results[1].replayed and results[1].job_id == results[0].job_id
    assert isinstance(results[2], Refused) and results[2].code == "conflict"
    assert isinstance(results[3], Refused) and results[3].field == "idempotency_key"  # same key, other params
    assert await _count(store, "jobs") == 2
    # Keys belong to a tenant: another tenant may use the same one.
    other = await client.enqueue("noop", {"order": 1}, idempotency_key="order-1", tenant="acme")
    assert not other.replayed and other.job_id != first.job_id


async def test_enqueue_inside_the_applications_transaction(
    client: Client, store: Store, queue: DelayQueue, database_url: str, config: Config
) -> None:
    connection = await asyncpg.connect(database_url)
    try:
        await connection.execute("CREATE TEMP TABLE orders (id int)")
        # Rolled back: neither the order nor the job exists.
        with pytest.raises(RuntimeError):
            async with connection.transaction():
                await connection.execute("INSERT INTO orders VALUES (1)")
                lost = await client.enqueue("noop", {"order": 1}, connection=connection)
                raise RuntimeError("the application changes its mind")
        assert await store.job_get(lost.job_id) is None
        assert await client.flush() == 0 and await queue.depth() == 0
        # Committed through client.transaction: in Redis as soon as the commit is done.
        async with client.transaction(connection):
            await connection.execute("INSERT INTO orders VALUES (2)")
            kept = await client.enqueue("noop", {"order": 2}, connection=connection)
            assert kept.executions[0].status == "pending"  # not ours to queue before the commit
            results = await client.enqueue_many([{"task": "noop"}, {"task": "nope"}], connection=connection)
        assert await store.job_get(kept.job_id) is not None
        assert await _in_redis(queue, kept.execution_id)
        assert results[0].ok and not results[1].ok and await _in_redis(queue, results[0].execution_id)  # type: ignore[union-attr]
        # Committed by the application itself and never flushed: the dispatcher enqueues it.
        async with connection.transaction():
            plain = await client.enqueue("noop", connection=connection)
        assert not await _in_redis(queue, plain.execution_id)
        await Dispatcher(store, queue, config.dispatcher).run_once()
        assert await _in_redis(queue, plain.execution_id)
        # Outside any transaction, the call is its own transaction and queues at once.
        alone = await client.enqueue("noop", connection=connection)
        assert alone.executions[0].status == "queued" and await _in_redis(queue, alone.execution_id)
    finally:
        await connection.close()


async def test_wait_returns_the_final_execution(
    client: Client, store: Store, make_worker: Callable[..., Worker]
) -> None:
    done = await client.enqueue("noop")
    worker = make_worker()

    running = asyncio.create_task(run_until_idle(worker, store, done.execution_id))
    finished = await client.wait(done.execution_id, timeout=10)  # type: ignore[arg-type]
    await running
    assert finished.status == "succeeded"
    pending = await client.enqueue("noop", in_="1h")
    with pytest.raises(TimeoutError):
        await client.wait(pending.execution_id, timeout=0.2)  # type: ignore[arg-type]


async def test_task_decorator_registers_and_enqueues(client: Client, store: Store) -> None:
    @task("tests.client.greet", max_attempts=7)
    async def greet(ctx: Any, params: dict[str, Any]) -> str:
        return f"hello {params['who']}"

    assert await greet(None, {"who": "you"}) == "hello you"  # still the handler
    done = await greet.enqueue(client, {"who": "world"}, in_=30)
    job = await store.job_get(done.job_id)
    assert job is not None and job.task == "tests.client.greet" and job.max_attempts == 7
    (many,) = await client.enqueue_many([greet.request({"who": "batch"}, max_attempts=2)])
    assert many.ok and (await store.job_get(many.job_id)).max_attempts == 2  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        task("tests.client.bad", colour="red")


async def test_connect_reads_the_daemons_configuration(database_url: str, redis_url: str, redis_prefix: str) -> None:
    environ = {"SCHEDULERD_DATABASE_URL": database_url, "SCHEDULERD_REDIS_URL": redis_url,
               "SCHEDULERD_REDIS_PREFIX": redis_prefix}  # fmt: skip
    async with await Client.connect(environ=environ, config_path="/nonexistent.toml") as client:
        done = await client.enqueue("noop")
        assert done.executions[0].status == "queued"
        assert await client.queue.depth() == 1
        await client.queue.delete_all()
        await client.store.db.execute("DELETE FROM executions WHERE job_id = $1", done.job_id)
        await client.store.db.execute("DELETE FROM jobs WHERE id = $1", done.job_id)


def test_sync_client(database_url: str, redis_url: str, redis_prefix: str) -> None:
    from schedulerd import SyncClient
    from schedulerd.config import load

    config = load("/nonexistent.toml", {"SCHEDULERD_DATABASE_URL": database_url, "SCHEDULERD_REDIS_URL": redis_url,
                                        "SCHEDULERD_REDIS_PREFIX": redis_prefix})  # fmt: skip
    with SyncClient.connect(config) as client:
        done = client.enqueue("noop", at=datetime.now(UTC) + timedelta(hours=2), name="sync")
        assert done.executions[0].status == "pending"
        assert client.get_execution(done.execution_id).status == "pending"  # type: ignore[arg-type, union-attr]
        (refused,) = client.enqueue_many([{"task": "noop", "cron": "@daily", "tz": "Mars/Olympus"}])
        assert isinstance(refused, Refused) and refused.field == "tz"


async def test_concurrent_enqueues_share_transactions_and_keep_their_own_results(
    client: Client, store: Store, queue: DelayQueue
) -> None:
    batches: list[int] = []
    create_many = client.intake.create_many

    async def counted(items: Any, **kwargs: Any) -> Any:
        batches.append(len(items))
        return await create_many(items, **kwargs)

    client.intake.create_many = counted  # type: ignore[method-assign]
    calls = [client.enqueue("noop", {"i": i}) if i != 17 else client.enqueue("noop", max_attempts=1000) for i in range(200)]
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    refused = [o for o in outcomes if isinstance(o, ValidationError)]
    assert len(refused) == 1 and refused[0].field == "max_attempts"
    created = [o for o in outcomes if isinstance(o, Enqueued)]
    assert len({o.job_id for o in created}) == 199 and all(o.job is not None for o in created)
    assert sum(batches) == 200 and len(batches) < 200  # group commit: fewer transactions than calls
    assert await _count(store, "jobs") == 199 and await queue.depth() == 199
    assert [(await store.job_get(o.job_id)).params for o in created[:3]] == [{"i": 0}, {"i": 1}, {"i": 2}]  # type: ignore[union-attr]


async def test_what_flush_would_add_is_bounded_when_flush_is_never_called(
    client: Client, store: Store, queue: DelayQueue, database_url: str, config: Config
) -> None:
    """An application enqueueing inside its own transactions and never flushing: the client
    holds at most unflushed_max executions for flush() (the earliest are let go), and those it
    let go reach Redis all the same, through the dispatcher."""
    client.unflushed_max = 5
    connections = [await asyncpg.connect(database_url) for _ in range(3)]
    try:
        enqueued = []
        for round_ in range(4):
            for connection in connections:
                async with connection.transaction():
                    enqueued.append(await client.enqueue("noop", {"round": round_}, connection=connection))
        assert len(enqueued) == 12
        assert sum(len(entries) for entries in client._unflushed.values()) == 5
    finally:
        for connection in connections:
            await connection.close()

    assert await client.flush() == 5 and not client._unflushed
    # The latest five were held; the earliest seven were let go.
    assert [await _in_redis(queue, e.execution_id) for e in enqueued] == [False] * 7 + [True] * 5
    await Dispatcher(store, queue, config.dispatcher).run_once()
    assert all([await _in_redis(queue, e.execution_id) for e in enqueued])
