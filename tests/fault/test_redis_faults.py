"""Items 4 and 10: Redis is an index, never the record. On a private redis-server (never the
shared one): FLUSHALL mid-run; a restart with no persistence mid-run; Redis unreachable (CLIENT
PAUSE, or the process frozen) for a while. Nothing is lost, nothing runs twice, and while Redis
is gone workers claim due rows straight from Postgres, so executions still start within 2 s."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest

from schedulerd.queue import DelayQueue
from tests.fault.conftest import check, insert_workload, wait_settled


async def _rebuilt_after(queue: DelayQueue, since: float, timeout_s: float = 20) -> float:
    """Seconds from `since` (monotonic) until the queue holds entries again (the reconcile)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if await queue.depth() > 0:
                return time.monotonic() - since
        except Exception:  # noqa: BLE001 (still down or loading)
            pass
        await asyncio.sleep(0.02)
    raise AssertionError(f"queue not rebuilt within {timeout_s} s")


async def _lag_in(store, start, end) -> float:
    lag = await store.db.fetchval(
        """SELECT extract(epoch FROM max(first_started_at - scheduled_for)) FROM executions
           WHERE tenant = 'fault' AND scheduled_for BETWEEN $1 AND $2""",
        start, end,
    )  # fmt: skip
    return float(lag or 0.0)


@pytest.fixture
async def private_queue(private_redis, redis_prefix):
    queue = DelayQueue.connect(private_redis.url, redis_prefix)
    yield queue
    await queue.close()


async def _run_with_fleet(store, fleet, private_redis, count: int, spread_s: float):
    fleet.start(2, SCHEDULERD_REDIS_URL=private_redis.url)
    await fleet.ready()
    pids = fleet.pids()
    _, first = await insert_workload(store, count, start_in_s=1.0, spread_s=spread_s, task="noop")
    return pids, first


@pytest.mark.timeout(90)
async def test_flushall_mid_run_loses_nothing(store, fleet, private_redis, private_queue) -> None:
    pids, first = await _run_with_fleet(store, fleet, private_redis, 1500, 12.0)
    await asyncio.sleep((first - await store.clock_now()).total_seconds() + 5)
    flushed_at = await store.clock_now()
    private_redis.flushall()
    rebuilt_s = await _rebuilt_after(private_queue, time.monotonic())
    counts = await wait_settled(store, timeout_s=40)
    figures = await check(store)
    after_lag = await _lag_in(store, flushed_at, flushed_at + timedelta(hours=1))
    print(figures.line("Redis FLUSHALL mid-run", by_status=counts, queue_rebuilt_after_s=round(rebuilt_s, 3),
                       worst_lag_of_those_due_after_s=round(after_lag, 3)))  # fmt: skip
    assert counts == {"succeeded": 1500} and figures.lost == 0
    assert figures.max_starts == 1, figures  # losing the index re-runs nothing
    assert fleet.pids() == pids and all(r.alive for r in fleet.replicas.values())
    assert rebuilt_s < 2.0 and after_lag < 2.0


@pytest.mark.timeout(90)
async def test_redis_restarted_empty_mid_run_loses_nothing(store, fleet, private_redis, private_queue) -> None:
    pids, first = await _run_with_fleet(store, fleet, private_redis, 1500, 14.0)
    await asyncio.sleep((first - await store.clock_now()).total_seconds() + 4)
    down_at = await store.clock_now()
    private_redis.shutdown_nosave()
    await asyncio.sleep(3.0)
    private_redis.start()  # same port, nothing in it
    up_at = await store.clock_now()
    rebuilt_s = await _rebuilt_after(private_queue, time.monotonic())
    counts = await wait_settled(store, timeout_s=40)
    figures = await check(store)
    outage_lag = await _lag_in(store, down_at, up_at)
    after_lag = await _lag_in(store, up_at, up_at + timedelta(hours=1))
    print(figures.line("Redis SHUTDOWN NOSAVE, 3 s down, restarted empty", by_status=counts,
                       queue_rebuilt_after_restart_s=round(rebuilt_s, 3), worst_lag_during_outage_s=round(outage_lag, 3),
                       worst_lag_after_restart_s=round(after_lag, 3)))  # fmt: skip
    assert counts == {"succeeded": 1500} and figures.lost == 0
    assert figures.max_starts == 1, figures
    assert fleet.pids() == pids and all(r.alive for r in fleet.replicas.values())  # no daemon restarted
    assert rebuilt_s < 2.0
    assert outage_lag < 2.0 and after_lag < 2.0  # the Postgres fallback kept starting due work


async def _unreachable(store, fleet, private_redis, private_queue, *, outage_s: float, how: str) -> None:
    count = int(50 * (outage_s + 12))
    pids, first = await _run_with_fleet(store, fleet, private_redis, count, outage_s + 12)
    await asyncio.sleep((first - await store.clock_now()).total_seconds() + 4)
    gone_at = await store.clock_now()
    if how == "pause":
        private_redis.client_pause(outage_s)
        await asyncio.sleep(outage_s)
    else:
        private_redis.freeze()
        await asyncio.sleep(outage_s)
        private_redis.thaw()
    back_at = await store.clock_now()
    back = time.monotonic()
    counts = await wait_settled(store, timeout_s=40)
    figures = await check(store)
    outage_lag = await _lag_in(store, gone_at, back_at)
    logs = fleet.logs()
    # The fallback stopped and the queue was rebuilt: every queued execution still ahead is in Redis.
    recovered = [r.daemon.log_text().count('"worker.redis_back"') for r in fleet.replicas.values()]
    print(figures.line(f"Redis unreachable {outage_s:g} s ({how})", by_status=counts, worst_lag_during_outage_s=round(outage_lag, 3),
                       fallback_claims_logged='"worker.redis_unreachable"' in logs, replicas_back_on_redis=recovered,
                       settled_after_return_s=round(time.monotonic() - back, 3)))  # fmt: skip
    assert counts == {"succeeded": count} and figures.lost == 0, counts
    assert figures.max_starts == 1 and figures.succeeded_twice == 0, figures
    assert fleet.pids() == pids and all(r.alive for r in fleet.replicas.values())
    assert all(n >= 1 for n in recovered)  # each worker left the fallback when Redis answered
    assert outage_lag < 2.0 and figures.max_lag_s < 2.0, figures  # still on time while Redis was gone


@pytest.mark.timeout(120)
async def test_redis_unreachable_workers_claim_from_postgres(store, fleet, private_redis, private_queue) -> None:
    await _unreachable(store, fleet, private_redis, private_queue, outage_s=8, how="pause")


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("how", ["pause", "freeze"])
async def test_redis_unreachable_for_30_s(store, fleet, private_redis, private_queue, how) -> None:
    await _unreachable(store, fleet, private_redis, private_queue, outage_s=30, how=how)


@pytest.mark.timeout(60)
async def test_queue_rebuilt_when_redis_returns(store, fleet, private_redis, private_queue) -> None:
    """Work accepted while Redis was frozen (its ZADDs timed out) is indexed again once Redis
    answers, before it falls due: the worker leaves the fallback and asks for a full reconcile."""
    fleet.start(1, SCHEDULERD_REDIS_URL=private_redis.url)
    await fleet.ready()
    private_redis.freeze()
    ids, _ = await insert_workload(store, 200, start_in_s=30.0, spread_s=10.0, task="noop")
    await asyncio.sleep(3.0)  # the dispatcher marks them queued in Postgres; its ZADDs time out
    queued = await store.db.fetchval("SELECT count(*) FROM executions WHERE tenant = 'fault' AND status = 'queued'")
    private_redis.thaw()
    back = time.monotonic()
    while await private_queue.missing([str(i) for i in ids]):
        assert time.monotonic() - back < 10, "queue not rebuilt"
        await asyncio.sleep(0.05)
    print(f"\n[fault] Redis frozen while 200 executions were dispatched: queued in Postgres {queued}, "
          f"all indexed in Redis {time.monotonic() - back:.2f} s after it answered again")
    assert queued == 200
