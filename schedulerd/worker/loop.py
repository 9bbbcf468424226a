"""The worker's loop: pop due ids from Redis -> claim them in Postgres -> admit (admission.py) ->
run each attempt (attempt.py) -> record the outcomes (the retry decision: core/retry.py).

A pop confers nothing; the batched claim UPDATE decides who runs what. Every later write
(heartbeat, finish) is conditional on the fence the claim returned, so a worker that froze past
its lease cannot overwrite the newer attempt's outcome. Heartbeats and finishes are batched.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import random
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any
from uuid import UUID

import structlog

from schedulerd import faults, flow_claims, health, metrics, overlap_claims, tracing
from schedulerd.config import BreakerConfig, JobsConfig, LateConfig, RateLimitsConfig, WorkerConfig
from schedulerd.core import linger, rate
from schedulerd.core.flow import NO_CAPS, Caps, Scope
from schedulerd.core.retry import RetryPolicy, after_attempt
from schedulerd.loops import retrying
from schedulerd.models import AttemptOutcome, Claim, Enqueue, ExecutionStatus, Finished, Outcome
from schedulerd.overrun_watch import OverrunWatch
from schedulerd.queue import UNREACHABLE, Breakers, DelayQueue, Pop, TokenBuckets
from schedulerd.store import REFUSED_ERRORS, RETRYABLE_ERRORS, Store, parsed_id
from schedulerd.tasks import registry
from schedulerd.transient import TRANSIENT_ERRORS, enqueue_committed
from schedulerd.worker import attempt
from schedulerd.worker.admission import Admission
from schedulerd.worker.attempt import Deadline, Running, Stop
from schedulerd.worker.breaker_gate import BreakerGate
from schedulerd.worker.parking import Parking
from schedulerd.worker.rate_gate import RateGate

log = structlog.get_logger("schedulerd.worker")

FINISH_BATCH_MAX = 1000  # outcomes written by one statement
CLAIM_TRIES = 4  # a claim that fails on the way is tried this often (adopting its own lost claims) before giving up
UNSURE_CLAIM_LEASES = 4  # ids of a claim that gave up are adopted when popped again within this many leases


@dataclass
class WorkerStats:
    claimed: int = 0
    dropped: int = 0  # popped but claimed by another worker, finished, or not due
    finished: int = 0
    fenced_out: int = 0  # outcomes refused because the lease had been reclaimed
    lease_lost: int = 0
    parked: int = 0  # claimed, then handed back unrun (task limit, rate limit, open breaker)
    last_pop: Pop | None = None
    known_epoch: str | None = field(default=None)


class Worker:
    def __init__(
        self,
        store: Store,
        queue: DelayQueue,
        config: WorkerConfig,
        worker_id: str,
        *,
        horizon_s: float,
        on_epoch_lost: Callable[[], None] = lambda: None,
        rng: random.Random | None = None,
        breaker_config: BreakerConfig | None = None,
        late_grace_s: float = 60.0,
        late_config: LateConfig | None = None,
        jobs_config: JobsConfig | None = None,
        caps: Caps = NO_CAPS,
        rate_config: RateLimitsConfig | None = None,
        tracer_provider: Any = None,
    ) -> None:
        self.store = store
        # Fleet-wide concurrency caps ([concurrency], kept current by tenant_quotas.QuotaRefresh); a
        # job's own key comes with its claim.
        self.caps = caps
        self.late_config = late_config or LateConfig()
        self.overrun = OverrunWatch(store, jobs_config or JobsConfig())
        self.queue = queue
        self.config = config
        self.worker_id = worker_id
        self.horizon_s = horizon_s
        self.on_epoch_lost = on_epoch_lost
        self.rng = rng or random.Random()
        self.gate = BreakerGate(Breakers(queue.client, queue.prefix), breaker_config or BreakerConfig(), self.rng)
        # A first attempt starting late_grace_s after its due time is late ([materialiser].misfire_grace_s).
        self.parking = Parking(store, queue, late_grace_s)
        limits = rate.limits_from(rate_config.tasks, rate_config.hosts) if rate_config else rate.RateLimits()
        # Always there: a job may name its own rate limit (a claim without one costs an attribute check).
        rates = RateGate(TokenBuckets(queue.client, queue.prefix), limits)
        self.admission = Admission(config, self.gate, self.parking, self.rng, rates)
        self.running: dict[UUID, Running] = {}
        self.stats = WorkerStats()
        # Outcomes recorded but not yet written, by execution. Each stays held (its lease is
        # extended by the heartbeat) until its write commits or its fence is refused.
        self._outcomes: dict[UUID, Outcome] = {}
        # Claims committed but neither started nor handed back yet: held (the heartbeat extends
        # their leases, the pop does not take them again) until admission settles each one.
        self._taken: dict[UUID, Claim] = {}
        # Ids whose claim gave up after failing on the way, so it may have committed with its reply
        # lost, by when to stop expecting them (monotonic): handed back to the queue, they come
        # back in a later pop, whose claim must adopt them or they would wait, running under this
        # worker's id, until the sweeper charges an attempt that never started.
        self._unsure: dict[UUID, float] = {}
        self._outcome_ready = asyncio.Event()
        self._closing = False  # set after the drain: the finish loop writes what is left and returns
        self.redis_down_since: float | None = None  # monotonic time Redis stopped answering, if it has
        self._next_redis_probe = 0.0
        self._slot_free = asyncio.Event()
        self._threads = ThreadPoolExecutor(config.threads, thread_name_prefix="schedulerd-task")
        # A write that hangs is abandoned in time to try again on a fresh connection before the lease runs out.
        self.write_timeout_s = min(config.write_timeout_s, config.lease_s / 3)
        self._claim_terms = {"late_after_s": late_grace_s, "down_after_s": self.late_config.down_after_s}
        self.late_grace_s = late_grace_s
        self.linger_s = config.linger_s  # the current pause between partial pops and outcome writes (core/linger)
        self._batch_max = min(config.batch_size, config.concurrency)  # most executions one pop can start
        # A span per attempt when tracing is on (tracer_provider: OpenTelemetry's; None: the global
        # one); None when it is off, decided once here, so an untraced attempt costs one check.
        self.tracer = tracing.attempt_tracer(worker_id, tracer_provider)

    # --- pop and claim -----------------------------------------------------------------------

    async def run_once(self) -> int:
        """Pop and claim up to the free capacity; start the handlers. Returns how many started."""
        if self._taken:  # an error stopped their admission last time: they go back first
            await self._hand_back_taken()
        # Slow tasks run in a pool of their own: only the main pool's room decides how much to pop.
        free = self.config.concurrency - self._main_running()
        if free <= 0:
            return 0
        limit = min(free, self.config.batch_size)
        if self.redis_down_since is not None and time.monotonic() < self._next_redis_probe:
            return await self._admit(await self._claim_due(limit))
        try:
            pop = await self.queue.pop_due(limit)
        except UNREACHABLE as exc:
            # Redis is an index, not the record: keep starting due work straight from Postgres.
            if self.redis_down_since is None:
                self.redis_down_since = time.monotonic()
                metrics.REDIS_FALLBACK.set(1)
                log.warning("worker.redis_unreachable", error=f"{type(exc).__name__}: {exc}", fallback="postgres")
            self._next_redis_probe = time.monotonic() + self.config.redis_probe_s
            self.stats.last_pop = None
            return await self._admit(await self._claim_due(limit))
        if self.redis_down_since is not None:
            log.info("worker.redis_back", outage_s=round(time.monotonic() - self.redis_down_since, 3))
            self.redis_down_since = None
            metrics.REDIS_FALLBACK.set(0)
            self.on_epoch_lost()  # entries may be missing (restart, or ZADDs that failed meanwhile)
        faults.hit("after_pop")  # fault suite only: popped ids that nobody has claimed
        self.stats.last_pop = pop
        if pop.breakers or self.gate.states:
            self.gate.see(pop.breakers)
        if pop.epoch != self.stats.known_epoch:
            if pop.epoch is None or self.stats.known_epoch is not None:
                log.warning("worker.epoch_lost", epoch=pop.epoch)
                self.on_epoch_lost()
            self.stats.known_epoch = pop.epoch
        # An id this worker already holds (a duplicate queue entry) is never claimed again by it:
        # that is what makes adopting rows running under its own id safe (_claim). Each popped id
        # is parsed as the driver parses ids (store.parsed_id: in C, a uuid.UUID all the same).
        popped = [
            i for i in pop.execution_ids
            if (held := parsed_id(i)) not in self.running and held not in self._outcomes and held not in self._taken
        ]  # fmt: skip
        if not popped:
            return 0
        try:
            claims = self._take(await self._claim(popped, pop.at, adopt=self._expecting(popped)))
        except BaseException:
            # The ids left Redis but nobody owns them: put them back rather than wait for the sweeper.
            await self._give_back(pop, popped)
            raise
        settled = 0
        if len(claims) < len(popped):
            # Rare but for guarded jobs (overlap policy other than allow), which that statement
            # leaves to the claim under their job's lock; other misses are someone else's claims,
            # or entries whose score was earlier than their row's due time.
            claimed = {str(c.id) for c in claims}
            missed = [i for i in popped if i not in claimed]
            try:
                judged = await overlap_claims.claim_guarded(
                    self.store, missed, self.config.lease_s, self.worker_id, self.caps, due_by=pop.at, **self._claim_terms
                )
                claims, settled = claims + self._take(judged.claims), judged.settled
                started = {str(c.id) for c in judged.claims}
                if len(judged.claims) + judged.settled < len(missed):  # limited jobs' come next
                    limited, waiting = await flow_claims.claim_limited(
                        self.store, [i for i in missed if i not in started], self.config.lease_s, self.worker_id,
                        self.caps, due_by=pop.at, **self._claim_terms,
                    )  # fmt: skip
                    claims, settled = claims + self._take(limited), settled + waiting
                    started |= {str(c.id) for c in limited}
                if len(started) + settled < len(missed):  # some are not explained yet
                    settled += await self._give_back_early(pop, [i for i in missed if i not in started])
            except TRANSIENT_ERRORS as exc:  # run what was claimed; the rest go back to the queue
                log.warning("worker.guarded_claim_failed", count=len(missed), error=str(exc))
                await self._give_back(pop, missed)
        self.stats.dropped += len(popped) - len(claims) - settled
        metrics.CLAIM_CONFLICTS.inc(len(popped) - len(claims) - settled)
        faults.hit("after_claim")  # fault suite only: claimed rows whose handlers never start
        return await self._admit(claims)

    async def _claim(self, execution_ids: list[str], due_by: datetime, *, adopt: bool = False) -> list[Claim]:
        """The batched claim, judging due-ness at due_by: the instant of the pop that returned
        these ids (Redis TIME), so a Redis clock a few ms ahead of Postgres's never makes a popped
        id look early. When it fails on the way (connection broken or timed out), it may
        have committed with its reply lost: claim again within a fraction of a second on a fresh
        connection, adopting rows already running under this worker's id (attempt and fence as the
        lost claim set them), so they run now instead of waiting for the sweeper to charge an
        attempt that never started. adopt: from the first try (some ids came back after such a
        claim gave up)."""
        for tries in itertools.count(1):
            try:
                claims = await self.store.execution_claim_many(
                    execution_ids, self.config.lease_s, self.worker_id, timeout_s=self.write_timeout_s,
                    adopt=adopt or tries > 1, due_by=due_by, caps=self.caps, **self._claim_terms,
                )  # fmt: skip
                if self._unsure:
                    for i in execution_ids:
                        self._unsure.pop(UUID(i), None)
                return claims
            except RETRYABLE_ERRORS as exc:
                if tries >= CLAIM_TRIES:
                    expect_until = time.monotonic() + UNSURE_CLAIM_LEASES * self.config.lease_s
                    self._unsure.update((UUID(i), expect_until) for i in execution_ids)
                    raise
                log.warning("worker.claim.retrying", count=len(execution_ids), error=f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(self._retry_in_s(tries))
        raise AssertionError("unreachable")

    def _expecting(self, execution_ids: list[str]) -> bool:
        """Whether any of these ids may be running under this worker's id after a claim that gave
        up (_unsure); forgets the ids whose leases have long run out (the sweeper has them)."""
        if not self._unsure:
            return False
        now = time.monotonic()
        for lapsed in [i for i, until in self._unsure.items() if until < now]:
            del self._unsure[lapsed]
        return any(UUID(i) in self._unsure for i in execution_ids)

    async def _give_back(self, pop: Pop, execution_ids: list[str]) -> None:
        """Put popped ids nobody claimed back in Redis (due at the pop's instant), best effort."""
        owners = {i: (t, p) for i, t, p in zip(pop.execution_ids, pop.tenants, pop.priorities)}
        await enqueue_committed(self.queue, [Enqueue(UUID(i), pop.at, *owners[i]) for i in execution_ids], "worker.give_back_failed")

    async def _give_back_early(self, pop: Pop, execution_ids: list[str]) -> int:
        """Popped ids still queued but not due at the pop's instant (an entry whose score was
        earlier than its row's due time): put each back at its due time rather than drop it.
        Returns how many (only ids the claims left come here, so it costs nothing per batch)."""
        early = await self.store.execution_queued_early(execution_ids, pop.at) if execution_ids else []
        if early:
            log.info("worker.popped_early", count=len(early))
            await enqueue_committed(self.queue, early, "worker.give_back_failed", only_new=False)
        return len(early)

    async def _claim_due(self, limit: int) -> list[Claim]:
        """The fallback while Redis is unreachable: claim due rows straight from Postgres."""
        lease_s, worker, terms = self.config.lease_s, self.worker_id, self._claim_terms
        claims, left = await self.store.execution_claim_due(limit, lease_s, worker, caps=self.caps, **terms)
        claims = self._take(claims)
        claims += self._take((await overlap_claims.claim_guarded(self.store, left, lease_s, worker, self.caps, **terms)).claims)
        started = {str(c.id) for c in claims}
        limited, _ = await flow_claims.claim_limited(
            self.store, [i for i in left if i not in started], lease_s, worker, self.caps, **terms
        )  # fmt: skip
        return claims + self._take(limited)

    def _take(self, claims: list[Claim]) -> list[Claim]:
        """Hold claims that have just committed until admission starts or hands back each one."""
        self._taken.update((claim.id, claim) for claim in claims)
        return claims

    def _settled(self, claims: list[Claim]) -> None:
        for claim in claims:
            if self._taken.get(claim.id) is claim:
                del self._taken[claim.id]

    def _main_running(self) -> int:
        return len(self.running) - self.admission.slow_running

    async def _admit(self, claims: list[Claim]) -> int:
        """Start the claims admission lets through; it parks the rest. Returns how many started.
        Should admission fail on the way (a probe taken in Redis, a park written in Postgres),
        every claim of the batch is handed back unrun instead (_hand_back_taken): the park is
        fenced, so one it already parked is left as it is, and none has started yet."""
        # The claim recorded why first attempts past their grace were late; count them here.
        for reason, count in collections.Counter(c.marked_late for c in claims if c.marked_late).items():
            metrics.LATE.labels(reason).inc(count)
        pop = self.stats.last_pop
        now_ms = pop.now_ms if pop is not None else int(time.time() * 1000)
        try:
            admitted = await self.admission.admit(claims, now_ms, redis_up=self.redis_down_since is None)
        except Exception as exc:
            log.warning("worker.admit_failed", count=len(claims), error=f"{type(exc).__name__}: {exc}")
            await self._hand_back_taken()
            return 0
        finally:
            self.stats.parked = self.parking.parked
        self._settled(claims)
        if len(admitted) < len(claims):  # parked ones free their concurrency slots
            started = {c.id for c in admitted}
            await self._release_slots(self._scopes(c for c in claims if c.id not in started))
        return len(self._start(admitted))

    def _scopes(self, claims: Iterable[Claim]) -> set[Scope]:
        return {scope for claim in claims for scope in flow_claims.claim_scopes(claim, self.caps)}

    async def _release_slots(self, scopes: set[Scope]) -> None:
        """Executions holding these concurrency slots stopped: let waiting ones start. Best effort:
        the sweeper releases what a lost call leaves waiting."""
        if not scopes:
            return
        try:
            released = await flow_claims.release(self.store, scopes, self.caps, late_after_s=self.late_grace_s)
        except TRANSIENT_ERRORS as exc:
            log.warning("worker.slot_release_failed", limits=len(scopes), error=f"{type(exc).__name__}: {exc}")
            return
        await enqueue_committed(self.queue, released, "worker.release_enqueue_failed", only_new=False)

    async def _hand_back_taken(self) -> None:
        """Queue again, due now, every claim taken but neither started nor parked: no handler
        could have run, so the attempt is not used (the park statement, reason admit_error). A
        failing write is tried again within a fraction of a second; should it keep failing, the
        claims stay held (the heartbeat extends their leases) and the next pop tries again."""
        for tries in itertools.count(1):
            taken = list(self._taken.values())
            if not taken:
                return
            try:
                await self.parking.park(taken, [0.0] * len(taken), "admit_error")
            except TRANSIENT_ERRORS as exc:
                if tries >= CLAIM_TRIES:
                    raise
                log.warning("worker.hand_back.retrying", count=len(taken), error=f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(self._retry_in_s(tries))
                continue
            finally:
                self.stats.parked = self.parking.parked
            self._settled(taken)
            log.info("worker.handed_back_unrun", count=len(taken))
            await self._release_slots(self._scopes(taken))
            return

    def _start(self, claims: list[Claim]) -> list[Claim]:
        self.stats.claimed += len(claims)
        for task, count in collections.Counter(claim.task for claim in claims).items():
            metrics.attempts(task).inc(count)  # per batch: each inc takes a lock
        by_timeout: dict[float, list[Running]] = {}
        for claim in claims:
            metrics.start_lag(claim.task).observe(max(0.0, claim.start_lag_s))
            older = self.running.get(claim.id)
            if older is not None and older.claim.fence < claim.fence and older.task is not None and older.stopped is None:
                # A newer fence for an execution this worker still runs (the fallback claim found
                # its lease reclaimed): that older attempt can write nothing more, stop it now.
                older.stopped = Stop.LEASE_LOST
                self.stats.lease_lost += 1
                older.task.cancel()
            if self.tracer is None and registry.is_inline(claim.task):  # a traced one needs a task for its span
                self._run_inline(claim)
                continue
            running = Running(claim)
            self.running[claim.id] = running
            by_timeout.setdefault(claim.timeout_s, []).append(running)
            # unnamed: naming cost 4% of a busy worker
            running.task = asyncio.create_task(self._execute(running) if self.tracer is None else self._traced(running))
        for timeout_s, started in by_timeout.items():
            Deadline(started, timeout_s)
        return claims

    def sleep_s(self) -> float:
        """Until the earliest queued due time, capped by poll_max_s."""
        pop = self.stats.last_pop
        if pop is None or pop.next_due_ms is None:
            return self.config.poll_max_s
        return min(self.config.poll_max_s, max(0.0, (pop.next_due_ms - pop.now_ms) / 1000))

    # --- running a handler -------------------------------------------------------------------

    async def _traced(self, running: Running) -> None:
        """_execute inside the attempt's span (tracing is on)."""
        assert self.tracer is not None
        with self.tracer.started(running.claim) as span:
            result = await self._execute(running, self.tracer.traceparent(span))
            if result is None:  # stopped on purpose: why is its outcome here
                self.tracer.ended(span, str(running.stopped), None)
            else:
                self.tracer.ended(span, str(result.outcome), result.error)

    async def _execute(self, running: Running, traceparent: str | None = None) -> attempt.Result | None:
        """Run the attempt and record its outcome; returns its Result (None: stopped on purpose)."""
        claim = running.claim
        ctx = _context(claim, traceparent)
        began = time.monotonic()
        try:
            result = await attempt.run(running, ctx, self._threads, self.worker_id)
        finally:
            if self.running.get(claim.id) is running:  # not a newer attempt of the same execution
                del self.running[claim.id]
            if running.deadline is not None:
                running.deadline.ended(running)
            self.admission.finished(claim)
            self._slot_free.set()
        if result is None:  # stopped on purpose: the attempt is recorded elsewhere
            return None
        self._ended(claim, ctx, result, began)
        return result

    def _run_inline(self, claim: Claim) -> None:
        """An inline task's attempt (registry.task(inline=True)), run as its claim starts: no
        thread, no asyncio task, no timer; recorded as any other attempt is."""
        ctx = _context(claim)
        began = time.monotonic()
        running = self.running[claim.id] = Running(claim)  # held as any running attempt, for the call
        try:
            result = attempt.run_inline(claim, ctx, self.worker_id)
        finally:
            if self.running.get(claim.id) is running:
                del self.running[claim.id]
            self.admission.finished(claim)
        self._ended(claim, ctx, result, began)

    def _ended(self, claim: Claim, ctx: registry.TaskContext, result: attempt.Result, began: float) -> None:
        """Record how an attempt ended, in a task or inline; log it unless it succeeded."""
        outcome, error = result.outcome, result.error
        self._record(claim, outcome, error, detail=result.detail, permanent=result.permanent, retry_after_s=result.retry_after_s)
        self.overrun.attempt_finished(claim.job_id, time.monotonic() - began)
        if outcome is AttemptOutcome.CANCELLED:
            ctx.log.warning("worker.attempt_cancelled", reason="overlap")
        elif outcome is not AttemptOutcome.SUCCEEDED:  # a line per success is too many at 10,000/s
            ctx.log.warning("worker.attempt_failed", outcome=str(outcome), error=((error or "").splitlines() or [""])[-1][:200])

    def _record(
        self, claim: Claim, outcome: AttemptOutcome, error: str | None, *, detail: str | None = None,
        permanent: bool = False, retry_after_s: float | None = None,
    ) -> None:  # fmt: skip
        if outcome is AttemptOutcome.SUCCEEDED:  # most attempts: nothing to decide (after_attempt's first rule)
            status, delay_s = ExecutionStatus.SUCCEEDED, None
        else:
            policy = RetryPolicy(claim.max_attempts, claim.backoff_base_s, claim.backoff_factor, claim.backoff_max_s)
            then = after_attempt(outcome, claim.attempt, policy, horizon_s=self.horizon_s, permanent=permanent,
                                 retry_after_s=retry_after_s, rng=self.rng)  # fmt: skip
            status, delay_s = ExecutionStatus(then.status), then.delay_s
        newer = self._outcomes.get(claim.id)
        if newer is not None and newer.fence > claim.fence:
            # A later attempt of this execution already holds its outcome here: this one's fence
            # is gone and its write would be refused, and it must not take the later one's place.
            log.warning("worker.outcome_superseded", execution_id=str(claim.id), fence=claim.fence, held_fence=newer.fence)
            return
        self._outcomes[claim.id] = Outcome(
            claim.id, claim.fence, claim.task, status, outcome, error, delay_s, detail,
            params=claim.params,
            breaker_counts=self.gate.config.enabled and not permanent and outcome is not AttemptOutcome.CANCELLED,
            job_id=claim.job_id, guarded=claim.overlap != "allow", slots=flow_claims.claim_scopes(claim, self.caps),
        )  # fmt: skip
        self._outcome_ready.set()

    # --- batched writers ---------------------------------------------------------------------

    async def flush_outcomes(self) -> int:
        """Write the recorded outcomes (at most FINISH_BATCH_MAX) in one statement, then
        re-enqueue the retries. A connection or timeout error leaves them held, to be tried
        again; an outcome Postgres refuses for what it carries is set apart (_finish)."""
        outcomes = list(itertools.islice(self._outcomes.values(), FINISH_BATCH_MAX))
        if not outcomes:
            return 0
        applied = await self._finish(outcomes)
        for outcome in outcomes:  # written, fenced out, or given up on: no longer held
            if self._outcomes.get(outcome.execution_id) is outcome:
                del self._outcomes[outcome.execution_id]
        self.stats.finished += len(applied)
        by_id = {o.execution_id: o for o in outcomes}
        took_effect = [by_id[execution_id] for execution_id, *_ in applied]
        # A retry of a job paused or deleted meanwhile, or of an execution cancelled meanwhile, was
        # cancelled by the finish: not a retry.
        retrying = {i for i, status, *_ in applied if status in (ExecutionStatus.QUEUED, ExecutionStatus.PENDING)}
        steered = [o for o in took_effect if o.retry_delay_s is not None and o.execution_id not in retrying]
        if steered:
            log.info("worker.retry_cancelled", reason="job paused or deleted, or execution cancelled",
                     execution_ids=[str(o.execution_id) for o in steered])
        counts = collections.Counter((o.task, o.outcome, o.execution_id in retrying) for o in took_effect)
        for (task, outcome, retried), count in counts.items():  # per batch: each inc takes a lock
            metrics.finished(task, outcome).inc(count)
            if retried:
                metrics.RETRIES.labels(task).inc(count)
        if len(applied) < len(outcomes):
            self.stats.fenced_out += len(outcomes) - len(applied)
            metrics.FENCED_OUT.inc(len(outcomes) - len(applied))
            refused = {o.execution_id for o in outcomes} - {a[0] for a in applied}
            log.warning("worker.outcome_fenced_out", execution_ids=sorted(map(str, refused)))
        if self.gate.config.enabled:
            await self.gate.tell(took_effect)
        retries = [retry for _, _, retry in applied if retry is not None]
        guarded_jobs = [o.job_id for o in took_effect if o.guarded]
        if guarded_jobs:
            # Their job is free now: a waiting occurrence (buffer_one, cancel_other) starts at once.
            try:
                retries += await overlap_claims.release(self.store, guarded_jobs)  # type: ignore[arg-type]
            except TRANSIENT_ERRORS as exc:  # the sweeper releases stalled waiting occurrences
                log.warning("worker.overlap_release_failed", jobs=len(guarded_jobs), error=str(exc))
        await enqueue_committed(self.queue, retries, "worker.retry_enqueue_failed", only_new=False)
        await self._release_slots({scope for o in took_effect for scope in o.slots})
        return len(applied)

    async def _finish(self, outcomes: list[Outcome]) -> list[Finished]:
        """execution_finish_many, with a refused batch split in halves until the refused outcome
        is alone: one bad row never holds the others back."""
        try:
            return await self.store.execution_finish_many(outcomes, timeout_s=self.write_timeout_s)
        except RETRYABLE_ERRORS:
            raise
        except REFUSED_ERRORS as exc:
            if len(outcomes) > 1:
                half = len(outcomes) // 2
                return await self._finish(outcomes[:half]) + await self._finish(outcomes[half:])
            return await self._finish_refused(outcomes[0], exc)

    async def _finish_refused(self, outcome: Outcome, exc: BaseException) -> list[Finished]:
        """Postgres refused this outcome for what it carries (its error or detail text, say): record
        the same verdict with a plain error instead. Should that be refused too, let it go: its
        lease then expires and the sweeper retries the execution (at-least-once still holds)."""
        log.error("worker.outcome_refused", execution_id=str(outcome.execution_id), error=f"{type(exc).__name__}: {exc}")
        plain = replace(
            outcome, detail=None,
            error=f"the attempt's outcome ({outcome.outcome}) could not be recorded as reported: {type(exc).__name__}",
        )  # fmt: skip
        try:
            return await self.store.execution_finish_many([plain], timeout_s=self.write_timeout_s)
        except REFUSED_ERRORS as again:
            if isinstance(again, RETRYABLE_ERRORS):
                raise
            log.error("worker.outcome_dropped", execution_id=str(outcome.execution_id), error=f"{type(again).__name__}: {again}")
            return []

    async def heartbeat_once(self) -> int:
        """Extend every held lease in one statement; cancel handlers whose lease was lost.

        The answer is about the fences sent, not about ids: while it is awaited, the attempt it
        judged may finish and the same worker claim the execution's next attempt (a newer fence).
        Applied to that one, "lease lost" would kill a healthy attempt, so an answer is applied
        only where the fence held now is the fence it was sent with."""
        # Outcomes waiting to be written are held too: a slow finish must not let their lease expire.
        held = {o.execution_id: o.fence for o in self._outcomes.values()}
        claims = itertools.chain(self._taken.values(), (r.claim for r in self.running.values()))
        for claim in claims:  # the newest fence of an id is the one still to extend
            if claim.fence >= held.get(claim.id, 0):
                held[claim.id] = claim.fence
        if not held:
            return 0
        alive = await self.store.execution_heartbeat_many(list(held.items()), self.config.lease_s, timeout_s=self.write_timeout_s)
        for execution_id, fence in held.items():
            taken = self._taken.get(execution_id)
            if taken is not None and taken.fence == fence and execution_id not in alive:
                del self._taken[execution_id]  # its lease was reclaimed: nothing left to hand back
            running = self.running.get(execution_id)
            if running is None or running.claim.fence != fence or running.task is None or running.stopped is not None:
                continue
            if execution_id not in alive:
                running.stopped = Stop.LEASE_LOST
                self.stats.lease_lost += 1
                running.task.cancel()
            elif alive[execution_id]:  # a cancel or an overlap policy (cancel_other) asked it to stop
                running.stopped = Stop.CANCELLED
                running.task.cancel()
        return len(alive)

    # --- loops -------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        heartbeat = asyncio.create_task(retrying("worker.heartbeat", self._heartbeat_loop, stop), name="worker-heartbeat")
        finish = asyncio.create_task(retrying("worker.finish", self._finish_loop, stop), name="worker-finish")
        try:
            await retrying("worker.pop", self._pop_loop, stop)
            await self._drain()
            # Let the finish loop write the last outcomes rather than cancel it mid-statement.
            self._closing = True
            self._outcome_ready.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(finish), self.config.shutdown_grace_s)
        finally:
            self.overrun.close()
            for helper in (heartbeat, finish):
                helper.cancel()
            await asyncio.gather(heartbeat, finish, return_exceptions=True)
            self._threads.shutdown(wait=False, cancel_futures=True)

    async def _pop_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            started = await self.run_once()
            health.tick("worker")
            metrics.IN_FLIGHT.set(len(self.running))  # per pass, not per attempt: a gauge set takes a lock
            full = self._main_running() >= self.config.concurrency
            if started or not full:  # a full worker that started nothing is as busy as before
                self.linger_s = linger.linger_s(started, self._batch_max, self.config.linger_s, self.config.linger_busy_s)
            if started >= self.config.batch_size and not full:
                continue  # a whole batch was due: more probably is
            self._slot_free.clear()
            if full:  # wait for a handler to finish
                await _wait_any(stop, self._slot_free, timeout_s=self.config.poll_max_s)
            else:
                # Linger a little even when the next entry is due sooner: executions falling due
                # one by one are then claimed and finished in batches, not one round trip each.
                await _wait_any(stop, timeout_s=max(self.linger_s, self.sleep_s()))

    async def _heartbeat_loop(self, stop: asyncio.Event) -> None:
        failures = 0
        health.tick("worker.heartbeat")  # nothing held yet, nothing failed
        while not stop.is_set() or self.running or self._outcomes or self._taken:
            wait_s = self.config.heartbeat_s if failures == 0 else self._retry_in_s(failures)
            if stop.is_set():
                await asyncio.sleep(wait_s)
            else:
                await _wait_any(stop, timeout_s=wait_s)
            try:
                await self.heartbeat_once()
            except TRANSIENT_ERRORS as exc:
                failures += 1
                log.warning("worker.heartbeat.retrying", error=f"{type(exc).__name__}: {exc}", held=len(self.running) + len(self._outcomes))
                continue
            failures = 0
            health.tick("worker.heartbeat")

    async def _finish_loop(self, stop: asyncio.Event) -> None:
        """Write outcomes as they come, in batches. A failed write is retried within a fraction
        of a second on a fresh connection (never the loops' long backoff: the outcomes' leases
        are running), and the loop ticks only while nothing waits or a write succeeded."""
        failures = 0
        health.tick("worker.finish")  # nothing waits yet
        while not (self._closing and not self._outcomes):
            if failures:
                await asyncio.sleep(self._retry_in_s(failures))
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._outcome_ready.wait(), self.config.heartbeat_s)
                if self._outcomes and not self._closing:
                    await asyncio.sleep(self.linger_s)  # let outcomes gather into one statement
                self._outcome_ready.clear()
            try:
                while await self.flush_outcomes():
                    pass
            except TRANSIENT_ERRORS as exc:
                failures += 1
                log.warning("worker.finish.retrying", error=f"{type(exc).__name__}: {exc}", waiting=len(self._outcomes))
                continue
            failures = 0
            health.tick("worker.finish")

    def _retry_in_s(self, failures: int) -> float:
        """Jittered, doubling from 50 ms, and capped well inside the lease so several tries fit."""
        return self.rng.uniform(0.5, 1.0) * min(0.05 * 2**failures, self.config.lease_s / 10)

    async def _drain(self) -> None:
        """After stop: let in-flight handlers finish within the grace, then hand the rest back
        (queued again at once, attempt not used up) so another replica takes them now rather
        than after their lease. If that write fails, the lease expiry still brings them back."""
        if self._taken:
            try:
                await self._hand_back_taken()
            except TRANSIENT_ERRORS as exc:
                log.warning("worker.hand_back_failed", count=len(self._taken), error=str(exc))
        tasks = [r.task for r in self.running.values() if r.task is not None]
        if not tasks:
            return
        log.info("worker.draining", in_flight=len(tasks), grace_s=self.config.shutdown_grace_s)
        _, pending = await asyncio.wait(tasks, timeout=self.config.shutdown_grace_s)
        unfinished = [r for r in self.running.values() if r.task in pending]
        for running in unfinished:
            running.stopped = Stop.HANDED_BACK
            running.task.cancel()  # type: ignore[union-attr]
        await asyncio.gather(*pending, return_exceptions=True)
        if not unfinished:
            return
        try:
            back = await self.store.execution_hand_back_many([(r.claim.id, r.claim.fence) for r in unfinished])
        except TRANSIENT_ERRORS as exc:
            log.warning("worker.hand_back_failed", count=len(unfinished), error=str(exc))
            return
        await enqueue_committed(self.queue, back, "worker.hand_back_enqueue_failed", only_new=False)
        log.info("worker.handed_back", count=len(back))
        await self._release_slots(self._scopes(r.claim for r in unfinished))


def _context(claim: Claim, traceparent: str | None = None) -> registry.TaskContext:
    """What a handler is told about its attempt."""
    return registry.TaskContext(
        claim.id, claim.job_id, claim.tenant, claim.scheduled_for, claim.attempt, claim.fence, claim.task, traceparent
    )


async def _wait_any(*events: asyncio.Event, timeout_s: float) -> None:
    """Sleep until any event is set or the timeout passes."""
    waiters = [asyncio.create_task(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
