"""Parking: claimed executions handed back without running (a task over its concurrency limit or
its rate limit, an open circuit breaker, an error while admitting them), queued again after a
delay with their attempt not used up. Lost writes fall back to the lease expiry (the sweeper), a
lost ZADD to the sweeper or the fallback claim."""

from __future__ import annotations

import collections
from collections.abc import Sequence

from schedulerd import metrics
from schedulerd.models import Claim
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from schedulerd.transient import enqueue_committed


class Parking:
    def __init__(self, store: Store, queue: DelayQueue, late_grace_s: float) -> None:
        self.store = store
        self.queue = queue
        self.late_grace_s = late_grace_s  # a first attempt due again past this is late (its park's reason)
        self.parked = 0  # claims handed back so far

    async def park(self, claims: Sequence[Claim], delays_s: Sequence[float], reason: str) -> None:
        """Queue `claims` again after their delays (s), no attempt recorded; `reason`
        (task_limit | rate_limited | breaker_open, or admit_error: admission failed on the way)
        says why; the wait each one adds is counted apart from the start lag (FLOW_WAIT)."""
        back, newly_late = await self.store.execution_park_many(
            [(c.id, c.fence) for c in claims], delays_s, reason, late_grace_s=self.late_grace_s
        )
        for late_reason, count in collections.Counter(newly_late).items():
            metrics.LATE.labels(late_reason).inc(count)
        waited = metrics.FLOW_WAIT.labels(reason)
        for claim, delay_s in zip(claims, delays_s):
            metrics.PARKED.labels(claim.task, reason).inc()
            waited.observe(delay_s)
        self.parked += len(back)
        await enqueue_committed(self.queue, back, "worker.park_enqueue_failed", only_new=False)
