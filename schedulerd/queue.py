"""The Redis delay queue. Redis is an index, never the record.

One sorted set per tenant ({prefix}:queue:<tenant>; member = execution id, score = due time in ms
since the Unix epoch) plus a set of tenants, so the pop can serve tenants round robin. Keys carry
a hash tag ({prefix}) so one deployment's keys live in one Redis Cluster slot.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import redis.asyncio as redis

from schedulerd.models import Enqueue

POP_LIMIT_MAX = 5000  # pop_due-3.lua refuses more (Lua stack limits)
# Redis is down, paused or unreachable: callers fall back to Postgres and try again later.
UNREACHABLE = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError, OSError, TimeoutError)
# Every error a call to Redis may raise for a passing reason (unreachable, loading, out of memory).
REDIS_ERRORS: tuple[type[BaseException], ...] = (redis.RedisError, OSError, TimeoutError)


def _lua_dir() -> Path:
    """Installed wheels carry lua/ inside the package; a source checkout has it at the root."""
    packaged = Path(__file__).with_name("lua")
    return packaged if packaged.is_dir() else Path(__file__).resolve().parent.parent / "lua"


def load_script(name: str) -> str:
    matches = sorted(_lua_dir().glob(f"{name}-*.lua"))
    if len(matches) != 1:
        raise FileNotFoundError(f"Lua script {name}-N.lua not found in {_lua_dir()}")
    return matches[0].read_text()


@dataclass(frozen=True)
class Pop:
    execution_ids: list[str]
    next_due_ms: int | None  # earliest score left in the queue
    now_ms: int  # the Redis server's clock at the pop
    epoch: str | None  # None: Redis lost its data (flushed or restarted empty)
    breakers: dict[str, str] = field(default_factory=dict)  # breaker key -> state (core/breaker.parse); empty when all is well
    tenants: list[str] = field(default_factory=list)  # the tenant of each popped id


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def score_ms(due_at: datetime) -> int:
    """Due time in whole ms, rounded UP: the pop compares with Redis TIME rounded down, so a
    member is never popped before its due time (the claim would refuse it and drop it)."""
    return -(-((due_at - _EPOCH) // timedelta(microseconds=1)) // 1000)


class DelayQueue:
    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.queue_key_prefix = f"{{{prefix}}}:queue:"  # + tenant
        self.tenants_key = f"{{{prefix}}}:tenants"
        # Renamed when the queue layout changed (one queue -> one per tenant): a replica of the
        # new version finds no marker, so the sweeper reconciles every queued execution into it.
        self.epoch_key = f"{{{prefix}}}:epoch:2"
        self.breakers_key = f"{{{prefix}}}:breakers"
        self._pop_due = client.register_script(load_script("pop_due"))
        self._shared: list[tuple[list[Enqueue], asyncio.Future[None]]] = []  # add_shared calls of this loop turn
        self._sending: set[asyncio.Task[None]] = set()

    @classmethod
    def connect(cls, redis_url: str, prefix: str, timeout_s: float = 1.0) -> DelayQueue:
        client = redis.from_url(redis_url, decode_responses=True, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
        return cls(client, prefix)

    async def close(self) -> None:
        await self.client.aclose()

    def queue_key(self, tenant: str) -> str:
        return self.queue_key_prefix + tenant

    async def add(self, entries: Iterable[Enqueue], *, only_new: bool) -> None:
        """ZADD into each tenant's queue in chunks. only_new (NX) keeps an existing score; otherwise
        the score is replaced (a retry moves its execution to the new due time). The tenant's score
        in the tenants set only moves earlier (LT): it may be early, never late, and the pop fixes it.
        The queue is written before the tenants set, so a pop in between finds the entry anyway."""
        by_tenant: dict[str, dict[str, int]] = {}
        for entry in entries:
            by_tenant.setdefault(entry.tenant, {})[str(entry.execution_id)] = score_ms(entry.due_at)
        if not by_tenant:
            return
        async with self.client.pipeline(transaction=False) as pipe:
            for tenant, scores in by_tenant.items():
                items = list(scores.items())
                for i in range(0, len(items), 5000):
                    pipe.zadd(self.queue_key(tenant), dict(items[i : i + 5000]), nx=only_new)
                pipe.zadd(self.tenants_key, {tenant: min(scores.values())}, lt=True)
            await pipe.execute()

    async def add_shared(self, entries: list[Enqueue]) -> None:
        """add(only_new=True), sharing one pipeline with the other add_shared calls made in the
        same turn of the event loop (many single creates committing at once): one round trip
        and one pipeline for all of them instead of one each. Raises what that pipeline raised."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._shared.append((entries, done))
        if len(self._shared) == 1:
            loop.call_soon(self._send_shared)
        await done

    def _send_shared(self) -> None:
        waiting, self._shared = self._shared, []

        async def send() -> None:
            try:
                await self.add([e for entries, _ in waiting for e in entries], only_new=True)
            except Exception as exc:
                for _, done in waiting:
                    if not done.done():
                        done.set_exception(exc)
            else:
                for _, done in waiting:
                    if not done.done():
                        done.set_result(None)

        task = asyncio.ensure_future(send())
        self._sending.add(task)  # a reference until it ends, or the loop may collect it mid-flight
        task.add_done_callback(self._sending.discard)

    async def pop_due(self, limit: int) -> Pop:
        ids, next_due, now_ms, epoch, breakers, tenants = await self._pop_due(
            keys=[self.tenants_key, self.epoch_key, self.breakers_key], args=[min(limit, POP_LIMIT_MAX), self.queue_key_prefix]
        )
        pairs = dict(zip(breakers[::2], breakers[1::2])) if breakers else {}
        return Pop(ids, int(float(next_due)) if next_due else None, int(now_ms), epoch or None, pairs, tenants)

    async def tenants(self) -> list[str]:
        """Tenants with a non-empty queue (and perhaps a few just emptied)."""
        return await self.client.zrange(self.tenants_key, 0, -1)

    async def missing(self, execution_ids: Sequence[str], tenants: Sequence[str] | None = None) -> list[str]:
        """Which of these ids have no entry in their tenant's queue (`tenants`: one per id). Without
        tenants every tenant's queue is looked in (for tests and tools; the sweeper names them)."""
        if not execution_ids:
            return []
        ids = list(execution_ids)
        async with self.client.pipeline(transaction=False) as pipe:
            if tenants is not None:
                by_tenant: dict[str, list[str]] = {}
                for execution_id, tenant in zip(ids, tenants, strict=True):
                    by_tenant.setdefault(tenant, []).append(execution_id)
                for tenant, members in by_tenant.items():
                    pipe.zmscore(self.queue_key(tenant), members)
                found = {m for members, scores in zip(by_tenant.values(), await pipe.execute())
                         for m, score in zip(members, scores) if score is not None}  # fmt: skip
            else:
                known = await self.tenants()
                for tenant in known:
                    pipe.zmscore(self.queue_key(tenant), ids)
                found = {m for scores in await pipe.execute() for m, score in zip(ids, scores) if score is not None}
        return [i for i in ids if i not in found]

    async def ensure_epoch(self) -> str:
        """Set the epoch marker if missing; returns its value. A changed value means Redis lost data."""
        await self.client.set(self.epoch_key, uuid.uuid4().hex, nx=True)
        return await self.client.get(self.epoch_key) or ""

    async def depth(self) -> int:
        return (await self.depth_and_earliest())[0]

    async def depth_and_earliest(self) -> tuple[int, int | None]:
        """Members in every tenant's queue, and the earliest due time (ms) among them. One
        pipeline of two commands per tenant with queued work (the observer calls it every few s)."""
        tenants = await self.tenants()
        if not tenants:
            return 0, None
        async with self.client.pipeline(transaction=False) as pipe:
            for tenant in tenants:
                pipe.zcard(self.queue_key(tenant))
                pipe.zrange(self.queue_key(tenant), 0, 0, withscores=True)
            answers = await pipe.execute()
        heads = [int(head[0][1]) for head in answers[1::2] if head]
        return sum(answers[0::2]), min(heads) if heads else None

    async def delete_all(self) -> None:
        keys = [self.queue_key(t) for t in await self.tenants()]
        async for key in self.client.scan_iter(match=self.queue_key_prefix + "*", count=1000):
            keys.append(key)
        # {prefix}:queue and {prefix}:epoch: the single queue and marker of before the per-tenant layout.
        legacy = [f"{{{self.prefix}}}:queue", f"{{{self.prefix}}}:epoch"]
        await self.client.delete(*keys, *legacy, self.tenants_key, self.epoch_key, self.breakers_key)
