"""Dead letters: list failed executions and redrive them. Used by the CLI and the API.

A redrive keeps the execution's id, gives it a new attempt budget (its job's max_attempts again:
`attempt` goes back to 0, so the worker's and sweeper's checks need nothing new), raises its
fence and records the redrive in its history (the redrives table, shown by `executions show`).
Redriven executions fall due at [jobs].redrive_per_s. A `tenant` argument scopes every call;
None means an operator acting on every tenant (the CLI).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

import structlog

from schedulerd import metrics
from schedulerd.config import Config
from schedulerd.errors import NotFoundError, ValidationError
from schedulerd.jobs import check_actor
from schedulerd.models import ExecutionStatus, FailedExecution
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from schedulerd.transient import enqueue_committed

log = structlog.get_logger("schedulerd.dead_letters")
MAX_ERROR_FILTER = 500  # characters of an error-text filter


@dataclass(frozen=True)
class FailedFilter:
    """Which failed executions: of a job, of a task type, whose last error contains a text
    (case-insensitive), that failed in [since, until)."""

    job_id: UUID | None = None
    task: str | None = None
    error: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    def check(self) -> None:
        if self.error is not None and not 1 <= len(self.error) <= MAX_ERROR_FILTER:
            raise ValidationError("error", f"must be 1-{MAX_ERROR_FILTER} characters")
        if self.error is not None and "\x00" in self.error:
            raise ValidationError("error", "contains a NUL character")
        for field, value in (("since", self.since), ("until", self.until)):
            if value is not None and value.tzinfo is None:
                raise ValidationError(field, "must carry a UTC offset")
        if self.since and self.until and self.since >= self.until:
            raise ValidationError("until", f"must be after since ({self.until.isoformat()} is not after {self.since.isoformat()})")

    @property
    def empty(self) -> bool:
        return all(v is None for v in (self.job_id, self.task, self.error, self.since, self.until))


@dataclass(frozen=True)
class Redriven:
    """What a redrive did: the executions given a new budget, those that matched but were not
    redriven (their job is paused or deleted, or another redrive took them first), and, for a
    bulk redrive, whether more matched than [jobs].redrive_max (run it again for the rest)."""

    execution_ids: list[UUID]
    not_redriven: list[UUID]
    more: bool = False


class DeadLetters:
    def __init__(self, store: Store, queue: DelayQueue, config: Config) -> None:
        self.store, self.queue, self.config = store, queue, config

    async def list(
        self, tenant: str | None, which: FailedFilter, *, after: tuple[datetime, UUID] | None = None, limit: int = 50
    ) -> list[FailedExecution]:
        which.check()
        return await self.store.execution_failed_page(
            tenant, job_id=which.job_id, task=which.task, error=which.error, since=which.since, until=which.until,
            after=after, limit=limit,
        )  # fmt: skip

    async def redrive(self, execution_ids: list[UUID], tenant: str | None, *, by: str) -> Redriven:
        """Redrive these executions. Every one must exist (for this tenant), be failed and belong
        to a live, unpaused job; otherwise nothing is redriven and the error names the first culprit."""
        check_actor(by)
        ids = list(dict.fromkeys(execution_ids))  # once each, first order kept
        if not ids:
            raise ValidationError("ids", "name at least one execution")
        limit = self.config.jobs.redrive_max
        if len(ids) > limit:
            raise ValidationError("ids", f"{len(ids)} executions; the limit is {limit} per request", "jobs.redrive_max")
        for execution_id in ids:
            execution = await self.store.execution_get(execution_id)
            if execution is None or (tenant is not None and execution.tenant != tenant):
                raise NotFoundError(f"execution {execution_id} not found")
            if execution.status != ExecutionStatus.FAILED:
                raise ValidationError("id", f"execution {execution_id} is {execution.status}; only failed executions are redriven")
            job = await self.store.job_get(execution.job_id)
            if job is None or job.deleted_at is not None or not job.enabled:
                state = "deleted" if job is None or job.deleted_at else "paused"
                raise ValidationError("id", f"execution {execution_id} belongs to job {execution.job_id}, which is {state}")
        return await self._redrive(ids, tenant, by, more=False)

    async def redrive_matching(self, tenant: str | None, which: FailedFilter, *, by: str) -> Redriven:
        """Redrive the failed executions matching a filter (at least one criterion), most
        recently failed first, at most [jobs].redrive_max of them."""
        check_actor(by)
        which.check()
        if which.empty:
            raise ValidationError("filter", "give at least one of job, task, error, since, until (a redrive of every failure is refused)")
        limit = self.config.jobs.redrive_max
        matched = await self.list(tenant, which, limit=limit + 1)
        ids = [m.execution.id for m in matched[:limit]]
        return await self._redrive(ids, tenant, by, more=len(matched) > limit)

    async def _redrive(self, ids: list[UUID], tenant: str | None, by: str, *, more: bool) -> Redriven:
        defaults = self.config.jobs
        done = await self.store.execution_redrive_many(
            ids, tenant, per_s=defaults.redrive_per_s, horizon_s=self.config.dispatcher.horizon_s, by=by
        )
        entries = [entry for entry, status in done if status == ExecutionStatus.QUEUED]
        await enqueue_committed(self.queue, entries, "dead_letters.enqueue_failed")
        redriven = {entry.execution_id for entry, _ in done}
        metrics.REDRIVEN.inc(len(redriven))
        log.info("dead_letters.redriven", count=len(redriven), by=by, tenant=tenant)
        return Redriven([i for i in ids if i in redriven], [i for i in ids if i not in redriven], more)
