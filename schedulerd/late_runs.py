"""Answers about late and missed occurrences and about known future load: the service behind
`executions list --late`, `job why`, `GET /v1/executions/late`, `GET /v1/jobs/{id}/why` and the
forecast. Reads only; callers scope it to a tenant (the API always does)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from uuid import UUID

from schedulerd.config import Config
from schedulerd.core import late
from schedulerd.core.schedule import schedule_of
from schedulerd.models import Execution, ExecutionStatus, Forecast, Job, LateExecution
from schedulerd.store import Store

# How far from the instant asked about an occurrence may be to count as the one meant.
NEAREST_WITHIN = timedelta(days=1)
_NOT_STARTED = {ExecutionStatus.PENDING, ExecutionStatus.QUEUED}


@dataclass(frozen=True)
class Why:
    """The answer to "why didn't job X run at T?"."""

    job_id: UUID
    asked_at: datetime  # the instant asked about (UTC)
    scheduled_for: datetime | None  # the occurrence nearest to it per the job's schedule; None: none within a day
    execution: Execution | None  # that occurrence's execution, when one was recorded
    late_reason: str | None  # core/late.py LateReason value, when it did not start within its grace
    answer: str  # one or two sentences for a person


class LateRuns:
    def __init__(self, store: Store, config: Config) -> None:
        self.store = store
        self.config = config

    @property
    def grace_s(self) -> float:
        return self.config.materialiser.misfire_grace_s

    async def list(
        self, *, since: datetime, tenant: str | None = None, job_id: UUID | None = None, reason: str | None = None,
        limit: int = 50,
    ) -> list[LateExecution]:  # fmt: skip
        """Occurrences scheduled since `since` that did not start within their grace, newest first."""
        return await self.store.execution_late_page(
            grace_s=self.grace_s, since=since, tenant=tenant, job_id=job_id, late_reason=reason, limit=limit,
            down_after_s=self.config.late.down_after_s,
        )  # fmt: skip

    async def forecast(self, tenant: str | None = None) -> Forecast:
        return await self.store.execution_due_forecast(late.FORECAST_WINDOWS_S, tenant)

    async def why(self, job: Job, at: datetime) -> Why:
        """Find the job's occurrence nearest to `at` (by its schedule) and explain what became of it."""
        now = await self.store.clock_now()
        if job.cron is not None:
            scheduled = late.nearest_occurrence(schedule_of(job), at, NEAREST_WITHIN)
        else:
            scheduled = job.run_at if job.run_at is not None and abs(job.run_at - at) <= NEAREST_WITHIN else None
        if scheduled is None:
            schedule = f"{job.cron!r} in {job.timezone}" if job.cron else f"once at {_at(job.run_at)}"
            return Why(job.id, at, None, None, None,
                       f"no occurrence was scheduled within a day of {_at(at)}: the job runs {schedule}")  # fmt: skip
        execution = await self.store.execution_near(job.id, scheduled, 0.0)
        if execution is None:
            return self._unrecorded(job, at, scheduled, now)
        reason = late.of_execution(execution.late_reason, execution.reason)
        return Why(job.id, at, scheduled, execution, reason.value if reason else None,
                   self._explain(execution, reason, now))  # fmt: skip

    def _explain(self, execution: Execution, reason: late.LateReason | None, now: datetime) -> str:
        status, scheduled = execution.status, execution.scheduled_for
        because = f": {late.EXPLANATIONS[reason]}" if reason else ""
        if execution.first_started_at is not None:
            lag_s = (execution.first_started_at - scheduled).total_seconds()
            when = f"started {lag_s:.1f} s after its scheduled time {_at(scheduled)}"
            tried = f"{execution.attempt} attempt(s), status {status}"
            if reason is None:
                return f"it ran: {when}; {tried}"
            return f"it ran late: {when}{because}; {tried}"
        if status in _NOT_STARTED:
            if execution.due_at > now and reason is None:
                return f"it has not run yet: due at {_at(execution.due_at)}"
            return f"it has not started yet (due {_at(execution.due_at)}, status {status}){because}"
        detail = f" (reason {execution.reason})" if execution.reason else ""
        return f"it did not run: {status}{detail}{because}"

    def _unrecorded(self, job: Job, at: datetime, scheduled: datetime, now: datetime) -> Why:
        """No execution in the occurrence's slot: say what the job's own record explains."""
        reason: str | None = None
        if scheduled > now:
            answer = f"its occurrence at {_at(scheduled)} is in the future"
        elif job.created_at > scheduled:
            answer = f"the job did not exist yet: it was created at {_at(job.created_at)}"
        elif job.deleted_at is not None and job.deleted_at <= scheduled:
            answer = f"the job was deleted at {_at(job.deleted_at)}"
        elif not job.enabled and job.updated_at <= scheduled:
            reason = late.LateReason.PAUSED.value
            answer = f"the job was paused (since {_at(job.updated_at)}), so the occurrence at {_at(scheduled)} was not written"
        else:
            answer = (f"no execution was recorded for its occurrence at {_at(scheduled)}: the job was paused then, "
                      f"or the scheduler was down for longer than [materialiser].lookback_s")  # fmt: skip
            reason = None
        return Why(job.id, at, scheduled, None, reason, answer)


def _at(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ") if value is not None else "-"
