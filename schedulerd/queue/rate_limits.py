"""The API's rate limits in Redis: requests per token (and failed authentications per address) in
fixed windows, counted once for every replica."""

from __future__ import annotations

import redis.asyncio as redis

from schedulerd.queue.errors import REDIS_ERRORS
from schedulerd.queue.scripts import load_script


class RequestCounter:
    """Requests per API token in fixed windows (count_request-1.lua), kept in Redis so every
    replica counts against one limit. Keys: {prefix}:rate:<token id>, expiring with the window."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.key_prefix = f"{{{prefix}}}:rate:"
        self._count_request = client.register_script(load_script("count_request"))

    async def count_request(self, token_id: str, window_s: float) -> tuple[int, float] | None:
        """(requests in this window including this one, seconds until it resets); None when
        Redis cannot answer: the API then serves without a limit rather than not at all."""
        try:
            count, reset_ms = await self._count_request(
                keys=[self.key_prefix + token_id], args=[max(1, round(window_s * 1000))]
            )
        except REDIS_ERRORS:
            return None
        return int(count), int(reset_ms) / 1000

    async def count_seen(self, name: str) -> int | None:
        """The count of `name`'s current window without counting a request (None: Redis cannot
        answer). The API peeks at an address's failed authentications before looking a token up."""
        try:
            value = await self.client.get(self.key_prefix + name)
        except REDIS_ERRORS:
            return None
        return int(value) if value is not None else 0

    async def count_items(self, token_id: str, window_s: float, items: int) -> tuple[int, float] | None:
        """count_request for `items` more at once (a batch counts its items); the same counter
        and window. One MULTI (INCRBY, PEXPIRE NX, PTTL): atomic like the script, no Lua needed."""
        try:
            async with self.client.pipeline(transaction=True) as pipe:
                key = self.key_prefix + token_id
                pipe.incrby(key, items)
                pipe.pexpire(key, max(1, round(window_s * 1000)), nx=True)
                pipe.pttl(key)
                count, _, reset_ms = await pipe.execute()
        except REDIS_ERRORS:
            return None
        return int(count), max(0, int(reset_ms)) / 1000

    async def delete_all(self) -> None:
        async for key in self.client.scan_iter(match=self.key_prefix + "*", count=1000):
            await self.client.delete(key)
