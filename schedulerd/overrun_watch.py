"""Overrun warnings: read cron jobs' recent attempt durations and judge them against their
interval (core/overrun.py does the math). Used by the job views (CLI, API, dashboard) and by the
worker, which looks only after an attempt long enough to matter, so short runs cost nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

import structlog

from schedulerd import metrics
from schedulerd.config import JobsConfig
from schedulerd.core.overrun import Overrun, assess, shortest_interval_s, worth_checking
from schedulerd.core.schedule import schedule_of
from schedulerd.models import Job
from schedulerd.store import Store
from schedulerd.transient import TRANSIENT_ERRORS

log = structlog.get_logger("schedulerd.overrun")

RECHECK_S = 60.0  # a job is looked at again by one worker at most this often


async def overruns(store: Store, jobs: Sequence[Job], config: JobsConfig, now: datetime) -> dict[UUID, Overrun]:
    """Overrun figures of the cron jobs among `jobs` that have finished attempts (one statement)."""
    cron_jobs = [j for j in jobs if j.cron is not None]
    if not cron_jobs:
        return {}
    durations = await store.job_recent_durations([j.id for j in cron_jobs], config.overrun_samples)
    found: dict[UUID, Overrun] = {}
    for job in cron_jobs:
        assert job.cron is not None
        judged = assess(durations[job.id], shortest_interval_s(schedule_of(job), now),
                        config.overrun_fraction)  # fmt: skip
        if judged is not None:
            found[job.id] = judged
    return found


class OverrunWatch:
    """The worker's side: after a long attempt, look at its job in the background and warn."""

    def __init__(self, store: Store, config: JobsConfig) -> None:
        self.store = store
        self.config = config
        self._checked_at: dict[UUID, float] = {}  # job -> monotonic time of its last check
        self._tasks: set[asyncio.Task[None]] = set()  # held so they are not collected mid-flight

    def attempt_finished(self, job_id: UUID, duration_s: float) -> None:
        if not worth_checking(duration_s, self.config.overrun_fraction):
            return
        now = time.monotonic()
        if now - self._checked_at.get(job_id, -RECHECK_S) < RECHECK_S:
            return
        self._checked_at[job_id] = now
        task = asyncio.create_task(self._check_quietly(job_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def close(self) -> None:
        """Stop checks still in flight (the daemon is stopping)."""
        for task in self._tasks:
            task.cancel()

    async def _check_quietly(self, job_id: UUID) -> None:
        try:
            await self.check(job_id)
        except TRANSIENT_ERRORS as exc:  # a warning, not the record: the next long attempt tries again
            log.debug("overrun.check_failed", job_id=str(job_id), error=str(exc))

    async def check(self, job_id: UUID) -> Overrun | None:
        """Judge one job now; log and count a warning. Returns its figures (None: not judged)."""
        job = await self.store.job_get(job_id)
        if job is None or job.cron is None:
            return None
        judged = (await overruns(self.store, [job], self.config, await self.store.clock_now())).get(job.id)
        if judged is not None and judged.warning:
            metrics.OVERRUN_WARNINGS.labels(job.task).inc()
            log.warning(
                "overrun.warning", job_id=str(job.id), tenant=job.tenant, task=job.task, cron=job.cron,
                p95_s=round(judged.p95_s, 3), interval_s=judged.interval_s, ratio=round(judged.ratio, 3),
                fraction=self.config.overrun_fraction, overlap=job.overlap,
            )  # fmt: skip
        return judged
