"""The sharded delay queue on a real Redis: keys per shard, pops across shards, and changing the
shard count with executions in flight (the sweeper reconciles from Postgres)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import pytest

from schedulerd.jobs import Jobs, JobSpec
from schedulerd.models import Enqueue, ExecutionStatus
from schedulerd.queue import DelayQueue, score_ms, shard_of
from schedulerd.sweeper import Sweeper
from schedulerd.worker import Worker
from tests.conftest import create_job
from tests.integration.conftest import settle

MakeQueue = Callable[[int], DelayQueue]


@pytest.fixture
async def make_queue(redis_url: str, redis_prefix: str) -> AsyncIterator[MakeQueue]:
    """Queues on this test's prefix with a shard count of the test's choosing (one deployment
    whose replicas were configured differently)."""
    made: list[DelayQueue] = []

    def make(shards: int) -> DelayQueue:
        queue = DelayQueue.connect(redis_url, redis_prefix, shards=shards)
        made.append(queue)
        return queue

    yield make
    await made[0].delete_all()
    for queue in made:
        await queue.close()


def _due(count: int, tenant: str = "default", offset_s: float = -1) -> list[Enqueue]:
    due_at = datetime.now(UTC) + timedelta(seconds=offset_s)
    return [Enqueue(uuid.uuid4(), due_at, tenant) for _ in range(count)]


async def test_each_entry_lives_in_its_shards_slot(make_queue: MakeQueue, redis_prefix: str) -> None:
    queue = make_queue(4)
    entries = _due(200, "acme")
    await queue.add(entries, only_new=True)

    for shard in range(4):
        members = set(await queue.client.zrange(f"{{{redis_prefix}:{shard}}}:queue:acme", 0, -1))
        assert members == {str(e.execution_id) for e in entries if shard_of(e.execution_id, 4) == shard}
        assert await queue.client.zrange(f"{{{redis_prefix}:{shard}}}:tenants", 0, -1) == ["acme"]
    assert not await queue.client.exists(f"{{{redis_prefix}}}:queue:acme")  # nothing in the one-shard slot
    assert Counter(shard_of(e.execution_id, 4) for e in entries).most_common()[-1][1] > 25  # spread, not piled


async def test_one_shard_keeps_the_key_names_of_before(make_queue: MakeQueue, redis_prefix: str) -> None:
    queue = make_queue(1)
    (entry,) = _due(1, "acme")
    await queue.add([entry], only_new=True)
    await queue.ensure_epoch()
    assert await queue.client.zscore(f"{{{redis_prefix}}}:queue:acme", str(entry.execution_id)) == score_ms(entry.due_at)
    assert await queue.client.get(f"{{{redis_prefix}}}:epoch:2")


async def test_a_pop_takes_every_shards_due_entries_in_one_round_trip(make_queue: MakeQueue, monkeypatch) -> None:
    queue = make_queue(8)
    entries = _due(40, "a") + _due(40, "b")
    await queue.add(entries + _due(5, "a", offset_s=60), only_new=True)
    await queue.ensure_epoch()
    first = await queue.pop_due(8)  # one each: learns every shard's line of tenants
    trips = 0
    real = queue._pop_shards

    async def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal trips
        trips += 1
        return await real(*args, **kwargs)

    monkeypatch.setattr(queue, "_pop_shards", counted)
    await queue.add(_due(3, "a"), only_new=True)
    pop = await queue.pop_due(500)

    assert trips == 1  # every shard's tenants were declared: no second trip
    assert len(first.execution_ids) + len(pop.execution_ids) == 83
    assert pop.epoch is not None and pop.next_due_ms is not None
    assert await queue.depth() == 5


async def test_shards_are_served_least_recently_first(make_queue: MakeQueue) -> None:
    queue = make_queue(4)
    entries = _due(400)
    await queue.add(entries, only_new=True)
    shard_by_id = {str(e.execution_id): shard_of(e.execution_id, 4) for e in entries}

    served = [shard_by_id[i] for _ in range(8) for i in (await queue.pop_due(1)).execution_ids]

    assert Counter(served) == {0: 2, 1: 2, 2: 2, 3: 2}  # a limit below the shard count rotates over all of them


async def test_a_tenant_new_to_a_shard_is_served_in_the_same_pop(make_queue: MakeQueue) -> None:
    queue = make_queue(2)
    await queue.add(_due(4, "old"), only_new=True)
    assert len((await queue.pop_due(100)).execution_ids) == 4
    late = _due(6, "new")
    await queue.add(late, only_new=True)  # a tenant this process has not seen at the head of any round

    pop = await queue.pop_due(100)

    assert sorted(pop.execution_ids) == sorted(str(e.execution_id) for e in late)


async def test_one_shard_losing_its_marker_reads_as_lost_data(make_queue: MakeQueue) -> None:
    queue = make_queue(4)
    await queue.ensure_epoch()
    assert (await queue.pop_due(10)).epoch is not None
    await queue.client.delete(queue.shards[2].epoch_key)
    assert (await queue.pop_due(10)).epoch is None


async def test_drain_moves_a_retired_layouts_entries_with_their_scores(make_queue: MakeQueue) -> None:
    old, new = make_queue(4), make_queue(2)
    entries = _due(60, "a", offset_s=30) + _due(20, "b", offset_s=30)
    await old.add(entries, only_new=True)
    await old.ensure_epoch()  # the layout of 4 is in use
    await new.ensure_epoch()

    moved = await new.drain_retired(retire_after_s=3600)

    # Shards {p:0} and {p:1} belong to both layouts: only {p:2}, {p:3} are retired and drained.
    retired = [e for e in entries if shard_of(e.execution_id, 4) >= 2]
    assert moved == len(retired)
    assert await new.missing([str(e.execution_id) for e in retired], [e.tenant for e in retired]) == []
    for e in retired:
        assert await new.client.zscore(new.queue_key(e.tenant, e.execution_id), str(e.execution_id)) == score_ms(e.due_at)
    assert not await new.client.exists(old.shards[2].tenants_key, old.shards[3].tenants_key)
    assert await new.client.exists(old.shards[2].epoch_key)  # a replica of 4 may still pop it: no false data loss
    assert await new.drain_retired(retire_after_s=0) == 0
    assert set(await new.client.hgetall(new.layouts_key)) == {"2"}  # the empty old layout is forgotten
    assert not await new.client.exists(old.shards[2].epoch_key, old.shards[3].epoch_key)


@pytest.mark.parametrize(("before", "after"), [(1, 4), (4, 1), (4, 8)])
async def test_changing_the_shard_count_loses_nothing_and_runs_nothing_twice(
    store, make_queue: MakeQueue, config, before: int, after: int
) -> None:
    """Executions queued under one shard count, then replicas restarted with another: every one
    runs exactly once (the claim settles entries the old and new layouts both hold)."""
    old = make_queue(before)
    await Sweeper(store, old, config.sweeper).run_once()  # the old fleet had its markers and layout
    jobs = Jobs(store, old, config)
    created = []
    for i in range(60):
        _, executions = await create_job(jobs, JobSpec(task="noop", tenant=f"t{i % 3}",
                                                  run_at=datetime.now(UTC) + timedelta(milliseconds=300)))  # fmt: skip
        created += executions
    new = make_queue(after)
    sweeper = Sweeper(store, new, config.sweeper)
    worker = Worker(store, new, config.worker, "after-change", horizon_s=config.dispatcher.horizon_s,
                    on_epoch_lost=sweeper.request_reconcile)  # fmt: skip
    try:
        await sweeper.run_once()  # new markers: a full reconcile, then the retired shards drained
        deadline = asyncio.get_running_loop().time() + 15
        while asyncio.get_running_loop().time() < deadline:
            await worker.run_once()
            await settle(worker)
            rows = await store.db.fetch("SELECT status, attempt FROM executions")
            # Both layouts may hold a copy of one execution (the reconcile adds it under its new
            # shard while the old shard, still in use, keeps its own): the later pop of the copy
            # is refused by the claim and dropped. Done when every run finished and no copy is left.
            if all(r["status"] == ExecutionStatus.SUCCEEDED for r in rows) and await new.depth() == 0:
                break
            await sweeper.run_once()
            await asyncio.sleep(0.05)
        rows = await store.db.fetch("SELECT status, attempt FROM executions")
        assert len(rows) == len(created) == 60
        assert Counter((r["status"], r["attempt"]) for r in rows) == {(ExecutionStatus.SUCCEEDED, 1): 60}
        assert await store.db.fetchval("SELECT count(*) FROM attempt_history") == 60  # one attempt each, none abandoned
        assert await new.depth() == 0
    finally:
        worker._threads.shutdown(wait=False, cancel_futures=True)


async def test_drain_keeps_the_score_an_old_replica_moved_mid_drain(make_queue: MakeQueue, monkeypatch) -> None:
    """An old replica moves an entry of a retired shard (a retry: a later due time) after the drain
    copied it and before it removed it: the drain copies the new score over the old one in the new
    home instead of removing the moved entry and leaving the earlier, stale score behind, and
    drops the tenant from the retired index only once its queue is empty."""
    old, new = make_queue(4), make_queue(2)
    entry = next(e for e in _due(40, "a", offset_s=30) if shard_of(e.execution_id, 4) >= 2)
    await old.add([entry], only_new=True)
    await old.ensure_epoch()
    await new.ensure_epoch()
    retried = Enqueue(entry.execution_id, entry.due_at + timedelta(seconds=60), entry.tenant)
    copy = new._add_scored
    moves: list[None] = []

    async def copy_then_move(*args, **kwargs):  # type: ignore[no-untyped-def]
        await copy(*args, **kwargs)
        if not moves:
            moves.append(None)
            await old.add([retried], only_new=False)

    monkeypatch.setattr(new, "_add_scored", copy_then_move)
    await new.drain_retired(retire_after_s=3600)

    home = new.queue_key(entry.tenant, entry.execution_id)
    assert await new.client.zscore(home, str(entry.execution_id)) == score_ms(retried.due_at)
    retired = old.shard(entry.execution_id)
    assert not await new.client.exists(retired.queue_key_prefix + entry.tenant, retired.tenants_key)
