"""A hypothesis state machine over the whole execution lifecycle, on the real Postgres and Redis.

The machine owns an event loop of its own and runs every component in it (Store, DelayQueue, two
Workers, Sweeper, Jobs, Cancels, Retention, DeadLetters, the tz recompute, queues of other shard counts)
one explicit step at a time: Worker.run_once / heartbeat_once / flush_outcomes, never the
background loops, so it alone decides the interleaving. Between two steps nothing runs (the loop
is stopped) while the wall clock, which both servers judge leases and due times by, goes on.

Latency is injected at the await points of the hot path: a wrapped Store or DelayQueue method
can be held before its statement is sent or after its answer arrived, while the machine goes on
with other steps (a heartbeat answer arriving after the next claim, say), or made to fail once
with a connection error. Handlers are witnesses: each start and end is recorded with its
execution id and fence, and the invariants are checked against Postgres after every step.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import dataclasses
import functools
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import asyncpg
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from schedulerd import tzchange, tzdb
from schedulerd.apply import Apply, DriftError, declarations
from schedulerd.cancels import CancelFilter, Cancels
from schedulerd.config import (
    ConcurrencyConfig, Config, DispatcherConfig, HttpConfig, JobsConfig, MaterialiserConfig, NotifyConfig, RetentionConfig, SweeperConfig, WorkerConfig,
)  # fmt: skip
from schedulerd.core.schedule import zone_rules
from schedulerd.dead_letters import DeadLetters
from schedulerd.errors import ConflictError, NotFoundError, TooLateError, ValidationError
from schedulerd.intake import Debounce, Intake
from schedulerd.jobs import Jobs, JobSpec
from schedulerd.materialiser import Materialiser
from schedulerd.notifier import Notifier
from schedulerd.models import Enqueue
from schedulerd.queue import DelayQueue, Pop, score_ms
from schedulerd.retention import Retention
from schedulerd.store import Store
from schedulerd.sweeper import Sweeper
from schedulerd.tasks.registry import TaskContext, task
from schedulerd.tenant_quotas import QuotaRefresh
from schedulerd.transient import TRANSIENT_ERRORS
from schedulerd.tzdb import TzDatabase
from schedulerd.worker import Worker
from tests.conftest import create_job

LEASE_S = 1.0
OLD_TZ_VERSION = "2000a"
NEW_TZ = TzDatabase("2099z", "lifecycle-test")
NY = "America/New_York"
FINAL = ("succeeded", "failed", "cancelled", "skipped")
STEP_TIMEOUT_S = 10.0  # one step (without its holds) taking longer than this is a hang, itself a finding
LOCK_CHECK_S = 0.5  # how often a step still running looks for a lock it waits on behind a held step

# The hooked methods: the worker's hot path (claim, heartbeat, finish, park), the queue's pop and
# add, and the retention's judge-then-drop.
STORE_HOOKS = (
    "execution_claim_many", "execution_heartbeat_many", "execution_finish_many", "execution_park_many",
    "execution_unfinished_between", "partition_drop", "execution_redrive_many",
)  # fmt: skip
QUEUE_HOOKS = ("pop_due", "add")
HOLDABLE = ("execution_claim_many", "execution_heartbeat_many", "execution_finish_many", "pop_due", "add", "partition_drop")


T = TypeVar("T")
CHOOSE = object()  # an action's parameter that is the step's `Choices` (it picks among what the state holds)
PICK = st.integers(min_value=0, max_value=2**16 - 1)
STEP_DRAWS = 8  # the most picks one step makes: its action, its parameters, and what it picks among the state


class Choices:
    """One step's draws, made before the step looks at the state. A step whose draws followed the
    state (a sampled_from over what exists, a pick only when something exists, an action list
    that depends on timing) draws differently from one run to the next, which hypothesis refuses
    as an inconsistent strategy (FlakyStrategyDefinition) when two runs share a prefix: a fixed
    number of draws under fixed bounds cannot differ."""

    def __init__(self, draws: Sequence[int]) -> None:
        self._draws = list(draws)

    def pick(self, items: Sequence[T]) -> T:
        if not self._draws:
            raise RuntimeError(f"a step picked more than STEP_DRAWS={STEP_DRAWS} times")
        return items[self._draws.pop(0) % len(items)]


TENANT_QUOTA = 2  # t2's in-flight quota in config


@dataclass(frozen=True)
class Action:
    name: str
    weight: int  # how often the step picks it, relative to the others
    when: Callable[[Any], bool] | None
    params: dict[str, Any]  # each a list the step picks from, or CHOOSE


ACTIONS: list[Action] = []


def action(weight: int, when: Callable[[Any], bool] | None = None, **params: Any) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register a machine method as an action of the one `step` rule. One weighted rule rather
    than a rule each: hypothesis enables a random subset of rules per example, which with a short
    budget leaves most examples without work to interleave."""

    def register(method: Callable[..., None]) -> Callable[..., None]:
        ACTIONS.append(Action(method.__name__, weight, when, params))
        return method

    return register


class Violation(AssertionError):
    """An invariant of the execution lifecycle does not hold."""


def _awaiting(task: asyncio.Task[Any]) -> list[str]:
    """Where a pending task waits: the chain of coroutines it awaits, outermost first."""
    lines = []
    awaited: Any = task.get_coro()
    while awaited is not None and hasattr(awaited, "cr_frame"):
        frame = awaited.cr_frame
        if frame is not None:
            lines.append(f"  {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        awaited = awaited.cr_await
    lines.append(f"  on {awaited!r}"[:300])
    return lines


def _old_new_york() -> timezone:
    """'Old tzdata': New York half an hour off the real rules, so every hourly instant moves."""
    real = datetime.now(ZoneInfo(NY)).utcoffset()
    assert real is not None
    return timezone(real + timedelta(minutes=30), "OLD")


def _old_rules(name: str) -> timezone | ZoneInfo:
    return _old_new_york() if name == NY else ZoneInfo(name)


@dataclass
class Hold:
    """One held call: `gate` is set to let it go on."""

    name: str
    phase: str  # "before": the statement is not sent yet; "after": its answer is held
    gate: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Start:
    """A handler start, as the witness saw it."""

    execution_id: uuid.UUID
    fence: int
    job_id: uuid.UUID
    worker: str
    claimed_at: datetime  # Postgres's clock at the claim
    started_at: float  # monotonic
    ended: str | None = None  # succeeded | failed | timed_out | cancelled:<why>


@dataclass
class Op:
    """A step still in flight (held at a gate)."""

    kind: str  # e.g. "run_once:a", "heartbeat:b", "retention"
    task: asyncio.Task[Any]


CURRENT: LifecycleMachine | None = None  # the machine whose witness handlers are running


async def _witness(ctx: TaskContext, params: dict[str, Any]) -> Any:
    machine = CURRENT
    assert machine is not None, "a lifecycle witness ran outside the machine"
    return await machine.witness(ctx, params)


def _witness_inline(ctx: TaskContext, params: dict[str, Any]) -> Any:
    machine = CURRENT
    assert machine is not None, "a lifecycle witness ran outside the machine"
    start, _ = machine.started(ctx)
    start.ended = "succeeded"
    return {"fence": ctx.fence}


task("lifecycle.ok")(_witness)
task("lifecycle.fail")(_witness)
task("lifecycle.block")(_witness)
task("lifecycle.inline", inline=True)(_witness_inline)  # runs as its claim starts, no task of its own


def _is_acceptable(exc: BaseException) -> bool:
    """What a step may raise without that being a finding: what the real loops wait out, and
    refusals of steering a job that another step deleted or paused meanwhile."""
    return isinstance(exc, TRANSIENT_ERRORS + (ValidationError, NotFoundError, asyncpg.LockNotAvailableError))


class LifecycleMachine(RuleBasedStateMachine):
    database_url: str = ""
    redis_url: str = ""

    def __init__(self) -> None:
        super().__init__()
        global CURRENT
        CURRENT = self
        self.loop = asyncio.new_event_loop()
        self.trace: list[str] = []
        self.prefix = f"schedulerd-lifecycle-{uuid.uuid4().hex[:12]}"
        self.holds: list[Hold] = []
        self.armed: dict[tuple[str, str], int] = {}  # (method, phase) -> calls left to hold
        self.fail_next: set[str] = set()  # methods whose next call raises a connection error
        self.hold_hit = asyncio.Event()
        self.ops: list[Op] = []
        self.starts: dict[tuple[uuid.UUID, int], Start] = {}
        self.start_order: dict[uuid.UUID, list[int]] = {}
        self.blocked: dict[tuple[uuid.UUID, int], asyncio.Future[str]] = {}
        self.accepted: dict[uuid.UUID, str] = {}  # execution id -> origin (how the machine got it)
        self.claimed: dict[uuid.UUID, list[int]] = {}  # fences the claim returned, in order
        self.forced_expiry: set[tuple[uuid.UUID, int]] = set()  # leases the machine ran out on purpose
        self.disabled: dict[uuid.UUID, list[list[datetime | None]]] = {}  # job -> [[disabled_after, enabled_before]]
        self.jobs_made: dict[uuid.UUID, str] = {}  # job id -> "one_off" | "cron" | "tz" | "bounded"
        self.max_runs: dict[uuid.UUID, int] = {}  # bounded jobs: at most this many scheduled executions, ever
        self.deleted: set[uuid.UUID] = set()
        self.cancelled: dict[uuid.UUID, int] = {}  # execution -> its fence when a cancel of it committed
        self.last_seen: dict[uuid.UUID, tuple[str, int, datetime]] = {}  # status, fence, scheduled_for
        self.dropped_days: set[Any] = set()
        self.tz_recomputed = False
        self.skew_ms = 0
        self.violations: list[str] = []
        self.overlaps: list[tuple[uuid.UUID, int, int]] = []  # (execution, older fence still running, newer fence)
        self.step_no = 0
        self.exit = contextlib.ExitStack()
        self._originals: list[tuple[type, str, Any]] = []
        self.config = Config(
            worker=WorkerConfig(concurrency=8, batch_size=20, poll_max_s=0.05, lease_s=LEASE_S, heartbeat_s=0.3,
                                shutdown_grace_s=0.5, task_concurrency={"lifecycle.block": 2}, defer_s=0.2),
            dispatcher=DispatcherConfig(interval_s=0.2, horizon_s=300.0),
            sweeper=SweeperConfig(interval_s=0.2, grace_s=0.3, live_holder_grace_s=0.0),
            jobs=JobsConfig(backoff_base_s=0.05, backoff_factor=1.0, timeout_s=5.0, max_attempts=3, backfill_per_s=50.0,
                            redrive_per_s=100.0),
            materialiser=MaterialiserConfig(horizon_s=300.0),
            # t2's in-flight quota: config's 2, and set_quota lowers it to 1 at runtime and back (invariant 9).
            concurrency=ConcurrencyConfig(tenants={"t2": TENANT_QUOTA}),
        )  # fmt: skip
        # Cron jobs in New York are created under "old" tz rules and version; tz_recompute installs the real ones.
        self._real_version = tzdb.installed_version
        tzdb.installed_version = lambda: OLD_TZ_VERSION  # type: ignore[assignment]
        self.exit.enter_context(zone_rules(_old_rules))
        self.run(self._setup(), "setup")

    # --- plumbing ----------------------------------------------------------------------------

    def note(self, line: str) -> None:
        self.trace.append(f"{self.step_no:3d} {line}")

    def run(self, coro: Coroutine[Any, Any, Any], kind: str) -> Any:
        """Run one step in the machine's loop until it is done or waits at a hold (then it stays
        in flight and later steps go on beside it); give handlers a few turns of the loop."""
        self.step_no += 1
        self.note(kind)
        return self.loop.run_until_complete(self._drive(coro, kind))

    async def _drive(self, coro: Coroutine[Any, Any, Any], kind: str) -> Any:
        self.hold_hit.clear()
        task = asyncio.ensure_future(coro)
        hit = asyncio.ensure_future(self.hold_hit.wait())
        waits_on_hold = False
        deadline = self.loop.time() + STEP_TIMEOUT_S
        try:
            while not task.done() and not hit.done() and self.loop.time() < deadline:
                await asyncio.wait([task, hit], timeout=LOCK_CHECK_S, return_when=asyncio.FIRST_COMPLETED)
                if self.holds and not task.done() and not hit.done() and await self._blocked_by_a_hold():
                    waits_on_hold = True
                    break
        finally:
            hit.cancel()
        await self._turns()
        if task.done():
            return self._result(task, kind)
        if not self.hold_hit.is_set() and not waits_on_hold:
            raise Violation(
                f"step {kind} neither finished nor waited at a hold within {STEP_TIMEOUT_S} s, awaiting:\n"
                + "\n".join(_awaiting(task)) + "\n--- steps ---\n" + "\n".join(self.trace[-80:])
            )
        self.ops.append(Op(kind, task))
        self.note(f"  -> {kind} {'waits on a held step' if waits_on_hold else 'held'}")
        return None

    async def _blocked_by_a_hold(self) -> bool:
        """A session of this database waits for a lock that a held step's open transaction (idle
        in it, at the hold) keeps, directly or through other waiters: as held as the step itself."""
        return bool(await self.store.db.fetchval(
            """
            WITH RECURSIVE held AS (
                SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'
                UNION
                SELECT w.pid FROM pg_stat_activity w, held
                WHERE w.datname = current_database() AND w.wait_event_type = 'Lock' AND held.pid = ANY(pg_blocking_pids(w.pid))
            )
            SELECT count(*) > (SELECT count(*) FROM pg_stat_activity
                               WHERE datname = current_database() AND state = 'idle in transaction') FROM held
            """
        ))  # fmt: skip

    def _result(self, task: asyncio.Task[Any], kind: str) -> Any:
        exc = task.exception()
        if exc is None:
            return task.result()
        if _is_acceptable(exc):
            self.note(f"  -> {kind} raised {type(exc).__name__}: {str(exc)[:120]}")
            return None
        raise exc

    async def _turns(self, n: int = 5) -> None:
        for _ in range(n):
            await asyncio.sleep(0)
        await asyncio.sleep(0.002)
        self._collect()

    def _collect(self) -> None:
        for op in [o for o in self.ops if o.task.done()]:
            self.ops.remove(op)
            self.note(f"  <- {op.kind} done")
            self._result(op.task, op.kind)

    def busy(self, kind: str) -> bool:
        return any(o.kind == kind for o in self.ops)

    def _hook(self, cls: type, name: str) -> None:
        original = getattr(cls, name)
        machine = self

        @functools.wraps(original)
        async def hooked(obj: Any, *args: Any, **kwargs: Any) -> Any:
            await machine._gate(name, "before")
            if name in machine.fail_next:
                machine.fail_next.discard(name)
                machine.note(f"  !! {name} fails (injected)")
                raise ConnectionResetError(f"injected: connection lost during {name}")
            if name == "add" and machine.skew_ms:
                args, kwargs = machine._skewed_add(args, kwargs)
            result = await original(obj, *args, **kwargs)
            if name == "pop_due" and machine.skew_ms:
                result = replace(result, now_ms=result.now_ms + machine.skew_ms)
            if name == "execution_claim_many":
                for claim in result:
                    machine.claimed.setdefault(claim.id, []).append(claim.fence)
            await machine._gate(name, "after")
            return result

        setattr(cls, name, hooked)
        self._originals.append((cls, name, original))

    def _skewed_add(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Redis's clock `skew_ms` ahead of Postgres's: every due time Redis compares with its
        TIME is, in Postgres's frame, that much earlier (and the pop reports its now that much later)."""
        entries = list(args[0]) if args else list(kwargs.pop("entries"))
        shift = timedelta(milliseconds=self.skew_ms)
        shifted = [Enqueue(e.execution_id, e.due_at - shift, e.tenant) for e in entries]
        return (shifted, *args[1:]), kwargs

    async def _gate(self, name: str, phase: str) -> None:
        left = self.armed.get((name, phase), 0)
        if not left:
            return
        self.armed[(name, phase)] = left - 1
        hold = Hold(name, phase)
        self.holds.append(hold)
        self.note(f"  .. {name} held {phase}")
        self.hold_hit.set()
        await hold.gate.wait()

    async def _setup(self) -> None:
        # As the daemon connects a worker: its writes on their own pool, one generic plan per statement.
        self.store = await Store.connect(self.database_url, min_size=2, max_size=12, worker_pool=True)
        await self.store.db.execute(
            "TRUNCATE jobs, executions, attempts, idempotency_keys, redrives, replicas, tz_recomputes, job_actions, tenant_quotas, "
            "notifications, notify_jobs CASCADE"
        )
        self.queue = DelayQueue.connect(self.redis_url, self.prefix)
        self.shard_queues: dict[int, DelayQueue] = {1: self.queue}
        for name in STORE_HOOKS:
            self._hook(Store, name)
        for name in QUEUE_HOOKS:
            self._hook(DelayQueue, name)
        self.sweeper = Sweeper(self.store, self.queue, self.config.sweeper, down_after_s=1.0, concurrency=self.config.concurrency)
        self.workers = {
            name: Worker(self.store, self.queue, self.config.worker, f"lifecycle-{name}", horizon_s=300.0,
                         on_epoch_lost=self.sweeper.request_reconcile, late_grace_s=60.0, caps=self.config.concurrency.caps)
            for name in ("a", "b")
        }  # fmt: skip
        self.notifier = Notifier(self.store, NotifyConfig(), HttpConfig())
        self.quotas = QuotaRefresh(self.store, self.config.concurrency, [*self.workers.values(), self.sweeper])
        self.jobs = Jobs(self.store, self.queue, self.config)
        self.dead = DeadLetters(self.store, self.queue, self.config)
        self.cancels = Cancels(self.store)
        self.applier = Apply(self.store, Intake(self.store, self.queue, self.config), self.jobs)
        self.retention = Retention(self.store, RetentionConfig(days=3, premake_days=1, lock_timeout_s=0.5))
        await self.sweeper.run_once()  # markers and the layout in use

    def teardown(self) -> None:
        global CURRENT
        if os.environ.get("SCHEDULERD_LIFECYCLE_TRACE"):
            print("\n".join(self.trace))
        try:
            self.armed.clear()
            self.fail_next.clear()
            for hold in self.holds:
                hold.gate.set()
            for waiting in self.blocked.values():
                if not waiting.done():
                    waiting.set_result("ok")
            self.loop.run_until_complete(self._close())
        finally:
            for cls, name, original in reversed(self._originals):
                setattr(cls, name, original)
            tzdb.installed_version = self._real_version  # type: ignore[assignment]
            self.exit.close()
            self.loop.close()
            CURRENT = None

    async def _close(self) -> None:
        for op in self.ops:
            op.task.cancel()
        for worker in self.workers.values():
            for running in list(worker.running.values()):
                if running.task is not None:
                    running.task.cancel()
            worker._threads.shutdown(wait=False, cancel_futures=True)
        pending = [o.task for o in self.ops] + [r.task for w in self.workers.values() for r in w.running.values() if r.task]
        if pending:
            await asyncio.wait(pending, timeout=5.0)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.queue.delete_all(), 5.0)
        for queue in self.shard_queues.values():
            await queue.close()
        try:
            await asyncio.wait_for(self.store.db.close(), 5.0)
        except TimeoutError:
            self.store.db.terminate()  # a connection still held by a step that never ended

    # --- the witness -------------------------------------------------------------------------

    def started(self, ctx: TaskContext) -> tuple[Start, Worker]:
        """A handler start: checked (one start per fence, fences rising) and recorded; with the
        worker holding it."""
        key = (ctx.execution_id, ctx.fence)
        holder = next((w for w in self.workers.values() if (r := w.running.get(ctx.execution_id)) and r.claim.fence == ctx.fence), None)
        assert holder is not None
        claim = holder.running[ctx.execution_id].claim
        if key in self.starts:
            self.violations.append(f"handler started twice at one fence: {key}")
        order = self.start_order.setdefault(ctx.execution_id, [])
        if order and ctx.fence <= max(order):
            self.violations.append(f"fence not rising: execution {ctx.execution_id} started at fence {ctx.fence} after {order}")
        order.append(ctx.fence)
        for other_fence in order[:-1]:
            other = self.starts[(ctx.execution_id, other_fence)]
            if other.ended is None and (ctx.execution_id, other_fence) not in self.forced_expiry:
                self.overlaps.append((ctx.execution_id, other_fence, ctx.fence))
        self.starts[key] = Start(ctx.execution_id, ctx.fence, ctx.job_id, holder.worker_id, claim.started_at, time.monotonic())
        self.note(f"  >> start {str(ctx.execution_id)[-6:]} fence {ctx.fence} on {holder.worker_id}")
        return self.starts[key], holder

    async def witness(self, ctx: TaskContext, params: dict[str, Any]) -> Any:
        key = (ctx.execution_id, ctx.fence)
        start, holder = self.started(ctx)
        try:
            if ctx.task == "lifecycle.fail":
                raise RuntimeError("lifecycle: this handler fails")
            if ctx.task == "lifecycle.block":
                waiting: asyncio.Future[str] = asyncio.get_running_loop().create_future()
                self.blocked[key] = waiting
                try:
                    verdict = await waiting
                finally:
                    self.blocked.pop(key, None)
                if verdict == "fail":
                    raise RuntimeError("lifecycle: the released handler fails")
            start.ended = "succeeded"
            return {"fence": ctx.fence}
        except asyncio.CancelledError:
            running = holder.running.get(ctx.execution_id)
            why = running.stopped if running is not None and running.claim.fence == ctx.fence else None
            start.ended = f"cancelled:{why or 'timeout-or-teardown'}"
            if why == "lease_lost":
                await self._check_lease_lost(ctx)
            raise
        except Exception:
            start.ended = "failed"
            raise

    async def _check_lease_lost(self, ctx: TaskContext) -> None:
        """A handler its worker cancelled because the lease was lost: was it?"""
        row = await self.store.db.fetchrow(
            "SELECT status, fence, lease_until > clock_timestamp() AS live FROM executions WHERE id = $1", ctx.execution_id
        )
        if row is not None and row["status"] == "running" and row["fence"] == ctx.fence and row["live"]:
            self.violations.append(
                f"healthy attempt cancelled as lease_lost: execution {ctx.execution_id} fence {ctx.fence} still "
                "running with a live lease"
            )

    # --- rules: creating work ----------------------------------------------------------------

    @action(4, kind=["lifecycle.ok", "lifecycle.fail", "lifecycle.block", "lifecycle.inline"], in_s=[0.0, 0.0, 0.2, 1.0],
          attempts=[1, 2, 3], timeout_s=[5.0, 0.4], tenant=["t1", "t2"])
    def create_one_off(self, kind: str, in_s: float, attempts: int, timeout_s: float, tenant: str) -> None:
        spec = JobSpec(task=kind, tenant=tenant, delay_s=in_s, max_attempts=attempts, timeout_s=timeout_s)
        self.run(self._create(spec, "one_off"), f"create one-off {kind} in {in_s}s attempts={attempts} timeout={timeout_s}")

    @action(2, kind=["lifecycle.ok", "lifecycle.block"], key=["k1", "k2"], window_s=[0.05, 0.3, 1.0])
    def create_debounced(self, kind: str, key: str, window_s: float) -> None:
        """A debounced create: it moves its key's execution on while that one has not started (a
        claim racing it keeps what it won), else makes a new one; either way nothing is lost."""
        spec = JobSpec(task=kind, tenant="t1", timeout_s=5.0)
        self.run(self._create(spec, "one_off", Debounce(key, window_s)), f"create debounced {kind} key={key} window={window_s}s")

    @action(2, kind=["lifecycle.ok", "lifecycle.block"], key=["c1", "c2"], tenant=["t1", "t2"])
    def create_keyed(self, kind: str, key: str, tenant: str) -> None:
        """A one-off with a concurrency key (limit 1): over its limit it waits, unclaimed, and a
        holder's finish, park, hand-back or reclaim lets it start (invariant 8 counts the holders)."""
        spec = JobSpec(task=kind, tenant=tenant, timeout_s=5.0, concurrency_key=key, concurrency_limit=1)
        self.run(self._create(spec, "one_off"), f"create keyed {kind} {tenant}/{key}")

    @action(1, kind=["lifecycle.ok", "lifecycle.fail"], attempts=[1, 2])
    def create_rated(self, kind: str, attempts: int) -> None:
        """A one-off under its own rate limit (2 per 0.5 s): over it, the claim is parked unrun until
        its token is due, its attempt not used (invariants 2-3 hold for parks as for any claim)."""
        spec = JobSpec(task=kind, tenant="t1", timeout_s=5.0, max_attempts=attempts, rate_key="r", rate_limit=2, rate_window_s=0.5)
        self.run(self._create(spec, "one_off"), f"create rated {kind} attempts={attempts}")

    @action(1, kind=["lifecycle.ok", "lifecycle.fail", "lifecycle.block"], attempts=[1, 2], zone=["UTC", NY],
          pause_after=[None, 1])
    def create_cron(self, kind: str, attempts: int, zone: str, pause_after: int | None) -> None:
        """pause_after: the notifier pauses the job after this many failed runs in a row (notifier_pass)."""
        cron = "* * * * *" if zone == "UTC" else "0 * * * *"
        spec = JobSpec(task=kind, tenant="t1", cron=cron, timezone=zone, max_attempts=attempts, timeout_s=5.0,
                       pause_after_failures=pause_after)  # fmt: skip
        self.run(self._create(spec, "cron" if zone == "UTC" else "tz"), f"create cron {cron!r} {zone} {kind}")

    @action(1, max_runs=[1, 3, 8])
    def create_bounded(self, max_runs: int) -> None:
        """Every minute, at most max_runs times: 8 is more than the 5-minute horizon writes at once."""
        spec = JobSpec(task="lifecycle.ok", tenant="t1", cron="* * * * *", max_runs=max_runs, timeout_s=5.0)
        self.run(self._create(spec, "bounded"), f"create bounded every minute max_runs={max_runs}")

    @action(1, when=lambda self: bool(self.max_runs), choose=CHOOSE, back_min=[3, 30])
    def rewind_bounded(self, choose: Choices, back_min: int) -> None:
        """A bounded job's cursor moved back (as if its rows were lost or never counted) and the
        materialiser runs: the count it keeps, not the rows, caps what it writes."""
        job_id = self._pick_job(choose, ("bounded",))

        async def go() -> None:
            await self.store.db.execute(
                "UPDATE jobs SET materialised_to = materialised_to - make_interval(mins => $2) WHERE id = $1", job_id, back_min
            )
            materialiser = Materialiser(self.store, self.queue, self.config.materialiser,
                                        dispatch_horizon_s=self.config.dispatcher.horizon_s)  # fmt: skip
            await materialiser.run_once()

        self.run(go(), f"rewind bounded {str(job_id)[-6:]} {back_min} min and materialise")

    async def _create(self, spec: JobSpec, kind: str, debounce: Debounce | None = None) -> None:
        job, executions = await create_job(self.jobs, spec, debounce)
        self.jobs_made[job.id] = kind
        if spec.max_runs is not None:
            self.max_runs[job.id] = spec.max_runs
        for execution in executions:
            self.accepted[execution.id] = "schedule" if kind != "one_off" else "one_off"

    def _pick_job(self, choose: Choices, kinds: tuple[str, ...] = ("one_off", "cron", "tz", "bounded")) -> uuid.UUID | None:
        candidates = sorted(j for j, k in self.jobs_made.items() if k in kinds)
        return choose.pick(candidates) if candidates else None

    @action(2, when=lambda self: any(k != "one_off" for k in self.jobs_made.values()), choose=CHOOSE)
    def trigger(self, choose: Choices) -> None:
        job_id = self._pick_job(choose, ("cron", "tz"))

        paused = job_id in self.disabled and bool(self.disabled[job_id]) and self.disabled[job_id][-1][1] is None
        paused = paused and job_id not in self.deleted

        async def go() -> None:
            try:
                execution = await self.jobs.trigger(job_id)
            except ValidationError:
                if not paused and job_id not in self.deleted:
                    raise
                return
            if paused:  # a paused job starts nothing, not even an explicit run
                self.violations.append(f"trigger of paused job {job_id} accepted: {execution.id}")
            self.accepted[execution.id] = "trigger"

        self.run(go(), f"trigger {str(job_id)[-6:]}")

    @action(2, when=lambda self: any(k == "cron" for k in self.jobs_made.values()), choose=CHOOSE, days_back=[0, 10])
    def backfill(self, choose: Choices, days_back: int) -> None:
        job_id = self._pick_job(choose, ("cron",))

        async def go() -> None:
            now = await self.store.clock_now()
            end = (now - timedelta(days=days_back, minutes=1)).replace(second=0, microsecond=0)
            done = await self.jobs.backfill(job_id, end - timedelta(minutes=3), end)
            for execution in done.created:
                self.accepted[execution.id] = "backfill"

        self.run(go(), f"backfill {str(job_id)[-6:]} {days_back} days back")

    # --- rules: steering ---------------------------------------------------------------------

    @action(1, when=lambda self: bool(self.jobs_made), choose=CHOOSE)
    def pause(self, choose: Choices) -> None:
        job_id = self._pick_job(choose)

        async def go() -> None:
            await self.jobs.pause(job_id, note="lifecycle")
            after = await self.store.clock_now()
            spans = self.disabled.setdefault(job_id, [])
            if not spans or spans[-1][1] is not None:
                spans.append([after, None])

        self.run(go(), f"pause {str(job_id)[-6:]}")

    @action(2)
    def notifier_pass(self) -> None:
        """The notifier judges failed runs: a job with pause_after_failures whose last runs failed is
        paused in its own transaction (jobs.pause_in), racing whatever runs or retries now;
        invariant 4 then holds for it as for a user's pause."""

        async def go() -> None:
            await self.notifier.run_once()
            after = await self.store.clock_now()
            for row in await self.store.db.fetch("SELECT id FROM jobs WHERE NOT enabled AND deleted_at IS NULL"):
                spans = self.disabled.setdefault(row["id"], [])
                if not spans or spans[-1][1] is not None:  # paused by the notifier just now
                    spans.append([after, None])

        if self.busy("notifier"):
            return
        self.run(go(), "notifier")

    @action(1, when=lambda self: bool(self.disabled), choose=CHOOSE)
    def resume(self, choose: Choices) -> None:
        job_id = self._pick_job(choose, ("cron", "tz", "bounded"))
        if job_id is None or job_id in self.deleted:
            return

        async def go() -> None:
            before = await self.store.clock_now()
            await self.jobs.resume(job_id)
            spans = self.disabled.get(job_id, [])
            if spans and spans[-1][1] is None:
                spans[-1][1] = before

        self.run(go(), f"resume {str(job_id)[-6:]}")

    @action(1, when=lambda self: bool(self.jobs_made), choose=CHOOSE)
    def delete(self, choose: Choices) -> None:
        job_id = self._pick_job(choose)

        async def go() -> None:
            await self.jobs.delete(job_id)
            after = await self.store.clock_now()
            self.deleted.add(job_id)
            spans = self.disabled.setdefault(job_id, [])
            if spans and spans[-1][1] is None:
                return
            spans.append([after, None])

        self.run(go(), f"delete {str(job_id)[-6:]}")

    @action(2, when=lambda self: any(k == "cron" for k in self.jobs_made.values()), choose=CHOOSE,
            cron=["* * * * *", "*/2 * * * *"], dry_run=[False, False, True])
    def edit(self, choose: Choices, cron: str, dry_run: bool) -> None:
        """Edit a cron job in place (Jobs.update). Its kept and new occurrences are accepted work
        like any other (checked never lost); those it cancels (reason edited) never started
        (checked by `_check_edited`), and a running one is left to finish."""
        job_id = self._pick_job(choose, ("cron",))

        async def go() -> None:
            try:
                done = await self.jobs.update(job_id, {"cron": cron, "params": {"edit": self.step_no}}, dry_run=dry_run)
            except ConflictError:
                if job_id not in self.deleted:
                    raise
                return
            if dry_run:
                return
            rows = await self.store.db.fetch(
                "SELECT id FROM executions WHERE job_id = $1 AND job_version = $2 AND status IN ('pending', 'queued')",
                job_id, done.job.version,
            )  # fmt: skip
            for row in rows:
                self.accepted.setdefault(row["id"], "schedule")

        self.run(go(), f"edit {str(job_id)[-6:]} cron {cron!r}{' (dry run)' if dry_run else ''}")

    @action(1, first=["* * * * *", "*/2 * * * *", None], second=["* * * * *", "*/2 * * * *", None], prune=[False, True])
    def apply(self, first: str | None, second: str | None, prune: bool) -> None:
        """Apply a declared source of two jobs (None: that one not declared) through `Apply`: added
        jobs and the occurrences of changed ones are accepted work like any other (checked never
        lost); a pruned job is deleted like `delete`'s; a declared job the `edit` rule changed since
        the last apply is drift, and the apply writes nothing."""
        documents = [{"name": f"declared-{i}", "task": "lifecycle.ok", "cron": cron, "timeout_s": 5.0}
                     for i, cron in enumerate((first, second)) if cron is not None]  # fmt: skip

        async def go() -> None:
            try:
                plan = await self.applier.apply(declarations(documents, "t1"), tenant="t1", source="lifecycle", prune=prune)
            except DriftError:
                return
            for added in plan.added:
                self.jobs_made[added.job.id] = "cron"
            after = await self.store.clock_now()
            for removed in plan.removed:
                self.deleted.add(removed.job.id)
                spans = self.disabled.setdefault(removed.job.id, [])
                if not spans or spans[-1][1] is not None:
                    spans.append([after, None])
            written = [a.job.id for a in plan.added] + [c.edit.job.id for c in plan.changed]
            for row in await self.store.db.fetch(
                "SELECT id FROM executions WHERE job_id = ANY($1::uuid[]) AND status IN ('pending', 'queued')", written
            ):
                self.accepted.setdefault(row["id"], "schedule")

        self.run(go(), f"apply {[first, second]}{' --prune' if prune else ''}")

    @action(2)
    def redrive(self) -> None:
        async def go() -> None:
            rows = await self.store.db.fetch(
                "SELECT e.id FROM executions e JOIN jobs j ON j.id = e.job_id WHERE e.status = 'failed' AND j.enabled "
                "AND j.deleted_at IS NULL ORDER BY e.id LIMIT 5"
            )
            if rows:
                done = await self.dead.redrive([r["id"] for r in rows], None, by="lifecycle")
                for execution_id in done.execution_ids:
                    self.accepted[execution_id] = "redrive"
                self.note(f"  redriven {len(done.execution_ids)}")

        self.run(go(), "redrive failed")

    @action(2, choose=CHOOSE)
    def cancel(self, choose: Choices) -> None:
        """Cancel one unsettled execution, whatever its state (a running one: at its next heartbeat)."""

        async def go() -> None:
            rows = await self.store.db.fetch(
                "SELECT id FROM executions WHERE status IN ('pending', 'queued', 'running') ORDER BY id LIMIT 20"
            )
            if not rows:
                return
            execution_id = choose.pick([r["id"] for r in rows])
            try:
                done = await self.cancels.cancel(execution_id, None, by="lifecycle")
            except TooLateError:
                return  # it settled meanwhile: its outcome stands
            self.cancelled.setdefault(execution_id, done.execution.fence)
            if not done.stop_requested and done.execution.status != "cancelled":
                self.violations.append(f"cancel of an unstarted execution left it {done.execution.status}: {execution_id}")
            self.note(f"  cancelled {str(execution_id)[-6:]} at fence {done.execution.fence} (running: {done.stop_requested})")

        self.run(go(), "cancel one")

    @action(1, when=lambda self: bool(self.jobs_made), choose=CHOOSE)
    def cancel_many(self, choose: Choices) -> None:
        """Cancel every unsettled execution of one job (running ones asked to stop), in pages."""
        job_id = self._pick_job(choose)

        async def go() -> None:
            job = await self.store.job_get(job_id)
            assert job is not None
            which = CancelFilter(statuses=("pending", "queued", "running"), job_id=job_id)
            plan = await self.cancels.plan(job.tenant, which)
            done = await self.cancels.cancel_matching(job.tenant, which, dry_run=False, by="lifecycle")
            # Once asked, a row's fence no longer moves (nothing claims it again): read it after.
            for r in await self.store.db.fetch(
                "SELECT id, fence FROM executions WHERE job_id = $1 AND cancelled_by = 'lifecycle'", job_id
            ):
                self.cancelled.setdefault(r["id"], r["fence"])
            self.note(f"  cancelled {done.matched} of job {str(job_id)[-6:]} (planned {plan.total})")

        self.run(go(), f"cancel many of {str(job_id)[-6:]}")

    # --- rules: the hot path -----------------------------------------------------------------

    @action(8, name=["a", "b"])
    def run_once(self, name: str) -> None:
        if self.busy(f"run_once:{name}"):
            return
        self.run(self._run_once(name), f"run_once:{name}")

    async def _run_once(self, name: str) -> None:
        worker = self.workers[name]
        started = await worker.run_once()
        pop = worker.stats.last_pop
        if pop is not None and pop.execution_ids:
            await self._check_not_dropped(worker, pop)
        self.note(f"  {name} started {started}")

    async def _check_not_dropped(self, worker: Worker, pop: Pop) -> None:
        """An id this pop took and nobody holds must not be left out of Redis while it is still
        waiting to run (only the sweeper's overdue repair would find it, seconds later)."""
        held = {i for w in self.workers.values() for i in w.running} | {i for w in self.workers.values() for i in w._outcomes}
        ids = [uuid.UUID(i) for i in pop.execution_ids if uuid.UUID(i) not in held]
        if not ids:
            return
        rows = await self.store.db.fetch("SELECT id, tenant, status FROM executions WHERE id = ANY($1)", ids)
        waiting = [r for r in rows if r["status"] == "queued"]
        if not waiting:
            return
        missing = set(await worker.queue.missing([str(r["id"]) for r in waiting], [r["tenant"] for r in waiting]))
        for r in waiting:
            if str(r["id"]) in missing and not self.ops:
                self.violations.append(
                    f"popped id dropped: execution {r['id']} is queued, was popped by {worker.worker_id} "
                    "(not claimed) and is no longer in Redis"
                )

    @action(6, name=["a", "b"])
    def heartbeat(self, name: str) -> None:
        if self.busy(f"heartbeat:{name}"):
            return
        self.run(self.workers[name].heartbeat_once(), f"heartbeat:{name}")

    @action(6, name=["a", "b"])
    def flush(self, name: str) -> None:
        if self.busy(f"flush:{name}"):
            return
        self.run(self.workers[name].flush_outcomes(), f"flush:{name}")

    @action(4, when=lambda self: bool(self.blocked), choose=CHOOSE, verdict=["ok", "fail"])
    def release_handler(self, choose: Choices, verdict: str) -> None:
        key = choose.pick(sorted(self.blocked))
        waiting = self.blocked.get(key)
        if waiting is not None and not waiting.done():
            waiting.set_result(verdict)
        self.run(self._turns(), f"release handler {str(key[0])[-6:]} fence {key[1]}: {verdict}")

    @action(1, quota=[1, None])
    def set_quota(self, quota: int | None) -> None:
        """An operator changes t2's in-flight quota at runtime (1, or cleared: config's 2 again); the
        replicas read it at once here (in a fleet: within [concurrency].refresh_s). A claim already
        on its way judges by the caps it read: never more than the larger of the two (invariant 9)."""

        async def go() -> None:
            if quota is None:
                await self.store.tenant_quota_clear("t2")
            else:
                await self.store.tenant_quota_set("t2", quota)
            await self.quotas.run_once()

        self.run(go(), f"set t2's quota to {quota or 'config'}")

    @action(3)
    def sweep(self) -> None:
        if self.busy("sweep"):
            return
        self.run(self.sweeper.run_once(), "sweep")

    @action(3, seconds=[0.05, 0.3, LEASE_S + 0.3])
    def wait(self, seconds: float) -> None:
        self.run(asyncio.sleep(seconds), f"wait {seconds}s")

    @action(1, name=["a", "b"])
    def freeze_worker(self, name: str) -> None:
        """The worker froze past its leases (Postgres-side: its leases run out now)."""
        worker = self.workers[name]

        async def go() -> None:
            rows = await self.store.db.fetch(
                "UPDATE executions SET lease_until = clock_timestamp() - interval '1 second' "
                "WHERE status = 'running' AND worker = $1 RETURNING id, fence", worker.worker_id,
            )  # fmt: skip
            self.forced_expiry.update((r["id"], r["fence"]) for r in rows)

        self.run(go(), f"freeze {name}")

    # --- rules: latency and faults -----------------------------------------------------------

    @action(4, method=HOLDABLE, phase=["before", "after"])
    def arm_hold(self, method: str, phase: str) -> None:
        """The next call of `method` waits (before its request, or with its answer) until released."""
        self.step_no += 1
        self.armed[(method, phase)] = 1
        self.note(f"arm hold {method} {phase}")

    @action(4, when=lambda self: bool(self.holds), choose=CHOOSE)
    def release_hold(self, choose: Choices) -> None:
        hold = choose.pick(self.holds)
        self.holds.remove(hold)
        hold.gate.set()
        self.run(self._turns(20), f"release hold {hold.name} {hold.phase}")

    @action(1)
    def fail_next_park(self) -> None:
        self.step_no += 1
        self.fail_next.add("execution_park_many")
        self.note("arm failure execution_park_many")

    @action(1, skew_ms=[0, 0, 30, 300])
    def clock_skew(self, skew_ms: int) -> None:
        """Redis's host clock `skew_ms` ahead of Postgres's host (from now on)."""
        self.step_no += 1
        self.skew_ms = skew_ms
        self.note(f"redis clock ahead by {skew_ms} ms")

    @action(1, what=["all", "tenants"])
    def flush_redis(self, what: str) -> None:
        """Redis lost this prefix's data (restart without persistence), or (tenants) a failover
        lost the last write of a shard: its tenants set."""
        async def go() -> None:
            if what == "all":
                for queue in self.shard_queues.values():
                    await queue.delete_all()
            else:
                for queue in self.shard_queues.values():
                    for shard in queue.shards:
                        await queue.client.delete(shard.tenants_key)

        self.run(go(), f"flush redis {what}")

    @action(1, shards=[1, 2, 4], which=["a", "b", "rest"])
    def change_shards(self, shards: int, which: str) -> None:
        """A replica restarted with another [redis].shards (the others keep theirs for now)."""
        queue = self.shard_queues.get(shards)
        if queue is None:
            queue = self.shard_queues[shards] = DelayQueue.connect(self.redis_url, self.prefix, shards=shards)
        if which == "rest":
            self.sweeper.queue, self.jobs.queue, self.dead.queue = queue, queue, queue
            self.sweeper._epoch = None  # a restarted replica's first sweep reconciles
        else:
            worker = self.workers[which]
            worker.queue, worker.parking.queue = queue, queue
            worker.stats.known_epoch = None
        self.run(self._turns(), f"shards={shards} for {which}")

    @action(2)
    def retention_pass(self) -> None:
        if self.busy("retention"):
            return
        self.run(self._retention(), "retention")

    async def _retention(self) -> None:
        result = await self.retention.run_once()
        self.dropped_days.update(result.dropped)
        if result.dropped or result.kept:
            self.note(f"  retention dropped {result.dropped} kept {result.kept}")

    @action(1, when=lambda self: not self.tz_recomputed)
    def tz_recompute(self) -> None:
        """The tz database was upgraded: the real New York rules replace the 'old' ones."""
        self.tz_recomputed = True
        self.exit.close()
        tzdb.installed_version = lambda: NEW_TZ.version  # type: ignore[assignment]
        self.run(tzchange.recompute(self.store, self.sweeper.queue, self.config, "lifecycle-tz", NEW_TZ), "tz recompute")

    @rule(draws=st.tuples(*[PICK] * STEP_DRAWS))
    def step(self, draws: tuple[int, ...]) -> None:
        choose = Choices(draws)
        allowed = [a for a in ACTIONS if a.when is None or a.when(self)]
        chosen = choose.pick([a for a in allowed for _ in range(a.weight)])
        params = {k: choose if v is CHOOSE else choose.pick(v) for k, v in chosen.params.items()}
        getattr(self, chosen.name)(**params)

    # --- invariants --------------------------------------------------------------------------

    @invariant()
    def holds_everywhere(self) -> None:
        if not hasattr(self, "store"):
            return
        self.loop.run_until_complete(self._check())
        if self.violations:
            raise Violation("\n".join(self.violations) + "\n--- steps ---\n" + "\n".join(self.trace[-80:]))

    async def _check(self) -> None:
        await self._turns(2)
        rows = {
            r["id"]: r
            for r in await self.store.db.fetch(
                "SELECT id, job_id, tenant, status, attempt, fence, due_at, scheduled_for, reason, redrives, "
                "lease_until, clock_timestamp() AS now FROM executions"
            )
        }
        history: dict[uuid.UUID, list[asyncpg.Record]] = {}
        for a in await self.store.db.fetch("SELECT execution_id, fence, attempt, outcome FROM attempt_history ORDER BY fence"):
            history.setdefault(a["execution_id"], []).append(a)
        redrive_fences: dict[uuid.UUID, list[int]] = {}
        for r in await self.store.db.fetch("SELECT execution_id, fence FROM redrives"):
            redrive_fences.setdefault(r["execution_id"], []).append(r["fence"])
        in_flight = bool(self.ops)
        # 1. Nothing accepted is lost.
        for execution_id, origin in self.accepted.items():
            row = rows.get(execution_id)
            if row is None:
                seen = self.last_seen.get(execution_id)
                if seen is not None and seen[0] in FINAL and seen[2].date() in self.dropped_days:
                    continue  # its day expired and was dropped whole, after it finished
                if self.tz_recomputed and origin == "schedule" and execution_id not in self.claimed:
                    continue  # an occurrence the new tz rules no longer produce, never started
                self.violations.append(f"accepted execution lost: {execution_id} (origin {origin}, last seen {seen})")
                continue
            previous = self.last_seen.get(execution_id)
            if previous is not None and row["fence"] < previous[1]:
                self.violations.append(f"fence went down: {execution_id} {previous[1]} -> {row['fence']}")
            self.last_seen[execution_id] = (row["status"], row["fence"], row["scheduled_for"])
        # A queued execution that is due is in Redis, or missing there (the sweeper re-adds it):
        # never in a queue that no pop serves (its tenant missing from its shard's tenants set).
        due = [r for r in rows.values() if r["status"] == "queued" and r["due_at"] <= r["now"]]
        if due and not in_flight:
            await self._check_servable(due)
        # 2-3. Attempts recorded and charged only for a start or a lease that really expired.
        for execution_id, row in rows.items():
            recorded = history.get(execution_id, [])
            fences = {a["fence"] for a in recorded}
            if row["status"] in FINAL and row["reason"] not in ("paused", "deleted"):
                for fence in self.start_order.get(execution_id, []):
                    start = self.starts[(execution_id, fence)]
                    if fence not in fences and start.ended not in (None, "cancelled:handed_back"):
                        self.violations.append(
                            f"final without its attempt recorded: {execution_id} is {row['status']}; the handler "
                            f"started at fence {fence} ({start.ended}) has no attempt row"
                        )
            for a in recorded:
                key = (execution_id, a["fence"])
                if a["outcome"] in ("handed_back",):
                    continue
                if key in self.starts:
                    continue
                if a["outcome"] == "lease_expired" and key in self.forced_expiry:
                    continue
                self.violations.append(
                    f"attempt charged without a handler start: {execution_id} fence {a['fence']} attempt "
                    f"{a['attempt']} outcome {a['outcome']} (claimed fences {self.claimed.get(execution_id)})"
                )
        # 4. No handler of a disabled or deleted job started after the disable committed.
        for start in self.starts.values():
            for disabled_after, enabled_before in self.disabled.get(start.job_id, []):
                if start.claimed_at > disabled_after and (enabled_before is None or start.claimed_at < enabled_before):
                    self.violations.append(
                        f"handler of a disabled job started: job {start.job_id} execution {start.execution_id} fence "
                        f"{start.fence} claimed at {start.claimed_at.isoformat()} after the disable at {disabled_after.isoformat()}"
                    )
        # 4b. An edit cancels only what never started: no handler ever began an edited-away row.
        for execution_id, row in rows.items():
            if row["status"] == "cancelled" and row["reason"] == "edited" and (row["attempt"] or execution_id in self.start_order):
                self.violations.append(
                    f"an edit cancelled a started execution: {execution_id} attempt {row['attempt']} "
                    f"(starts at fences {self.start_order.get(execution_id)})"
                )
        # 5. Two handlers of one execution at once only when the older one's lease really ran out.
        for execution_id, older, newer in self.overlaps:
            outcomes = {a["fence"]: a["outcome"] for a in history.get(execution_id, [])}
            if outcomes.get(older) != "lease_expired":
                self.violations.append(
                    f"two handlers at once: {execution_id} fences {older} and {newer}, the older one's lease did not "
                    f"expire (its attempt: {outcomes.get(older)})"
                )
        self.overlaps.clear()
        # 6. A cancelled execution never starts an attempt after the cancel committed (the one
        # running then may finish its attempt); only a redrive of its final failure starts it again.
        for (execution_id, fence), start in self.starts.items():
            at_cancel = self.cancelled.get(execution_id)
            if at_cancel is None or fence <= at_cancel:
                continue
            if not any(at_cancel < f <= fence for f in redrive_fences.get(execution_id, [])):
                self.violations.append(
                    f"cancelled execution started again: {execution_id} fence {fence} after the cancel at fence {at_cancel}"
                )
        for execution_id in self.cancelled:
            row = rows.get(execution_id)
            if row is not None and row["status"] in ("pending", "queued") and not redrive_fences.get(execution_id):
                self.violations.append(f"cancelled execution queued again: {execution_id} is {row['status']}")
        # 7. A bounded job never writes more scheduled executions than its max_runs, and counts each.
        if self.max_runs:
            for r in await self.store.db.fetch(
                "SELECT j.id, j.runs_written, j.done_at, (SELECT count(*) FROM executions e WHERE e.job_id = j.id "
                "AND e.origin = 'scheduled') AS scheduled FROM jobs j WHERE j.id = ANY($1::uuid[])", list(self.max_runs)
            ):
                cap = self.max_runs[r["id"]]
                if r["scheduled"] > cap or r["runs_written"] > cap or r["scheduled"] > r["runs_written"]:
                    self.violations.append(
                        f"bounded job {r['id']} over its max_runs {cap}: {r['scheduled']} scheduled executions, "
                        f"runs_written {r['runs_written']}"
                    )

        # 8. A concurrency key never has more executions running (claimed, lease live or not yet
        # reclaimed) than its limit, whichever replica claimed them.
        for r in await self.store.db.fetch(
            "SELECT e.tenant, j.concurrency_key, count(*) AS running, max(j.concurrency_limit) AS limit FROM executions e "
            "JOIN jobs j ON j.id = e.job_id WHERE e.status = 'running' AND j.concurrency_key IS NOT NULL "
            "GROUP BY e.tenant, j.concurrency_key HAVING count(*) > max(j.concurrency_limit)"
        ):
            self.violations.append(f"concurrency key {r['tenant']}/{r['concurrency_key']} has {r['running']} running, limit {r['limit']}")

        # 9. Tenant t2 never has more executions running than the largest quota it was given (config's
        # 2; set_quota only lowers it), across both replicas, every claim path and every steering.
        running = await self.store.db.fetchval("SELECT count(*) FROM executions WHERE tenant = 't2' AND status = 'running'")
        if running > TENANT_QUOTA:
            self.violations.append(f"tenant t2 has {running} running, its quota is at most {TENANT_QUOTA}")

    async def _check_servable(self, due: list[asyncpg.Record]) -> None:
        queue = self.sweeper.queue
        tenants_by_shard = await queue._shard_tenants()
        missing = set(await queue.missing([str(r["id"]) for r in due], [r["tenant"] for r in due]))
        for r in due:
            if str(r["id"]) in missing:
                continue  # the sweeper's overdue repair puts it back
            shard = queue.shards.index(queue.shard(r["id"]))
            if r["tenant"] not in tenants_by_shard[shard]:
                self.violations.append(
                    f"stuck entry: execution {r['id']} is queued and due, its entry is in {r['tenant']}'s queue of "
                    f"shard {shard}, but the tenant is not in that shard's tenants set (no pop serves it, the sweeper "
                    "sees it present)"
                )


def machine_factory(database_url: str, redis_url: str) -> Callable[[], LifecycleMachine]:
    class Bound(LifecycleMachine):
        pass

    Bound.database_url, Bound.redis_url = database_url, redis_url
    return Bound
