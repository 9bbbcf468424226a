"""The Python producer API: `from schedulerd import Client`. Enqueue one job or many (batched),
inside the application's own asyncpg transaction if it likes, edit a job in place, read an
execution, wait for one, cancel one or many, act on every job matching a label selector.

Connects like the daemon (config.toml, SCHEDULERD_* variables, the embedded servers' URLs) and
checks task types against those live worker replicas registered: producers import no handlers.
Every write commits to Postgres before its ZADD (schedulerd/intake.py).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta
from itertools import count, islice
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

import structlog

from schedulerd import apply as apply_module
from schedulerd import config as config_module
from schedulerd import servers, tracing
from schedulerd.clock import ServerClock
from schedulerd.config import Config
from schedulerd.core.durations import parse_duration_s, parse_instant
from schedulerd.cancels import UNSTARTED, BulkCancel, CancelFilter, Cancels
from schedulerd.core.labels import parse_selector
from schedulerd.errors import ValidationError
from schedulerd.intake import Debounce, Enqueued, EnqueuedExecution, Intake, Item, Refused, Result, SharedBatches
from schedulerd.job_actions import Action, ActionResult, JobActions, selector_of
from schedulerd.job_fields import EDITABLE, renamed
from schedulerd.jobs import Edit, Jobs, JobSpec
from schedulerd.models import Enqueue, Execution, ExecutionStatus
from schedulerd.queue import DelayQueue
from schedulerd.store import Connection, Store
from schedulerd.task_types import TaskTypes
from schedulerd.tasks import registry

__all__ = ["Client", "SyncClient", "JobRequest", "Enqueued", "EnqueuedExecution", "Refused", "TaskRef", "task"]

BATCH_SIZE = 2000  # items per transaction in enqueue_many (measured: 1,000 -> 25,062/s, 2,000 -> 25,961/s, 4,000 -> 26,529/s)
BATCHES_IN_FLIGHT = 3  # enqueue_many's transactions at once (Postgres writes while the next batches are validated)
# Executions enqueued inside applications' transactions kept for flush(), all connections together.
# Past it the earliest are let go: each is a pending row the dispatcher queues within
# [dispatcher].interval_s once its transaction commits (and nothing, if it rolled back).
UNFLUSHED_MAX = 10_000
log = structlog.get_logger("schedulerd.client")
FINAL = frozenset({ExecutionStatus.SUCCEEDED, ExecutionStatus.FAILED, ExecutionStatus.SKIPPED, ExecutionStatus.CANCELLED})
Duration = float | int | timedelta | str  # seconds, a timedelta, or "30s" / "5m" / "1h30m"
T = TypeVar("T")


def _seconds(value: Duration | None, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool):
        raise ValidationError(name, f"must be seconds, a timedelta or a duration like '30s', got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return parse_duration_s(value)
        except ValueError as exc:
            raise ValidationError(name, str(exc)) from None
    raise ValidationError(name, f"must be seconds, a timedelta or a duration like '30s', got {type(value).__name__}")


def _instant(value: datetime | str | None, field: str = "at") -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return parse_instant(value)
        except ValueError as exc:
            raise ValidationError(field, str(exc)) from None
    raise ValidationError(field, f"must be an aware datetime or an ISO 8601 string, got {type(value).__name__}")


def _labels(value: Any) -> dict[str, str]:
    """A job's labels as JobSpec takes them (jobs.validate checks them)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError("labels", f"must be a mapping of strings to strings, got {type(value).__name__}")
    return dict(value)


@dataclass(frozen=True)
class JobRequest:
    """One job as `enqueue` takes it (its keyword arguments); `enqueue_many` takes these or
    mappings with the same keys. No at/in_/cron: now. at: once at that instant (aware datetime
    or ISO 8601 with offset). in_: after a delay from now (Postgres's clock). cron + tz: recurring."""

    task: str
    params: Mapping[str, Any] | None = None
    at: datetime | str | None = None
    in_: Duration | None = None
    cron: str | None = None
    tz: str = "UTC"
    name: str | None = None
    tenant: str = "default"
    max_attempts: int | None = None
    timeout: Duration | None = None
    idempotency_key: str | None = None
    misfire: str = "run_once"  # skip | run_once | catch_up
    catch_up_limit: int = 10
    window: Duration | None = None  # cron: smear each run within this window
    overlap: str = "allow"  # allow | skip | buffer_one | cancel_other
    dst_repeated: str | None = None  # cron: first | both
    dst_missing: str | None = None  # cron: shift | skip
    backoff_base_s: float | None = None
    backoff_factor: float | None = None
    backoff_max_s: float | None = None
    labels: Mapping[str, str] | None = None
    start_at: datetime | str | None = None  # cron: bounds (docs/schedules.md "Bounds")
    end_at: datetime | str | None = None
    max_runs: int | None = None
    debounce_key: str | None = None  # one-off: creates with this key share one execution (docs/enqueue.md "Debounce")
    debounce_window: Duration | None = None
    priority: int = 5  # 0-9, higher starts first among the tenant's due executions
    concurrency_key: str | None = None  # at most concurrency_limit of the tenant's jobs with this key run at once (docs/tasks.md)
    concurrency_limit: int | None = None
    rate_key: str | None = None  # at most rate_limit starts per rate_window of the tenant's jobs with this key
    rate_limit: int | None = None
    rate_window: Duration | None = None
    notify_url: str | None = None  # POST notices here (docs/notifications.md); replaces the tenant's setting
    notify_on: Sequence[str] | None = None  # failure, recovery, late, dead_letter (default failure, recovery)
    pause_after_failures: int | None = None  # cron: pause the job after this many consecutive failed runs

    def item(self, traceparent: str | None = None) -> Item:
        """As the intake takes it (with the producer's trace context, if any); raises
        ValidationError naming the argument."""
        return _item({f.name: getattr(self, f.name) for f in fields(self)}, traceparent)


_REQUEST_FIELDS = frozenset(f.name for f in fields(JobRequest))
# The intake names JobSpec's fields; a refusal names the argument the caller wrote.
_ARGUMENT_OF = renamed("argument")


def _item(options: Mapping[str, Any], traceparent: str | None = None) -> Item:
    """An intake item from JobRequest's fields (a mapping: enqueue_many builds no JobRequest per
    item, which showed in its profile), carrying the producer's trace context `traceparent`;
    raises ValidationError naming the argument."""
    if type(options) is not dict and not isinstance(options, Mapping):
        raise ValidationError("item", f"must be a JobRequest or a mapping, got {type(options).__name__}")
    if not options.keys() <= _REQUEST_FIELDS:
        raise ValidationError(str(sorted(options.keys() - _REQUEST_FIELDS)[0]), "is not an enqueue argument")
    get = options.get
    if "task" not in options:
        raise ValidationError("task", "is required")
    params = get("params")
    if params is not None and type(params) is not dict and not isinstance(params, Mapping):
        raise ValidationError("params", f"must be a mapping (a JSON object), got {type(params).__name__}")
    spec = JobSpec(
        task=options["task"], tenant=get("tenant", "default"),
        params=params if type(params) is dict else dict(params) if params else {},
        run_at=_instant(get("at")), cron=get("cron"), timezone=get("tz", "UTC"), misfire_policy=get("misfire", "run_once"),
        catch_up_limit=get("catch_up_limit", 10), window_s=_seconds(get("window"), "window") or 0.0, name=get("name"),
        max_attempts=get("max_attempts"), timeout_s=_seconds(get("timeout"), "timeout"),
        backoff_base_s=get("backoff_base_s"), backoff_factor=get("backoff_factor"), backoff_max_s=get("backoff_max_s"),
        dst_repeated=get("dst_repeated"), dst_missing=get("dst_missing"), overlap=get("overlap", "allow"),
        delay_s=_seconds(get("in_"), "in_"), labels=_labels(get("labels")),
        start_at=_instant(get("start_at"), "start_at"), end_at=_instant(get("end_at"), "end_at"), max_runs=get("max_runs"),
        priority=get("priority", 5), concurrency_key=get("concurrency_key"), concurrency_limit=get("concurrency_limit"),
        rate_key=get("rate_key"), rate_limit=get("rate_limit"), rate_window_s=_seconds(get("rate_window"), "rate_window"),
        notify_url=get("notify_url"), notify_on=_events(get("notify_on")), pause_after_failures=get("pause_after_failures"),
    )  # fmt: skip
    debounce = Debounce.given(get("debounce_key"), _seconds(get("debounce_window"), "debounce_window"))
    return Item(spec, get("idempotency_key"), debounce=debounce, traceparent=traceparent)


# update_job's keyword arguments -> JobSpec's fields (job_fields.EDITABLE), and how each is read.
_EDITABLE_ARGUMENTS = {f.argument: f.spec for f in EDITABLE if f.argument is not None} | {"labels": "labels", "task": "task"}
_READ_ARGUMENT: dict[str, Callable[[Any], Any]] = {
    "at": _instant, "window": lambda v: _seconds(v, "window") or 0.0, "timeout": lambda v: _seconds(v, "timeout"),
    "params": lambda v: dict(v) if isinstance(v, Mapping) else v, "rate_window": lambda v: _seconds(v, "rate_window"),
    "notify_on": lambda v: _events(v),
}


def _events(value: Any) -> Any:
    """notify_on as JobSpec takes it: a tuple of event names (jobs.validate judges them)."""
    return tuple(value) if isinstance(value, list | tuple) else value


def _changes(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """update_job's arguments as Jobs.update's changes; refused naming the argument."""
    changes: dict[str, Any] = {}
    for name, value in arguments.items():
        if name not in _EDITABLE_ARGUMENTS:
            raise ValidationError(name, "is not an editable field of a job")
        changes[_EDITABLE_ARGUMENTS[name]] = _READ_ARGUMENT.get(name, lambda v: v)(value)
    return changes


def _request(entry: JobRequest | Mapping[str, Any]) -> JobRequest:
    """For callers that want the record (TaskRef.request); validated as an item would be."""
    if isinstance(entry, JobRequest):
        return entry
    _item(entry)
    return JobRequest(**entry)


def _chunks(iterable: Iterable[T], size: int) -> Iterator[list[T]]:
    iterator = iter(iterable)
    while chunk := list(islice(iterator, size)):
        yield chunk


def _actor(door: str) -> str:
    """Who acted when no `by` is given: the door and the OS user (client:alice)."""
    import getpass

    try:
        return f"{door}:{getpass.getuser()}"[:100]
    except (KeyError, OSError):  # no user name for this uid (a container)
        return door


class Client:
    """An asyncio producer. `await Client.connect()`; `await client.close()` (or `async with`)."""

    def __init__(self, store: Store, queue: DelayQueue, config: Config, *, owned: bool = True) -> None:
        self.store = store
        self.queue = queue
        self.config = config
        self._owned = owned  # close store and queue with the client
        self.clock = ServerClock(store)
        self.task_types = TaskTypes(store, config.jobs.task_types_seen_within_s)
        self.intake = Intake(store, queue, config, self.task_types, self.clock)
        self.shared = SharedBatches(self.intake)  # concurrent enqueue calls share transactions
        self.jobs = Jobs(store, queue, config)
        # Executions enqueued inside an application's transaction, not yet in Redis, by connection,
        # each numbered in the order held; at most unflushed_max of them (UNFLUSHED_MAX).
        self._unflushed: dict[int, collections.deque[tuple[int, Enqueue]]] = {}
        self._unflushed_count = 0
        self._unflushed_seq = count()
        self.unflushed_max = UNFLUSHED_MAX

    @classmethod
    async def connect(
        cls, config: Config | None = None, *, config_path: str | Path | None = None,
        environ: Mapping[str, str] | None = None, pool_max: int | None = None,
    ) -> Client:  # fmt: skip
        """Connect with the daemon's configuration: `config`, else config.toml (or `config_path`,
        or $SCHEDULERD_CONFIG) and SCHEDULERD_* variables; no URLs: the embedded servers that
        `schedulerd run` started in this folder."""
        config = config or config_module.load(config_path, environ)
        store, queue = await servers.connect(config, pool_max=pool_max)
        return cls(store, queue, config)

    async def close(self) -> None:
        if self._owned:
            await self.queue.close()
            await self.store.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def enqueue(
        self, task: str, params: Mapping[str, Any] | None = None, *, connection: Connection | None = None,
        **options: Any,
    ) -> Enqueued:  # fmt: skip
        """Create one job; returns it with its first execution(s) (a cron job: those written for
        its first horizon). Options are JobRequest's fields: at=, in_=, cron=, tz=, name=,
        tenant=, max_attempts=, timeout=, idempotency_key=, misfire=, window=, overlap=, priority=, ...
        Raises ValidationError naming the argument; nothing is written then.

        connection: an asyncpg connection inside the application's transaction: the job exists
        only if that transaction commits. Use `async with client.transaction(conn)` (or call
        `flush()` after the commit) to put it in Redis at once; otherwise the dispatcher does
        within [dispatcher].interval_s (as it does for the earliest of those held for flush()
        past UNFLUSHED_MAX).

        The caller's current OpenTelemetry span, if any, is stored with the execution: its first
        attempt's span is a child of it (docs/tracing.md)."""
        request = {"task": task, "params": params, **options}
        if connection is not None:
            (result,) = await self._create([request], connection, traceparent=tracing.current())
        else:
            result = await self.shared.create(_item(request, tracing.current()))
            if isinstance(result, Enqueued):
                return result
        if isinstance(result, Refused):
            raise ValidationError(_ARGUMENT_OF.get(result.field, result.field), result.message, result.limit)
        return result

    async def enqueue_many(
        self, requests: Iterable[JobRequest | Mapping[str, Any]], *, batch_size: int = BATCH_SIZE,
        connection: Connection | None = None,
    ) -> list[Result]:  # fmt: skip
        """Create many jobs, `batch_size` per transaction (one INSERT for the jobs, one for their
        executions, one ZADD pipeline after each commit). Returns one result per request, in
        order: Enqueued, or Refused (index, field, message) for one that was refused and wrote
        nothing; the others are written all the same. Check `result.ok`."""
        done: list[Result] = []
        async for batch in self.enqueue_batches(requests, batch_size=batch_size, connection=connection):
            done.extend(batch)
        return done

    async def enqueue_batches(
        self, requests: Iterable[JobRequest | Mapping[str, Any] | Item], *, batch_size: int = BATCH_SIZE,
        connection: Connection | None = None,
    ) -> AsyncIterator[list[Result]]:  # fmt: skip
        """enqueue_many as a stream: yields each batch's results once it has committed (indexes
        count from the first request), so a caller can report progress on a long input. Each
        execution carries the caller's current span, as enqueue's does (an intake Item given as
        is carries its own traceparent)."""
        if not 1 <= batch_size <= 10_000:
            raise ValidationError("batch_size", f"must be between 1 and 10000, got {batch_size}")
        traceparent = tracing.current()
        # BATCHES_IN_FLIGHT batches on as many pooled connections: the next ones are validated
        # while Postgres writes the others (one connection of the application's: one at a time).
        in_flight: collections.deque[asyncio.Task[list[Result]]] = collections.deque()
        offset = 0
        try:
            for chunk in _chunks(requests, batch_size):
                if connection is not None:
                    yield await self._create(chunk, connection, offset, traceparent)
                else:
                    in_flight.append(asyncio.create_task(self._create(chunk, None, offset, traceparent)))
                    if len(in_flight) >= BATCHES_IN_FLIGHT:
                        yield await in_flight.popleft()
                offset += len(chunk)
            while in_flight:
                yield await in_flight.popleft()
        finally:
            for task in in_flight:
                task.cancel()
            await asyncio.gather(*in_flight, return_exceptions=True)

    async def _create(
        self, entries: list[JobRequest | Mapping[str, Any] | Item], connection: Connection | None, offset: int = 0,
        traceparent: str | None = None,
    ) -> list[Result]:
        refused: list[Refused] = []
        as_given: set[int] = set()  # intake Items (the CLI's): their refusals keep the intake's field names

        def numbered() -> Iterator[tuple[int, Item]]:
            """Each entry as an intake Item, made as the intake takes it (so it is gone once validated)."""
            for index, entry in enumerate(entries, offset):
                try:
                    if isinstance(entry, Item):
                        as_given.add(index)
                    item = entry if isinstance(entry, Item) else entry.item(traceparent) if isinstance(entry, JobRequest) \
                        else _item(entry, traceparent)  # fmt: skip
                except ValidationError as exc:
                    refused.append(Refused(index, exc.field, exc.message))
                    continue
                except TypeError as exc:  # a value JobSpec cannot take
                    refused.append(Refused(index, "item", str(exc)))
                    continue
                yield index, item

        results, unflushed = await self.intake.create_numbered(numbered(), connection=connection)
        if unflushed and connection is not None:
            self._hold(id(connection), unflushed)
        for i, result in enumerate(results):
            if isinstance(result, Refused) and result.field in _ARGUMENT_OF and result.index not in as_given:
                results[i] = Refused(result.index, _ARGUMENT_OF[result.field], result.message, result.code, result.limit)
        if refused:
            results = sorted([*results, *refused], key=lambda r: r.index)
        return results

    def _hold(self, key: int, entries: list[Enqueue]) -> None:
        """Keep entries for flush(); past unflushed_max, let the earliest held go (the dispatcher
        queues them), so an application that never flushes does not grow without bound."""
        self._unflushed.setdefault(key, collections.deque()).extend(zip(self._unflushed_seq, entries))
        self._unflushed_count += len(entries)
        dropped = 0
        while self._unflushed_count > self.unflushed_max:
            # The earliest held is at the head of one connection's deque (a few connections: a scan).
            oldest_key = min(self._unflushed, key=lambda k: self._unflushed[k][0][0])
            held = self._unflushed[oldest_key]
            held.popleft()
            self._unflushed_count -= 1
            dropped += 1
            if not held:
                del self._unflushed[oldest_key]
        if dropped:
            log.info("client.unflushed_let_go", count=dropped, held=self._unflushed_count, limit=self.unflushed_max)

    @contextlib.asynccontextmanager
    async def transaction(self, connection: Connection) -> AsyncIterator[Connection]:
        """`async with client.transaction(conn):` opens a transaction on the application's
        connection; jobs enqueued in it with connection=conn exist only if it commits, and go
        into Redis right after the commit."""
        async with connection.transaction():
            yield connection
        await self.flush(connection)

    async def flush(self, connection: Connection | None = None) -> int:
        """Put into Redis the executions enqueued inside application transactions (of this
        connection, or all) that have committed since; returns how many. Rolled-back ones are
        dropped: Postgres is asked which exist."""
        keys = [id(connection)] if connection is not None else list(self._unflushed)
        entries = [e for key in keys for _, e in self._unflushed.pop(key, ())]
        self._unflushed_count -= len(entries)
        if not entries:
            return 0
        committed = await self.store.execution_committed([e.execution_id for e in entries])
        await self.queue.add(committed, only_new=True)
        return len(committed)

    async def update_job(
        self, job_id: UUID | str, *, tenant: str | None = None, dry_run: bool = False, if_version: int | None = None,
        **changes: Any,
    ) -> Edit:  # fmt: skip
        """Edit a job in place (Jobs.update): keyword arguments as enqueue's (params=, cron=, tz=,
        at= for a one-off, misfire=, window=, overlap=, name=, max_attempts=, timeout=, dst_*=,
        backoff_*=, priority=, notify_url=, notify_on=, pause_after_failures=) and labels=; those not given keep their value. Returns the Edit: the job
        after it and its next runs removed / kept / added. dry_run: the same answer, nothing
        written. if_version: refused (StaleVersionError) unless the job is at that version.
        tenant: only that tenant's job (None: any). Raises ValidationError naming the argument
        (task and the schedule's kind are fixed), NotFoundError, ConflictError (deleted)."""
        try:
            return await self.jobs.update(UUID(str(job_id)), _changes(changes), tenant, dry_run=dry_run, if_version=if_version)
        except ValidationError as exc:
            raise ValidationError(_ARGUMENT_OF.get(exc.field, exc.field), exc.message, exc.limit) from None

    async def apply(
        self, declarations: Sequence[Mapping[str, Any]] | Mapping[str, Any] | str | Path, *, source: str | None = None,
        tenant: str = "default", plan: bool = False, prune: bool = False, force: bool = False,
    ) -> apply_module.Plan:  # fmt: skip
        """Schedules as code (apply.Apply): make the jobs of `source` what the declarations say,
        in one transaction. `declarations`: a list of job tables (the API body's fields, each with
        its `name`), a parsed schedules file ({"source": ..., "job": [...]}) or the path of one
        (source: its `source` key, else its stem). plan: the same answer, nothing written. prune:
        delete the source's jobs no longer declared. force: overwrite jobs edited elsewhere since
        the last apply (else DriftError, nothing written). Raises ValidationError naming the job
        and field (nothing written)."""
        if isinstance(declarations, (str, Path)):
            file_source, documents = apply_module.load(declarations)
        elif isinstance(declarations, Mapping):
            file_source, documents = apply_module.parsed(declarations, "declarations", source)
        else:
            file_source, documents = source, list(declarations)
        chosen = apply_module.check_source(source if source is not None else file_source)
        declared = apply_module.declarations(documents, tenant, str(declarations) if isinstance(declarations, (str, Path))
                                             else "declarations")  # fmt: skip
        applier = apply_module.Apply(self.store, self.intake, self.jobs)
        return await applier.apply(declared, tenant=tenant, source=chosen, plan_only=plan, prune=prune, force=force)

    async def get_execution(self, execution_id: UUID | str) -> Execution | None:
        return await self.store.execution_get(UUID(str(execution_id)))

    async def cancel(self, execution_id: UUID | str, *, by: str | None = None) -> Execution:
        """Cancel one execution: pending or queued (a retry waiting for its backoff too) ends
        cancelled now; a running one is asked to stop, and its worker cancels the handler at the
        next heartbeat (the attempt is recorded cancelled, never retried). Returns the execution
        as it is now (a running one: still running, cancel_requested_at set). Cancelling a
        cancelled one returns it again; one that settled first raises TooLateError (its status
        in .status), a missing one NotFoundError. `by` says who (default client:$USER)."""
        done = await Cancels(self.store).cancel(UUID(str(execution_id)), None, by=by or _actor("client"))
        return done.execution

    async def cancel_many(
        self, *, tenant: str = "default", job: UUID | str | None = None, status: Iterable[str] | None = None,
        label: str | None = None, due_from: datetime | str | None = None, due_to: datetime | str | None = None,
        dry_run: bool = True, by: str | None = None,
    ) -> BulkCancel:  # fmt: skip
        """Cancel every execution of `tenant` matching all the criteria given: of `job`, in
        `status` (among pending, queued, running; default pending and queued), whose job carries
        the labels of selector `label` ("team=billing,env=prod"), due in [due_from, due_to).
        dry_run=True (the default) counts them and returns a sample, writing nothing; False
        cancels them (running ones asked to stop), a page at a time, and records who did it."""
        which = CancelFilter(
            statuses=tuple(status) if status is not None else UNSTARTED, job_id=UUID(str(job)) if job else None,
            selector=parse_selector(label) if label is not None else None,
            due_from=_instant(due_from, "due_from"), due_to=_instant(due_to, "due_to"),
        )  # fmt: skip
        return await Cancels(self.store).cancel_matching(tenant, which, dry_run=dry_run, by=by or _actor("client"))

    async def job_action(
        self, action: str, selector: str | Mapping[str, str], *, tenant: str = "default", dry_run: bool = True,
        by: str | None = None,
    ) -> ActionResult:  # fmt: skip
        """pause | resume | trigger | delete | cancel (their unstarted runs) every job of `tenant`
        whose labels match `selector` ("team=billing" or {"team": "billing"}), each as the
        single-job steering does it. dry_run=True (the default) counts the jobs and executions it
        would touch, writing nothing; False acts and records who did it and when (job_actions)."""
        try:
            chosen = Action(action)
        except ValueError:
            raise ValidationError("action", f"must be one of {', '.join(Action)}, got {action!r}") from None
        actions = JobActions(Jobs(self.store, self.queue, self.config), Cancels(self.store))
        return await actions.run(tenant, chosen, selector_of(dict(selector) if isinstance(selector, Mapping) else selector),
                                 dry_run=dry_run, by=by or _actor("client"))  # fmt: skip

    async def wait(self, execution_id: UUID | str, timeout: float = 30.0, *, poll_s: float = 0.05) -> Execution:
        """Wait until the execution is final (succeeded, failed, skipped, cancelled); returns
        it. Raises TimeoutError after `timeout` seconds, LookupError when there is no such one."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        delay_s = poll_s
        while True:
            execution = await self.get_execution(execution_id)
            if execution is None:
                raise LookupError(f"execution {execution_id} not found")
            if execution.status in FINAL:
                return execution
            if loop.time() + delay_s > deadline:
                raise TimeoutError(f"execution {execution_id} is still {execution.status} after {timeout:g} s")
            await asyncio.sleep(delay_s)
            delay_s = min(delay_s * 2, 1.0)  # a long job is polled about once a second


class SyncClient:
    """The client for synchronous code: the same methods, blocking, on an event loop of its own
    (one thread at a time). `SyncClient.connect()`; `close()` or `with`."""

    def __init__(self, runner: asyncio.Runner, client: Client) -> None:
        self._runner = runner
        self.client = client

    @classmethod
    def connect(cls, config: Config | None = None, **kwargs: Any) -> SyncClient:
        runner = asyncio.Runner()
        try:
            return cls(runner, runner.run(Client.connect(config, **kwargs)))
        except BaseException:
            runner.close()
            raise

    def _run(self, call: Awaitable[T], context: contextvars.Context | None = None) -> T:
        return self._runner.run(call, context=context)  # type: ignore[arg-type]

    def enqueue(self, task: str, params: Mapping[str, Any] | None = None, **options: Any) -> Enqueued:
        # In the caller's context: its current span is the producer's (tracing.current).
        return self._run(self.client.enqueue(task, params, **options), contextvars.copy_context())

    def enqueue_many(self, requests: Iterable[JobRequest | Mapping[str, Any]], *, batch_size: int = BATCH_SIZE) -> list[Result]:
        return self._run(self.client.enqueue_many(requests, batch_size=batch_size), contextvars.copy_context())

    def update_job(
        self, job_id: UUID | str, *, tenant: str | None = None, dry_run: bool = False, if_version: int | None = None,
        **changes: Any,
    ) -> Edit:  # fmt: skip
        return self._run(self.client.update_job(job_id, tenant=tenant, dry_run=dry_run, if_version=if_version, **changes))

    def apply(self, declarations: Sequence[Mapping[str, Any]] | Mapping[str, Any] | str | Path, **options: Any) -> apply_module.Plan:
        return self._run(self.client.apply(declarations, **options))

    def get_execution(self, execution_id: UUID | str) -> Execution | None:
        return self._run(self.client.get_execution(execution_id))

    def wait(self, execution_id: UUID | str, timeout: float = 30.0) -> Execution:
        return self._run(self.client.wait(execution_id, timeout))

    def cancel(self, execution_id: UUID | str, *, by: str | None = None) -> Execution:
        return self._run(self.client.cancel(execution_id, by=by))

    def cancel_many(self, **criteria: Any) -> BulkCancel:
        return self._run(self.client.cancel_many(**criteria))

    def job_action(self, action: str, selector: str | Mapping[str, str], **options: Any) -> ActionResult:
        return self._run(self.client.job_action(action, selector, **options))

    def close(self) -> None:
        try:
            self._run(self.client.close())
        finally:
            self._runner.close()

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class TaskRef:
    """A task type with its handler, as `@task` returns it: call it like the handler, or
    `await send_email.enqueue(client, {"to": ...}, in_="5m")`. `defaults` are enqueue options
    applied to every enqueue of this task (an enqueue's own options win)."""

    name: str
    handler: registry.Handler
    defaults: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self, ctx: registry.TaskContext, params: dict[str, Any]) -> Any:
        return self.handler(ctx, params)

    async def enqueue(self, client: Client, params: Mapping[str, Any] | None = None, **options: Any) -> Enqueued:
        return await client.enqueue(self.name, params, **{**self.defaults, **options})

    def request(self, params: Mapping[str, Any] | None = None, **options: Any) -> JobRequest:
        """A JobRequest for enqueue_many."""
        return _request({"task": self.name, "params": params, **{**self.defaults, **options}})


def task(
    name: str, *, breaker_key: Callable[[dict[str, Any]], str] | None = None, inline: bool = False, **defaults: Any
) -> Callable[[registry.Handler], TaskRef]:
    """Register a handler under a task type name (for the workers that import this module) and
    return a TaskRef to enqueue it with. `defaults`: enqueue options, e.g. max_attempts=5.
    inline: a plain function that returns at once runs on the event loop without a thread or a
    task of its own (registry.task)."""
    unknown = sorted(set(defaults) - (_REQUEST_FIELDS - {"task", "params"}))
    if unknown:
        raise TypeError(f"task {name!r}: {unknown[0]!r} is not an enqueue option")

    def register(handler: registry.Handler) -> TaskRef:
        registry.task(name, breaker_key=breaker_key, inline=inline)(handler)
        return TaskRef(name, handler, dict(defaults))

    return register
