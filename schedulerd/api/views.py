"""How the API shows stored records: jobs, executions, attempts and redrives as JSON-ready
values. Pure mapping; shared by every router."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from schedulerd.api import schemas
from schedulerd.core.overrun import Overrun
from schedulerd.core.targets import redact
from schedulerd.core.tenant_view import tenant_error
from schedulerd.jobs import job_state, next_runs, schedule_of
from schedulerd.models import Attempt, Execution, Job, JobAction, LastExecution, MinuteStats, Redrive

NEXT_RUNS = 5  # upcoming instants shown with an enabled job
MINUTES_MAX = 180  # GET /v1/stats/minutes and the [ops] /stats/minutes look back at most 3 hours


def job_view(job: Job, now: datetime, last: LastExecution | None = None, overrun: Overrun | None = None,
             fraction: float = 0.8, settled: bool = False) -> schemas.Job:
    """settled: a one-off whose run is final (Store.job_settled_many), shown done."""
    state = job_state(job, settled)
    # An @every interval is elapsed time: no DST rule is in force for it.
    schedule = schedule_of(job) if job.cron else None
    schedule = schedule if schedule and schedule.interval_s is None else None
    return schemas.Job(
        id=job.id, tenant=job.tenant, name=job.name, task=job.task, params=_shown_params(job), schedule_kind=job.schedule_kind,
        run_at=job.run_at, cron=job.cron, timezone=job.timezone,
        misfire=schemas.MisfirePolicy(policy=job.misfire_policy, catch_up_limit=job.catch_up_limit),
        window_s=job.window_s, retry=schemas.Retry(max_attempts=job.max_attempts, backoff_base_s=job.backoff_base_s,
        backoff_factor=job.backoff_factor, backoff_max_s=job.backoff_max_s), timeout_s=job.timeout_s,
        overlap=job.overlap, state=state, labels=job.labels, start_at=job.start_at, end_at=job.end_at,
        max_runs=job.max_runs, runs_written=job.runs_written, done_at=job.done_at,
        created_at=job.created_at, updated_at=job.updated_at, deleted_at=job.deleted_at,
        pause=schemas.Pause(note=job.paused_note, by=job.paused_by, at=job.paused_at) if state == "paused" else None,
        next_runs=next_runs(job, now, NEXT_RUNS) if state == "enabled" else [],
        last_execution=schemas.LastExecution(id=last.id, status=last.status, scheduled_for=last.scheduled_for,
                                             finished_at=last.finished_at) if last else None,
        dst_repeated=schedule.repeated if schedule else None,
        dst_missing=schedule.missing if schedule else None, tzdata_version=job.tzdata_version,
        overrun=schemas.Overrun(warning=overrun.warning, p95_s=overrun.p95_s, interval_s=overrun.interval_s,
                                ratio=overrun.ratio, fraction=fraction, samples=overrun.samples) if overrun else None,
        version=job.version, priority=job.priority,
        concurrency=schemas.ConcurrencyBody(key=job.concurrency_key, limit=job.concurrency_limit)
        if job.concurrency_key is not None else None,
        rate_limit=schemas.RateLimitBody(key=job.rate_key, limit=job.rate_limit, window_s=job.rate_window_s)
        if job.rate_key is not None else None,
        notify=schemas.NotifyBody(url=redact(job.notify_url) if job.notify_url else None, on=job.notify_on)
        if job.notify_on is not None else None,
        pause_after_failures=job.pause_after_failures,
    )  # type: ignore[arg-type]  # fmt: skip


def _shown_params(job: Job) -> dict[str, Any]:
    """A job's params as the API shows them: an http target's URL without its credentials."""
    url = job.params.get("url")
    if job.task == "http" and isinstance(url, str):
        return {**job.params, "url": redact(url)}
    return job.params


def execution_view(execution: Execution) -> dict[str, Any]:
    started = execution.first_started_at
    return {
        "id": execution.id, "job_id": execution.job_id, "scheduled_for": execution.scheduled_for,
        "due_at": execution.due_at, "status": execution.status, "reason": execution.reason,
        "attempt": execution.attempt, "worker": execution.worker, "enqueued_at": execution.enqueued_at,
        "first_started_at": started, "started_at": execution.started_at, "finished_at": execution.finished_at,
        # A success has no error of its own; an earlier attempt's stays in the attempt history.
        "last_error": tenant_error(execution.last_error) if execution.status != "succeeded" else None,
        "start_lag_s": (started - execution.scheduled_for).total_seconds() if started else None,
        "duration_s": (execution.finished_at - execution.started_at).total_seconds()
        if execution.finished_at and execution.started_at else None,
        "origin": execution.origin, "redrives": execution.redrives,
        "late_reason": execution.late_reason, "job_version": execution.job_version or 1, "priority": execution.priority,
        "cancel_requested": execution.cancel_requested_at is not None,
    }  # fmt: skip


def redrive_view(redrive: Redrive) -> dict[str, Any]:
    return {"fence": redrive.fence, "redriven_at": redrive.redriven_at, "redriven_by": redrive.redriven_by,
            "attempts_before": redrive.attempts_before, "error_before": tenant_error(redrive.error_before)}  # fmt: skip


def attempt_view(attempt: Attempt) -> dict[str, Any]:
    return {"attempt": attempt.attempt, "worker": attempt.worker, "started_at": attempt.started_at,
            "finished_at": attempt.finished_at, "duration_s": attempt.duration_s, "outcome": attempt.outcome,
            "error": tenant_error(attempt.error)}  # fmt: skip


def minute_view(m: MinuteStats) -> dict[str, Any]:
    return {"minute": m.minute, "scheduled": m.scheduled, "started": m.started, "succeeded": m.succeeded,
            "failed": m.failed, "lag_p50_s": m.lag_p50_s, "lag_p99_s": m.lag_p99_s}  # fmt: skip


def job_action_view(action: JobAction) -> dict[str, Any]:
    return {"id": action.id, "action": action.action, "selector": action.selector, "filter": action.filter,
            "jobs_count": action.jobs_count, "executions_count": action.executions_count, "actor": action.actor,
            "at": action.at}  # fmt: skip
