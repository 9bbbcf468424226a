"""pop_due-4.lua (one shard) on a real Redis (never fakeredis: Lua versions differ)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

from schedulerd.models import Enqueue
from schedulerd.queue import score_ms


def _entries(count: int, offset_s: float) -> list[Enqueue]:
    due_at = datetime.now(UTC) + timedelta(seconds=offset_s)
    return [Enqueue(uuid.uuid4(), due_at + timedelta(milliseconds=i)) for i in range(count)]


async def test_pops_only_what_is_due_earliest_first(queue) -> None:
    due, later = _entries(5, -1), _entries(3, 60)
    await queue.add(later + due, only_new=True)
    await queue.ensure_epoch()

    pop = await queue.pop_due(100)

    assert pop.execution_ids == [str(e.execution_id) for e in due]
    assert pop.next_due_ms == score_ms(later[0].due_at)
    assert abs(pop.now_ms / 1000 - datetime.now(UTC).timestamp()) < 1
    assert pop.epoch is not None
    assert await queue.depth() == 3


async def test_limit_and_empty_queue(queue) -> None:
    await queue.add(_entries(7, -1), only_new=True)
    assert len((await queue.pop_due(5)).execution_ids) == 5
    rest = await queue.pop_due(5)
    assert len(rest.execution_ids) == 2 and rest.next_due_ms is None and rest.epoch is None


async def test_concurrent_pops_never_share_a_member(queue) -> None:
    await queue.add(_entries(3000, -10), only_new=True)
    pops = await asyncio.gather(*(queue.pop_due(200) for _ in range(20)))
    popped = [i for p in pops for i in p.execution_ids]
    assert len(popped) == len(set(popped)) == 3000


async def test_only_new_keeps_the_existing_score(queue) -> None:
    (entry,) = _entries(1, 30)
    await queue.add([entry], only_new=True)
    moved = Enqueue(entry.execution_id, entry.due_at + timedelta(seconds=30))
    await queue.add([moved], only_new=True)
    assert await queue.client.zscore(queue.queue_key("default"), str(entry.execution_id)) == score_ms(entry.due_at)
    await queue.add([moved], only_new=False)
    assert await queue.client.zscore(queue.queue_key("default"), str(entry.execution_id)) == score_ms(moved.due_at)


def test_scores_round_up_so_nothing_pops_before_it_is_due() -> None:
    due_at = datetime(2026, 11, 29, 12, 0, 0, 510, tzinfo=UTC)  # 0.51 ms past the second
    assert score_ms(due_at) == int(datetime(2026, 11, 29, 12, tzinfo=UTC).timestamp()) * 1000 + 1
    assert score_ms(due_at.replace(microsecond=0)) == int(due_at.replace(microsecond=0).timestamp()) * 1000


def _tenant_entries(tenant: str, count: int, offset_s: float = -1) -> list[Enqueue]:
    due_at = datetime.now(UTC) + timedelta(seconds=offset_s)
    return [Enqueue(uuid.uuid4(), due_at, tenant) for _ in range(count)]


async def test_a_storm_takes_only_its_share_of_a_pop(queue) -> None:
    noisy, quiet = _tenant_entries("noisy", 3000), _tenant_entries("quiet", 10)
    await queue.add(noisy, only_new=True)
    await queue.add(quiet, only_new=True)  # added after the storm, due at the same instant

    pop = await queue.pop_due(100)

    assert len(pop.execution_ids) == 100  # the quiet tenant's unused share goes to the noisy one
    assert {str(e.execution_id) for e in quiet} <= set(pop.execution_ids)
    assert dict(zip(pop.execution_ids, pop.tenants))[str(quiet[0].execution_id)] == "quiet"
    assert pop.tenants.count("noisy") == 90
    assert await queue.depth_and_earliest() == (2910, score_ms(noisy[0].due_at))
    assert await queue.tenants() == ["noisy"]  # the emptied tenant left the round


async def test_tenants_are_served_round_robin_without_starving_any(queue) -> None:
    entries = {f"t{i:03d}": _tenant_entries(f"t{i:03d}", 5) for i in range(300)}
    for batch in entries.values():
        await queue.add(batch, only_new=True)

    served: set[str] = set()
    for _ in range(3):  # 300 tenants, 100 per pop: three pops reach every one of them
        served |= set((await queue.pop_due(100)).tenants)

    assert served == set(entries)
    assert await queue.depth() == 300 * 5 - 300


async def test_missing_looks_in_each_tenants_queue(queue) -> None:
    a, b = _tenant_entries("a", 2), _tenant_entries("b", 1)
    await queue.add(a + b, only_new=True)
    ids = [str(e.execution_id) for e in a + b]
    assert await queue.missing(ids, ["a", "a", "b"]) == []
    assert await queue.missing(ids, ["b", "a", "a"]) == [ids[0], ids[2]]  # looked in the wrong queues
    assert await queue.missing(ids) == []  # no tenants given: every queue is looked in
    assert await queue.missing([str(uuid.uuid4())]) != []


def _break_pipelines_after_first_command(queue, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Every pipeline of this queue's client reaches Redis with its first command only, then the
    connection breaks (a failover, a reset): what one command writes is all that lands."""
    import redis

    make = queue.client.pipeline

    def pipeline(*args, **kwargs):  # type: ignore[no-untyped-def]
        pipe = make(*args, **kwargs)
        execute = pipe.execute

        async def cut(raise_on_error: bool = True):  # type: ignore[no-untyped-def]
            del pipe.command_stack[1:]
            await execute(raise_on_error=raise_on_error)
            raise redis.ConnectionError("connection lost after the first command")

        pipe.execute = cut
        return pipe

    monkeypatch.setattr(queue.client, "pipeline", pipeline)


async def test_an_entry_is_never_written_without_its_tenants_index(queue, monkeypatch) -> None:
    """add writes the tenant's queue and the shard's tenants set in one step: a connection lost
    after the first command cannot leave an entry that no pop serves."""
    import pytest
    import redis

    entry = Enqueue(uuid.uuid4(), datetime.now(UTC) - timedelta(seconds=1), "acme")
    with monkeypatch.context() as patched:
        _break_pipelines_after_first_command(queue, patched)
        with pytest.raises(redis.ConnectionError):
            await queue.add([entry], only_new=True)
    assert await queue.client.zscore(queue.tenants_key, "acme") is not None
    assert (await queue.pop_due(10)).execution_ids == [str(entry.execution_id)]


async def test_an_entry_whose_tenant_lost_its_index_counts_as_missing_and_add_repairs_it(queue) -> None:
    """The sweeper's check (missing) reads the tenants set too: an entry present in its queue but
    whose tenant no pop finds (absent, or indexed in the future) is reported, and re-adding it
    puts the tenant back at the queue's head."""
    now = datetime.now(UTC)
    stuck = Enqueue(uuid.uuid4(), now - timedelta(seconds=5), "acme")
    late = Enqueue(uuid.uuid4(), now - timedelta(seconds=5), "beta")
    fine = Enqueue(uuid.uuid4(), now - timedelta(seconds=5), "gamma")
    await queue.add([stuck, late, fine], only_new=True)
    await queue.client.zrem(queue.tenants_key, "acme")
    await queue.client.zadd(queue.tenants_key, {"beta": score_ms(now + timedelta(hours=1))})
    ids = [str(e.execution_id) for e in (stuck, late, fine)]

    assert await queue.missing(ids, ["acme", "beta", "gamma"]) == ids[:2]
    assert (await queue.pop_due(10)).execution_ids == ids[2:]

    await queue.add([stuck, late], only_new=True)
    assert await queue.missing(ids[:2], ["acme", "beta"]) == []
    assert sorted((await queue.pop_due(10)).execution_ids) == sorted(ids[:2])
