"""Fleet-wide rate limits on real Redis and Postgres: the token-bucket script (all or nothing per
claim, successive instants for the refused, refill, nothing left behind), and two workers sharing
one limit without exceeding it, charging an attempt or failing an execution."""

from __future__ import annotations

import asyncio
import bisect
import time
from dataclasses import replace
from typing import Any

from prometheus_client import REGISTRY

from schedulerd.config import RateLimitsConfig
from schedulerd.core.rate import Bucket
from schedulerd.models import ExecutionStatus
from schedulerd.queue import DelayQueue, TokenBuckets
from schedulerd.tasks.registry import TaskContext, task
from schedulerd.worker import Worker

STARTS: list[tuple[float, int]] = []  # (monotonic start, attempt) of each test.rated handler


@task("test.rated")
async def rated(ctx: TaskContext, params: dict[str, Any]) -> None:
    STARTS.append((time.monotonic(), ctx.attempt))


async def test_take_tokens_grants_the_burst_then_successive_instants(queue) -> None:
    buckets = TokenBuckets(queue.client, queue.prefix)
    a = Bucket("task:a", 4, 1000)  # a token every 250 ms, burst 4
    now_ms, answers = await buckets.take([[a]] * 7)
    assert [g for g, _ in answers] == [True] * 4 + [False] * 3
    assert [at for g, at in answers if g] == [now_ms] * 4
    waits = [at - now_ms for g, at in answers if not g]
    assert [round(w / 250) for w in waits] == [1, 2, 3] and all(0 < w - 250 * n <= 2 for n, w in enumerate(waits, 1))
    # Refused claims book their instants: the next refused, in a later call, comes after them.
    _, again = await buckets.take([[a]])
    assert again[0][0] is False and 995 <= again[0][1] - now_ms <= 1005
    await asyncio.sleep((waits[0] + 5) / 1000)  # the first booked claim comes back at its instant...
    _, back = await buckets.take([[a]])
    assert back == [(True, back[0][1])]  # ...and finds its token


async def test_a_claim_refused_by_one_bucket_takes_nothing_from_the_others(queue) -> None:
    buckets = TokenBuckets(queue.client, queue.prefix)
    task, host = Bucket("task:http", 10, 1000), Bucket("host:api.example.com", 1, 60_000)
    now_ms, answers = await buckets.take([[task, host], [task, host], [task, host]])
    assert [g for g, _ in answers] == [True, False, False]  # the host allows one a minute
    first_at, second_at = answers[1][1], answers[2][1]
    assert 59_990 <= first_at - now_ms <= 60_010 and 59_990 <= second_at - first_at <= 60_010  # successive
    # The refused claims took no token of the task's bucket: 9 of its 10 are left.
    _, after = await buckets.take([[task]] * 10)
    assert [g for g, _ in after] == [True] * 9 + [False]


async def test_buckets_refill_and_leave_nothing_behind(queue) -> None:
    buckets = TokenBuckets(queue.client, queue.prefix)
    quick, slow = Bucket("task:quick", 2, 200), Bucket("task:slow", 1, 5_000)
    _, answers = await buckets.take([[quick]] * 3)
    assert [g for g, _ in answers] == [True, True, False]
    await asyncio.sleep(0.11)  # one token back (every 100 ms), not two
    _, answers = await buckets.take([[quick]] * 2)
    assert [g for g, _ in answers] == [True, False]
    await asyncio.sleep(0.4)  # full again (the refused one's booking passed too): the hash expires with it
    assert await queue.client.exists(buckets.key) == 0
    await buckets.take([[quick], [slow]])
    await asyncio.sleep(0.25)  # quick is full again, slow still counts
    _, [(granted, _)] = await buckets.take([[slow]])  # the sweep deletes the full bucket while the hash stays busy
    assert set(await buckets.states()) == {"task:slow"}
    # slow is refused and books the instant after its next token: the hash lives until that passes.
    assert not granted and 9_000 < await queue.client.pttl(buckets.key) <= 10_000


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_no_limits_configured_no_call(make_worker, make_job) -> None:
    worker = make_worker("plain")
    _, execution = await make_job("noop")
    claim = (await worker.store.execution_claim_many([execution.id], 5.0, "plain"))[0]
    gate = worker.admission.rates
    assert gate is not None and not gate.limits.enabled and gate.buckets_of(claim) == ()
    assert await gate.sort([claim]) == ([claim], [])  # no bucket: no script call, nothing parked


async def test_two_workers_share_one_limit(store, queue, config, make_job, redis_url, redis_prefix) -> None:
    limit, count = 10, 60
    STARTS.clear()
    executions = [(await make_job("test.rated"))[1] for _ in range(count)]
    parked_before = _sample("schedulerd_executions_parked_total", task="test.rated", reason="rate_limited")
    waited_before = _sample("schedulerd_flow_wait_seconds_count", reason="rate_limited")
    second_queue = DelayQueue.connect(redis_url, redis_prefix)  # the other replica's own connection
    rates = RateLimitsConfig(tasks={"test.rated": f"{limit}/1s"})
    workers = [
        Worker(store, q, replace(config.worker, concurrency=32, batch_size=50), name, horizon_s=300, rate_config=rates)
        for q, name in ((queue, "rate-a"), (second_queue, "rate-b"))
    ]
    stop = asyncio.Event()
    running = [asyncio.create_task(w.run(stop)) for w in workers]
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            rows = [await store.execution_get(e.id) for e in executions]
            if all(r.status == ExecutionStatus.SUCCEEDED for r in rows):
                break
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*running), 15)
        await second_queue.close()

    assert [r.status for r in rows] == [ExecutionStatus.SUCCEEDED] * count
    assert {r.attempt for r in rows} == {1} and {a for _, a in STARTS} == {1}  # waiting cost no attempt
    assert all(w.stats.claimed > 0 for w in workers)  # both replicas started some
    starts = sorted(t for t, _ in STARTS)
    assert len(starts) == count
    # A bucket allows `limit` per window and a burst of `limit`: any 1 s window holds at most the
    # burst (a full bucket when it opens) plus the `limit` tokens refilled during it, 2 x limit.
    # (Start times trail their grants by a few ms; that could add one only if the delay varied by
    # more than a token's interval, 100 ms.)
    busiest = max(bisect.bisect_left(starts, t + 1.0) - i for i, t in enumerate(starts))
    span_s = starts[-1] - starts[0]
    assert busiest <= 2 * limit
    # After the burst the rest trickle in at the rate: the 50th after the burst starts >= 5 s on.
    assert span_s >= (count - limit) / limit - 0.1
    assert span_s < (count - limit) / limit + 5  # parked claims come back when their token is due
    parked = _sample("schedulerd_executions_parked_total", task="test.rated", reason="rate_limited") - parked_before
    print(f"\n{count} executions at {limit}/1s on two workers: busiest 1 s window {busiest}, first to last start "
          f"{span_s:.2f} s, {parked:.0f} parks")  # fmt: skip
    # Each claim over the burst is parked about once: refused claims book successive instants, so
    # they come back one token apart and find their token, rather than racing and parking again.
    assert count - 2 * limit <= parked <= 1.2 * (count - limit)
    assert _sample("schedulerd_flow_wait_seconds_count", reason="rate_limited") - waited_before == parked
