"""Records passed between components: one dataclass per table row, plus the claim result.

Every datetime here is timezone-aware UTC.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Self
from uuid import UUID

from schedulerd.core.flow import Scope


class ExecutionStatus(enum.StrEnum):
    PENDING = "pending"  # waiting for its due time to enter the dispatch horizon
    QUEUED = "queued"  # in (or owed to) the Redis delay queue
    RUNNING = "running"  # claimed: a worker holds the lease
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # attempts spent
    SKIPPED = "skipped"  # a misfire or overlap policy chose not to run it
    CANCELLED = "cancelled"  # its job was paused or deleted, or a newer occurrence replaced it (cancel_other)


class AttemptOutcome(enum.StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # the handler raised
    TIMED_OUT = "timed_out"  # the handler outlived its timeout
    LEASE_EXPIRED = "lease_expired"  # the worker stopped heartbeating (died or froze)
    HANDED_BACK = "handed_back"  # the worker shut down gracefully; the attempt was not counted
    CANCELLED = "cancelled"  # stopped on request: a newer occurrence replaced it (overlap cancel_other)


class _Row:
    __slots__ = ()

    @classmethod
    def from_row(cls, row: Any) -> Self:
        return cls(*map(row.__getitem__, _field_names(cls)))

    @classmethod
    def from_rows(cls, rows: Sequence[Any]) -> list[Self]:
        """from_row for each row. When the statement returns exactly the fields, in constructor order
        (checked once, on the first row), by position: 0.5 against 3.0 us for a Claim's 23 columns
        looked up by name."""
        if rows and tuple(rows[0].keys()) == _field_names(cls):
            return [cls(*row) for row in rows]
        return [cls.from_row(row) for row in rows]


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    """A record's columns in constructor order (fields() per row cost ~8% of a busy worker)."""
    return tuple(f.name for f in fields(cls))


@dataclass(frozen=True)
class Job(_Row):
    id: UUID
    tenant: str
    name: str | None
    task: str
    params: dict[str, Any]
    schedule_kind: str  # now | at | cron
    run_at: datetime | None
    cron: str | None
    timezone: str
    misfire_policy: str
    catch_up_limit: int
    window_s: float
    max_attempts: int
    backoff_base_s: float
    backoff_factor: float
    backoff_max_s: float
    timeout_s: float
    overlap: str  # allow | skip | buffer_one | cancel_other (core/overlap.py)
    enabled: bool
    materialised_to: datetime | None
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    paused_note: str | None  # why it was paused (cleared on resume)
    paused_by: str | None  # who paused it: "cli:<user>", a --by name, or "api:<tenant>"
    paused_at: datetime | None
    dst_repeated: str | None  # first | both; None: the DST rule (README "The DST rule")
    dst_missing: str | None  # shift | skip; None: the DST rule
    tzdata_version: str | None  # tz database that resolved its written occurrences ('mixed': several)
    labels: dict[str, str]  # core/labels.py
    start_at: datetime | None  # bounds of a recurring schedule (core/bounds.py)
    end_at: datetime | None
    max_runs: int | None
    runs_written: int  # scheduled occurrences written so far: max_runs caps it
    done_at: datetime | None  # when the schedule was found to have nothing left to write
    version: int = 1  # rises by one at every edit (Jobs.update)
    priority: int = 5  # 0-9, higher pops first within its tenant's share (core/priority.py)
    concurrency_key: str | None = None  # at most concurrency_limit of the tenant's executions with this key run at once
    concurrency_limit: int | None = None
    rate_key: str | None = None  # at most rate_limit starts per rate_window_s of the tenant's jobs with this key
    rate_limit: int | None = None
    rate_window_s: float | None = None
    notify_url: str | None = None  # where its notices go (core/notify.py); notify_on None: its tenant's setting
    notify_on: list[str] | None = None  # the events notified; []: none, not even the tenant's
    pause_after_failures: int | None = None  # paused after this many consecutive failed runs; None: never


@dataclass(frozen=True)
class LeaseWindow:
    """One window of the sweeper's walk of the active lane (Store.execution_lease_window)."""

    lapsed: list[tuple[UUID, datetime]]  # (id, scheduled_for) running under an expired lease, read unlocked
    resume_after: tuple[datetime, UUID] | None  # (due_at, id) the next window starts after; None: the lane's start


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs a list shows (jobs.job_filter builds it from a request); None: any."""

    name_prefix: str | None = None
    task: str | None = None
    kind: str | None = None  # cron | one-off
    labels: dict[str, str] | None = None  # a selector: the job carries every pair
    states: tuple[str, ...] | None = None  # jobs.job_state's words


@dataclass(frozen=True)
class Execution(_Row):
    id: UUID
    job_id: UUID
    tenant: str
    scheduled_for: datetime
    due_at: datetime
    status: str
    attempt: int
    fence: int
    lease_until: datetime | None
    worker: str | None
    enqueued_at: datetime | None
    first_started_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    last_error: str | None
    created_at: datetime
    reason: str | None  # why it was skipped or cancelled, or 'late_replay', or 'redrive'
    origin: str  # scheduled | trigger | backfill: what made this occurrence
    redrives: int  # times it was redriven after failing (each gave it a new attempt budget)
    late_reason: str | None  # why it did not start within its grace (core/late.py LateReason), if it did not
    cancel_requested_at: datetime | None  # a cancel or overlap cancel_other asked the running attempt to stop
    job_version: int | None = None  # the job's version that wrote (or an edit kept) it; None: before versions, 1
    priority: int = 5  # its job's when written (an edit moves the unstarted ones): core/priority.py


@dataclass(frozen=True)
class Attempt(_Row):
    execution_id: UUID
    attempt: int
    fence: int
    worker: str | None
    started_at: datetime
    finished_at: datetime
    outcome: str
    error: str | None
    detail: str | None  # what the handler returned (JSON), e.g. an HTTP status and body excerpt

    @property
    def duration_s(self) -> float:
        return (self.finished_at - self.started_at).total_seconds()


@dataclass(frozen=True)
class Redrive(_Row):
    """A failed execution given a new attempt budget: an entry in its history."""

    execution_id: UUID
    fence: int  # the execution's fence after the redrive: sorts it among the attempts
    redriven_at: datetime
    redriven_by: str
    attempts_before: int  # attempts the spent budget had used
    error_before: str | None


@dataclass(frozen=True)
class JobAction(_Row):
    """A bulk action a tenant took (job_actions): what, on which jobs or executions, who and when."""

    id: UUID
    tenant: str
    action: str  # pause | resume | trigger | delete | cancel
    selector: dict[str, str]  # the label selector it matched jobs by ({} when none)
    filter: dict[str, Any]  # a bulk cancel's other criteria (job, statuses, due range)
    jobs_count: int
    executions_count: int
    actor: str  # the token (api:...) or CLI user (cli:...) that did it
    at: datetime


@dataclass(frozen=True)
class CancelPlan:
    """What a bulk cancel would take: how many match (running ones get a stop request), and a sample."""

    total: int
    running: int
    sample: list[dict[str, Any]]  # id, job_id, status, scheduled_for, due_at of the first few (id order)


@dataclass(frozen=True)
class FailedExecution:
    """A row of the dead-letter list: the execution and its job's task type."""

    execution: Execution
    task: str


# Claim and Outcome are made once per execution on the worker's hottest path: slotted and not
# frozen, since a frozen dataclass's __init__ (object.__setattr__ per field) costs ten times as
# much (4.7 against 0.4 µs for a Claim). Nothing changes one after it is made.
@dataclass(slots=True)
class Claim(_Row):
    """An execution this worker now holds, with what it needs to run and retry it."""

    id: UUID
    job_id: UUID
    tenant: str
    scheduled_for: datetime
    # When this attempt was due (scheduled_for, or its retry time) as seconds after scheduled_for,
    # and the start lag, seconds from then to the claim, both by Postgres's clock. Floats, not
    # instants: a timestamptz costs a worker about 1 us a row to decode, a float8 a tenth of that;
    # due_at and started_at give the instants back (to the microsecond) when something asks.
    due_after_s: float
    attempt: int
    fence: int
    start_lag_s: float
    task: str
    params: dict[str, Any]
    timeout_s: float
    max_attempts: int
    backoff_base_s: float
    backoff_factor: float
    backoff_max_s: float
    overlap: str  # the job's overlap policy: anything but allow releases a waiting occurrence at finish
    marked_late: str | None  # the late reason this claim recorded (a first attempt past its grace), for the metric
    concurrency_key: str | None = None  # its job's (core/flow.py): the slot it holds is freed when it stops
    concurrency_limit: int | None = None
    rate_key: str | None = None  # its job's rate limit: rate_limit starts per rate_window_s (core/rate.py)
    rate_limit: int | None = None
    rate_window_s: float | None = None
    traceparent: str | None = None  # the producer's trace context (W3C), for the attempt's span (tracing.py)

    @property
    def due_at(self) -> datetime:
        """When this attempt was due."""
        return self.scheduled_for + timedelta(seconds=self.due_after_s)

    @property
    def started_at(self) -> datetime:
        """When the claim started this attempt."""
        return self.due_at + timedelta(seconds=self.start_lag_s)


@dataclass(slots=True)
class Outcome:
    """What a worker reports for one attempt (see Store.execution_finish_many)."""

    execution_id: UUID
    fence: int
    task: str
    status: ExecutionStatus  # where the execution goes next
    outcome: AttemptOutcome
    error: str | None = None
    retry_delay_s: float | None = None
    detail: str | None = None  # e.g. the http task's response status and body excerpt (JSON)
    params: dict[str, Any] | None = None  # the job's params (names the circuit breaker for http)
    breaker_counts: bool = False  # counts toward its circuit breaker (permanent errors do not)
    job_id: UUID | None = None
    guarded: bool = False  # its job has an overlap policy: finishing may release a waiting occurrence
    slots: tuple[Scope, ...] = ()  # the concurrency limits it held a slot of (core/flow.py): finishing frees them


class Enqueue(NamedTuple):
    """A queued execution to put in the Redis delay queue. A named tuple: one is made for every
    execution queued (a create, a dispatch, a retry), and a frozen dataclass costs five times as much."""

    execution_id: UUID
    due_at: datetime
    tenant: str = "default"  # whose queue it goes in (the pop serves tenants round robin)
    priority: int = 5  # which band of that queue (core/priority.py): higher pops first among the due


# What a finish did to one execution: its id, the status it left it in, and, when it was queued
# again (a retry), the entry to put back in Redis. A plain tuple: one is made per execution.
Finished = tuple[UUID, str, Enqueue | None]


@dataclass(frozen=True)
class ApiToken(_Row):
    """An API token as listed: never the secret (only its hash is stored), nor the hash."""

    id: UUID
    tenant: str
    created_at: datetime
    last_used_at: datetime | None  # to the minute
    revoked_at: datetime | None


# Why an execution is held back unrun, attempt not used: parked by a worker (queued again, due
# later) or waiting for a concurrency slot (pending). What "parked by reason" counts.
PARK_REASONS = ("task_limit", "rate_limited", "breaker_open", "admit_error", "concurrency_limit")


@dataclass(frozen=True)
class TenantQuota(_Row):
    """A tenant's in-flight quota set at runtime (`schedulerd tenant quota`), over [concurrency]'s."""

    tenant: str
    in_flight: int  # most of its executions running at once, fleet-wide
    updated_at: datetime


@dataclass(frozen=True)
class SecretEntry(_Row):
    """A tenant secret as listed: its name and times, never its value."""

    name: str
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class SigningKeyEntry(_Row):
    """A webhook signing key as listed: its public id and times, never its secret."""

    id: str
    created_at: datetime
    retires_at: datetime | None  # when it stops signing (set by the next rotation); None: until retired


@dataclass(frozen=True)
class Sealed(_Row):
    """A sealed secret or signing key as read for opening (schedulerd/keyring.py)."""

    name: str  # the secret's name, or the signing key's id
    key_id: str
    sealed: bytes


@dataclass(frozen=True)
class IdempotencyRecord(_Row):
    """The first result of a create made with an Idempotency-Key."""

    request_hash: bytes
    job_id: UUID
    response: dict[str, Any]


@dataclass(frozen=True)
class LastExecution(_Row):
    """A job's latest execution that started or was skipped: its "last outcome"."""

    job_id: UUID
    id: UUID
    status: str
    scheduled_for: datetime
    finished_at: datetime | None


@dataclass(frozen=True)
class TenantStats:
    """One tenant's recent executions: count per status and start-lag percentiles (seconds)."""

    by_status: dict[str, int]
    lag_p50_s: float | None
    lag_p90_s: float | None
    lag_p99_s: float | None
    lag_max_s: float | None
    started: int


@dataclass(frozen=True)
class MinuteStats:
    """One UTC minute of scheduled time: executions scheduled, started, succeeded and failed in it,
    and the start-lag percentiles (seconds) of those started (None when none started)."""

    minute: datetime
    scheduled: int
    started: int
    succeeded: int
    failed: int
    lag_p50_s: float | None
    lag_p99_s: float | None


@dataclass(frozen=True)
class LateExecution:
    """An occurrence that did not start within its grace, and why (recorded, or implied now)."""

    execution: Execution
    why: str  # a core/late.py LateReason value


@dataclass(frozen=True)
class Forecast:
    """Executions due in the next windows (seconds, narrowest first), per tenant; counts in window order."""

    now: datetime
    windows_s: tuple[int, ...]
    by_tenant: dict[str, tuple[int, ...]]

    @property
    def total(self) -> tuple[int, ...]:
        return tuple(sum(column) for column in zip(*self.by_tenant.values())) if self.by_tenant else (0,) * len(self.windows_s)


@dataclass(frozen=True)
class TzRecompute(_Row):
    """One pass that rewrote cron jobs' future occurrences after the tz database changed."""

    id: int
    tzdata_version: str
    tzdata_source: str
    worker: str
    started_at: datetime
    finished_at: datetime | None
    jobs_checked: int
    jobs_moved: int


@dataclass(frozen=True)
class TzMovedJob(_Row):
    """A job whose future instants moved in a recompute: what was cancelled and written."""

    recompute_id: int
    job_id: UUID
    tenant: str
    old_version: str | None
    removed: int
    added: int
    moves: list[list[str | None]]  # [old, new] ISO 8601 UTC pairs, oldest first; None on one side: no partner
