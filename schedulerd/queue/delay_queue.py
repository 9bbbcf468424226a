"""The Redis delay queue. Redis is an index, never the record.

The queue is split into `shards` hash-tagged shards. Each shard ({prefix:s}, or {prefix} when
there is one) holds a sorted set per tenant and priority band ({tag}:queue:<band>, the band
named by core/priority.py: the tenant's name at priority 5; member = execution id, score = due
time in ms since the Unix epoch), a set of bands so the pop can serve tenants round robin and
each tenant's due bands highest first, and an epoch marker; an execution's shard is crc32 of its id, so it never moves between
attempts. Every script touches one shard's keys and declares them all, so on a Redis Cluster the
shards spread over the nodes. Breakers and rate counters keep the {prefix} slot of their own.
Which shard to pop, and in what order, is decided here: callers see one queue.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import redis.asyncio as redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError

from schedulerd.config import RedisConfig
from schedulerd.core.priority import DEFAULT as DEFAULT_PRIORITY
from schedulerd.core.priority import band, bands, of_band
from schedulerd.models import Enqueue
from schedulerd.queue.scripts import Script, load_script

POP_LIMIT_MAX = 5000  # pop_due-4.lua refuses more (Lua stack limits)
LINE_MIN, LINE_MAX = 16, 1000  # tenants declared per shard pop (pop_due-4.lua refuses more than 1000)
POP_PASSES = 3  # round trips one pop_due may take: the first, then shards with undeclared due tenants or more due
SEEN_S = 30.0  # a tenant popped from a shard this recently is declared in its pops even when not at the head
Client = redis.Redis | RedisCluster


def connect_redis(url: str, timeout_s: float = 1.0, *, cluster: bool = False) -> Client:
    """A client for one Redis, or (cluster) for the Redis Cluster `url` names a node of."""
    options: dict[str, Any] = {"decode_responses": True, "socket_timeout": timeout_s, "socket_connect_timeout": timeout_s}
    if cluster:
        return RedisCluster.from_url(url, **options)
    return redis.from_url(url, **options)


def shard_of(execution_id: uuid.UUID | str, shards: int) -> int:
    """The shard an execution's queue entry lives in: crc32 of its canonical id text, so every
    process (and every language) agrees, and an execution keeps its shard across attempts.

    >>> shard_of("018f0000-0000-8000-8000-000000000001", 32)
    10
    """
    if shards == 1:
        return 0
    return zlib.crc32(str(execution_id).encode()) % shards


def _split(room: int, weights: list[float]) -> list[int]:
    """`room` pop slots over shards: 1 each, the rest in proportion to what each is expected to
    have due (a shard that gave all it was asked gets more next time), so a backlog in a few
    shards fills the batch without a second round trip. len(weights) <= room.

    >>> _split(10, [1.0, 1.0]), _split(10, [1.0, 7.0]), _split(3, [5.0, 1.0, 1.0])
    ([5, 5], [2, 8], [1, 1, 1])
    """
    spare = room - len(weights)
    total = sum(weights)
    shares = [1 + int(spare * w / total) for w in weights]
    order = sorted(range(len(weights)), key=lambda i: -weights[i])
    for i in itertools.islice(itertools.cycle(order), room - sum(shares)):
        shares[i] += 1
    return shares


def _of_bands(owners: list[str]) -> tuple[list[str], list[int]]:
    """The tenant and priority of each popped id from its band's name: parsed once per band
    (a pop holds a few), and not at all when every band is a tenant's priority-5 one.

    >>> _of_bands(["a", "a#9", "b"])
    (['a', 'a', 'b'], [5, 9, 5])
    """
    named = {b: of_band(b) for b in dict.fromkeys(owners)}
    if all(b == tenant for b, (tenant, _) in named.items()):
        return owners, [DEFAULT_PRIORITY] * len(owners)
    return [named[b][0] for b in owners], [named[b][1] for b in owners]


def shard_tags(prefix: str, shards: int) -> list[str]:
    """The hash tag of each shard: {prefix} alone when there is one (the keys of versions that had
    no shards), else {prefix:0} .. {prefix:N-1}."""
    if shards == 1:
        return [f"{{{prefix}}}"]
    return [f"{{{prefix}:{s}}}" for s in range(shards)]


@dataclass
class _Shard:
    """One shard's keys and what this process last learned of it."""

    tag: str
    tenants_key: str
    epoch_key: str
    queue_key_prefix: str  # + band (core/priority.py: the tenant's name at priority 5)
    line: list[str] = field(default_factory=list)  # bands at the head of its round at the last pop: declared next
    next_due_ms: int | None = None  # earliest tenant score at the last pop (None: empty, or never asked)
    asked_at: float = 0.0  # monotonic time of the last pop of it
    served_at: float = 0.0  # monotonic time of the last pop that returned something
    epoch: str | None = None  # its marker at the last pop
    want: float = 0.0  # how many it is expected to have due at the next pop (what it gave, or more when it gave all asked)
    # Bands seen in it lately (monotonic time): declared too, so a band whose queue emptied and
    # filled again between two pops is served without a second round trip.
    seen: dict[str, float] = field(default_factory=dict)

    def declared(self, line_max: int, now: float) -> list[str]:
        """The bands to declare: the head of the round first, then others seen within SEEN_S."""
        names = dict.fromkeys(self.line)
        for tenant, at in list(self.seen.items()):
            if now - at > SEEN_S:
                del self.seen[tenant]
            elif len(names) < line_max:
                names[tenant] = None
        return list(names)[:line_max]

    @classmethod
    def of(cls, tag: str) -> _Shard:
        # The epoch key was renamed when the queue became one per tenant: a replica of that layout
        # found no marker and reconciled every queued execution into it. It stays ":epoch:2".
        return cls(tag, f"{tag}:tenants", f"{tag}:epoch:2", f"{tag}:queue:")


@dataclass(frozen=True)
class Pop:
    execution_ids: list[str]
    next_due_ms: int | None  # earliest score left in the queue (any shard)
    now_ms: int  # the Redis server's clock at the pop
    epoch: str | None  # None: Redis lost its data (flushed or restarted empty; one shard is enough)
    breakers: dict[str, str] = field(default_factory=dict)  # breaker key -> state (core/breaker.parse); empty when all is well
    tenants: list[str] = field(default_factory=list)  # the tenant of each popped id
    priorities: list[int] = field(default_factory=list)  # the priority (band) of each popped id

    @property
    def at(self) -> datetime:
        """now_ms as an aware UTC instant, exactly: the claim judges the popped ids due at it."""
        return _EPOCH + timedelta(milliseconds=self.now_ms)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def score_ms(due_at: datetime) -> int:
    """Due time in whole ms, rounded UP: the pop compares with Redis TIME rounded down, so a
    member is never popped before its due time, and the claim, judging at the pop's instant,
    finds every popped row due."""
    since = due_at - _EPOCH  # its fields, not `// timedelta(microseconds=1)`: a third of the cost, per entry
    return -(-((since.days * 86_400 + since.seconds) * 1_000_000 + since.microseconds) // 1000)


class DelayQueue:
    def __init__(self, client: Client, prefix: str, *, shards: int = 1, idle_probe_s: float = 0.05) -> None:
        if not 1 <= shards <= 1024:
            raise ValueError(f"shards must be between 1 and 1024, got {shards}")
        self.client = client
        self.prefix = prefix
        self.shards = [_Shard.of(tag) for tag in shard_tags(prefix, shards)]
        # A shard whose earliest entry is known to be in the future is still asked this often, for
        # work another process added meanwhile (with one shard it is asked at every pop, as ever).
        self.idle_probe_s = idle_probe_s
        self.breakers_key = f"{{{prefix}}}:breakers"
        # Shard counts in use ({prefix}: field = count, value = ms last seen by a sweeper): entries
        # in a layout no replica uses any more are moved to their new shard (drain_retired).
        self.layouts_key = f"{{{prefix}}}:layouts"
        self._add_script = Script("add_entries")
        self._remove_moved_script = Script("remove_moved")
        self._pop_source = load_script("pop_due")
        self._pop_sha = ""
        self._breakers: dict[str, str] = {}
        self._redis_offset_ms = 0.0  # Redis TIME minus this host's clock, from the last pop
        self._shared: list[tuple[list[Enqueue], asyncio.Future[None]]] = []  # add_shared calls of this loop turn
        self._sending: set[asyncio.Task[None]] = set()

    @classmethod
    def connect(
        cls, redis_url: str, prefix: str, timeout_s: float = 1.0, *, shards: int = 1, cluster: bool = False
    ) -> DelayQueue:
        return cls(connect_redis(redis_url, timeout_s, cluster=cluster), prefix, shards=shards)

    @classmethod
    def from_config(cls, redis_url: str, config: RedisConfig, *, timeout_s: float | None = None) -> DelayQueue:
        """The queue [redis] describes (prefix, shards, cluster) at redis_url."""
        return cls.connect(redis_url, config.prefix, config.timeout_s if timeout_s is None else timeout_s,
                           shards=config.shards, cluster=config.cluster)  # fmt: skip

    async def close(self) -> None:
        await self.client.aclose()

    # --- keys ----------------------------------------------------------------------------------

    @property
    def shard_count(self) -> int:
        return len(self.shards)

    def shard(self, execution_id: uuid.UUID | str) -> _Shard:
        return self.shards[shard_of(execution_id, len(self.shards))]

    def queue_key(self, tenant: str, execution_id: uuid.UUID | str | None = None, priority: int = DEFAULT_PRIORITY) -> str:
        """The key of `tenant`'s queue of `priority` in the shard of `execution_id` (the only
        shard when None)."""
        shard = self.shards[0] if execution_id is None else self.shard(execution_id)
        return shard.queue_key_prefix + band(tenant, priority)

    @property
    def tenants_key(self) -> str:
        return self.shards[0].tenants_key  # tests and tools with one shard

    @property
    def epoch_key(self) -> str:
        return self.shards[0].epoch_key

    # --- add -------------------------------------------------------------------------------------

    async def add(self, entries: Iterable[Enqueue], *, only_new: bool) -> None:
        """Add to each entry's band (its tenant's queue of its priority) of its shard, in chunks,
        one pipeline (one round trip). only_new (NX) keeps an existing score; otherwise the score is replaced (a retry
        moves its execution to the new due time). Each chunk is one add_entries-2.lua call, which
        indexes the tenant in its shard's tenants set in the same step (its score only moves
        earlier: it may be early, never late, and the pop fixes it), so no failure between two
        writes can leave an entry that no pop serves."""
        count = len(self.shards)
        by_key: dict[tuple[int, str], dict[str, int]] = {}
        for entry in entries:
            member = str(entry.execution_id)
            shard = 0 if count == 1 else zlib.crc32(member.encode()) % count
            # core/priority.band, inlined: this runs per entry of every create.
            name = entry.tenant if entry.priority == DEFAULT_PRIORITY else band(entry.tenant, entry.priority)
            by_key.setdefault((shard, name), {})[member] = score_ms(entry.due_at)
        await self._add_keyed(by_key, nx=only_new)

    async def _add_keyed(self, by_key: dict[tuple[int, str], dict[str, int]], *, nx: bool) -> None:
        """add_entries-2.lua for each (shard, band) -> {member: score ms}, 5,000 members a call."""
        calls: list[tuple[list[str], list[Any]]] = []
        for (shard, tenant), scores in by_key.items():
            keys = [self.shards[shard].tenants_key, self.shards[shard].queue_key_prefix + tenant]
            items = list(scores.items())
            for i in range(0, len(items), 5000):
                pairs = [v for member, score in items[i : i + 5000] for v in (score, member)]
                calls.append((keys, [tenant, "nx" if nx else "set", *pairs]))
        if calls:
            await self._eval_many(self._add_script, calls)

    async def _eval_many(self, script: Script, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
        """One pipelined EVALSHA per (keys, args); a server that does not know the script (a
        restart, a promoted replica) is sent it and the pipeline again (each script is
        idempotent). Raises the first error otherwise."""
        for attempt in range(2):
            async with self.client.pipeline(transaction=False) as pipe:
                for keys, args in calls:
                    # execute_command: redis-py refuses pipe.evalsha on a cluster, not the command itself.
                    pipe.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
                answers = await pipe.execute(raise_on_error=False)
            failed = [a for a in answers if isinstance(a, Exception)]
            if not failed:
                return answers
            if attempt == 0 and all(isinstance(a, NoScriptError) for a in failed):
                await self.client.script_load(script.source)
                continue
            raise failed[0]
        raise AssertionError("unreachable")

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

    # --- pop -------------------------------------------------------------------------------------

    async def pop_due(self, limit: int) -> Pop:
        """Pop up to `limit` due ids from the shards, least recently served first.

        One round trip in the common case: one script call per shard worth asking (its earliest
        entry is due, or it was not asked for idle_probe_s), pipelined, the limit split among them
        by what each had due last time, plus the breakers hash. A second (and third) round trip
        only when the batch is not full and a shard either had due tenants this process had not
        declared (a tenant new at the head of its round) or still has due work."""
        limit = max(1, min(limit, POP_LIMIT_MAX))
        now = time.monotonic()
        est_ms = time.time() * 1000 + self._redis_offset_ms
        single = len(self.shards) == 1
        asked = [
            s for s in self.shards
            if single or s.next_due_ms is None or s.next_due_ms <= est_ms or now - s.asked_at >= self.idle_probe_s
        ]  # fmt: skip
        asked.sort(key=lambda s: s.served_at)  # least recently served first: none starves
        ids: list[str] = []
        owners: list[str] = []
        now_ms: int | None = None
        read_breakers = True
        for _ in range(POP_PASSES):
            room = limit - len(ids)
            if not asked or room <= 0:
                break
            asked = asked[:room]
            shares = _split(room, [max(1.0, s.want) for s in asked])
            answers = await self._pop_shards(asked, shares, read_breakers)
            read_breakers = False
            again: list[_Shard] = []
            for shard, share_n, (got, got_owners, next_due, shard_now, epoch, line, skipped) in zip(asked, shares, answers):
                ids += got
                owners += got_owners
                shard.line = line
                for tenant in dict.fromkeys(got_owners):
                    shard.seen[tenant] = time.monotonic()
                shard.next_due_ms = int(float(next_due)) if next_due else None
                # Due work left (a served tenant with more, or a due tenant not reached): its
                # earliest tenant score is at or before the script's now.
                more = shard.next_due_ms is not None and shard.next_due_ms <= int(shard_now)
                shard.want = max(2.0 * share_n, shard.want) if more else float(len(got))
                shard.epoch = epoch or None
                shard.asked_at = time.monotonic()
                now_ms = max(now_ms or 0, int(shard_now))
                if got:
                    shard.served_at = shard.asked_at
                if skipped or more:
                    again.append(shard)
            asked = again
        if now_ms is not None:
            self._redis_offset_ms = now_ms - time.time() * 1000
        else:
            now_ms = int(est_ms)
        dues = [s.next_due_ms for s in self.shards if s.next_due_ms is not None]
        tenants, priorities = _of_bands(owners)
        return Pop(ids, min(dues) if dues else None, now_ms, self._epoch_token(), dict(self._breakers), tenants, priorities)

    async def _pop_shards(self, shards: list[_Shard], shares: list[int], read_breakers: bool) -> list[list[Any]]:
        """One pipelined EVALSHA per shard (and HGETALL of the breakers); loads the script when a
        server does not know it (a restart, a promoted replica) and sends the pipeline again."""
        if not self._pop_sha:
            self._pop_sha = await self._load_pop()
        for attempt in range(2):
            async with self.client.pipeline(transaction=False) as pipe:
                now = time.monotonic()
                for shard, share in zip(shards, shares):
                    line_max = min(LINE_MAX, max(LINE_MIN, share))
                    line = shard.declared(line_max, now)
                    keys = [shard.tenants_key, shard.epoch_key, *(shard.queue_key_prefix + t for t in line)]
                    # execute_command: redis-py refuses pipe.evalsha on a cluster, not the command itself.
                    pipe.execute_command("EVALSHA", self._pop_sha, len(keys), *keys, share, line_max, *line)
                if read_breakers:
                    pipe.hgetall(self.breakers_key)
                answers = await pipe.execute(raise_on_error=False)
            failed = [a for a in answers if isinstance(a, Exception)]
            if not failed:
                break
            if attempt == 0 and all(isinstance(a, NoScriptError) for a in failed):
                self._pop_sha = await self._load_pop()
                continue
            raise failed[0]
        if read_breakers:
            self._breakers = answers.pop()
        return answers

    async def _load_pop(self) -> str:
        """SCRIPT LOAD (on a cluster, redis-py sends it to every master); returns its SHA1."""
        sha = await self.client.script_load(self._pop_source)
        return sha if isinstance(sha, str) else next(iter(sha.values()))

    def _epoch_token(self) -> str | None:
        """One value standing for every shard's marker: None when any is missing, and different
        when any changed, so the worker's check reads as it did with one marker."""
        epochs = [s.epoch for s in self.shards]
        return None if any(e is None for e in epochs) else "|".join(epochs)  # type: ignore[arg-type]

    # --- look -----------------------------------------------------------------------------------

    async def _shard_tenants(self) -> list[list[str]]:
        """Each shard's tenants with a non-empty queue (and perhaps a few just emptied)."""
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in self.shards:
                pipe.zrange(shard.tenants_key, 0, -1)
            return await pipe.execute()

    async def tenants(self) -> list[str]:
        """Tenants with a non-empty queue in any shard (and perhaps a few just emptied)."""
        seen: dict[str, None] = {}
        for names in await self._shard_tenants():
            seen.update(dict.fromkeys(of_band(name)[0] for name in names))
        return list(seen)

    async def missing(
        self, execution_ids: Sequence[str], tenants: Sequence[str] | None = None, priorities: Sequence[int] | None = None
    ) -> list[str]:
        """Which of these ids no pop would serve: no entry in their band of their shard (`tenants`
        and `priorities`: one per id; priority 5 when not given), or an entry whose band is
        missing from that shard's tenants set, or indexed there later than the entry and still in
        the future (more than a second past this host's estimate of Redis's clock). One pipelined
        round trip. Re-adding them (add) repairs both. Without tenants every band of their shard
        is looked in (tests, tools)."""
        if not execution_ids:
            return []
        ids = list(execution_ids)
        if tenants is None:
            by_shard_tenants = await self._shard_tenants()
            wanted = [(i, t) for i in ids for t in by_shard_tenants[shard_of(i, len(self.shards))]]
        elif priorities is None:
            wanted = list(zip(ids, tenants, strict=True))
        else:
            wanted = [(i, band(t, p)) for i, t, p in zip(ids, tenants, priorities, strict=True)]
        by_key: dict[tuple[int, str], list[str]] = {}
        for execution_id, tenant in wanted:
            by_key.setdefault((shard_of(execution_id, len(self.shards)), tenant), []).append(execution_id)
        indexed: dict[int, list[str]] = {}
        for shard, tenant in by_key:
            indexed.setdefault(shard, []).append(tenant)
        async with self.client.pipeline(transaction=False) as pipe:
            for (shard, tenant), members in by_key.items():
                pipe.zmscore(self.shards[shard].queue_key_prefix + tenant, members)
            for shard, names in indexed.items():
                pipe.zmscore(self.shards[shard].tenants_key, names)
            answers = await pipe.execute() if by_key else []
        tenant_scores = {
            (shard, tenant): score
            for (shard, names), scores in zip(indexed.items(), answers[len(by_key) :])
            for tenant, score in zip(names, scores)
        }  # fmt: skip
        future_ms = time.time() * 1000 + self._redis_offset_ms + 1000
        found: set[str] = set()
        for key, members, scores in zip(by_key, by_key.values(), answers):
            indexed_at = tenant_scores[key]
            for member, score in zip(members, scores):
                if score is not None and indexed_at is not None and (indexed_at <= score or indexed_at <= future_ms):
                    found.add(member)
        return [i for i in ids if i not in found]

    async def ensure_epoch(self) -> str:
        """Set every shard's epoch marker if missing and note this layout as in use; returns one
        value for all markers: a changed value means Redis lost (some of) its data."""
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in self.shards:
                pipe.set(shard.epoch_key, uuid.uuid4().hex, nx=True)
            for shard in self.shards:
                pipe.get(shard.epoch_key)
            pipe.hset(self.layouts_key, str(len(self.shards)), int(time.time() * 1000))
            answers = await pipe.execute()
        return "|".join(v or "" for v in answers[len(self.shards) : 2 * len(self.shards)])

    async def depth(self) -> int:
        return (await self.depth_and_earliest())[0]

    async def tenant_depth(self, tenant: str) -> int:
        """Members of one tenant's queue (every band), summed over the shards: one pipelined round
        trip that names no other tenant's key (a tenant's overview)."""
        async with self.client.pipeline(transaction=False) as pipe:
            for shard in self.shards:
                for name in bands(tenant):
                    pipe.zcard(shard.queue_key_prefix + name)
            return sum(await pipe.execute())

    async def depth_and_earliest(self) -> tuple[int, int | None]:
        """Members in every tenant's queue of every shard, and the earliest due time (ms) among
        them: two pipelined round trips (the observer calls it every few seconds)."""
        keys = [shard.queue_key_prefix + t for shard, names in zip(self.shards, await self._shard_tenants()) for t in names]
        if not keys:
            return 0, None
        async with self.client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.zcard(key)
                pipe.zrange(key, 0, 0, withscores=True)
            answers = await pipe.execute()
        heads = [int(head[0][1]) for head in answers[1::2] if head]
        return sum(answers[0::2]), min(heads) if heads else None

    # --- changing the shard count -------------------------------------------------------------

    async def drain_retired(self, *, retire_after_s: float = 60.0) -> int:
        """Move the entries of shards that only another shard count uses (a change of
        [redis].shards) into their shard under this count, keeping their scores; returns how
        many moved. A layout no sweeper has reported for retire_after_s, whose shards are empty,
        is forgotten. Entries a replica of the old count adds after this are moved next sweep;
        the sweeper's overdue check covers whatever a crash leaves between."""
        layouts = await self.client.hgetall(self.layouts_key)
        mine = {s.tag for s in self.shards}
        now_ms = time.time() * 1000
        moved = 0
        for count_text, seen_ms in layouts.items():
            count = int(count_text)
            if count == len(self.shards):
                continue
            retired = [_Shard.of(tag) for tag in shard_tags(self.prefix, count) if tag not in mine]
            left = 0
            for shard in retired:
                moved_now, left_now = await self._drain_shard(shard)
                moved, left = moved + moved_now, left + left_now
            if not left and now_ms - float(seen_ms) > retire_after_s * 1000:
                # No sweeper of that count is left: its markers go too (kept until now, so a
                # replica of the old count still running did not read their absence as data loss).
                for shard in retired:
                    await self.client.delete(shard.epoch_key)
                await self.client.hdel(self.layouts_key, count_text)
        return moved

    async def _drain_shard(self, shard: _Shard) -> tuple[int, int]:
        """(entries moved out of this retired shard, entries still there).

        Per tenant: read a chunk, add it to the new homes, then remove what was read only where
        its score is unchanged, and drop the tenant from the shard's index only once its queue is
        empty, both in one script (remove_moved-2.lua). Nothing is removed before it is copied,
        so a failure anywhere leaves entries in place, not lost; an entry popped meanwhile by an
        old replica is added back only as a harmless duplicate; one an old replica moved meanwhile
        stays, and the next chunk copies its new score over the one written from the old."""
        moved = 0
        for tenant in await self.client.zrange(shard.tenants_key, 0, -1):
            key = shard.queue_key_prefix + tenant
            changed: set[str] = set()
            while True:
                chunk = await self.client.zrange(key, 0, 4999, withscores=True)
                if chunk:
                    await self._add_scored([(member, tenant, int(score)) for member, score in chunk], replace=changed)
                pairs = [v for member, score in chunk for v in (member, int(score))]
                ((removed, still),) = await self._eval_many(
                    self._remove_moved_script, [([shard.tenants_key, key], [tenant, *pairs])]
                )
                moved += int(removed)
                changed = set(still)
                if not chunk:
                    break
        return moved, await self.client.zcard(shard.tenants_key)

    async def _add_scored(self, entries: list[tuple[str, str, int]], *, replace: set[str]) -> None:
        """Add (member, tenant, score ms) into their shards: an entry already there keeps its score
        (NX), but for members in `replace` (moved in the old shard since the last copy)."""
        by_key: dict[bool, dict[tuple[int, str], dict[str, int]]] = {True: {}, False: {}}
        for member, tenant, score in entries:
            by_key[member in replace].setdefault((shard_of(member, len(self.shards)), tenant), {})[member] = score
        await self._add_keyed(by_key[False], nx=True)
        await self._add_keyed(by_key[True], nx=False)

    async def delete_all(self) -> None:
        """Every key of this prefix's queues, whatever shard count wrote them (tests and tools)."""
        keys: set[str] = set()
        for pattern in (f"{{{self.prefix}}}:queue:*", f"{{{self.prefix}:*"):
            async for key in self.client.scan_iter(match=pattern, count=1000):
                keys.add(key)
        for shard in self.shards:
            keys |= {shard.tenants_key, shard.epoch_key}
        # {prefix}:queue and {prefix}:epoch: the single queue and marker of before the per-tenant layout.
        keys |= {f"{{{self.prefix}}}:queue", f"{{{self.prefix}}}:epoch", self.breakers_key, self.layouts_key}
        for key in keys:  # one by one: on a cluster they live in many slots
            await self.client.delete(key)
