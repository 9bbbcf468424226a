"""Retention: keep a partition of executions and attempts for each UTC day, create them ahead,
and drop whole days once they are older than the retention, so expiry never deletes row by row.

A day with an execution not yet final (a retry still pending, say) is kept and reported: history
is never dropped under a live execution, and the count is taken under the lock the DROP holds, so
nothing can come alive in between. Rows waiting in the default partition move into their day's
partition only while none of that day's rows is queued or running (a day backfilled before its
partition existed waits there until its work is final): a row is never moved under a worker.
Optionally each day is first written to
`<export_dir>/{executions,attempts}-YYYY-MM-DD.csv.gz`. One replica works at a time (an advisory
lock); DDL waits at most `lock_timeout_s` for its locks, then gives up until the next pass, so
it never queues the workers behind it.
"""

from __future__ import annotations

import asyncio
import gzip
import os
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import structlog

from schedulerd import metrics
from schedulerd.config import RetentionConfig
from schedulerd.loops import every
from schedulerd.store import Store

log = structlog.get_logger("schedulerd.retention")
DEBOUNCE_KEY_KEPT_S = 2 * 86400.0  # twice the longest debounce window


@dataclass(frozen=True)
class RetentionResult:
    created: list[date] = field(default_factory=list)
    dropped: list[date] = field(default_factory=list)
    kept: list[date] = field(default_factory=list)  # expired, but holding executions not yet final
    deferred: list[date] = field(default_factory=list)  # its rows in the default partition include queued or running ones
    busy: bool = False  # another replica held the maintenance lock
    idempotency_keys_pruned: int = 0  # keys past [api].idempotency_ttl_s deleted
    debounce_keys_pruned: int = 0  # debounce keys unused for DEBOUNCE_KEY_KEPT_S whose execution started


def day_bounds(day: date) -> tuple[datetime, datetime]:
    start = datetime.combine(day, time(), UTC)
    return start, start + timedelta(days=1)


def expired_days(days: list[date], today: date, retention_days: int) -> list[date]:
    """Days wholly older than the retention: the last instant of day d is before today - retention."""
    return [d for d in days if d < today - timedelta(days=retention_days)]


class Retention:
    def __init__(self, store: Store, config: RetentionConfig, idempotency_ttl_s: float | None = None) -> None:
        self.store = store
        self.config = config
        self.idempotency_ttl_s = idempotency_ttl_s  # [api].idempotency_ttl_s: older keys replay nothing; None keeps them

    async def run_once(self) -> RetentionResult:
        today = (await self.store.clock_now()).astimezone(UTC).date()
        ahead = today + timedelta(days=self.config.premake_days + 1)
        async with self.store.transaction() as tx:
            if not await tx.maintenance_lock(self.config.lock_timeout_s):
                return RetentionResult(busy=True)
            # Yesterday too (a late start after midnight), and any day whose rows wait in the default partition.
            wanted = {today + timedelta(days=n) for n in range(-1, self.config.premake_days + 1)}
            wanted.update(await tx.partition_default_days(before=ahead))
            ensured = {day: await tx.partition_ensure(day) for day in sorted(wanted)}
            existing = await tx.partition_days()
        created = [day for day, made in ensured.items() if made]
        deferred = [day for day, made in ensured.items() if made is None]
        for day in created:
            log.info("retention.partition_created", day=day.isoformat())
        for day in deferred:
            log.info("retention.partition_deferred", day=day.isoformat(), why="queued or running rows in the default partition")
        metrics.PARTITIONS.labels("created").inc(len(created))
        dropped, kept = [], []
        for day in expired_days(existing, today, self.config.days):
            if await self._drop(day):
                dropped.append(day)
            else:
                kept.append(day)
        pruned = await self.store.idempotency_prune(self.idempotency_ttl_s) if self.idempotency_ttl_s is not None else 0
        if pruned:
            log.info("retention.idempotency_keys_pruned", count=pruned)
        # A key's row names the execution its creates share; once that one started and the key went
        # unused for longer than any window (1 day), the next create makes a new one all the same.
        forgotten = await self.store.debounce_forget_old(DEBOUNCE_KEY_KEPT_S)
        if forgotten:
            log.info("retention.debounce_keys_pruned", count=forgotten)
        return RetentionResult(created, dropped, kept, deferred=deferred, idempotency_keys_pruned=pruned,
                               debounce_keys_pruned=forgotten)  # fmt: skip

    async def _drop(self, day: date) -> bool:
        """Export (when configured) then drop one expired day; False when it must be kept."""
        low, high = day_bounds(day)
        if self.config.export_dir and await self.store.execution_unfinished_between(low, high) == 0:
            await self._export(day, low, high)
        async with self.store.transaction() as tx:
            if not await tx.maintenance_lock(self.config.lock_timeout_s):
                return False
            # Locked before it is counted: a redrive or backfill committing after this waits, then
            # finds the day gone, instead of vanishing with it.
            unfinished = await tx.partition_lock(day)
            if unfinished is None:  # dropped meanwhile
                return False
            if unfinished:
                log.warning("retention.partition_kept", day=day.isoformat(), unfinished=unfinished)
                return False
            await tx.partition_drop(day)
        log.info("retention.partition_dropped", day=day.isoformat(), exported=bool(self.config.export_dir))
        metrics.PARTITIONS.labels("dropped").inc()
        return True

    async def _export(self, day: date, low: datetime, high: datetime) -> None:
        """Write the day's executions and attempts as gzipped CSV (with a header) before the drop.
        Written to a temporary name and renamed, so a file under the final name is complete."""
        directory = Path(self.config.export_dir)
        directory.mkdir(parents=True, exist_ok=True)
        exports = {"executions": self.store.partition_export_executions, "attempts": self.store.partition_export_attempts}
        for table, export in exports.items():
            final = directory / f"{table}-{day.isoformat()}.csv.gz"
            partial = final.with_suffix(".partial")
            with gzip.open(partial, "wb") as sink:

                async def write(chunk: bytes) -> None:
                    await asyncio.to_thread(sink.write, chunk)  # compression off the event loop

                await export(low, high, write)
            os.replace(partial, final)
        metrics.PARTITIONS.labels("exported").inc()

    async def run(self, stop: asyncio.Event) -> None:
        await every("retention", self.config.interval_s, self.run_once, stop)
