"""Writing cron jobs' occurrences inside the caller's transaction, and judging the missed ones by
each job's misfire policy: shared by the materialiser's loop, the intake (a new cron job's first
horizon) and Jobs (a resumed job). Runs no loop of its own.
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from uuid import UUID

import structlog

from schedulerd import metrics, tzdb
from schedulerd.config import LateConfig, MaterialiserConfig
from schedulerd.core import late, misfire
from schedulerd.core.bounds import Bounds
from schedulerd.core.ids import execution_id as new_execution_id
from schedulerd.core.materialise import plan
from schedulerd.core.schedule import schedule_of
from schedulerd.models import Enqueue, Execution, ExecutionStatus, Job
from schedulerd.store import Store

log = structlog.get_logger("schedulerd.materialiser")


@dataclass(frozen=True)
class Judgement:
    skipped: set[UUID]
    replays: list[Enqueue]  # new due times of the late runs


async def judge_misfires(
    tx: Store, config: MaterialiserConfig, job_ids: list[UUID] | None = None, replay_slot: int = 0,
    late_config: LateConfig | None = None,
) -> Judgement:  # fmt: skip
    """Apply each job's misfire policy to its missed occurrences (of these jobs, when given).
    Late runs are released at replay_per_s, starting from slot `replay_slot` of this pass. Each
    missed occurrence records why it was missed (core/late.py: scheduler_down, misfire_skip, backlog)."""
    down_after_s = (late_config or LateConfig()).down_after_s
    rows = await tx.execution_missed(config.misfire_grace_s, config.misfire_batch_size, job_ids, down_after_s=down_after_s)
    down = {r["id"]: r["scheduler_down"] for r in rows}
    groups = [list(g) for _, g in itertools.groupby(rows, key=lambda r: r["job_id"])]
    cut = len(rows) == config.misfire_batch_size  # the last job's group may be cut by the LIMIT
    if cut and len(groups) > 1:
        groups.pop()  # judge it next pass, whole
    # One job's missed rows fill the batch: only its oldest are seen, so only those provably
    # older than what its policy runs are decided now (judging the part as the whole would run
    # its policy once per batch).
    decide = misfire.decide_oldest if cut and len(groups) == 1 else misfire.decide
    to_skip: list[UUID] = []
    to_run: list[UUID] = []
    for group in groups:
        decision = decide(group[0]["misfire_policy"], [r["id"] for r in group], group[0]["catch_up_limit"])
        to_skip.extend(decision.skip)
        to_run.extend(decision.run)
    skips = [(i, late.for_misfire(down[i], runs_late=False).value) for i in to_skip]
    skipped = await tx.execution_skip_many(skips) if skips else {}
    delays = misfire.replay_delays_s(replay_slot + len(to_run), config.replay_per_s)[replay_slot:]
    runs = [(i, d, late.for_misfire(down[i], runs_late=True).value) for i, d in zip(to_run, delays)]
    replayed = await tx.execution_replay_many(runs) if runs else []
    metrics.MISFIRES.labels("skipped").inc(len(skipped))
    metrics.MISFIRES.labels("replayed").inc(len(replayed))
    for reason in [*skipped.values(), *(r for _, r in replayed)]:
        metrics.LATE.labels(reason).inc()
    if skipped or replayed:
        while_down = sum(down[i] for i in skipped) + sum(down[e.execution_id] for e, _ in replayed)
        log.warning("materialiser.misfired", skipped=len(skipped), replayed=len(replayed), jobs=len(groups),
                    scheduler_down=while_down)  # fmt: skip
    return Judgement(set(skipped), [e for e, _ in replayed])


def bounds_of(job: Job) -> Bounds:
    """The job's bounds as core/bounds.py takes them."""
    return Bounds(job.start_at, job.end_at, job.max_runs, job.runs_written)


@dataclass(frozen=True)
class Materialised:
    executions: list[Execution]  # as inserted
    enqueue: list[Enqueue]  # to ZADD once the transaction has committed
    skipped: int = 0
    replayed: int = 0
    # By job, as its row now stands: (materialised_to, occurrences written by this call).
    cursors: dict[UUID, tuple[datetime, int]] = field(default_factory=dict)
    done: set[UUID] = field(default_factory=set)  # bounded jobs left with none to write


async def materialise_jobs(
    tx: Store, jobs: list[Job], now: datetime, config: MaterialiserConfig, dispatch_horizon_s: float, replay_slot: int = 0,
    late_config: LateConfig | None = None,
) -> Materialised:
    """Write these jobs' next occurrences and advance their cursors, inside the caller's
    transaction: one INSERT and one cursor UPDATE (which records the tz database, counts the
    occurrences written and marks done the bounded jobs with none left) for the batch. A done job
    is never written for again."""
    rows: list[tuple[UUID, UUID, str, datetime, datetime]] = []
    steps: list[tuple[UUID, datetime, int, bool]] = []  # job, cursor, occurrences planned, done
    for job in jobs:
        if job.done_at is not None:
            continue
        step = plan(
            # A job never materialised (written by SQL, say) owes its occurrences since it was created.
            schedule_of(job), str(job.id), job.window_s,
            job.materialised_to or job.created_at, now,
            horizon_s=config.horizon_s, lookback_s=config.lookback_s, max_occurrences=config.max_occurrences_per_job,
            bounds=bounds_of(job),
        )  # fmt: skip
        if step.unrecorded:
            log.warning(
                "materialiser.occurrences_unrecorded", job_id=str(job.id), tenant=job.tenant,
                since=step.unrecorded[0].isoformat(), until=step.unrecorded[1].isoformat(),
            )  # fmt: skip
        rows.extend((new_execution_id(at), job.id, job.tenant, at, due_at) for at, due_at in step.occurrences)
        steps.append((job.id, step.cursor, len(step.occurrences), step.done))
    executions = await tx.execution_insert_many(rows, dispatch_horizon_s) if rows else []
    written = collections.Counter(e.job_id for e in executions)
    # An occurrence already there (a slot a resume revived) was counted when it was first written.
    # A plan that ran into one is not taken as the last: the next pass looks past it.
    cursors = [(job_id, cursor, written[job_id], done and written[job_id] == planned)
               for job_id, cursor, planned, done in steps]  # fmt: skip
    if cursors:
        await tx.job_advance_cursor_many(cursors, tzdb.installed_version())
    counted = {job_id: (cursor, n) for job_id, cursor, n, _ in cursors}
    done = {job_id for job_id, _, _, is_done in cursors if is_done}
    enqueue = {e.id: Enqueue(e.id, e.due_at, e.tenant, e.priority) for e in executions if e.status == ExecutionStatus.QUEUED}
    missed_by = now - timedelta(seconds=config.misfire_grace_s)
    missed_jobs = list({e.job_id for e in executions if e.due_at < missed_by})
    if not missed_jobs:
        return Materialised(executions, list(enqueue.values()), cursors=counted, done=done)
    judgement = await judge_misfires(tx, config, missed_jobs, replay_slot, late_config)
    for execution_id in judgement.skipped:
        enqueue.pop(execution_id, None)
    enqueue.update((r.execution_id, r) for r in judgement.replays)
    return Materialised(executions, list(enqueue.values()), len(judgement.skipped), len(judgement.replays), counted, done)
