"""The API's request and response bodies as pydantic models: they validate input and are the
/openapi.json document, so the document describes what the server does. No I/O here."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import ValidationError as PydanticValidationError
from pydantic import (
    AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, WithJsonSchema,
)  # fmt: skip

from schedulerd.config import MAX_SIGNING_GRACE_S
from schedulerd.core.durations import parse_instant, text_problem
from schedulerd.core import notify
from schedulerd.core.late import LateReason
from schedulerd.job_fields import EDITABLE, doc, renamed
from schedulerd.intake import Debounce
from schedulerd.jobs import JobSpec
from schedulerd.models import ExecutionStatus


def _instant(value: Any) -> Any:
    """Timestamps are ISO 8601 strings with an offset; a naive time or a number is refused
    (guessing a zone is how jobs end up running an hour off)."""
    if value is None or isinstance(value, datetime):
        return value
    return parse_instant(value)  # the one parser of instants, shared with the CLI


def _storable(value: str) -> str:
    """Text Postgres can store: refused here, naming the field, not by the driver with a 500."""
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


Instant = Annotated[datetime, BeforeValidator(_instant)]
Text = Annotated[StrictStr, AfterValidator(_storable)]  # every free-text input field
Status = Literal["pending", "queued", "running", "succeeded", "failed", "skipped", "cancelled"]
# Past: started or settled (not pending or queued) and scheduled by now. Upcoming: not yet started.
Phase = Literal["past", "upcoming"]
assert set(Status.__args__) == set(ExecutionStatus)  # type: ignore[attr-defined]
Seconds = Annotated[StrictFloat, Field(allow_inf_nan=False)]
LateReasonName = Literal[
    "scheduler_down", "backlog", "misfire_skip", "overlap", "paused", "breaker_open", "tenant_cap", "rate_limited",
    "concurrency_limit",
]  # fmt: skip
assert set(LateReasonName.__args__) == set(LateReason)  # type: ignore[attr-defined]
Overlap = Literal["allow", "skip", "buffer_one", "cancel_other"]
OVERLAP_HELP = doc("overlap")

# The names refusals carry (JobSpec's, flat) -> the request body's (nested for some).
BODY_FIELDS = {**renamed("body"), "id": "job_id"}  # id: a steered job's, the path's job_id


def pydantic_field(exc: PydanticValidationError, whole: str) -> tuple[str, str]:
    """A body refused by its model: the first error's field path (`whole`: none) and message."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or whole
    message = str(first.get("msg", "is invalid")).removeprefix("Value error, ")
    if first.get("type") == "extra_forbidden":
        message = "is not a field of a job"
    return where, message


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field (or a "tenant") is an error, not ignored


class RetryPolicy(_Input):
    """Omitted fields take the server's [jobs] defaults."""

    max_attempts: StrictInt | None = Field(None, ge=1, le=100, description=doc("max_attempts"))
    backoff_base_s: Seconds | None = Field(None, ge=0, le=86400, description=doc("backoff_base_s"))
    backoff_factor: Seconds | None = Field(None, ge=1, le=100, description=doc("backoff_factor"))
    backoff_max_s: Seconds | None = Field(None, ge=0, le=604800, description=doc("backoff_max_s"))


class MisfirePolicy(_Input):
    policy: Literal["skip", "run_once", "catch_up"] = Field("run_once", description=doc("misfire_policy"))
    catch_up_limit: StrictInt = Field(10, ge=0, le=1000, description=doc("catch_up_limit"))


IdempotencyKey = Annotated[StrictStr, Field(min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$")]


class DebounceBody(_Input):
    key: IdempotencyKey = Field(..., description=doc("debounce_key"))
    window_s: Seconds = Field(..., gt=0, le=86400, description=doc("debounce_window_s"))


FlowKey = Annotated[StrictStr, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]


class ConcurrencyBody(_Input):
    key: FlowKey = Field(..., description=doc("concurrency_key"))
    limit: StrictInt = Field(..., ge=1, le=100000, description=doc("concurrency_limit"))


class RateLimitBody(_Input):
    key: FlowKey = Field(..., description=doc("rate_key"))
    limit: StrictInt = Field(..., ge=1, le=1000000, description=doc("rate_limit"))
    window_s: Seconds = Field(..., ge=0.001, le=86400, description=doc("rate_window_s"))


NotifyEvent = Literal["failure", "recovery", "late", "dead_letter"]
assert NotifyEvent.__args__ == notify.EVENTS  # type: ignore[attr-defined]


class NotifyBody(_Input):
    """Where a job's notices go and which events are sent (docs/notifications.md)."""

    url: Text | None = Field(None, max_length=notify.MAX_URL, description=doc("notify_url"))
    on: list[NotifyEvent] = Field(list(notify.DEFAULT_EVENTS), max_length=len(notify.EVENTS), description=doc("notify_on"))


class JobCreate(_Input):
    """No run_at and no cron: run now. run_at: once at that instant. cron + timezone: recurring.
    debounce: a one-off whose creates with one key share an execution (debounce.window_s after the last)."""

    task: Text = Field(..., max_length=200, description=doc("task"))
    params: dict[str, Any] = Field(default_factory=dict, description=doc("params"))
    name: Text | None = Field(None, max_length=200, description=doc("name"))
    run_at: Instant | None = Field(None, description=doc("run_at"))
    cron: Text | None = Field(None, max_length=200, description=doc("cron"))
    timezone: Text = Field("UTC", max_length=100, description=doc("timezone"))
    misfire: MisfirePolicy = Field(default_factory=MisfirePolicy)
    window_s: Seconds = Field(0.0, ge=0, le=86400, description=doc("window_s"))
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    timeout_s: Seconds | None = Field(None, gt=0, le=604800, description=doc("timeout_s"))
    dst_repeated: Literal["first", "both"] | None = Field(None, description=doc("dst_repeated"))
    dst_missing: Literal["shift", "skip"] | None = Field(None, description=doc("dst_missing"))
    overlap: Overlap = Field("allow", description=OVERLAP_HELP)
    labels: dict[StrictStr, StrictStr] = Field(default_factory=dict, description=doc("labels"))
    start_at: Instant | None = Field(None, description=doc("start_at"))
    end_at: Instant | None = Field(None, description=doc("end_at"))
    max_runs: StrictInt | None = Field(None, ge=1, le=2**31 - 1, description=doc("max_runs"))
    debounce: DebounceBody | None = Field(None)

    priority: StrictInt = Field(5, ge=0, le=9, description=doc("priority"))
    concurrency: ConcurrencyBody | None = Field(None, description="a fleet-wide concurrency key and its limit")
    rate_limit: RateLimitBody | None = Field(None, description="a fleet-wide rate limit: starts per window, by key")
    notify: NotifyBody | None = Field(None, description="this job's notices (none: its tenant's setting applies)")
    pause_after_failures: StrictInt | None = Field(None, description=doc("pause_after_failures"))

    def debounced(self) -> Debounce | None:
        return Debounce(self.debounce.key, self.debounce.window_s) if self.debounce is not None else None

    def spec(self, tenant: str) -> JobSpec:
        """The job this body asks for, filed under `tenant` (the token's, or the CLI's)."""
        return JobSpec(
            task=self.task, tenant=tenant, params=self.params, run_at=self.run_at, cron=self.cron,
            timezone=self.timezone, misfire_policy=self.misfire.policy, catch_up_limit=self.misfire.catch_up_limit,
            window_s=self.window_s, name=self.name, max_attempts=self.retry.max_attempts, timeout_s=self.timeout_s,
            backoff_base_s=self.retry.backoff_base_s, backoff_factor=self.retry.backoff_factor,
            backoff_max_s=self.retry.backoff_max_s, dst_repeated=self.dst_repeated, dst_missing=self.dst_missing,
            overlap=self.overlap, labels=self.labels, start_at=self.start_at, end_at=self.end_at, max_runs=self.max_runs,
            priority=self.priority,
            concurrency_key=self.concurrency.key if self.concurrency else None,
            concurrency_limit=self.concurrency.limit if self.concurrency else None,
            rate_key=self.rate_limit.key if self.rate_limit else None,
            rate_limit=self.rate_limit.limit if self.rate_limit else None,
            rate_window_s=self.rate_limit.window_s if self.rate_limit else None,
            notify_url=self.notify.url if self.notify else None,
            notify_on=tuple(self.notify.on) if self.notify else None, pause_after_failures=self.pause_after_failures,
        )  # fmt: skip


class RetryChange(_Input):
    """Only the fields given change."""

    max_attempts: StrictInt = Field(None, ge=1, le=100, description=doc("max_attempts"))  # type: ignore[assignment]
    backoff_base_s: Seconds = Field(None, ge=0, le=86400, description=doc("backoff_base_s"))  # type: ignore[assignment]
    backoff_factor: Seconds = Field(None, ge=1, le=100, description=doc("backoff_factor"))  # type: ignore[assignment]
    backoff_max_s: Seconds = Field(None, ge=0, le=604800, description=doc("backoff_max_s"))  # type: ignore[assignment]


class MisfireChange(_Input):
    """Only the fields given change."""

    policy: Literal["skip", "run_once", "catch_up"] = Field(None, description=doc("misfire_policy"))  # type: ignore[assignment]
    catch_up_limit: StrictInt = Field(None, ge=0, le=1000, description=doc("catch_up_limit"))  # type: ignore[assignment]


class JobUpdate(_Input):
    """The fields to change (job_fields.EDITABLE, by their body path); those omitted keep their
    value, null resets one that takes null (name, a DST override). task and the schedule's kind
    (cron or one-off) are fixed: naming them is refused."""

    task: Text | None = Field(None, description="not editable: given, it is refused")
    params: dict[str, Any] = Field(None, description=doc("params"))  # type: ignore[assignment]
    name: Text | None = Field(None, max_length=200, description=doc("name"))
    run_at: Instant = Field(None, description=doc("run_at") + " (one-off jobs)")  # type: ignore[assignment]
    cron: Text = Field(None, max_length=200, description=doc("cron") + " (cron jobs)")  # type: ignore[assignment]
    timezone: Text = Field(None, max_length=100, description=doc("timezone"))  # type: ignore[assignment]
    misfire: MisfireChange = Field(None)  # type: ignore[assignment]
    window_s: Seconds = Field(None, ge=0, le=86400, description=doc("window_s"))  # type: ignore[assignment]
    retry: RetryChange = Field(None)  # type: ignore[assignment]
    timeout_s: Seconds = Field(None, gt=0, le=604800, description=doc("timeout_s"))  # type: ignore[assignment]
    dst_repeated: Literal["first", "both"] | None = Field(None, description=doc("dst_repeated"))
    dst_missing: Literal["shift", "skip"] | None = Field(None, description=doc("dst_missing"))
    overlap: Overlap = Field(None, description=OVERLAP_HELP)  # type: ignore[assignment]
    labels: dict[StrictStr, StrictStr] = Field(None, description=doc("labels") + "; replaced as a whole")  # type: ignore[assignment]
    priority: StrictInt = Field(None, ge=0, le=9, description=doc("priority") + "; unstarted runs take it too")  # type: ignore[assignment]
    concurrency: ConcurrencyBody | None = Field(None, description="the concurrency key and limit, replaced as a whole; null removes them")
    rate_limit: RateLimitBody | None = Field(None, description="the rate limit, replaced as a whole; null removes it")
    notify: NotifyBody | None = Field(None, description="this job's notices, replaced as a whole; null: its tenant's setting")
    pause_after_failures: StrictInt | None = Field(None, description=doc("pause_after_failures") + "; null: never")

    def changes(self) -> dict[str, Any]:
        """{JobSpec field: new value} of the fields given, found by each editable field's body path."""
        given = self.model_dump(exclude_unset=True)
        changes: dict[str, Any] = {}
        for head, key in (("concurrency", "concurrency_key"), ("rate_limit", "rate_key")):
            if head in given and given[head] is None:  # null: removed (Jobs.update removes the key's limit with it)
                changes[key] = None
        for f in EDITABLE:
            assert f.body is not None
            head, _, tail = f.body.partition(".")
            if head in given and (not tail or tail in (given[head] or {})):
                changes[f.spec] = given[head][tail] if tail else given[head]
        if "notify" in given:  # replaced whole: an event list left out is the default one
            changes["notify_url"] = self.notify.url if self.notify else None
            changes["notify_on"] = tuple(self.notify.on) if self.notify else None
        for name in ("task",):
            if name in given:
                changes[name] = given[name]
        return changes


class EditedRun(BaseModel):
    at: datetime = Field(..., description="the occurrence's instant, UTC (before smearing)")
    local: str = Field(..., description="the same instant in the job's zone, ISO 8601 with offset")
    labels: list[Literal["dst_shifted", "dst_skipped_before", "dst_deduplicated", "dst_repeated"]] = Field(
        ..., description="what DST did to this run (README: The DST rule); empty for an ordinary run")
    note: str | None = Field(None, description="the same in words, in local time")


class JobEdited(BaseModel):
    """An edit's answer: the job after it and how its next runs changed, by UTC instant (up to
    the earlier of the two schedules' 10th next run)."""

    job: Job
    dry_run: bool = Field(..., description="true: nothing was written (?dry_run=true)")
    removed: list[EditedRun] = Field(..., description="next runs of the old spec the new one does not have")
    kept: list[EditedRun] = Field(..., description="next runs both have (their executions keep their ids)")
    added: list[EditedRun] = Field(..., description="next runs of the new spec the old one did not have")
    cancelled_executions: int = Field(..., description="unstarted executions cancelled (reason edited)")
    written_executions: int = Field(..., description="executions written for the new spec's next runs")




class JobBatchItem(JobCreate):
    """One job of a batch: the fields of a single create, and its own idempotency key."""

    idempotency_key: IdempotencyKey | None = Field(None, description=doc("idempotency_key"))


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """A model's JSON schema with its $defs written in place (a schema given to WithJsonSchema
    may not refer to definitions of its own)."""
    definitions = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return inline(definitions[ref.removeprefix("#/$defs/")])
            return {key: inline(value) for key, value in node.items()}
        if isinstance(node, list):
            return [inline(value) for value in node]
        return node

    return inline(schema)  # type: ignore[no-any-return]


# Each item is validated on its own (a bad item is refused in the answer, the others are created),
# so the body is parsed as plain objects; the document still describes every item as a JobBatchItem.
BatchItemIn = Annotated[dict[str, Any], WithJsonSchema(_inlined(JobBatchItem.model_json_schema()))]


class JobBatch(_Input):
    items: list[BatchItemIn] = Field(..., min_length=1, description="at most api.batch_max jobs")


class BatchExecution(BaseModel):
    id: UUID
    due_at: datetime
    status: Literal["pending", "queued"] | None = Field(None, description="null for a replayed item")


class BatchItemResult(BaseModel):
    index: int = Field(..., description="the item's position in `items`, from 0")
    result: Literal["created", "replayed", "refused"]
    job_id: UUID | None = None
    executions: list[BatchExecution] = Field(default_factory=list, description="its first executions (a replayed cron job: none)")
    error: ErrorDetail | None = Field(None, description="why it was refused (nothing of it was written)")


class JobBatchResult(BaseModel):
    created: int
    replayed: int
    refused: int
    items: list[BatchItemResult]


class PauseRequest(_Input):
    note: Text | None = Field(None, max_length=500, description="why the job is paused; shown until it is resumed")


class BackfillRequest(_Input):
    """The half-open range [from, to) of the job's schedule to create, in the past."""

    from_: Instant = Field(..., alias="from", description="ISO 8601 instant with a UTC offset (inclusive)")
    to: Instant = Field(..., description="ISO 8601 instant with a UTC offset (exclusive); not in the future")


class RedriveRequest(_Input):
    """Either `ids`, or at least one filter (the most recently failed first, up to jobs.redrive_max)."""

    ids: list[UUID] | None = Field(None, min_length=1, description="failed executions to redrive")
    job: UUID | None = Field(None, description="every failed execution of this job")
    task: Text | None = Field(None, max_length=200, description="of this task type")
    error: Text | None = Field(None, min_length=1, max_length=500, description="whose last error contains this (any case)")
    since: Instant | None = Field(None, description="failed at or after (ISO 8601)")
    until: Instant | None = Field(None, description="failed before (ISO 8601)")


Cancellable = Literal["pending", "queued", "running"]


class CancelRequest(_Input):
    """Which executions to cancel: every criterion given holds. Pending and queued ones are
    cancelled at once; running ones are asked to stop (at their next heartbeat)."""

    job: UUID | None = Field(None, description="of this job")
    status: list[Cancellable] | None = Field(None, min_length=1, max_length=3,
                                             description="among these statuses (default: pending and queued)")
    label: Text | None = Field(None, min_length=1, max_length=1500,
                               description="whose job carries these labels: a selector, team=billing,env=prod")
    due_from: Instant | None = Field(None, description="due at or after (ISO 8601)")
    due_to: Instant | None = Field(None, description="due before (ISO 8601)")
    dry_run: StrictBool = Field(True, description="true (the default): count and sample what would be cancelled, "
                                "writing nothing; false: cancel")


class CancelSample(BaseModel):
    id: UUID
    job_id: UUID
    status: Cancellable
    scheduled_for: datetime
    due_at: datetime


class JobActionRecord(BaseModel):
    """A bulk action someone took: what, on what, how much, who and when."""

    id: UUID
    action: Literal["pause", "resume", "trigger", "delete", "cancel"]
    selector: dict[str, str] = Field(..., description="the label selector it matched jobs by ({}: none)")
    filter: dict[str, Any] = Field(..., description="a bulk cancel's other criteria (statuses, job, due range)")
    jobs_count: int
    executions_count: int
    actor: str = Field(..., description="who: the API token (api:TENANT (token ID)) or the CLI user (cli:USER)")
    at: datetime


class JobActionPage(BaseModel):
    items: list[JobActionRecord]
    next_cursor: str | None = Field(None, description="pass as ?cursor= for the next page; null on the last")


class BulkCancelled(BaseModel):
    dry_run: bool
    matched: int = Field(..., description="executions cancelled or asked to stop (dry run: that match now)")
    stop_requested: int = Field(..., description="of them, running ones asked to stop")
    sample: list[CancelSample] = Field(..., description="dry run: the first matching executions (by id); empty otherwise")
    action: JobActionRecord | None = Field(None, description="the record of the action (null for a dry run)")


class JobActionRequest(_Input):
    selector: Text = Field(..., min_length=1, max_length=1500, description="the jobs whose labels match: team=billing,env=prod")
    dry_run: StrictBool = Field(True, description="true (the default): count what would change, writing nothing; false: act")


class JobActionDone(BaseModel):
    action: Literal["pause", "resume", "trigger", "delete", "cancel"]
    selector: dict[str, str]
    dry_run: bool
    jobs: int = Field(..., description="jobs acted on (dry run: that match now)")
    executions: int = Field(..., description="executions cancelled (pause, delete, cancel) or created (trigger)")
    skipped: list[UUID] = Field(..., description="jobs matched but refused on the way (a one-off cannot be resumed)")
    record: JobActionRecord | None = Field(None, description="the record of the action (null for a dry run)")


class ErrorDetail(BaseModel):
    code: str = Field(..., description="validation | limit_exceeded | unauthorized | not_found | conflict | bad_request | ...")
    message: str
    field: str | None = Field(None, description="the input at fault, e.g. cron, retry.max_attempts, limit")
    limit: str | None = Field(None, description="the setting that refused the request, e.g. api.rate_limit")


class ErrorBody(BaseModel):
    error: ErrorDetail


class Retry(BaseModel):
    max_attempts: int
    backoff_base_s: float
    backoff_factor: float
    backoff_max_s: float


class Pause(BaseModel):
    note: str | None
    by: str | None = Field(None, description='"api:<tenant> (token <id prefix>)", or a name given to the CLI')
    at: datetime | None


class LastExecution(BaseModel):
    id: UUID
    status: Status
    scheduled_for: datetime
    finished_at: datetime | None


class Overrun(BaseModel):
    """A cron job's recent run time against its interval: a warning comes before runs overlap."""

    warning: bool = Field(..., description="ratio reached jobs.overrun_fraction (over at least 3 attempts)")
    p95_s: float = Field(..., description="95th percentile duration of the recent attempts")
    interval_s: float = Field(..., description="shortest gap between the job's next runs")
    ratio: float = Field(..., description="p95_s / interval_s")
    fraction: float = Field(..., description="the server's jobs.overrun_fraction")
    samples: int = Field(..., description="recent attempts judged (jobs.overrun_samples at most)")


class Job(BaseModel):
    id: UUID
    tenant: str
    name: str | None
    task: str
    params: dict[str, Any]
    schedule_kind: Literal["now", "at", "cron"]
    run_at: datetime | None
    cron: str | None
    timezone: str
    misfire: MisfirePolicy
    window_s: float
    retry: Retry
    timeout_s: float
    overlap: Overlap = Field(..., description=OVERLAP_HELP)
    state: Literal["enabled", "paused", "done", "deleted"] = Field(
        ..., description="done: a bounded recurring job with no run left to write, or a one-off whose run is final")
    labels: dict[str, str] = Field(default_factory=dict, description=doc("labels"))
    start_at: datetime | None = Field(None, description=doc("start_at"))
    end_at: datetime | None = Field(None, description=doc("end_at"))
    max_runs: int | None = Field(None, description=doc("max_runs"))
    runs_written: int = Field(0, description="scheduled runs written so far (max_runs caps it)")
    done_at: datetime | None = Field(None, description="when a bounded job was found to have no run left")
    pause: Pause | None = Field(None, description="who paused the job and why (while it is paused)")
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None
    next_runs: list[datetime] = Field(..., description="the next due instants, UTC (smearing applied)")
    last_execution: LastExecution | None = Field(None, description="latest execution that started or was skipped")
    dst_repeated: Literal["first", "both"] | None = Field(None, description="in force for a cron job (its choice or the DST rule)")
    dst_missing: Literal["shift", "skip"] | None = Field(None, description="in force for a cron job (its choice or the DST rule)")
    tzdata_version: str | None = Field(None, description="tz database that resolved its written occurrences")
    overrun: Overrun | None = Field(None, description="cron jobs with finished runs: recent p95 duration vs interval")
    version: int = Field(1, description="rises by one at every edit (PATCH; If-Match takes it)")
    priority: int = Field(5, description=doc("priority"))
    concurrency: ConcurrencyBody | None = Field(None, description="its concurrency key and limit, if it has one")
    rate_limit: RateLimitBody | None = Field(None, description="its rate limit, if it has one")
    notify: NotifyBody | None = Field(None, description="its own notification setting, if it has one (else its tenant's applies)")
    pause_after_failures: int | None = Field(None, description=doc("pause_after_failures"))


class NextRun(BaseModel):
    at: datetime = Field(..., description="due instant, UTC (smearing applied)")
    local: str = Field(..., description="the same instant in the job's zone, ISO 8601 with offset")
    labels: list[Literal["dst_shifted", "dst_skipped_before", "dst_deduplicated", "dst_repeated"]] = Field(
        ..., description="what DST did to this run (README: The DST rule); empty for an ordinary run")
    note: str | None = Field(None, description="the same in words, in local time")


class NextRuns(BaseModel):
    items: list[NextRun]


class JobCreated(BaseModel):
    job: Job
    next_runs: list[datetime] = Field(..., description="resolved UTC instants of the next runs")


class JobChanged(BaseModel):
    job: Job
    cancelled_executions: int = Field(0, description="unstarted executions cancelled by a pause or delete")


class Execution(BaseModel):
    id: UUID
    job_id: UUID
    scheduled_for: datetime = Field(..., description="the occurrence's nominal instant")
    due_at: datetime = Field(..., description="when it may start next (a retry moves it)")
    status: Status
    reason: str | None = Field(None, description="why it was skipped or cancelled (paused, deleted: its job was, before "
                               "it started or between two attempts; overlap: by the job's overlap policy; cancelled: "
                               "someone cancelled it), late_replay, "
                               "or overlap_buffered (it waited for the previous run)")
    attempt: int = Field(..., description="attempts started so far")
    worker: str | None
    enqueued_at: datetime | None
    first_started_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    last_error: str | None
    start_lag_s: float | None = Field(None, description="first start minus scheduled time")
    duration_s: float | None = Field(None, description="the latest attempt's run time (finished minus started), once finished")
    origin: Literal["scheduled", "trigger", "backfill"] = Field("scheduled", description="what made this occurrence")
    redrives: int = Field(0, description="times it was redriven after failing, each with a new attempt budget")
    late_reason: LateReasonName | None = Field(None, description="why it did not start within its grace, if it did not")
    job_version: int = Field(1, description="the job's version that wrote this occurrence (or an edit kept it for)")
    priority: int = Field(5, description="its job's priority when it was written (an edit moves unstarted ones): "
                          "0-9, higher starts first among the tenant's due executions")
    cancel_requested: bool = Field(False, description="someone cancelled it (or the overlap policy cancel_other asked it "
                                   "to stop); while it runs, its worker cancels the handler at the next heartbeat")


class Attempt(BaseModel):
    attempt: int
    worker: str | None
    started_at: datetime
    finished_at: datetime
    duration_s: float
    outcome: Literal["succeeded", "failed", "timed_out", "lease_expired", "handed_back", "cancelled"]
    error: str | None


class RedriveEntry(BaseModel):
    fence: int = Field(..., description="the fence after the redrive: attempts with a higher fence belong to the new budget")
    redriven_at: datetime
    redriven_by: str
    attempts_before: int = Field(..., description="attempts the spent budget had used")
    error_before: str | None


class ExecutionDetail(Execution):
    attempts: list[Attempt] = Field(..., description="every finished or abandoned attempt, oldest first")
    redrive_history: list[RedriveEntry] = Field(default_factory=list, description="every redrive, oldest first")


class FailedExecution(Execution):
    task: str


class FailedExecutionPage(BaseModel):
    items: list[FailedExecution]
    next_cursor: str | None = Field(None, description="pass as ?cursor= (with the same filters) for the next page; null on the last")


class Backfilled(BaseModel):
    created: list[Execution] = Field(..., description="executions created, oldest occurrence first")
    already_backfilled: int = Field(..., description="occurrences of the range an earlier backfill had created (left as they are)")


class Redriven(BaseModel):
    redriven: list[UUID]
    not_redriven: list[UUID] = Field(..., description="matched, but their job is paused or deleted, or another redrive took them")
    more: bool = Field(False, description="more matched than jobs.redrive_max: send the same request again")


NEXT_CURSOR = Field(None, description="pass as ?cursor= (with the same filters) for the next page; null on the last")


class JobPage(BaseModel):
    items: list[Job]
    next_cursor: str | None = NEXT_CURSOR


class ExecutionPage(BaseModel):
    items: list[Execution]
    next_cursor: str | None = NEXT_CURSOR


class Me(BaseModel):
    tenant: str


class Token(BaseModel):
    id: UUID
    created_at: datetime
    last_used_at: datetime | None = Field(None, description="last request made with it (to the minute)")
    revoked_at: datetime | None
    current: bool = Field(False, description="the token this request was made with")


class Tokens(BaseModel):
    items: list[Token] = Field(..., description="this tenant's tokens, newest first; the secrets are never shown again")


class IssuedToken(BaseModel):
    id: UUID
    token: str = Field(..., description="the secret: shown once, only its hash is kept")


class Tasks(BaseModel):
    tasks: list[str]


class StartLag(BaseModel):
    p50_s: float | None
    p90_s: float | None
    p99_s: float | None
    max_s: float | None
    started: int


class Minute(BaseModel):
    minute: datetime = Field(..., description="the UTC minute of scheduled time this row counts")
    scheduled: int = Field(..., description="executions scheduled in the minute (by now)")
    started: int = Field(..., description="of those, started at least once")
    succeeded: int
    failed: int
    lag_p50_s: float | None = Field(None, description="median start lag of those started (null: none started)")
    lag_p99_s: float | None = Field(None, description="99th percentile start lag of those started")


class MinuteStats(BaseModel):
    """Per minute of the last `minutes`, oldest first (the current, partial minute last)."""

    tenant: str
    now: datetime
    minutes: list[Minute]


class Overview(BaseModel):
    """This tenant's queue, horizon and recent executions (nothing of other tenants)."""

    tenant: str
    now: datetime
    queue_depth: int = Field(..., description="this tenant's entries in the Redis delay queue")
    oldest_due_age_s: float | None = Field(None, description="how long this tenant's oldest due, unstarted execution has waited")
    horizon_s: float | None = Field(None, description="how far ahead every enabled cron job of this tenant is written")
    window_s: float = Field(..., description="the span the next two fields cover")
    start_lag: StartLag
    runs_by_status: dict[str, int]


class LateExecution(Execution):
    late_reason: LateReasonName = Field(..., description="recorded, or (still waiting) the reason it would get now")


class LatePage(BaseModel):
    """Occurrences that did not start within [materialiser].misfire_grace_s, newest scheduled first."""

    items: list[LateExecution]
    since: datetime = Field(..., description="scheduled at or after this instant")


class WhyAnswer(BaseModel):
    """Why didn't the job run at the instant asked about?"""

    job_id: UUID
    asked_at: datetime
    scheduled_for: datetime | None = Field(None, description="the job's occurrence nearest to asked_at (none within a day: null)")
    execution: ExecutionDetail | None = Field(None, description="that occurrence's execution, with every attempt")
    late_reason: LateReasonName | None = Field(None, description="why it did not start within its grace")
    answer: str = Field(..., description="the explanation, for a person")


class ForecastWindow(BaseModel):
    window: Literal["1m", "5m", "15m", "60m"]
    seconds: int
    due: int = Field(..., description="executions not yet started that fall due within the window")


class Forecast(BaseModel):
    """Known future load: this tenant's executions due in the next 1, 5, 15 and 60 minutes."""

    tenant: str
    now: datetime
    windows: list[ForecastWindow]


class TzRecompute(BaseModel):
    id: int
    tzdata_version: str = Field(..., description="the tz database jobs were recomputed with")
    started_at: datetime
    finished_at: datetime | None


class TzMovedJob(BaseModel):
    job_id: UUID
    old_version: str | None = Field(None, description="the tz database its occurrences had been resolved with")
    removed: int = Field(..., description="future occurrences the new rules no longer produce (deleted, never started)")
    added: int = Field(..., description="occurrences the new rules produce (written)")
    moves: list[list[datetime | None]] = Field(..., description="up to 20 [old, new] UTC pairs, oldest first")


class TzReport(BaseModel):
    """The last recompute after a tz database change, and this tenant's jobs whose instants moved."""

    last_recompute: TzRecompute | None
    moved_jobs: list[TzMovedJob]


class ApplyRequest(_Input):
    """Schedules as code: the jobs a source declares, each the body of a create with its name."""

    source: Text = Field(..., min_length=1, max_length=200, description="the name this set of jobs is kept under")
    jobs: list[dict[str, Any]] = Field(..., max_length=1000, description="the declared jobs: each a POST /v1/jobs body "
                                       "with a name (its key within the source) and a cron or a run_at")  # fmt: skip
    prune: StrictBool = Field(False, description="delete the source's jobs the declarations no longer name")
    force: StrictBool = Field(False, description="overwrite jobs edited elsewhere since the last apply (drift)")


class AppliedJob(BaseModel):
    name: str
    job: Job = Field(..., description="added: the job created (dry run: as it would be; its id is not kept)")


class AppliedChange(BaseModel):
    name: str
    fields: list[str] = Field(..., description="what differs from the declaration (JobSpec names)")
    drifted: bool = Field(..., description="edited elsewhere since the last apply, overwritten because of force")
    edit: JobEdited


class AppliedDrift(BaseModel):
    name: str
    job_id: UUID
    version: int
    applied_version: int | None = Field(..., description="the version the last apply left the job at")
    fields: list[str] = Field(..., description="what differs from the declaration; empty: a removal")


class ApplyPlan(BaseModel):
    """What an apply did (applied) or would do (dry run)."""

    tenant: str
    source: str
    applied: bool
    added: list[AppliedJob]
    changed: list[AppliedChange]
    removed: list[AppliedJob] = Field(..., description="deleted (prune)")
    unchanged: list[str]
    undeclared: list[AppliedJob] = Field(..., description="no longer declared, kept (prune deletes them)")
    drifted: list[AppliedDrift] = Field(..., description="edited elsewhere; a plan lists them, an apply refuses (409) "
                                        "unless force")  # fmt: skip


class SecretInput(_Input):
    value: StrictStr = Field(..., min_length=1, description="the secret: stored sealed, never shown again (at most "
                             "[secrets].max_value_bytes UTF-8 bytes); referenced from params as {\"$secret\": NAME}")


class Secret(BaseModel):
    name: str
    created_at: datetime
    updated_at: datetime


class Secrets(BaseModel):
    items: list[Secret] = Field(..., description="this tenant's secrets by name; values are never shown")


class SigningKeyRotation(_Input):
    grace_s: Seconds = Field(  # type: ignore[assignment]
        None, ge=0, le=MAX_SIGNING_GRACE_S,
        description="seconds the older live keys keep signing beside the new one (default [secrets].signing_grace_s)",
    )  # fmt: skip


class SigningKey(BaseModel):
    id: str = Field(..., description="the key id sent in X-Schedulerd-Signature (v1=<id>:<signature>)")
    created_at: datetime
    retires_at: datetime | None = Field(None, description="when it stops signing (set by the next rotation); null: until retired")


class SigningKeys(BaseModel):
    items: list[SigningKey] = Field(..., description="this tenant's live signing keys, newest first; secrets are never shown again")


class IssuedSigningKey(BaseModel):
    id: str
    secret: str = Field(..., description="the receiver's verification secret: shown once, stored sealed")
    created_at: datetime


class NotificationSettingIn(_Input):
    """The tenant's notification setting: for its jobs without their own (a job's notify replaces it whole)."""

    url: Text = Field(..., max_length=notify.MAX_URL, description="POST notices to this URL (docs/notifications.md)")
    on: list[NotifyEvent] = Field(list(notify.DEFAULT_EVENTS), max_length=len(notify.EVENTS),
                                  description="the events notified: failure, recovery, late, dead_letter")  # fmt: skip


class NotificationSetting(BaseModel):
    url: str | None = Field(None, description="where notices go (credentials masked); null: no tenant setting")
    on: list[NotifyEvent] = Field(default_factory=list, description="the events notified")
    updated_at: datetime | None = None


class NotificationTestIn(_Input):
    url: Text | None = Field(None, max_length=notify.MAX_URL, description="send here instead of the tenant's URL")


class NotificationTestResult(BaseModel):
    url: str = Field(..., description="where it was sent (credentials masked)")
    delivered: bool = Field(..., description="the receiver answered 2xx")
    status: int | None = Field(None, description="the receiver's HTTP status; null: no answer (see error)")
    error: str | None = Field(None, description="why it was not delivered: the refusal, the failure, or the status")
    notification_id: UUID = Field(..., description="the X-Schedulerd-Notification-Id the test notice carried")


class Notice(BaseModel):
    id: UUID
    job_id: UUID
    execution_id: UUID
    event: Literal["failure", "recovery", "late", "dead_letter"]
    status: Literal["pending", "sent", "given_up"]
    attempts: int
    last_status: int | None = Field(None, description="the receiver's last HTTP status")
    last_error: str | None = None
    created_at: datetime
    sent_at: datetime | None = None


class Notices(BaseModel):
    items: list[Notice]
