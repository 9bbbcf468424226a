"""Sweeper: hand back executions whose lease expired, and put back queue entries Redis lost.

Reclaims are one guarded UPDATE (status, lease expiry and the fence read in the same
statement), so a completion that lands first is never undone. Redis losing its data is seen at
once through the epoch marker (the worker's pop returns it) and answered with a full reconcile.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

import structlog

from schedulerd import flow_claims, metrics, overlap_claims
from schedulerd.config import ConcurrencyConfig, SweeperConfig
from schedulerd.core import flow
from schedulerd.loops import every
from schedulerd.models import Enqueue, ExecutionStatus
from schedulerd.queue import UNREACHABLE, DelayQueue
from schedulerd.store import Store

log = structlog.get_logger("schedulerd.sweeper")

_BEFORE_ALL = (datetime(1970, 1, 1, tzinfo=UTC), UUID(int=0))
# The walk for lapsed leases reads at most this many batches of the active lane a sweep. Running
# executions hide among queued ones (no index of their own), and a backlog is all due: a sweep
# reads what the lane holds up to this bound (a running fleet's in-flight rows at once), and a
# backlog larger than it in turns, one window a sweep, instead of all of it at every sweep.
LEASE_WINDOW_BATCHES = 20


@dataclass(frozen=True)
class SweepResult:
    reclaimed: int = 0  # expired leases handed back to the queue
    failed: int = 0  # expired leases whose attempts were spent
    re_enqueued: int = 0  # queued executions found missing from Redis
    reconciled: int = 0  # entries re-added by a full reconcile after Redis lost its data
    released: int = 0  # waiting occurrences (overlap buffer_one, cancel_other) whose job is free again


class Sweeper:
    def __init__(
        self, store: Store, queue: DelayQueue, config: SweeperConfig, *, down_after_s: float = 15.0,
        concurrency: ConcurrencyConfig | None = None, late_grace_s: float = 60.0,
    ) -> None:  # fmt: skip
        self.store = store
        self.queue = queue
        self.config = config
        self.concurrency = concurrency or ConcurrencyConfig()
        self.caps = self.concurrency.caps  # the caps in force: tenant_quotas.QuotaRefresh keeps them current
        self.late_grace_s = late_grace_s  # a first attempt released past this is late (reason concurrency_limit)
        self.down_after_s = down_after_s  # a replica silent this long is not alive ([late].down_after_s)
        self._epoch: str | None = None
        self._overdue_after = _BEFORE_ALL  # where the overdue repair's walk resumes: (due_at, id)
        self._lease_after = _BEFORE_ALL  # where the walk for lapsed leases resumes: (due_at, id)
        self._reconcile_requested = asyncio.Event()

    def request_reconcile(self) -> None:
        """Called when a pop finds the epoch marker missing, or Redis answering again after an
        outage: rebuild the queue now, not at the next tick."""
        self._epoch = None
        self._reconcile_requested.set()

    async def run_once(self) -> SweepResult:
        # Leases first: they live in Postgres alone, so expired ones come back even while Redis
        # is unreachable (workers then claim them straight from Postgres).
        reclaimed = failed = 0
        requeue: list[Enqueue] = []
        window = await self.store.execution_lease_window(self._lease_after, self.config.batch_size * LEASE_WINDOW_BATCHES)
        self._lease_after = window.resume_after or _BEFORE_ALL
        while True:
            handed_back = await self.store.execution_reclaim_expired(
                self.config.batch_size, window.lapsed, live_holder_grace_s=self.config.live_holder_grace_s,
                down_after_s=self.down_after_s,
            )  # fmt: skip
            for row in handed_back:
                log.warning(
                    "sweeper.lease_expired", execution_id=str(row["id"]), job_id=str(row["job_id"]),
                    tenant=row["tenant"], attempt=row["attempt"], fence=row["fence"], worker=row["worker"],
                    now=row["status"],
                )  # fmt: skip
                if row["status"] == ExecutionStatus.QUEUED:
                    requeue.append(Enqueue(row["id"], row["due_at"], row["tenant"], row["priority"]))
                elif row["status"] == ExecutionStatus.FAILED:
                    failed += 1  # (the rest: cancelled, an overlap policy had asked them to stop)
            if len(handed_back) < self.config.batch_size:
                break
        reclaimed = len(requeue)
        # Waiting occurrences of guarded jobs whose running execution stopped without releasing
        # them: reclaimed just now, parked, handed back, or its worker died after the finish.
        released = await overlap_claims.release(self.store, await self.store.job_overlap_stalled(self.config.batch_size))
        # Executions waiting for a concurrency slot whose holder stopped without releasing one:
        # reclaimed just now, or its worker died between the finish and the release.
        released += await flow_claims.release_stalled(
            self.store, self.caps, batch=self.config.batch_size, late_after_s=self.late_grace_s
        )  # fmt: skip
        requeue += released
        await self._flow_gauges()
        metrics.LEASE_RECLAIMS.labels("requeued").inc(reclaimed)
        metrics.LEASE_RECLAIMS.labels("failed").inc(failed)
        try:
            reconciled, re_enqueued = await self._repair_queue(requeue)
        except UNREACHABLE as exc:
            log.warning("sweeper.redis_unreachable", error=f"{type(exc).__name__}: {exc}")
            reconciled = re_enqueued = 0
        result = SweepResult(reclaimed, failed, re_enqueued, reconciled, len(released))
        metrics.QUEUE_REPAIRS.labels("missing").inc(re_enqueued)
        metrics.QUEUE_REPAIRS.labels("reconcile").inc(reconciled)
        if result != SweepResult():
            log.info("sweeper.swept", **result.__dict__)
        return result

    async def _flow_gauges(self) -> None:
        """Executions held back unrun by reason, and what runs in each limit an operator watches."""
        for reason, count in (await self.store.execution_parked_counts()).items():
            metrics.PARKED_NOW.labels(reason).set(count)
        if not self.concurrency.watch:
            return
        watched = {name: flow.watched_scope(name, self.caps) for name in self.concurrency.watch}
        async with self.store.transaction() as tx:
            running = await flow_claims.running_in(tx, watched.values())
        for name, scope in watched.items():
            metrics.FLOW_IN_FLIGHT.labels(name, str(scope.limit) if scope.limit else "").set(running.get(scope, 0))

    async def _repair_queue(self, requeue: list[Enqueue]) -> tuple[int, int]:
        """Put reclaimed executions back in Redis; rebuild it after a data loss; re-add queued
        executions overdue and missing. Returns (reconciled, re-enqueued)."""
        if requeue:
            await self.queue.add(requeue, only_new=False)
        reconciled = 0
        epoch = await self.queue.ensure_epoch()
        if epoch != self._epoch:
            # First sweep of this process, or Redis lost its data: rebuild the queue from Postgres.
            reconciled = await self.reconcile_all()
            self._epoch = epoch
        # After a change of [redis].shards: what the old layout's shards hold moves to the new ones.
        moved = await self.queue.drain_retired()
        if moved:
            log.info("sweeper.shards_drained", moved=moved, shards=self.queue.shard_count)
        return reconciled, await self._repair_overdue()

    async def _repair_overdue(self) -> int:
        """Re-add queued executions overdue by grace_s that no pop would serve (no entry, or their
        tenant missing from its shard's index). One page (batch_size) a sweep, walked from where
        the last sweep stopped and back to the oldest at the end: the work per sweep stays what
        reading the oldest page cost (four pages a sweep cost a 50,000 spike 16 % of its
        throughput), and an entry lost behind a backlog of any size is found within
        backlog / batch_size sweeps, not once the backlog has drained. Returns how many were re-added."""
        page = await self.store.execution_queued_overdue(self.config.grace_s, self.config.batch_size, self._overdue_after)
        by_id = {str(e.execution_id): e for e in page}
        missing = await self.queue.missing(list(by_id), [e.tenant for e in by_id.values()], [e.priority for e in by_id.values()])
        if missing:
            await self.queue.add([by_id[i] for i in missing], only_new=True)
        last = page[-1] if len(page) == self.config.batch_size else None
        self._overdue_after = (last.due_at, last.execution_id) if last is not None else _BEFORE_ALL
        return len(missing)

    async def reconcile_all(self) -> int:
        """ZADD NX every queued execution, earliest first."""
        total, after = 0, _BEFORE_ALL
        while True:
            page = await self.store.execution_queued_page(after, self.config.batch_size * 10)
            if not page:
                return total
            await self.queue.add(page, only_new=True)
            total += len(page)
            after = (page[-1].due_at, page[-1].execution_id)

    async def run(self, stop: asyncio.Event) -> None:
        await every("sweeper", self.config.interval_s, self.run_once, stop, wake=self._reconcile_requested)
