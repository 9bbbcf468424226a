"""The one way jobs are created, by every door: the Python client, POST /v1/jobs (one, with or
without an Idempotency-Key), POST /v1/jobs/batch and `schedulerd job create` (one, or
--from-file). Its idempotency keys serve an edit too (EditKey: PATCH /v1/jobs/{id}). Validate every item against Postgres's clock and the task types live workers
reported, claim the idempotency keys first, record the jobs with their one-off executions in one
multi-row INSERT, then ZADD the queued executions in one pipeline after the commit. One-off jobs
without keys need no transaction: that INSERT is a single statement.

A refused item writes nothing and is reported with its index, field and message; the other items
are written. Inside an application's own transaction (`connection=`) nothing is queued in Redis:
the rows stay pending until the dispatcher sees them committed (or the client's flush adds them).
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import operator
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import structlog

from schedulerd.clock import ServerClock
from schedulerd.config import Config
from schedulerd.core import traceparent
from schedulerd.core.ids import execution_id
from schedulerd.core.priority import DEFAULT as DEFAULT_PRIORITY
from schedulerd.errors import ConflictError, ValidationError
from schedulerd.jobs import FLOW_COLUMNS, NOTIFY_COLUMNS, Edit, JobSpec, validate
from schedulerd.materialising import materialise_jobs
from schedulerd.models import Enqueue, ExecutionStatus, IdempotencyRecord, Job
from schedulerd.queue import DelayQueue
from schedulerd.store import RETRYABLE_ERRORS, Connection, Store
from schedulerd.task_types import TaskTypes
from schedulerd.transient import enqueue_committed

# Records made per job are slotted: a batch of thousands of them is what the garbage collector
# walks, and a __dict__ apiece was a measurable share of enqueue_many's time.
# job_insert_many's columns, in its order (values from jobs.validate; params go as JSON text; the
# item's traceparent goes on its one-off execution).
JOB_COLUMNS = (
    "id", "tenant", "name", "task", "params_json", "schedule_kind", "run_at", "cron", "timezone", "misfire_policy",
    "catch_up_limit", "window_s", "max_attempts", "backoff_base_s", "backoff_factor", "backoff_max_s", "timeout_s",
    "dst_repeated", "dst_missing", "tzdata_version", "overlap", "labels_json", "start_at", "end_at", "max_runs",
    "priority", "concurrency_key", "concurrency_limit", "rate_key", "rate_limit", "rate_window_s", "traceparent",
    "notify_url", "notify_on_text", "pause_after_failures",
)  # fmt: skip
# A dispatch horizon no due time is inside: inside an application's transaction every new
# execution is written pending, for the dispatcher to enqueue once it can see the row.
NOT_QUEUED_HORIZON_S = -1e9
MAX_IDEMPOTENCY_KEY = 200  # characters, as the API's Idempotency-Key header (and a debounce key)
MAX_DEBOUNCE_WINDOW_S = 86400.0
log = structlog.get_logger("schedulerd.intake")
# A create whose connection broke is retried after 0.1, 0.2, 0.4 ... s, at most 2 s apart.
COMMIT_RETRY_BASE_DELAY_S, COMMIT_RETRY_MAX_DELAY_S = 0.1, 2.0
# Why a key's create is refused (code conflict): the API words each its own way.
KEY_IN_FLIGHT = "a create with this key is in flight; retry"
KEY_REUSED = "was used with a different request"


@dataclass(frozen=True, slots=True)
class Item:
    """One job to create. `request_hash` tells a replay (same key, same request) from a
    conflict (same key, another request); None: a hash of the spec. `answer`: what a keyed
    create records with its key for replays, built from the job row (JSON values); None: the
    job id and first executions. `traceparent`: the producer's trace context (W3C, checked by
    core/traceparent.py), stored on a one-off's execution; a cron job's occurrences carry none."""

    spec: JobSpec
    idempotency_key: str | None = None
    request_hash: bytes | None = None
    answer: Callable[[Job], Any] | None = None
    debounce: Debounce | None = None
    traceparent: str | None = None


@dataclass(frozen=True, slots=True)
class Debounce:
    """Creates with one key (per tenant) share one execution while it has not started, due
    `window_s` after the last of them, with the last one's params; each is answered with it."""

    key: str
    window_s: float

    @classmethod
    def given(cls, key: str | None, window_s: float | None) -> Debounce | None:
        """From a door's two fields: None when neither is given; refused when one comes alone."""
        if key is None and window_s is None:
            return None
        if key is None:
            raise ValidationError("debounce_key", "is required with debounce_window")
        if window_s is None:
            raise ValidationError("debounce_window", "is required with debounce_key")
        return cls(key, window_s)


@dataclass(frozen=True, slots=True)
class EnqueuedExecution:
    id: UUID
    due_at: datetime  # UTC
    status: str | None  # queued (in Redis after the commit) or pending (the dispatcher enqueues it); None: a replay


@dataclass(frozen=True, slots=True)
class Enqueued:
    """An item accepted: its job and first execution(s) (a cron job's first horizon). With
    `replayed`, an earlier create with the same idempotency key made them (a replayed cron job
    names its job only)."""

    index: int
    job_id: UUID
    executions: tuple[EnqueuedExecution, ...]
    replayed: bool = False
    job: Job | None = field(default=None, repr=False)  # the job row, when asked for (with_jobs) and not a replay
    response: Any = field(default=None, repr=False)  # a keyed item's answer (Item.answer), as recorded with its key
    ok: bool = field(default=True, init=False)

    @property
    def execution_id(self) -> UUID | None:
        """The first execution's id (a one-off job has exactly one)."""
        return self.executions[0].id if self.executions else None


@dataclass(frozen=True, slots=True)
class Refused:
    """An item refused: nothing of it was written. code: validation | limit_exceeded | conflict."""

    index: int
    field: str
    message: str
    code: str = "validation"
    limit: str | None = None
    ok: bool = field(default=False, init=False)

    def __str__(self) -> str:
        return f"item {self.index}: {self.field}: {self.message}"


Result = Enqueued | Refused
_job_row = operator.itemgetter(*JOB_COLUMNS)


def spec_hash(spec: JobSpec) -> bytes:
    """A stable digest of what was asked (not of the derived row: "now" moves between retries)."""
    fields = asdict(spec)
    fields.pop("tenant")
    if fields["priority"] == DEFAULT_PRIORITY:  # a key taken before priorities existed still matches its retry
        fields.pop("priority")
    for name in FLOW_COLUMNS + NOTIFY_COLUMNS:  # and one taken before flow control or notifications
        if fields[name] is None:
            fields.pop(name)
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).digest()


def held_answer(record: IdempotencyRecord | None, request_hash: bytes) -> dict[str, Any] | str:
    """A key another request holds: the answer it recorded (replay it), or why not (KEY_IN_FLIGHT:
    its transaction has not ended; KEY_REUSED: it asked something else)."""
    if record is None:
        return KEY_IN_FLIGHT
    if record.request_hash != request_hash:
        return KEY_REUSED
    # The application's own connection has no jsonb codec: the response comes as text.
    return json.loads(record.response) if isinstance(record.response, str) else record.response


@dataclass(frozen=True)
class EditKey:
    """An edit's idempotency key (jobs.KeyClaim): the same table and claim as a create's, so a key
    is one request's, whichever it was. `answer` builds the response a replay returns."""

    tenant: str
    key: str
    request_hash: bytes
    answer: Callable[[Edit], dict[str, Any]]
    ttl_s: float

    async def earlier(self, tx: Store) -> dict[str, Any] | None:
        """The answer recorded with this key by an earlier request, or None (the key is free);
        ConflictError when another request holds it."""
        records = await tx.idempotency_get_many([(self.tenant, self.key)], self.ttl_s)
        if (self.tenant, self.key) not in records:
            return None
        return self._judged(records[(self.tenant, self.key)])

    async def take(self, tx: Store, edit: Edit) -> dict[str, Any] | None:
        """Record this edit's answer with the key, in the edit's transaction; None when taken,
        else the answer of the request that took it first (a concurrent one: replay it)."""
        claim = (self.tenant, self.key, self.request_hash, edit.job.id, json.dumps(self.answer(edit)))
        if await tx.idempotency_claim_many([claim], self.ttl_s):
            return None
        return self._judged((await tx.idempotency_get_many([(self.tenant, self.key)], self.ttl_s)).get((self.tenant, self.key)))

    def _judged(self, record: IdempotencyRecord | None) -> dict[str, Any]:
        answer = held_answer(record, self.request_hash)
        if isinstance(answer, str):
            raise ConflictError("idempotency_key", answer)
        return answer


def _debounced(item: Item) -> JobSpec:
    """A debounced create's spec: a one-off due its window from now (a later create of its key
    moves it on). Refused (ValidationError) where the request sets what debouncing decides."""
    debounce, spec = item.debounce, item.spec
    assert debounce is not None
    key = debounce.key
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY or not key.isprintable() \
            or not key.isascii() or " " in key:  # fmt: skip
        raise ValidationError("debounce_key", f"must be 1-{MAX_IDEMPOTENCY_KEY} printable ASCII characters without spaces")
    window_s = debounce.window_s
    if isinstance(window_s, bool) or not isinstance(window_s, int | float) or not 0 < window_s <= MAX_DEBOUNCE_WINDOW_S:
        raise ValidationError("debounce_window", f"must be above 0 s and at most 1 day, got {window_s!r}")
    if spec.cron is not None:
        raise ValidationError("debounce_key", "applies to one-off jobs, not to a cron schedule")
    if spec.run_at is not None or spec.delay_s is not None:
        raise ValidationError("debounce_key", "sets the due time (debounce_window after the last create): give no run_at or in")
    if item.idempotency_key is not None:
        raise ValidationError("debounce_key", "give a debounce_key or an idempotency_key, not both")
    return replace(spec, delay_s=float(window_s))


def _refusal(index: int, exc: ValidationError) -> Refused:
    return Refused(index, exc.field, exc.message, "limit_exceeded" if exc.limit else "validation", exc.limit)


def _job(values: dict[str, Any], created_at: datetime) -> Job:
    """The Job row just inserted, built from the values sent (the insert returns nothing)."""
    return Job(
        id=values["id"], tenant=values["tenant"], name=values["name"], task=values["task"], params=values["params"],
        schedule_kind=values["schedule_kind"], run_at=values["run_at"], cron=values["cron"],
        timezone=values["timezone"], misfire_policy=values["misfire_policy"],
        catch_up_limit=values["catch_up_limit"], window_s=values["window_s"], max_attempts=values["max_attempts"],
        backoff_base_s=values["backoff_base_s"], backoff_factor=values["backoff_factor"],
        backoff_max_s=values["backoff_max_s"], timeout_s=values["timeout_s"], overlap=values["overlap"],
        enabled=True, materialised_to=None, created_at=created_at, updated_at=created_at, deleted_at=None,
        paused_note=None, paused_by=None, paused_at=None, dst_repeated=values["dst_repeated"],
        dst_missing=values["dst_missing"], tzdata_version=values["tzdata_version"], labels=values["labels"],
        start_at=values["start_at"], end_at=values["end_at"], max_runs=values["max_runs"], runs_written=0, done_at=None,
        priority=values["priority"], **{name: values[name] for name in FLOW_COLUMNS + NOTIFY_COLUMNS},
    )  # fmt: skip


@dataclass(slots=True)
class _Accepted:
    slot: int  # position in this call's items
    index: int  # the number results carry (the caller's numbering)
    row: int  # its values' position in the batch's columns
    job_id: UUID
    tenant: str
    key: tuple[str, str] | None
    request_hash: bytes | None
    first_execution: UUID | None  # one-off jobs: their execution's id, made before the insert
    run_at: datetime | None  # one-off jobs: the execution's due time
    values: dict[str, Any] | None  # kept only where the Job row is built (cron jobs, with_jobs, an answer)
    answer: Callable[[Job], Any] | None
    priority: int  # one-off jobs: the band their execution is queued in
    response: Any = None  # the answer recorded with the key
    debounce: tuple[str, str] | None = None  # (tenant, key) of a debounced create


class _Columns:
    """The accepted jobs' values, one list per JOB_COLUMNS column, filled as each item is
    validated. A values dict per job would live until the batch is written, across its round
    trips, and be promoted to the collector's oldest generation with the rest of the batch: the
    full collections that followed were a quarter of enqueue_many's time."""

    def __init__(self) -> None:
        self.lists: list[list[Any]] = [[] for _ in JOB_COLUMNS]
        self.rows = 0

    def append(self, values: dict[str, Any]) -> int:
        for column, value in zip(self.lists, _job_row(values)):
            column.append(value)
        self.rows += 1
        return self.rows - 1

    def only(self, rows: list[int]) -> list[list[Any]]:
        """The columns of these rows (all of them: the lists as they are)."""
        if len(rows) == self.rows:
            return self.lists
        return [[column[row] for row in rows] for column in self.lists]


class Intake:
    def __init__(self, store: Store, queue: DelayQueue, config: Config, task_types: TaskTypes | None = None,
                 clock: ServerClock | None = None) -> None:  # fmt: skip
        self.store = store
        self.queue = queue
        self.config = config
        self.task_types = task_types  # None: only this process's registry
        self.clock = clock or ServerClock(store)

    async def create_many(
        self, items: Sequence[Item], *, connection: Connection | None = None,
        numbers: Sequence[int] | None = None, with_jobs: bool = False,
    ) -> tuple[list[Result], list[Enqueue]]:  # fmt: skip
        """Create these jobs: results in input order, each carrying its item's number (from
        `numbers`, else its position), and the executions due soon but not yet in Redis
        (non-empty only with `connection`: add them after that transaction commits). with_jobs:
        each created result carries its Job row (built from the values sent)."""
        return await self.create_numbered(zip(numbers if numbers is not None else range(len(items)), items),
                                          connection=connection, with_jobs=with_jobs)  # fmt: skip

    async def create_numbered(
        self, numbered: Iterable[tuple[int, Item]], *, connection: Connection | None = None,
        with_jobs: bool = False,
    ) -> tuple[list[Result], list[Enqueue]]:  # fmt: skip
        """create_many for (number, item) pairs taken one at a time: an item (and its spec) can
        be made just before it is validated and be gone right after, instead of a batch of them
        outliving the batch's round trips (which the garbage collector then walks)."""
        known = await self.task_types.known() if self.task_types is not None else None
        rechecked: set[str] = set()
        now = await self.clock.now()
        results: list[Result | None] = []
        accepted: list[_Accepted] = []
        columns = _Columns()
        first_of_key: dict[tuple[str, str], _Accepted] = {}
        repeats: list[tuple[int, int, _Accepted, bytes]] = []  # a key used again in the same batch
        for slot, (index, item) in enumerate(numbered):
            results.append(None)
            task = item.spec.task
            if known is not None and isinstance(task, str) and task not in known and task not in rechecked:
                rechecked.add(task)  # a type newer than the cached list? Asked once per call
                known = await self.task_types.known([task])  # type: ignore[union-attr]
            try:
                spec = _debounced(item) if item.debounce is not None else item.spec
                values = validate(spec, self.config, now, known)
                values["traceparent"] = traceparent.normalised(item.traceparent) if item.traceparent is not None else None
                key = self._key(item)
            except ValidationError as exc:
                results[slot] = _refusal(index, exc)
                continue
            except (TypeError, ValueError, AttributeError) as exc:  # a value of the wrong type from Python code
                results[slot] = Refused(index, "item", f"is not a valid job ({type(exc).__name__}: {exc})")
                continue
            request_hash = (item.request_hash or spec_hash(item.spec)) if key else None
            if key is not None and key in first_of_key:
                repeats.append((slot, index, first_of_key[key], request_hash or b""))
                continue
            one_off = values["cron"] is None
            entry = _Accepted(
                slot, index, columns.append(values), values["id"], values["tenant"], key, request_hash,
                execution_id(values["run_at"]) if one_off else None, values["run_at"],
                None if one_off and not with_jobs and item.answer is None else values, item.answer, values["priority"],
                debounce=(values["tenant"], item.debounce.key) if item.debounce is not None else None,
            )  # fmt: skip
            if key is not None:
                first_of_key[key] = entry
            accepted.append(entry)
        if accepted:
            if connection is None:
                in_transaction = bool(first_of_key) or any(a.debounce is not None for a in accepted)
                to_queue = await self._write_retrying(accepted, columns, results, in_transaction, with_jobs)
                await enqueue_committed(self.queue, to_queue, "jobs.enqueue_failed", shared=True)
                to_queue = []
            elif connection.is_in_transaction():
                to_queue = await self._write(Store(connection), accepted, columns, results, queue_now=False)
            else:  # the application's connection, outside a transaction: this call is its own
                async with connection.transaction():
                    to_queue = await self._write(Store(connection), accepted, columns, results, queue_now=True)
                await enqueue_committed(self.queue, to_queue, "jobs.enqueue_failed", shared=True)
                to_queue = []
        else:
            to_queue = []
        for slot, index, first, request_hash in repeats:
            done = results[first.slot]
            if isinstance(done, Enqueued) and request_hash == first.request_hash:
                results[slot] = Enqueued(index, done.job_id, done.executions, replayed=True, response=done.response)
            elif isinstance(done, Enqueued):
                results[slot] = Refused(index, "idempotency_key", KEY_REUSED, "conflict")
            else:
                assert done is not None
                results[slot] = Refused(index, done.field, done.message, done.code, done.limit)
        return [r for r in results if r is not None], to_queue

    async def _write_retrying(
        self, accepted: list[_Accepted], columns: _Columns, results: list[Result | None], in_transaction: bool,
        with_jobs: bool,
    ) -> list[Enqueue]:  # fmt: skip
        """_write in a transaction of its own (one-off jobs without keys or debounces: one
        statement, no transaction needed). When the connection breaks (a failover, a restart) the commit's outcome
        is unknown: once Postgres answers again the jobs' own ids (made here, before the write) say
        whether it committed; if so the answer is read back, else the write is tried again. Either
        way each job exists once. Past [database].commit_retry_s the error reaches the caller."""
        deadline = time.monotonic() + self.config.database.commit_retry_s
        for failures in itertools.count():
            try:
                if in_transaction or any(a.first_execution is None for a in accepted):
                    async with self.store.transaction() as tx:
                        return await self._write(tx, accepted, columns, results, queue_now=True, with_jobs=with_jobs)
                return await self._write(self.store, accepted, columns, results, queue_now=True, with_jobs=with_jobs)
            except RETRYABLE_ERRORS as exc:
                error: BaseException = exc
            while True:  # until Postgres says whether that write committed
                delay_s = min(COMMIT_RETRY_MAX_DELAY_S, COMMIT_RETRY_BASE_DELAY_S * 2**failures)
                if time.monotonic() + delay_s > deadline:
                    raise error
                log.warning("jobs.create_retry", error=f"{type(error).__name__}: {error}", jobs=len(accepted),
                            retry_in_s=round(delay_s, 3))  # fmt: skip
                await asyncio.sleep(delay_s)
                try:
                    written = await self.store.job_get_many([a.job_id for a in accepted])
                    break
                except RETRYABLE_ERRORS as exc:
                    error, failures = exc, failures + 1
            if written:  # committed after all: one transaction (or statement) wrote every job of it
                return await self._answer_committed(accepted, written, results, with_jobs)
            for a in accepted:
                results[a.slot] = None
        raise AssertionError("unreachable")

    async def _answer_committed(
        self, accepted: list[_Accepted], written: dict[UUID, Job], results: list[Result | None], with_jobs: bool
    ) -> list[Enqueue]:
        """The results a committed write would have answered, read back from Postgres: each job with
        its executions; an item the write did not insert was answered from its key's holder."""
        debounced = [a.debounce for a in accepted if a.debounce is not None and a.job_id not in written]
        shared = await self.store.debounce_get_many(debounced) if debounced else {}
        written |= await self.store.job_get_many([job_id for job_id, _ in shared.values()]) if shared else {}
        executions = await self.store.execution_of_jobs(list(written))
        to_queue: list[Enqueue] = []
        held: list[_Accepted] = []
        for a in accepted:
            job = written.get(a.job_id)
            if job is None and a.debounce in shared:
                job_id, execution = shared[a.debounce]  # type: ignore[index]
                job = written[job_id]
                runs = tuple(EnqueuedExecution(i, due_at, status) for i, due_at, status in executions.get(job_id, ()) if i == execution)
                results[a.slot] = Enqueued(a.index, job_id, runs, job=job, response=a.answer(job) if a.answer else None)
                continue
            if job is None:
                held.append(a)
                continue
            runs = tuple(EnqueuedExecution(id_, due_at, status) for id_, due_at, status in executions.get(a.job_id, ()))
            response = a.answer(job) if a.answer is not None else a.response
            results[a.slot] = Enqueued(a.index, a.job_id, runs, job=job, response=response)
            to_queue.extend(Enqueue(r.id, r.due_at, a.tenant, a.priority) for r in runs if r.status == ExecutionStatus.QUEUED)
        if held:
            ttl_s = self.config.api.idempotency_ttl_s
            earlier = await self.store.idempotency_get_many([a.key for a in held if a.key], ttl_s)
            for a in held:
                record = earlier.get(a.key) if a.key else None
                response = held_answer(record, a.request_hash or b"")
                if isinstance(response, str):
                    results[a.slot] = Refused(a.index, "idempotency_key", response, "conflict")
                else:
                    assert record is not None
                    runs = tuple(EnqueuedExecution(UUID(e["id"]), datetime.fromisoformat(e["due_at"]), None)
                                 for e in response.get("executions", []))  # fmt: skip
                    results[a.slot] = Enqueued(a.index, record.job_id, runs, replayed=True, response=response)
        return to_queue

    @staticmethod
    def _key(item: Item) -> tuple[str, str] | None:
        key = item.idempotency_key
        if key is None:
            return None
        if not isinstance(key, str) or not 1 <= len(key) <= MAX_IDEMPOTENCY_KEY or not key.isprintable() \
                or not key.isascii() or " " in key:  # fmt: skip
            raise ValidationError(
                "idempotency_key", f"must be 1-{MAX_IDEMPOTENCY_KEY} printable ASCII characters without spaces"
            )
        return item.spec.tenant, key

    async def _write(
        self, tx: Store, accepted: list[_Accepted], columns: _Columns, results: list[Result | None], *,
        queue_now: bool, with_jobs: bool = False,
    ) -> list[Enqueue]:  # fmt: skip
        """Inside a transaction (or, for one-off jobs without keys, in one statement): claim keys,
        insert jobs and executions; fill `results`; return the queued executions (to ZADD after
        the commit)."""
        # Postgres's clock, as the column default would have it: read exactly when a cron job's
        # first occurrences count from it, else the ServerClock's reading (no round trip). Read
        # before the claims: a key records the answer, which shows the job as created.
        has_cron = any(a.first_execution is None for a in accepted)
        created_at = await tx.clock_now() if has_cron else await self.clock.now()
        keyed = [a for a in accepted if a.key is not None]
        if keyed:
            accepted = await self._claim_keys(tx, keyed, accepted, results, created_at)
        followers: list[tuple[_Accepted, _Accepted]] = []
        if any(a.debounce is not None for a in accepted):
            accepted, followers = await self._debounce(tx, accepted, columns, results)
        if not accepted:
            return []
        horizon_s = self.config.dispatcher.horizon_s
        pending = await tx.job_insert_many(
            columns.only([a.row for a in accepted]), created_at, [a.first_execution for a in accepted], horizon_s,
            queue_now=queue_now,
        )  # fmt: skip
        one_offs = [a for a in accepted if a.first_execution is not None]
        # Inside an application's transaction nothing is queued, but the ones due within the
        # horizon are returned all the same: to add to Redis once that transaction commits.
        horizon_end = await self.clock.now() + timedelta(seconds=horizon_s)
        to_queue: list[Enqueue] = []
        queued, waiting = str(ExecutionStatus.QUEUED), str(ExecutionStatus.PENDING)  # once, not per job
        for a in one_offs:
            first_id, due_at = a.first_execution, a.run_at
            assert first_id is not None and due_at is not None
            status = waiting if first_id in pending else queued
            job = _job(a.values, created_at) if a.values is not None else None
            results[a.slot] = Enqueued(a.index, a.job_id, (EnqueuedExecution(first_id, due_at, status),), job=job,
                                       response=a.response)  # fmt: skip
            if status is queued or (not queue_now and due_at <= horizon_end):
                to_queue.append(Enqueue(first_id, due_at, a.tenant, a.priority))
        leaders = [a for a in one_offs if a.debounce is not None]
        if leaders:
            assert all(a.first_execution is not None and a.run_at is not None for a in leaders)
            await tx.debounce_point_many([(*a.debounce, a.job_id, a.first_execution, a.run_at) for a in leaders])  # type: ignore[misc]
            for a, leader in followers:
                leading = results[leader.slot]
                assert isinstance(leading, Enqueued)
                results[a.slot] = replace(leading, index=a.index)
        crons = [a for a in accepted if a.first_execution is None]
        if crons:
            jobs = [_job(a.values, created_at) for a in crons if a.values is not None]
            done = await materialise_jobs(
                tx, jobs, await tx.clock_now(), self.config.materialiser,
                horizon_s if queue_now else NOT_QUEUED_HORIZON_S, late_config=self.config.late,
            )  # fmt: skip
            # As the cursor UPDATE left them (done_at: Postgres's instant of it, near enough).
            jobs = [replace(j, materialised_to=done.cursors[j.id][0], runs_written=done.cursors[j.id][1],
                            done_at=created_at if j.id in done.done else None) if j.id in done.cursors else j
                    for j in jobs]  # fmt: skip
            by_job: dict[UUID, list[EnqueuedExecution]] = {}
            for e in done.executions:
                by_job.setdefault(e.job_id, []).append(EnqueuedExecution(e.id, e.due_at, e.status))
            for a, job in zip(crons, jobs, strict=True):
                results[a.slot] = Enqueued(a.index, a.job_id, tuple(by_job.get(a.job_id, ())), job=job, response=a.response)
            to_queue.extend(done.enqueue if queue_now else
                            [Enqueue(e.id, e.due_at, e.tenant, e.priority) for e in done.executions if e.due_at <= horizon_end])
        return to_queue

    async def _debounce(
        self, tx: Store, accepted: list[_Accepted], columns: _Columns, results: list[Result | None]
    ) -> tuple[list[_Accepted], list[tuple[_Accepted, _Accepted]]]:
        """Debounced creates, under their keys' locks: where a key's execution has not started, it
        moves to the last create's due time and params and answers every create of the key;
        otherwise the key's last create in this batch is written (and the key pointed at it) and
        answers the others. Returns the items still to insert, and (item, the one it shares) pairs."""
        last: dict[tuple[str, str], _Accepted] = {}
        for a in accepted:
            if a.debounce is not None:
                last[a.debounce] = a  # slot order: the last create of each key wins
        await tx.debounce_make_many(sorted(last))
        shared = await tx.debounce_lock_many(sorted(last))
        params = columns.lists[JOB_COLUMNS.index("params_json")]
        traceparents = columns.lists[JOB_COLUMNS.index("traceparent")]
        moves = [(at[0], at[1], last[k].run_at, params[last[k].row], traceparents[last[k].row])
                 for k, at in shared.items() if at is not None]  # fmt: skip
        moved = await tx.debounce_extend_many(moves) if moves else {}  # type: ignore[arg-type]
        answered: dict[tuple[str, str], Enqueued] = {}
        if moved:
            jobs = await tx.job_get_many([job_id for job_id, *_ in moved.values()])
            points = []
            for k, at in shared.items():
                if at is None or at[0] not in moved:
                    continue
                job_id, _, status, due_at = moved[at[0]]
                points.append((*k, job_id, at[0], at[1]))
                job = jobs[job_id]
                answer = last[k].answer
                answered[k] = Enqueued(0, job_id, (EnqueuedExecution(at[0], due_at, status),), job=job,
                                       response=answer(job) if answer is not None else None)  # fmt: skip
            await tx.debounce_point_many(points)
        kept: list[_Accepted] = []
        followers: list[tuple[_Accepted, _Accepted]] = []
        for a in accepted:
            if a.debounce is None:
                kept.append(a)
            elif a.debounce in answered:
                results[a.slot] = replace(answered[a.debounce], index=a.index)
            elif a is last[a.debounce]:
                kept.append(a)
            else:
                followers.append((a, last[a.debounce]))
        return kept, followers

    async def _claim_keys(
        self, tx: Store, keyed: list[_Accepted], accepted: list[_Accepted], results: list[Result | None],
        created_at: datetime,
    ) -> list[_Accepted]:  # fmt: skip
        """Take the items' idempotency keys, each recorded with its answer; an item whose key is
        held is answered from the first create (replay) or refused (another request). Returns
        the items still to insert."""
        ttl_s = self.config.api.idempotency_ttl_s
        claims = []
        for a in keyed:
            assert a.key is not None and a.request_hash is not None
            if a.answer is not None and a.values is not None:
                a.response = a.answer(_job(a.values, created_at))
            else:
                first = [{"id": str(a.first_execution), "due_at": a.run_at.isoformat()}] \
                    if a.first_execution and a.run_at else []  # fmt: skip
                a.response = {"job_id": str(a.job_id), "executions": first}
            claims.append((a.key[0], a.key[1], a.request_hash, a.job_id, json.dumps(a.response)))
        claims.sort(key=lambda c: (c[0], c[1]))  # one lock order, so two batches sharing keys cannot deadlock
        taken = await tx.idempotency_claim_many(claims, ttl_s)
        held = [a for a in keyed if a.key not in taken]
        if not held:
            return accepted
        earlier = await tx.idempotency_get_many([a.key for a in held if a.key], ttl_s)
        for a in held:
            record = earlier.get(a.key) if a.key else None
            response = held_answer(record, a.request_hash)
            if isinstance(response, str):  # in flight (or expired meanwhile), or another request's
                results[a.slot] = Refused(a.index, "idempotency_key", response, "conflict")
            else:
                assert record is not None
                executions = tuple(
                    EnqueuedExecution(UUID(e["id"]), datetime.fromisoformat(e["due_at"]), None)
                    for e in response.get("executions", [])
                )  # fmt: skip
                results[a.slot] = Enqueued(a.index, record.job_id, executions, replayed=True, response=response)
        skip = {id(a) for a in held}
        return [a for a in accepted if id(a) not in skip]


class SharedBatches:
    """Single creates made concurrently (API requests, `Client.enqueue` calls) go to Postgres
    together: one batch per turn of the event loop, at most `in_flight` batches at once, so under
    load they queue up into larger batches (one transaction and one commit for many: group
    commit). Each caller gets its own result; an error of the batch's transaction is raised to
    every caller in it (nothing of that batch was written)."""

    def __init__(self, intake: Intake, *, in_flight: int = 4, max_batch: int = 500) -> None:
        self.intake = intake
        self.in_flight = in_flight
        self.max_batch = max_batch
        self._pending: list[tuple[Item, asyncio.Future[Result]]] = []
        self._running: set[asyncio.Task[None]] = set()
        self._scheduled = False

    async def create(self, item: Item) -> Result:
        """The item's result, with its Job row when created."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Result] = loop.create_future()
        self._pending.append((item, done))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._start)
        return await done

    def _start(self) -> None:
        self._scheduled = False
        while self._pending and len(self._running) < self.in_flight:
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
            task = asyncio.ensure_future(self._run(batch))
            self._running.add(task)
            task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if self._pending and not self._scheduled:  # what queued up meanwhile goes next, as one batch
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._start)

    async def _run(self, batch: list[tuple[Item, asyncio.Future[Result]]]) -> None:
        try:
            results, _ = await self.intake.create_many([item for item, _ in batch], with_jobs=True)
        except BaseException as exc:
            for _, done in batch:
                if not done.done():
                    done.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, done), result in zip(batch, results, strict=True):
            if not done.done():
                done.set_result(result)
