"""Priorities in pop_due-4.lua on a real Redis: among the due, higher priority first within a
tenant's share; never a not-yet-due member before a due one; tenants still share fairly."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

from schedulerd.models import Enqueue
from schedulerd.queue import DelayQueue


def _entries(count: int, offset_s: float, tenant: str = "default", priority: int = 5) -> list[Enqueue]:
    due_at = datetime.now(UTC) + timedelta(seconds=offset_s)
    return [Enqueue(uuid.uuid4(), due_at + timedelta(milliseconds=i), tenant, priority) for i in range(count)]


def _ids(entries: list[Enqueue]) -> list[str]:
    return [str(e.execution_id) for e in entries]


async def test_a_due_9_pops_before_older_due_5s(queue: DelayQueue) -> None:
    fives = _entries(50, -5)
    nines = _entries(3, -1, priority=9)
    ones = _entries(3, -10, priority=1)
    await queue.add(fives + ones, only_new=True)
    await queue.pop_due(1)  # the 9s arrive once the queue has a round going: as in a backlog
    await queue.add(nines, only_new=True)

    pop = await queue.pop_due(10)

    assert pop.execution_ids[:3] == _ids(nines)
    assert pop.execution_ids[3:] == _ids(fives)[1:8]  # then the 5s, in due order
    assert pop.priorities == [9, 9, 9] + [5] * 7 and pop.tenants == ["default"] * 10
    rest = await queue.pop_due(100)
    assert rest.execution_ids == _ids(fives)[8:] + _ids(ones)  # the lowest band last, though due first


async def test_a_not_yet_due_9_never_goes_before_a_due_5(queue: DelayQueue) -> None:
    fives = _entries(5, -1)
    (later_nine,) = _entries(1, 60, priority=9)
    await queue.add([later_nine, *fives], only_new=True)

    pop = await queue.pop_due(100)

    assert pop.execution_ids == _ids(fives)
    assert await queue.missing([str(later_nine.execution_id)], ["default"], [9]) == []
    assert pop.next_due_ms is not None  # the 9's band is still indexed: the worker wakes for it


async def test_priority_orders_within_a_tenant_share_not_across_tenants(queue: DelayQueue) -> None:
    """Tenant a's 9s take a's share first; tenant b's 5s still get b's share of every pop."""
    a_fives, a_nines = _entries(40, -3, "a"), _entries(40, -2, "a", 9)
    b_fives = _entries(40, -3, "b")
    await queue.add(a_fives + a_nines + b_fives, only_new=True)

    pop = await queue.pop_due(20)

    by_tenant = {t: [p for p, owner in zip(pop.priorities, pop.tenants) if owner == t] for t in ("a", "b")}
    assert len(by_tenant["a"]) == len(by_tenant["b"]) == 10
    assert by_tenant["a"] == [9] * 10  # a's share: its highest band first
    assert set(pop.execution_ids) >= set(_ids(b_fives)[:10])


async def test_one_band_is_the_plain_tenant_queue(queue: DelayQueue) -> None:
    """With every execution at 5 the keys are the tenant's queue alone: no band key, no '#' member."""
    entries = _entries(3, -1, "acme")
    await queue.add(entries, only_new=True)
    assert await queue.client.zrange(queue.tenants_key, 0, -1) == ["acme"]
    assert await queue.client.zcard(queue.queue_key("acme")) == 3
    assert await queue.tenants() == ["acme"]

    await queue.add(_entries(2, -1, "acme", 7), only_new=True)
    assert sorted(await queue.client.zrange(queue.tenants_key, 0, -1)) == ["acme", "acme#7"]
    assert await queue.tenants() == ["acme"] and await queue.tenant_depth("acme") == 5


async def test_give_back_keeps_the_band(queue: DelayQueue) -> None:
    """A popped 9 added back with the tenant and priority the pop returned lands in its band again."""
    (nine,) = _entries(1, -1, "acme", 9)
    await queue.add([nine], only_new=True)
    pop = await queue.pop_due(10)
    back = [Enqueue(uuid.UUID(i), pop.at, t, p) for i, t, p in zip(pop.execution_ids, pop.tenants, pop.priorities)]
    await queue.add(back, only_new=True)
    assert await queue.client.zcard(queue.queue_key("acme", priority=9)) == 1


async def check_each_shard_pops_its_9s_first(queue: DelayQueue, fives: list[Enqueue], nines: list[Enqueue], popped_at_least: int) -> None:
    """The 5s due, one pop taken, then the 9s: in what every shard gives after them, its 9s come
    before its 5s (each shard's pop orders its own due members; shards get unequal shares)."""
    from schedulerd.queue.delay_queue import shard_of

    await queue.add(fives, only_new=True)
    await queue.pop_due(queue.shard_count)
    await queue.add(nines, only_new=True)
    popped: list[tuple[str, int]] = []
    while len(popped) < popped_at_least:
        pop = await queue.pop_due(20)
        popped += list(zip(pop.execution_ids, pop.priorities))
    assert {str(e.execution_id) for e in nines} <= {i for i, _ in popped}
    for shard in range(queue.shard_count):
        order = [p for i, p in popped if shard_of(i, queue.shard_count) == shard]
        assert order == sorted(order, reverse=True), (shard, order)


async def test_priorities_across_shards(redis_url: str, redis_prefix: str) -> None:
    queue = DelayQueue.connect(redis_url, redis_prefix, shards=4)
    try:
        await check_each_shard_pops_its_9s_first(queue, _entries(400, -3), _entries(8, -1, priority=9), 80)
    finally:
        await queue.delete_all()
        await queue.close()


async def test_a_waiting_low_band_does_not_keep_its_tenant_first_in_the_round(queue: DelayQueue) -> None:
    """One at a time (a saturated worker pops what frees): tenant a, whose low band has waited
    longest, still alternates with b, and gives its 5s before its 1s."""
    await queue.add(_entries(10, -10, "a", 1) + _entries(10, -3, "a") + _entries(10, -3, "b"), only_new=True)
    served = []
    for _ in range(6):
        pop = await queue.pop_due(1)
        served += list(zip(pop.tenants, pop.priorities))
        # Served bands move to the pop's millisecond; two pops in one millisecond tie, and a tie
        # goes by name (as it always has for tenants): apart, the round is strict.
        await asyncio.sleep(0.003)
    assert served.count(("a", 5)) == 3 and served.count(("b", 5)) == 3
    assert all(served[i][0] != served[i + 1][0] for i in range(5))
