"""Accepting jobs: validate a definition, record it with its first execution, then enqueue.

Order of writes: the Postgres transaction commits before the ZADD. If the ZADD fails the job
is still accepted; the sweeper puts the queued execution into Redis within its grace.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog

from schedulerd import registry
from schedulerd.config import JobsConfig
from schedulerd.errors import ValidationError
from schedulerd.models import Enqueue, Execution, ExecutionStatus, Job
from schedulerd.queue import DelayQueue
from schedulerd.store import Store

log = structlog.get_logger("schedulerd.jobs")

TENANT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
LATEST_RUN_AT = timedelta(days=3660)  # "at" more than ~10 years ahead is a typo, not a plan
EARLIEST_RUN_AT = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class JobSpec:
    """A one-off job as a user asks for it; None fields take the [jobs] defaults."""

    task: str
    tenant: str = "default"
    params: dict[str, Any] = field(default_factory=dict)
    run_at: datetime | None = None  # None: now
    name: str | None = None
    max_attempts: int | None = None
    timeout_s: float | None = None


def _check_json_text(value: Any, path: str) -> None:
    """Postgres jsonb refuses NUL characters; say where, before the insert fails half-way."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ValidationError(path, "contains a NUL character, which cannot be stored")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_json_text(key, f"{path} key")
            _check_json_text(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_json_text(item, f"{path}[{index}]")


def validate(spec: JobSpec, defaults: JobsConfig, now: datetime) -> dict[str, Any]:
    """Return the job row's values, or raise ValidationError naming the field."""
    registry.get(spec.task)  # raises "task: unknown task type ..."
    if not TENANT_PATTERN.match(spec.tenant):
        raise ValidationError("tenant", "must be 1-64 characters of letters, digits, '_', '.', '-'")
    if not isinstance(spec.params, dict):
        raise ValidationError("params", f"must be a JSON object, got {type(spec.params).__name__}")
    try:
        encoded = json.dumps(spec.params, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError("params", f"is not valid JSON ({exc})") from None
    if len(encoded.encode()) > defaults.max_params_bytes:
        raise ValidationError("params", f"is {len(encoded.encode())} bytes; the limit is {defaults.max_params_bytes}")
    _check_json_text(spec.params, "params")
    run_at = spec.run_at or now
    if run_at.tzinfo is None:
        raise ValidationError("run_at", "must carry a UTC offset")
    if not EARLIEST_RUN_AT <= run_at <= now + LATEST_RUN_AT:
        raise ValidationError("run_at", f"{run_at.isoformat()} is out of range (2000-01-01 to 10 years from now)")
    max_attempts = defaults.max_attempts if spec.max_attempts is None else spec.max_attempts
    if not 1 <= max_attempts <= 100:
        raise ValidationError("max_attempts", f"must be between 1 and 100, got {max_attempts}")
    timeout_s = defaults.timeout_s if spec.timeout_s is None else spec.timeout_s
    if not 0 < timeout_s <= 7 * 86400:
        raise ValidationError("timeout_s", f"must be above 0 and at most 7 days, got {timeout_s}")
    if spec.name is not None and len(spec.name) > 200:
        raise ValidationError("name", "is longer than 200 characters")
    return {
        "id": uuid.uuid4(), "tenant": spec.tenant, "name": spec.name, "task": spec.task,
        "params": spec.params, "schedule_kind": "now" if spec.run_at is None else "at",
        "run_at": run_at.astimezone(UTC), "cron": None, "timezone": "UTC", "misfire_policy": "run_once",
        "catch_up_limit": 10, "window_s": 0.0, "max_attempts": max_attempts,
        "backoff_base_s": defaults.backoff_base_s, "backoff_factor": defaults.backoff_factor,
        "backoff_max_s": defaults.backoff_max_s, "timeout_s": timeout_s,
    }  # fmt: skip


async def create_job(
    store: Store, queue: DelayQueue, spec: JobSpec, defaults: JobsConfig, *, horizon_s: float
) -> tuple[Job, Execution]:
    """Validate, commit the job and its execution, then ZADD it when it is due inside the horizon."""
    values = validate(spec, defaults, datetime.now(UTC))
    job, execution = await store.job_create(values, (uuid.uuid4(), values["run_at"]), horizon_s)
    assert execution is not None  # a new job cannot collide with an existing slot
    if execution.status == ExecutionStatus.QUEUED:
        try:
            await queue.add([Enqueue(execution.id, execution.due_at)], only_new=True)
        except Exception as exc:  # accepted all the same: the sweeper re-enqueues it
            log.warning("jobs.enqueue_failed", execution_id=str(execution.id), error=str(exc))
    log.info("jobs.created", job_id=str(job.id), tenant=job.tenant, task=job.task, execution_id=str(execution.id))
    return job, execution
