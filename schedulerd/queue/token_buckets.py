"""Rate limits' shared state in Redis: one hash of token buckets for the fleet ({prefix}:tokens),
changed only by take_tokens-1.lua; core/rate.py decides which buckets a claim needs."""

from __future__ import annotations

from collections.abc import Sequence

import redis.asyncio as redis

from schedulerd.core.rate import Bucket
from schedulerd.queue.scripts import load_script


def take_tokens_args(requests: Sequence[Sequence[Bucket]]) -> list[str | int]:
    """ARGV of take_tokens-1.lua: per request its bucket count, then key, limit, window_ms, cost 1
    per bucket.

    >>> take_tokens_args([[Bucket("task:t", 10, 1000)], [Bucket("task:t", 10, 1000), Bucket("host:h", 5, 500)]])
    [1, 'task:t', 10, 1000, 1, 2, 'task:t', 10, 1000, 1, 'host:h', 5, 500, 1]
    """
    args: list[str | int] = []
    for request in requests:
        args.append(len(request))
        for b in request:
            args += [b.key, b.limit, b.window_ms, 1]
    return args


class TokenBuckets:
    """Token buckets shared by every replica: one hash, {prefix}:tokens (same hash tag as the
    breakers, so it lives in their slot on a Redis Cluster)."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.key = f"{{{prefix}}}:tokens"
        self._take_tokens = client.register_script(load_script("take_tokens"))

    async def take(self, requests: Sequence[Sequence[Bucket]]) -> tuple[int, list[tuple[bool, int]]]:
        """(Redis now ms, per request (granted, instant ms it may start, Redis clock)): one call
        for a whole claim batch; every bucket of a request grants or none is taken from, and a
        refused one books its instant (see take_tokens-1.lua)."""
        reply = await self._take_tokens(keys=[self.key], args=take_tokens_args(requests))
        return int(reply[0]), [(bool(g), int(at)) for g, at in zip(reply[1::2], reply[2::2])]

    async def states(self) -> dict[str, str]:
        """Every bucket not full yet (field -> "tat|booked", ms), for tests and operators."""
        return {k: v for k, v in (await self.client.hgetall(self.key)).items() if not k.startswith("#")}
