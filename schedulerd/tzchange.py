"""After a tz database change: rewrite cron jobs' future occurrences resolved with another
version, and record which jobs' instants moved (log, metric, `schedulerd tz report`).

Runs at daemon start, before the first materialiser pass, under a Postgres advisory lock so one
replica recomputes at a time (the next finds nothing left to do). Only occurrences that never
started are touched (plain, parked by a tenant cap or breaker, replayed late): those the new rules
no longer produce are deleted, the new ones written (and enqueued when due soon), in one
transaction that holds them locked from the read, so a claim racing it waits and then finds the
row gone or kept; a paused job's cancelled slots are deleted and its resume writes the new ones.
An occurrence already started (or final) stays, and the instant it would move to is not written.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

import structlog

from schedulerd import metrics
from schedulerd.config import Config
from schedulerd.core.bounds import inside
from schedulerd.core.ids import execution_id
from schedulerd.core.materialise import Reconciled, reconcile
from schedulerd.core.schedule import ScheduleError, smear_offset_s
from schedulerd.jobs import queued, schedule_of
from schedulerd.materialising import bounds_of
from schedulerd.models import Enqueue, Job, TzMovedJob
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from schedulerd.transient import enqueue_committed
from schedulerd.tzdb import TzDatabase

log = structlog.get_logger("schedulerd.tz")

MOVES_KEPT = 20  # [old, new] pairs recorded per job; the counts say how many there were
MOVES_LOGGED = 5


@dataclass(frozen=True)
class RecomputeResult:
    recompute_id: int | None  # None: every job already matched the installed version
    jobs_checked: int
    moved_job_ids: list[UUID]  # the details are in tz_moved_jobs (schedulerd tz report)
    occurrences_moved: int  # [old, new] pairs over all jobs (an unpaired instant counts once)


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at else None


def _without_fixed(diff: Reconciled, fixed: set[datetime]) -> Reconciled:
    """The moves of `diff` that can be made: those whose old instant is not `fixed`."""
    moves = [(old, new) for old, new in diff.moves if old is None or old not in fixed]
    return Reconciled([old for old, _ in moves if old], [new for _, new in moves if new], moves)


async def _recompute_batch(
    tx: Store, jobs: list[Job], now: datetime, recompute_id: int, installed: TzDatabase, horizon_s: float
) -> tuple[list[TzMovedJob], list[Enqueue]]:
    rows = await tx.execution_future_lock([j.id for j in jobs], now)
    written = {job_id: list(g) for job_id, g in itertools.groupby(rows, key=lambda r: r["job_id"])}
    stale: list[tuple[UUID, datetime]] = []
    inserts: list[tuple[UUID, UUID, str, datetime, datetime]] = []
    moved: list[TzMovedJob] = []
    unresolved: set[UUID] = set()
    for job in jobs:
        slots = written.get(job.id, [])
        if not slots:  # nothing written ahead: the materialiser writes the rest with the installed rules
            continue
        until = max(job.materialised_to or now, slots[-1]["scheduled_for"])
        try:
            # Inside the job's bounds only: a moved occurrence never lands before start_at or at end_at.
            expected = [t for t in schedule_of(job).occurrences(now, until) if inside(t, bounds_of(job))]
        except ScheduleError as exc:  # its zone left the tz database: keep its rows, say so at every start
            log.error("tz.job_unresolvable", job_id=str(job.id), tenant=job.tenant, timezone=job.timezone, error=str(exc))
            unresolved.add(job.id)
            continue
        # A started (or otherwise settled) occurrence stays where it is, and so does the one it
        # would move to: writing that too would run one occurrence twice.
        fixed = {r["scheduled_for"] for r in slots if not r["movable"]}
        diff = _without_fixed(reconcile([r["scheduled_for"] for r in slots], expected), fixed)
        if not diff.moves:
            continue
        by_instant = {r["scheduled_for"]: r["id"] for r in slots}
        stale.extend((by_instant[t], t) for t in diff.remove)
        if job.enabled:  # a paused job's resume materialises from then on
            offset = timedelta(seconds=smear_offset_s(str(job.id), job.window_s))
            inserts.extend((execution_id(t), job.id, job.tenant, t, t + offset) for t in diff.add)
        moves = [[_iso(old), _iso(new)] for old, new in diff.moves]
        moved.append(TzMovedJob(
            recompute_id, job.id, job.tenant, job.tzdata_version, len(diff.remove), len(diff.add), moves[:MOVES_KEPT]
        ))
        log.warning(
            "tz.job_moved", job_id=str(job.id), tenant=job.tenant, old_version=job.tzdata_version,
            new_version=installed.version, removed=len(diff.remove), added=len(diff.add),
            moves=", ".join(f"{old or '-'} -> {new or '-'}" for old, new in moves[:MOVES_LOGGED])
            + (f" (+{len(moves) - MOVES_LOGGED} more)" if len(moves) > MOVES_LOGGED else ""),
        )  # fmt: skip
    if stale:
        await tx.execution_delete_tz_stale(stale)
    executions = await tx.execution_insert_many(inserts, horizon_s) if inserts else []
    await tx.job_set_tzdata_version([j.id for j in jobs if j.id not in unresolved], installed.version)
    if moved:
        await tx.tz_moved_job_insert_many(recompute_id, moved)
    return moved, queued(executions)


async def recompute(
    store: Store, queue: DelayQueue, config: Config, worker: str, installed: TzDatabase, *, batch_size: int | None = None
) -> RecomputeResult:
    """Bring every live cron job recorded with a tz database other than `installed` up to date.
    Waits while another replica does the same; safe to run any number of times."""
    batch_size = batch_size or config.materialiser.tz_batch_size
    metrics.TZDATA.labels(installed.version, installed.source).set(1)
    recompute_id: int | None = None
    checked = occurrences = 0
    moved: list[UUID] = []
    async with store.tz_locked() as locked:
        after = UUID(int=0)
        while True:
            async with locked.transaction() as tx:
                jobs, now = await tx.job_tz_stale(installed.version, after, batch_size)
                if not jobs:
                    break
                assert now is not None
                if recompute_id is None:
                    recompute_id = (await tx.tz_recompute_insert(installed.version, installed.source, worker)).id
                    log.info("tz.recompute_started", tzdata_version=installed.version, source=installed.source)
                batch_moved, enqueue = await _recompute_batch(tx, jobs, now, recompute_id, installed, config.dispatcher.horizon_s)
            checked += len(jobs)
            moved.extend(m.job_id for m in batch_moved)
            occurrences += sum(max(m.removed, m.added) for m in batch_moved)
            after = jobs[-1].id
            await enqueue_committed(queue, enqueue, "tz.enqueue_failed")
        if recompute_id is not None:
            await locked.tz_recompute_finish(recompute_id, checked, len(moved))
    metrics.TZ_JOBS_MOVED.inc(len(moved))
    metrics.TZ_OCCURRENCES_MOVED.inc(occurrences)
    if recompute_id is not None:
        log.info("tz.recompute_finished", tzdata_version=installed.version, jobs_checked=checked, jobs_moved=len(moved))
    return RecomputeResult(recompute_id, checked, moved, occurrences)
