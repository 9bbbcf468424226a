"""Fleet-wide rate limits on real Redis and Postgres: the token-bucket script (all or nothing per
claim, successive instants for the refused, refill, nothing left behind), and two workers sharing
one limit without exceeding it, charging an attempt or failing an execution."""

from __future__ import annotations

import asyncio

from schedulerd.core.rate import Bucket
from schedulerd.queue import TokenBuckets


async def test_take_tokens_grants_the_burst_then_successive_instants(queue) -> None:
    buckets = TokenBuckets(queue.client, queue.prefix)
    a = Bucket("task:a", 4, 1000)  # a token every 250 ms, burst 4
    now_ms, answers = await buckets.take([[a]] * 7)
    assert [g for g, _ in answers] == [True] * 4 + [False] * 3
    assert [at for g, at in answers if g] == [now_ms] * 4
    waits = [at - now_ms for g, at in answers if not g]
    assert [round(w / 250) for w in waits] == [1, 2, 3] and all(0 < w - 250 * n <= 2 for n, w in enumerate(waits, 1))
    # The instants are estimates, never reservations: the next call counts from the stored state only.
    _, again = await buckets.take([[a]])
    assert again[0][0] is False and 240 <= again[0][1] - now_ms <= 260


async def test_a_claim_refused_by_one_bucket_takes_nothing_from_the_others(queue) -> None:
    buckets = TokenBuckets(queue.client, queue.prefix)
    task, host = Bucket("task:http", 10, 1000), Bucket("host:api.example.com", 1, 60_000)
    _, answers = await buckets.take([[task, host], [task, host], [task, host]])
    assert [g for g, _ in answers] == [True, False, False]  # the host allows one a minute
    first_at, second_at = answers[1][1], answers[2][1]
    assert 59_000 <= second_at - first_at <= 61_000  # successive: the host's next token, then the one after
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
    await asyncio.sleep(0.25)  # full again: an absent bucket is a full one, and the hash expires with it
    assert await queue.client.exists(buckets.key) == 0
    await buckets.take([[quick], [slow]])
    await asyncio.sleep(0.25)  # quick is full again, slow still counts
    await buckets.take([[slow]])  # the sweep deletes the full bucket while the hash stays busy
    assert set(await buckets.tats()) == {"task:slow"}
    assert 4_000 < await queue.client.pttl(buckets.key) <= 5_000
