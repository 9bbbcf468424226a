"""Jobs: what a definition may be (validate, used by every create through intake.Intake), and
steering a recorded one: pause (with a note), resume, delete, trigger, backfill, edit in place
(update), get. Used by the CLI, the API and the client.

Order of writes: the Postgres transaction commits before the ZADD. If the ZADD fails the
executions are still recorded; the sweeper puts the queued ones into Redis within its grace.
A `tenant` argument scopes every call: another tenant's job is "not found", exactly like a
missing one. None means an operator acting on every tenant (the CLI).
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol
from uuid import UUID

import structlog

from schedulerd import metrics, tzdb
from schedulerd.clock import Clock, system
from schedulerd.config import MAX_CATCH_UP_LIMIT, Config
from schedulerd.core.backfill import check_range, plan_backfill
from schedulerd.core import flow, notify
from schedulerd.core.durations import shifted, text_problem
from schedulerd.core.priority import DEFAULT as DEFAULT_PRIORITY
from schedulerd.core.priority import check_priority
from schedulerd.core.ids import execution_id
from schedulerd.core.late import LateReason
from schedulerd.core.materialise import plan
from schedulerd.core.misfire import MisfirePolicy
from schedulerd.core.overlap import OverlapPolicy
from schedulerd.core.schedule import DST_MISSING, DST_REPEATED, CronSchedule, Run, ScheduleError, schedule_of, smear_offset_s
from schedulerd.errors import ConflictError, NotFoundError, StaleVersionError, UnknownTaskError, ValidationError
from schedulerd.core import bounds
from schedulerd.core.bounds import Bounds
from schedulerd.core.labels import check_labels, parse_selector
from schedulerd.job_fields import EDITABLE
from schedulerd.materialising import bounds_of, materialise_jobs
from schedulerd.models import Enqueue, Execution, ExecutionStatus, Job, JobFilter
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from schedulerd.tasks import registry
from schedulerd.transient import enqueue_committed

log = structlog.get_logger("schedulerd.jobs")
# A job's flow-control columns (core/flow.py), as validate returns them.
FLOW_COLUMNS = ("concurrency_key", "concurrency_limit", "rate_key", "rate_limit", "rate_window_s")
# Its notification columns (core/notify.py), as validate returns them.
NOTIFY_COLUMNS = ("notify_url", "notify_on", "pause_after_failures")

TENANT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
LATEST_RUN_AT = timedelta(days=3660)  # "at" more than ~10 years ahead is a typo, not a plan
EARLIEST_RUN_AT = datetime(2000, 1, 1, tzinfo=UTC)
MAX_WINDOW_S = 86400.0
MAX_PARAMS_DEPTH = 32  # nesting levels of a params document
MAX_PAUSE_NOTE = 500  # characters of a pause note
MAX_ACTOR = 100  # characters of a "paused by" / "redriven by" name
MISFIRE_POLICIES = frozenset(MisfirePolicy)  # built once: iterating an enum per job showed in the intake's profile
OVERLAP_POLICIES = frozenset(OverlapPolicy)
BACKOFF_BASE_RANGE_S = (0.0, 86400.0)
BACKOFF_FACTOR_RANGE = (1.0, 100.0)
BACKOFF_MAX_RANGE_S = (0.0, 7 * 86400.0)
_PARAMS_ENCODER = json.JSONEncoder(allow_nan=False)  # built once: json.dumps with options builds one per call


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A job as a user asks for it; None fields take the [jobs] defaults.

    One-off: run_at None (now) or an instant. Recurring: cron (+ timezone, an IANA name)."""

    task: str
    tenant: str = "default"
    params: dict[str, Any] = field(default_factory=dict)
    run_at: datetime | None = None
    cron: str | None = None
    timezone: str = "UTC"
    misfire_policy: str = "run_once"
    catch_up_limit: int = 10
    window_s: float = 0.0  # smearing window for cron jobs
    name: str | None = None
    max_attempts: int | None = None
    timeout_s: float | None = None
    backoff_base_s: float | None = None  # retry policy; see README "Retries"
    backoff_factor: float | None = None
    backoff_max_s: float | None = None
    dst_repeated: str | None = None  # cron jobs: first | both; None = the DST rule (README)
    dst_missing: str | None = None  # cron jobs: shift | skip; None = the DST rule
    overlap: str = "allow"  # an occurrence due while the previous one runs: allow | skip | buffer_one | cancel_other
    delay_s: float | None = None  # one-off: run this long after `now` (Postgres's clock), instead of run_at
    labels: dict[str, str] = field(default_factory=dict)  # core/labels.py
    start_at: datetime | None = None  # recurring jobs: no occurrence before this instant
    end_at: datetime | None = None  # recurring jobs: none at or after this instant
    max_runs: int | None = None  # recurring jobs: at most this many occurrences in all
    priority: int = DEFAULT_PRIORITY  # 0-9, higher pops first within the tenant's share (core/priority.py)
    concurrency_key: str | None = None  # at most concurrency_limit of the tenant's executions with this key run at once
    concurrency_limit: int | None = None
    rate_key: str | None = None  # at most rate_limit starts per rate_window_s of the tenant's jobs with this key
    rate_limit: int | None = None
    rate_window_s: float | None = None
    notify_url: str | None = None  # where notices go (core/notify.py); None with notify_on None: the tenant's setting
    notify_on: tuple[str, ...] | None = None  # the events notified; () sends none
    pause_after_failures: int | None = None  # recurring jobs: paused after this many consecutive failed runs


def _check_text(text: str, field: str) -> None:
    """Text Postgres can store (core/durations.text_problem); the driver or jsonb would refuse
    anything else with a server error."""
    problem = text_problem(text)
    if problem is not None:
        raise ValidationError(field, problem)


def _check_json_text(value: Any, path: str) -> None:
    """Postgres jsonb refuses NUL characters; say where, before the insert fails half-way.
    Iterative, with a depth cap, so a deeply nested document is refused instead of overflowing
    the stack of every recursive encoder after this one."""
    todo: list[tuple[Any, str, int]] = [(value, path, 0)]
    while todo:
        item, where, depth = todo.pop()
        if depth > MAX_PARAMS_DEPTH:
            raise ValidationError("params", f"is nested deeper than {MAX_PARAMS_DEPTH} levels")
        if isinstance(item, str):
            _check_text(item, where)
        elif isinstance(item, dict):
            for key, child in item.items():
                todo.append((key, f"{where} key", depth + 1))
                todo.append((child, f"{where}.{key}", depth + 1))
        elif isinstance(item, list):
            todo.extend((child, f"{where}[{index}]", depth + 1) for index, child in enumerate(item))


def check_task(task: str, known_tasks: Collection[str] | None) -> None:
    """A task type this process registered, or (known_tasks given) one of those: the types live
    worker replicas reported (schedulerd/task_types.py), so producers need no handler modules."""
    if known_tasks is None:
        registry.get(task)  # raises "task: unknown task type ..."
    elif task not in known_tasks:
        known = ", ".join(sorted(known_tasks)) or "none: is a worker replica running?"
        raise UnknownTaskError(task, f"unknown task type {task!r} (registered by live workers: {known})")


def validate(spec: JobSpec, config: Config, now: datetime, known_tasks: Collection[str] | None = None) -> dict[str, Any]:
    """Return the job row's values (plus "params_json", the params as JSON text), or raise
    ValidationError naming the field. `now` is the instant "now" and `delay_s` count from."""
    defaults = config.jobs
    if not isinstance(spec.task, str):
        raise ValidationError("task", f"must be a string, got {type(spec.task).__name__}")
    check_task(spec.task, known_tasks)
    if not TENANT_PATTERN.match(spec.tenant):
        raise ValidationError("tenant", "must be 1-64 characters of letters, digits, '_', '.', '-'")
    encoded = _encoded_params(spec.params, defaults.max_params_bytes)
    _check_dst_overrides(spec)
    _check_delay(spec)
    if spec.cron is not None:
        cron: str | None = _cron_expression(spec)
        run_at, kind = None, "cron"
    else:
        run_at, kind = _one_off_run_at(spec, now)
        cron = None
    max_attempts = defaults.max_attempts if spec.max_attempts is None else spec.max_attempts
    if not 1 <= max_attempts <= 100:
        raise ValidationError("max_attempts", f"must be between 1 and 100, got {max_attempts}")
    timeout_s = defaults.timeout_s if spec.timeout_s is None else spec.timeout_s
    if not 0 < timeout_s <= 7 * 86400:
        raise ValidationError("timeout_s", f"must be above 0 and at most 7 days, got {timeout_s}")
    if spec.overlap not in OVERLAP_POLICIES:
        raise ValidationError("overlap", f"must be one of allow, skip, buffer_one, cancel_other, got {spec.overlap!r}")
    if spec.name is not None and len(spec.name) > 200:
        raise ValidationError("name", "is longer than 200 characters")
    if spec.name is not None:
        _check_text(spec.name, "name")
    backoff_base_s, backoff_factor, backoff_max_s = _backoff(spec, config)
    labels = check_labels(spec.labels) if spec.labels else {}
    job_priority = check_priority(spec.priority)
    concurrency = _checked(flow.check_key, spec.concurrency_key, spec.concurrency_limit)
    rate = _checked(flow.check_rate, spec.rate_key, spec.rate_limit, spec.rate_window_s)
    bounds.check_bounds(spec.start_at, spec.end_at, spec.max_runs, recurring=cron is not None)
    notify_url, notify_on = _notify(spec, config)
    _check_pause_after_failures(spec.pause_after_failures, recurring=cron is not None)
    return {
        "id": uuid.uuid4(), "tenant": spec.tenant, "name": spec.name, "task": spec.task,
        "params": spec.params, "schedule_kind": kind, "run_at": run_at, "cron": cron,
        "timezone": spec.timezone, "misfire_policy": spec.misfire_policy,
        "catch_up_limit": spec.catch_up_limit, "window_s": spec.window_s if cron else 0.0,
        "max_attempts": max_attempts, "backoff_base_s": backoff_base_s,
        "backoff_factor": backoff_factor, "backoff_max_s": backoff_max_s, "timeout_s": timeout_s,
        "dst_repeated": spec.dst_repeated, "dst_missing": spec.dst_missing,
        "tzdata_version": tzdb.installed_version() if cron else None,
        "overlap": spec.overlap, "params_json": encoded,
        "labels": labels, "labels_json": _PARAMS_ENCODER.encode(labels) if labels else "{}",
        "start_at": spec.start_at.astimezone(UTC) if spec.start_at else None,
        "end_at": spec.end_at.astimezone(UTC) if spec.end_at else None, "max_runs": spec.max_runs,
        "priority": job_priority,
        "concurrency_key": concurrency[0] if concurrency else None, "concurrency_limit": concurrency[1] if concurrency else None,
        "rate_key": rate[0] if rate else None, "rate_limit": rate[1] if rate else None,
        "rate_window_s": rate[2] if rate else None,
        "notify_url": notify_url, "notify_on": list(notify_on) if notify_on is not None else None,
        "notify_on_text": ",".join(notify_on) if notify_on is not None else None,
        "pause_after_failures": spec.pause_after_failures,
    }  # fmt: skip


def _notify(spec: JobSpec, config: Config) -> tuple[str | None, tuple[str, ...] | None]:
    """The job's own notification setting (url, events), or (None, None): its tenant's applies.
    A URL alone subscribes to core/notify.DEFAULT_EVENTS; events without a URL are refused
    (none at all, [], opts the job out and needs none)."""
    url, events = spec.notify_url, spec.notify_on
    if url is None and events is None:
        return None, None
    if isinstance(events, str) or events is not None and not isinstance(events, (list, tuple)):
        raise ValidationError("notify_on", "must be a list of events")
    try:
        checked = notify.DEFAULT_EVENTS if events is None else notify.check_events(events, "notify_on")
        if url is None:
            if checked:
                raise ValidationError("notify_url", "is required when notify.on names events")
            return None, ()
        notify.check_url(url, config.http.allow_hosts, config.http.allow_private, "notify_url")
    except notify.NotifyError as exc:
        raise ValidationError(exc.field, exc.message) from None
    return url, checked


def _check_pause_after_failures(value: int | None, *, recurring: bool) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= notify.MAX_PAUSE_AFTER_FAILURES:
        raise ValidationError("pause_after_failures", f"must be a whole number between 1 and {notify.MAX_PAUSE_AFTER_FAILURES}, "
                              f"got {value!r}")  # fmt: skip
    if not recurring:
        raise ValidationError("pause_after_failures", "applies to recurring (cron) jobs only: a one-off job runs once")


def _checked(check: Any, *values: Any) -> Any:
    """A core/flow.py check, its ValueError(field, message) as the ValidationError naming the field."""
    try:
        return check(*values)
    except ValueError as exc:
        raise ValidationError(*exc.args) from None


def _encoded_params(params: Any, max_bytes: int) -> str:
    """The params as JSON text: a JSON object Postgres can store, at most `max_bytes` encoded."""
    if not isinstance(params, dict):
        raise ValidationError("params", f"must be a JSON object, got {type(params).__name__}")
    try:
        encoded = _PARAMS_ENCODER.encode(params)
    except RecursionError:
        raise ValidationError("params", f"is nested deeper than {MAX_PARAMS_DEPTH} levels") from None
    except (TypeError, ValueError) as exc:
        raise ValidationError("params", f"is not valid JSON ({exc})") from None
    # The encoding is ASCII: a NUL or a lone surrogate would show as a \u escape, and fewer
    # brackets than the depth cap cannot nest past it. Only a document that fails this quick
    # test is walked (the walk names where the problem is; it was a tenth of enqueue_many).
    if "\\u" in encoded or encoded.count("{") + encoded.count("[") > MAX_PARAMS_DEPTH:
        _check_json_text(params, "params")
    if len(encoded.encode()) > max_bytes:
        raise ValidationError("params", f"is {len(encoded.encode())} bytes; the limit is {max_bytes}", "jobs.max_params_bytes")
    return encoded


def _check_dst_overrides(spec: JobSpec) -> None:
    """dst_repeated and dst_missing: one of their choices, and on a cron job only."""
    for name, value, choices in (("dst_repeated", spec.dst_repeated, DST_REPEATED), ("dst_missing", spec.dst_missing, DST_MISSING)):
        if value is not None and value not in choices:
            raise ValidationError(name, f"must be one of {', '.join(choices)}, got {value!r}")
        if value is not None and spec.cron is None:
            raise ValidationError(name, "applies to cron jobs only (a one-off job runs at one instant)")


def _check_delay(spec: JobSpec) -> None:
    """A delay (in) is the one-off's only instant, and at most 10 years."""
    if spec.delay_s is None:
        return
    if spec.run_at is not None:
        raise ValidationError("in", "give a run_at or a delay (in), not both")
    if spec.cron is not None:
        raise ValidationError("in", "a job has either a cron schedule or a delay (in), not both")
    if not 0 <= spec.delay_s <= LATEST_RUN_AT.total_seconds():  # also refuses NaN
        raise ValidationError("in", f"must be between 0 s and 10 years, got {spec.delay_s}")


def _cron_expression(spec: JobSpec) -> str:
    """A cron job's schedule as stored (CronSchedule's expression), after its misfire policy,
    catch-up limit and smearing window are checked."""
    if spec.run_at is not None:
        raise ValidationError("run_at", "a job has either a cron schedule or a run_at, not both")
    assert spec.cron is not None
    try:
        schedule = CronSchedule.parse(spec.cron, spec.timezone, spec.dst_repeated, spec.dst_missing)
    except ScheduleError as exc:
        field = "timezone" if "time zone" in str(exc) else "cron"
        if str(exc).startswith("dst_"):  # an @every job given a DST override
            field = "dst_repeated" if spec.dst_repeated is not None else "dst_missing"
        raise ValidationError(field, str(exc)) from None
    if spec.misfire_policy not in MISFIRE_POLICIES:
        raise ValidationError("misfire_policy", f"must be one of skip, run_once, catch_up, got {spec.misfire_policy!r}")
    if not 0 <= spec.catch_up_limit <= MAX_CATCH_UP_LIMIT:
        raise ValidationError("catch_up_limit", f"must be between 0 and {MAX_CATCH_UP_LIMIT}, got {spec.catch_up_limit}")
    if not 0 <= spec.window_s <= MAX_WINDOW_S:
        raise ValidationError("window", f"must be between 0 and 24 h, got {spec.window_s:g} s")
    return schedule.expression


def _one_off_run_at(spec: JobSpec, now: datetime) -> tuple[datetime, str]:
    """A one-off job's instant (UTC) and schedule kind: now, at run_at, or `delay_s` after now."""
    if spec.timezone != "UTC":  # a one-off job keeps a zone only to show its time in; it must be one
        try:
            CronSchedule.parse("* * * * *", spec.timezone)
        except ScheduleError as exc:
            raise ValidationError("timezone", str(exc)) from None
    if spec.delay_s is not None:
        run_at, kind = now + timedelta(seconds=spec.delay_s), "at"
    else:
        run_at, kind = spec.run_at or now, "now" if spec.run_at is None else "at"
    if not isinstance(run_at, datetime):
        raise ValidationError("run_at", f"must be a datetime, got {type(run_at).__name__}")
    if run_at.tzinfo is None or run_at.utcoffset() is None:
        raise ValidationError("run_at", "must carry a UTC offset")
    if not EARLIEST_RUN_AT <= run_at <= now + LATEST_RUN_AT:
        raise ValidationError("in" if spec.delay_s is not None else "run_at",
                              f"{run_at.isoformat()} is out of range (2000-01-01 to 10 years from now)")  # fmt: skip
    return run_at.astimezone(UTC), kind


def _backoff(spec: JobSpec, config: Config) -> tuple[float, float, float]:
    """The retry backoff (base s, factor, cap s), the [jobs] defaults where the spec gives none."""
    defaults = config.jobs
    backoff_base_s = defaults.backoff_base_s if spec.backoff_base_s is None else spec.backoff_base_s
    backoff_factor = defaults.backoff_factor if spec.backoff_factor is None else spec.backoff_factor
    backoff_max_s = defaults.backoff_max_s if spec.backoff_max_s is None else spec.backoff_max_s
    for key, value, (low, high) in (("backoff_base_s", backoff_base_s, BACKOFF_BASE_RANGE_S),
                                    ("backoff_factor", backoff_factor, BACKOFF_FACTOR_RANGE),
                                    ("backoff_max_s", backoff_max_s, BACKOFF_MAX_RANGE_S)):  # fmt: skip
        if not low <= value <= high:  # also refuses NaN
            raise ValidationError(key, f"must be between {low:g} and {high:g}, got {value}")
    return backoff_base_s, backoff_factor, backoff_max_s


def next_runs(job: Job, after: datetime, count: int) -> list[datetime]:
    """The due instants (smearing applied, UTC) of the job's next `count` occurrences, those
    scheduled strictly after `after`: the same slots the materialiser writes (its bounds too)."""
    if job.schedule_kind != "cron" or job.cron is None:
        return [job.run_at] if job.run_at and job.run_at > after else []
    offset = timedelta(seconds=smear_offset_s(str(job.id), job.window_s))
    schedule = schedule_of(job)
    instants = bounds.next_runs(schedule.next_runs, after, count, bounds_of(job), job.materialised_to, job.done_at is not None)
    return [shifted(t, offset) for t in instants]


def labelled_next_runs(job: Job, after: datetime, count: int) -> list[Run]:
    """next_runs with what DST did to each (CronSchedule.labelled_runs); smearing applied."""
    if job.schedule_kind != "cron" or job.cron is None:
        return [Run(job.run_at, (), None)] if job.run_at and job.run_at > after else []
    offset = timedelta(seconds=smear_offset_s(str(job.id), job.window_s))
    runs = bounds.next_runs(schedule_of(job).labelled_runs, after, count, bounds_of(job), job.materialised_to,
                            job.done_at is not None, at=lambda r: r.at)  # fmt: skip
    return [Run(shifted(r.at, offset), r.labels, r.note) for r in runs]


JOB_STATES = ("enabled", "paused", "done", "deleted")
JOB_KINDS = ("cron", "one-off")
LISTED_BY_DEFAULT = ("enabled", "paused")  # a list hides done jobs (finished one-offs) unless asked


def job_filter(
    *, name: str | None = None, task: str | None = None, kind: str | None = None, state: str | None = None,
    label: str | None = None, include_deleted: bool = False, flags: dict[str, str] | None = None,
) -> JobFilter:  # fmt: skip
    """A list's filter from what a request gave, each refused naming its field (`flags`: the
    name the caller typed for a field, e.g. {"label": "--label"}). state: a comma-separated list
    of JOB_STATES, or "all"; none given: LISTED_BY_DEFAULT, with deleted when include_deleted."""
    named = (flags or {}).get
    if name is not None:
        _check_text(name, named("name", "name"))
    if task is not None:
        _check_text(task, named("task", "task"))
    if kind is not None and kind not in JOB_KINDS:
        raise ValidationError(named("kind", "kind"), f"must be one of {', '.join(JOB_KINDS)}, got {kind!r}")
    if state is None or not state.strip():
        states: tuple[str, ...] | None = LISTED_BY_DEFAULT + (("deleted",) if include_deleted else ())
    elif state.strip() == "all":
        states = None if include_deleted else JOB_STATES[:3]
    else:
        states = tuple(dict.fromkeys(s.strip() for s in state.split(",")))
        wrong = [s for s in states if s not in JOB_STATES]
        if wrong:
            raise ValidationError(named("state", "state"),
                                  f"must be all or a comma-separated list of {', '.join(JOB_STATES)}, got {wrong[0]!r}")  # fmt: skip
    labels = parse_selector(label, named("label", "label")) if label else None
    return JobFilter(name or None, task or None, kind, labels, states)


def job_state(job: Job, settled: bool = False) -> str:
    """The one word for a job's state, in the API, the CLI and the dashboard: deleted | paused |
    done | enabled. done: a bounded recurring job with nothing left to write (done_at), or a
    one-off whose execution is final (`settled`: none of its executions is pending, queued or
    running; the store's job_settled_many and job_page's state filter judge it the same way)."""
    if job.deleted_at is not None:
        return "deleted"
    if not job.enabled:
        return "paused"
    if job.done_at is not None or (job.schedule_kind != "cron" and settled):
        return "done"
    return "enabled"


EDITABLE_FIELDS = frozenset(f.spec for f in EDITABLE)
SCHEDULE_FIELDS = frozenset({"cron", "timezone", "window_s", "dst_repeated", "dst_missing", "run_at"})
DIFF_RUNS = 10  # next runs of the old and the new schedule an edit compares


class KeyClaim(Protocol):
    """An edit's idempotency key (intake.EditKey), claimed in the edit's transaction."""

    async def earlier(self, tx: Store) -> dict[str, Any] | None:
        """The answer an earlier request with this key recorded (replay it), or None."""

    async def take(self, tx: Store, edit: Edit) -> dict[str, Any] | None:
        """Record this edit's answer with the key: None when taken, else the first one's answer."""


def spec_of(job: Job) -> JobSpec:
    """The JobSpec a recorded job answers to: what an edit merges its changes into."""
    one_off = job.schedule_kind != "cron"
    return JobSpec(
        task=job.task, tenant=job.tenant, params=job.params, run_at=job.run_at if one_off else None,
        cron=None if one_off else job.cron, timezone=job.timezone, misfire_policy=job.misfire_policy,
        catch_up_limit=job.catch_up_limit, window_s=job.window_s, name=job.name, max_attempts=job.max_attempts,
        timeout_s=job.timeout_s, backoff_base_s=job.backoff_base_s, backoff_factor=job.backoff_factor,
        backoff_max_s=job.backoff_max_s, dst_repeated=job.dst_repeated, dst_missing=job.dst_missing, overlap=job.overlap,
        labels=job.labels, start_at=job.start_at, end_at=job.end_at, max_runs=job.max_runs, priority=job.priority,
        concurrency_key=job.concurrency_key, concurrency_limit=job.concurrency_limit, rate_key=job.rate_key,
        rate_limit=job.rate_limit, rate_window_s=job.rate_window_s, notify_url=job.notify_url,
        notify_on=tuple(job.notify_on) if job.notify_on is not None else None, pause_after_failures=job.pause_after_failures,
    )  # fmt: skip


def _check_changes(job: Job, changes: Mapping[str, Any]) -> None:
    """Only editable fields, and never the schedule's kind: a cron job stays a cron job."""
    for name, value in changes.items():
        if name == "task":
            raise ValidationError("task", "cannot be edited: a job keeps its task type (create a new job for another)")
        if name not in EDITABLE_FIELDS:
            raise ValidationError(name, "cannot be edited")
        if name == "cron" and (job.schedule_kind != "cron" or value is None):
            raise ValidationError("cron", "cannot turn a one-off job into a cron job or back; create a new job instead")
        if name == "run_at" and job.schedule_kind == "cron":
            raise ValidationError("run_at", "cannot turn a cron job into a one-off job; create a new job instead")
        # Its budget counts the runs written; moving them would spend or free it unseen.
        if job.max_runs is not None and name in SCHEDULE_FIELDS:
            raise ValidationError(name, "cannot be edited on a job bounded by max_runs: its schedule is fixed "
                                  "(edit params, retry, timeout, name, labels; or create a new job)")


def _check_changes_types(changes: Mapping[str, Any]) -> None:
    if not isinstance(changes, Mapping) or not all(isinstance(k, str) for k in changes):
        raise ValidationError("changes", "must map field names to values")
    if not changes:
        raise ValidationError("changes", "name at least one field to change")


def _runs(job: Job, now: datetime) -> list[Run]:
    """The job's next DIFF_RUNS nominal runs (UTC, labelled), the instants an edit compares."""
    if job.schedule_kind != "cron" or job.cron is None:
        return [Run(job.run_at, (), None)] if job.run_at and job.run_at > now else []
    return schedule_of(job).labelled_runs(now, DIFF_RUNS)


@dataclass(frozen=True)
class Edit:
    """What an edit did (or, dry_run, would do): the job after it, and its next runs compared with
    those before it by UTC instant: removed (the old spec's only), kept (both), added (the new
    spec's only), up to the earlier of the two lists' last instants. `cancelled` / `written` count
    the executions it cancelled and wrote. `replayed`: the answer an earlier request with the same
    idempotency key recorded (nothing was written)."""

    job: Job
    removed: list[Run]
    kept: list[Run]
    added: list[Run]
    cancelled: int
    written: int
    dry_run: bool
    replayed: dict[str, Any] | None = None
    # An edit inside a caller's transaction: the executions to add to Redis (scores replaced)
    # once it commits.
    enqueue: tuple[Enqueue, ...] = field(default=(), repr=False)


def _diff(before: list[Run], after: list[Run]) -> tuple[list[Run], list[Run], list[Run]]:
    if before and after and len(before) == DIFF_RUNS and len(after) == DIFF_RUNS:
        cut = min(before[-1].at, after[-1].at)
    elif before and len(before) == DIFF_RUNS:
        cut = before[-1].at
    elif after and len(after) == DIFF_RUNS:
        cut = after[-1].at
    else:
        cut = None
    before = [r for r in before if cut is None or r.at <= cut]
    after = [r for r in after if cut is None or r.at <= cut]
    old, new = {r.at for r in before}, {r.at for r in after}
    return [r for r in before if r.at not in new], [r for r in after if r.at in old], [r for r in after if r.at not in old]


class _Replayed(Exception):
    """Raised inside an edit's transaction to roll it back: its key's answer is another request's."""

    def __init__(self, answer: dict[str, Any]) -> None:
        super().__init__("replayed")
        self.answer = answer


@dataclass(frozen=True)
class Backfill:
    """What a backfill did: the executions it created, and the occurrences of the range that a
    previous backfill had already created (left as they are)."""

    created: list[Execution]
    already_backfilled: int


def check_actor(by: str, field: str = "by") -> str:
    """A name saying who acted (paused, redrove): 1-100 characters of storable text."""
    if not by or len(by) > MAX_ACTOR:
        raise ValidationError(field, f"must be 1-{MAX_ACTOR} characters, got {len(by)}")
    _check_text(by, field)
    return by


def queued(executions: list[Execution]) -> list[Enqueue]:
    return [Enqueue(e.id, e.due_at, e.tenant, e.priority) for e in executions if e.status == ExecutionStatus.QUEUED]


async def pause_in(tx: Store, job_id: UUID, at: datetime, note: str | None, by: str | None) -> tuple[Job, int] | None:
    """The pause, inside the caller's transaction: the job stops, its unstarted executions are
    cancelled (reason paused); a running one's retry, reclaim or park is cancelled when it comes
    (the hot path's statements read the job's enabled flag). None: no such live job. Returns
    (job, cancelled)."""
    job = await tx.job_set_enabled(job_id, False, at, note, by)  # the cursor is unused when pausing
    if job is None:
        return None
    return job, await tx.execution_cancel_for_job(job_id, "paused")


class Jobs:
    def __init__(self, store: Store, queue: DelayQueue, config: Config, clock: Clock | None = None) -> None:
        self.store = store
        self.queue = queue
        self.config = config
        self.clock = clock or system()  # the host's: only stamps pause times; due times use Postgres's

    async def _enqueue(self, entries: list[Enqueue]) -> None:
        await enqueue_committed(self.queue, entries, "jobs.enqueue_failed", shared=True)

    async def get(self, job_id: UUID, tenant: str | None = None) -> Job:
        job = await self.store.job_get(job_id)
        if job is None or (tenant is not None and job.tenant != tenant):
            raise NotFoundError(f"job {job_id} not found")
        return job

    async def pause(
        self, job_id: UUID, tenant: str | None = None, *, note: str | None = None, by: str | None = None
    ) -> tuple[Job, int]:
        """Stop a job; its not-yet-started executions are cancelled. `note` says why and `by` who
        (both shown with the job until it is resumed). Returns (job, cancelled)."""
        if note is not None:
            if len(note) > MAX_PAUSE_NOTE:
                raise ValidationError("note", f"is {len(note)} characters; the limit is {MAX_PAUSE_NOTE}")
            _check_text(note, "note")
        if by is not None:
            check_actor(by)
        await self.get(job_id, tenant)
        async with self.store.transaction() as tx:
            paused = await pause_in(tx, job_id, self.clock.now(), note or None, by)
            if paused is None:
                raise NotFoundError(f"job {job_id} not found")
        return paused

    async def resume(self, job_id: UUID, tenant: str | None = None) -> Job:
        """Start a paused cron job again from now (the paused stretch is not caught up). The
        occurrences the pause covered are counted as late with reason paused (all of them, also
        those never written because they lay past the materialiser's horizon)."""
        current = await self.get(job_id, tenant)
        if current.schedule_kind != "cron":
            raise ValidationError("id", "only recurring (cron) jobs can be resumed; create a new one-off job instead")
        async with self.store.transaction() as tx:
            now = await tx.clock_now()
            job = await tx.job_set_enabled(job_id, True, now)
            if job is None:
                raise NotFoundError(f"job {job_id} not found")
            revived = await tx.execution_revive_for_job(job_id, self.config.dispatcher.horizon_s)
            done = await materialise_jobs(
                tx, [job], now, self.config.materialiser, self.config.dispatcher.horizon_s, late_config=self.config.late
            )
        await self._enqueue(queued(revived) + done.enqueue)
        if not current.enabled and current.cron is not None:
            # updated_at of a paused job is when it was paused (pause is its last change); counted
            # at most lookback_s back, as far as the materialiser would have looked.
            since = max(current.updated_at, now - timedelta(seconds=self.config.materialiser.lookback_s))
            paused_over = schedule_of(current).occurrences(since, now)
            metrics.LATE.labels(LateReason.PAUSED).inc(len(paused_over))
        return job

    async def delete(self, job_id: UUID, tenant: str | None = None, *, tx: Store | None = None) -> tuple[Job, int]:
        """Soft-delete: no further runs, unstarted executions cancelled, history kept. `tx`:
        inside this caller's transaction (an apply's), instead of one of its own."""
        await self.get(job_id, tenant)
        if tx is not None:
            return await self._delete(tx, job_id)
        async with self.store.transaction() as tx:
            return await self._delete(tx, job_id)

    @staticmethod
    async def _delete(tx: Store, job_id: UUID) -> tuple[Job, int]:
        job = await tx.job_delete(job_id)
        if job is None:
            raise NotFoundError(f"job {job_id} not found")
        return job, await tx.execution_cancel_for_job(job_id, "deleted")

    async def trigger(self, job_id: UUID, tenant: str | None = None) -> Execution:
        """Run a job once now, besides its schedule. Its slot is (this instant, origin trigger),
        so it never takes a scheduled occurrence's place, even at the same instant. A paused or
        deleted job is refused; the job is held while the run is written, so a pause or delete
        racing the trigger either refuses it or cancels the run it wrote."""
        async with self.store.transaction() as tx:
            job = await self._held(tx, job_id, tenant, "triggering")
            now = await tx.clock_now()  # Postgres's: a skewed host must not make it due late or early
            (execution,) = await tx.execution_insert_many(
                [(execution_id(now), job.id, job.tenant, now, now)], self.config.dispatcher.horizon_s, origin="trigger"
            )
        await self._enqueue(queued([execution]))
        return execution

    async def update(
        self, job_id: UUID, changes: Mapping[str, Any], tenant: str | None = None, *, dry_run: bool = False,
        if_version: int | None = None, claim: KeyClaim | None = None, tx: Store | None = None,
    ) -> Edit:  # fmt: skip
        """Edit a job in place, in one transaction holding its row FOR UPDATE (the materialiser,
        pause, trigger and another edit wait; two edits serialise, the second sees the first).
        `changes` maps JobSpec field names (job_fields.EDITABLE, and labels) to new values; the
        merged spec passes the create path's validate, or nothing is written. The version rises by
        one. Of the written occurrences that never started, those the new spec does not produce are
        cancelled (reason edited), those it produces at the same UTC instant keep their row (new
        due time and version); the new spec's occurrences up to the materialiser's horizon are
        written. A running execution, a retry waiting for its next attempt and an occurrence
        already due are left as they are (each attempt reads the job's params when it starts).
        `if_version`: refuse (StaleVersionError) unless the job is at that version. dry_run:
        the same answer, nothing written. `claim`: the idempotency key's (intake.key_claim).
        `tx`: run inside this caller's transaction (an apply's) instead of one of its own; then
        nothing goes to Redis: Edit.enqueue lists what to add once that transaction commits."""
        _check_changes_types(changes)
        if tx is not None and claim is not None:
            raise ValueError("an edit inside a caller's transaction takes no idempotency key")
        try:
            return await self._update(job_id, changes, tenant, dry_run, if_version, claim, tx)
        except _Replayed as replayed:
            job = await self.get(job_id, tenant)
            return Edit(job, [], [], [], 0, 0, False, replayed=replayed.answer)

    async def _update(
        self, job_id: UUID, changes: Mapping[str, Any], tenant: str | None, dry_run: bool, if_version: int | None,
        claim: KeyClaim | None, outer: Store | None = None,
    ) -> Edit:  # fmt: skip
        async with contextlib.nullcontext(outer) if outer is not None else self.store.transaction() as tx:
            job = await tx.job_lock_for_edit(job_id)
            if job is None or (tenant is not None and job.tenant != tenant):
                raise NotFoundError(f"job {job_id} not found")
            if job.deleted_at is not None:
                raise ConflictError("job_id", f"job {job_id} is deleted; it can no longer be edited")
            # A replay answers before the version is judged: the first request moved it.
            earlier = await claim.earlier(tx) if claim is not None and not dry_run else None
            if earlier is not None:
                return Edit(job, [], [], [], 0, 0, False, replayed=earlier)
            if if_version is not None and if_version != job.version:
                raise StaleVersionError("version", f"job {job_id} is at version {job.version}, not {if_version}: "
                                        "it was edited meanwhile; read it again")  # fmt: skip
            _check_changes(job, changes)
            now = await tx.clock_now()
            for key, partners in (("concurrency_key", ("concurrency_limit",)), ("rate_key", ("rate_limit", "rate_window_s"))):
                if key in changes and changes[key] is None:  # removing a key removes its limit
                    changes = {**dict.fromkeys(partners), **changes}
            spec = replace(spec_of(job), **changes)
            values = validate(spec, self.config, now, known_tasks={job.task})
            labels = values["labels"]
            after = replace(
                job, name=values["name"], params=values["params"], schedule_kind=values["schedule_kind"],
                run_at=values["run_at"], cron=values["cron"], timezone=values["timezone"],
                misfire_policy=values["misfire_policy"], catch_up_limit=values["catch_up_limit"],
                window_s=values["window_s"], max_attempts=values["max_attempts"], backoff_base_s=values["backoff_base_s"],
                backoff_factor=values["backoff_factor"], backoff_max_s=values["backoff_max_s"],
                timeout_s=values["timeout_s"], dst_repeated=values["dst_repeated"], dst_missing=values["dst_missing"],
                overlap=values["overlap"], labels=labels, version=job.version + 1, priority=values["priority"],
                **{name: values[name] for name in FLOW_COLUMNS + NOTIFY_COLUMNS},
            )  # fmt: skip
            removed, kept, added = _diff(_runs(job, now), _runs(after, now))
            edits, inserts, cursor = await self._occurrences(tx, job, after, now)
            cancelled = sum(1 for e in edits if e[2] == "cancel")
            edit = Edit(after, removed, kept, added, cancelled, len(inserts), dry_run)
            if dry_run:
                return edit
            written = await tx.job_update(job.id, values, labels, cursor, tzdb.installed_version() if inserts else None,
                                         len(inserts))
            assert written is not None  # locked and not deleted
            horizon_s = self.config.dispatcher.horizon_s
            changed = await tx.execution_edit_many(edits, written.version, horizon_s, written.priority) if edits else []
            created = await tx.execution_insert_many(inserts, horizon_s) if inserts else []
            edit = replace(edit, job=written, written=len(created))
            # Recorded once written, so a replay answers exactly what this request answers.
            if claim is not None and (earlier := await claim.take(tx, edit)) is not None:
                raise _Replayed(earlier)  # a concurrent request with this key won: roll this one back
        if outer is not None:
            return replace(edit, enqueue=tuple(queued(changed + created)))
        # Scores replaced: a kept row's due time moves with a new smearing window.
        await enqueue_committed(self.queue, queued(changed + created), "jobs.enqueue_failed", only_new=False)
        log.info("jobs.edited", job_id=str(job.id), tenant=job.tenant, version=written.version, fields=sorted(changes),
                 cancelled=cancelled, written=len(created))  # fmt: skip
        return edit

    async def _occurrences(
        self, tx: Store, job: Job, after: Job, now: datetime
    ) -> tuple[list[tuple[UUID, datetime, str, datetime]], list[tuple[UUID, UUID, str, datetime, datetime]], datetime | None]:
        """The edit's row changes: (id, scheduled_for, action, due_at) for execution_edit_many, the
        occurrences to insert, and the job's new cursor. Locks the movable rows it judges."""
        config = self.config.materialiser
        if after.schedule_kind == "cron":
            # start_at / end_at hold; max_runs is left out: the written runs it counts are judged here.
            step = plan(schedule_of(after), str(after.id), after.window_s, None, now, horizon_s=config.horizon_s,
                        lookback_s=config.lookback_s, max_occurrences=config.max_occurrences_per_job,
                        bounds=Bounds(after.start_at, after.end_at, None, 0))  # fmt: skip
            expected = {t: due for t, due in step.occurrences}
            # Rows the old spec wrote past the new cursor are judged too: the materialiser never
            # writes behind its cursor, so a slot left there would never be given back.
            cursor = step.cursor
            if job.materialised_to is not None and job.materialised_to > cursor:
                offset = timedelta(seconds=smear_offset_s(str(after.id), after.window_s))
                expected.update((t, shifted(t, offset)) for t in schedule_of(after).occurrences(cursor, job.materialised_to))
                cursor = job.materialised_to
            rows = await tx.execution_edit_lock(job.id, now)
        else:
            assert after.run_at is not None
            expected, cursor = {after.run_at: after.run_at}, job.materialised_to
            rows = await tx.execution_edit_lock(job.id, EARLIEST_RUN_AT - timedelta(days=1))
            started = [r for r in rows if not r["movable"] and r["status"] != ExecutionStatus.CANCELLED]
            if started and after.run_at != job.run_at:
                raise ValidationError("run_at", "the job's run has already started; create a new job to run it again")
        edits: list[tuple[UUID, datetime, str, datetime]] = []
        for r in rows:
            at, movable, due = r["scheduled_for"], r["movable"], expected.get(r["scheduled_for"])
            if not movable:
                continue
            if r["status"] != ExecutionStatus.CANCELLED:
                edits.append((r["id"], at, "cancel", at) if due is None else (r["id"], at, "keep", due))
            elif not job.enabled:  # a resume revives the slots cancelled as paused: those the new spec produces
                action = "paused" if due is not None else "edited"
                if action != r["reason"]:
                    edits.append((r["id"], at, action, at))
            elif due is not None:
                edits.append((r["id"], at, "revive", due))
        written = {r["scheduled_for"] for r in rows}
        # A job bounded by max_runs writes nothing new (its schedule is fixed: the materialiser
        # writes what its budget allows), nor does one whose schedule is done.
        fixed = not job.enabled or job.max_runs is not None or job.done_at is not None
        inserts = [] if fixed else [
            (execution_id(t), job.id, job.tenant, t, due) for t, due in sorted(expected.items()) if t not in written
        ]  # fmt: skip
        return edits, inserts, cursor

    async def _held(self, tx: Store, job_id: UUID, tenant: str | None, doing: str) -> Job:
        """The job, locked in `tx` against pause, resume and delete; refused when deleted or paused."""
        job = await tx.job_lock_shared(job_id)
        if job is None or (tenant is not None and job.tenant != tenant):
            raise NotFoundError(f"job {job_id} not found")
        if job.deleted_at is not None:
            raise ValidationError("id", f"job {job_id} is deleted")
        if not job.enabled:
            raise ValidationError("id", f"job {job_id} is paused; resume it before {doing}")
        return job

    async def backfill(self, job_id: UUID, start: datetime, end: datetime, tenant: str | None = None) -> Backfill:
        """Create the occurrences of a cron job's schedule in [start, end) (the past only) as
        executions of origin backfill: scheduled_for is the occurrence's instant, due times are
        spread from now at [jobs].backfill_per_s. The slot (job, instant, origin backfill) is
        unique: a scheduled run of the same instant is neither blocked nor taken, and an instant
        already backfilled is left as it is (running the same backfill twice creates nothing)."""
        defaults = self.config.jobs
        async with self.store.transaction() as tx:
            job = await self._held(tx, job_id, tenant, "backfilling")
            if job.schedule_kind != "cron" or job.cron is None:
                raise ValidationError("id", f"job {job_id} runs once ({job.schedule_kind}); only cron jobs can be backfilled")
            now = await tx.clock_now()  # Postgres's: "the past" and the due times are judged on one clock
            check_range(start, end, now)
            if start < EARLIEST_RUN_AT:
                raise ValidationError("from", f"{start.isoformat()} is before 2000-01-01")
            plan = plan_backfill(
                schedule_of(job), start, end, now,
                max_occurrences=defaults.backfill_max_occurrences, per_s=defaults.backfill_per_s,
            )  # fmt: skip
            rows = [(execution_id(at), job.id, job.tenant, at, due) for at, due in plan.occurrences]
            created = await tx.execution_insert_many(rows, self.config.dispatcher.horizon_s, origin="backfill")
        await self._enqueue(queued(created))
        metrics.BACKFILLED.inc(len(created))
        log.info("jobs.backfilled", job_id=str(job.id), tenant=job.tenant, created=len(created),
                 already_backfilled=len(rows) - len(created), start=start.isoformat(), end=end.isoformat())  # fmt: skip
        return Backfill(created, len(rows) - len(created))
