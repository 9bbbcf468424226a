"""Circuit breakers' shared state in Redis (one hash for the fleet, changed only by
record_outcomes-1.lua and take_probe-1.lua); core/breaker.py reads and judges it, without I/O."""

from __future__ import annotations

import redis.asyncio as redis

from schedulerd.queue.scripts import load_script


class Breakers:
    """Circuit breakers shared by every replica: one hash, {prefix}:breakers (see
    record_outcomes-1.lua); the pop returns it with each batch, so reading it costs nothing."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.key = f"{{{prefix}}}:breakers"
        self._record_outcomes = client.register_script(load_script("record_outcomes"))
        self._take_probe = client.register_script(load_script("take_probe"))

    async def record_outcomes(
        self, summary: dict[str, tuple[bool, int]], threshold: int, open_s: float
    ) -> list[tuple[str, str]]:
        """Fold (saw_success, trailing_failures) per key in; returns (key, new state) that changed."""
        args: list[str | int] = [threshold, max(1, round(open_s * 1000))]
        for key, (saw_success, trailing) in summary.items():
            args += [key, int(saw_success), trailing]
        changed = await self._record_outcomes(keys=[self.key], args=args)
        return list(zip(changed[::2], changed[1::2]))

    async def take_probe(self, key: str, probe_timeout_s: float) -> tuple[bool, int, int]:
        """(this caller holds the probe, next probe instant ms, Redis now ms)."""
        got, probe_at_ms, now_ms = await self._take_probe(keys=[self.key], args=[key, max(1, round(probe_timeout_s * 1000))])
        return bool(got), int(probe_at_ms), int(now_ms)

    async def states(self) -> dict[str, str]:
        """Every breaker that is open, half open or counting failures (absent ones are closed)."""
        return await self.client.hgetall(self.key)

    async def reset(self, key: str) -> bool:
        """Close a breaker by hand (an operator knows the target is back)."""
        return bool(await self.client.hdel(self.key, key))
