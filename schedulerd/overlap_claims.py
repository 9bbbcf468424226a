"""Overlap policies at claim time: guarded jobs' executions are claimed, skipped, made to wait or
make the running one stop, under a lock on their job row (core/overlap.py decides).

The lock is what serialises two replicas claiming different executions of one job: each takes it
before reading whether the job is busy, so the second sees the first's claim. Jobs whose policy
is allow never come here (execution_claim_many claims them without a job lock).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from uuid import UUID

import structlog

from schedulerd import flow_claims, metrics
from schedulerd.core.flow import NO_CAPS, Caps
from schedulerd.core.overlap import Verdict, decide, superseded
from schedulerd.models import Claim, Enqueue
from schedulerd.store import Store

log = structlog.get_logger("schedulerd.overlap")


@dataclass(frozen=True)
class Judged:
    claims: list[Claim] = field(default_factory=list)  # started: run them
    settled: int = 0  # skipped, made to wait, or cancelled with their paused or deleted job (not claim conflicts)


async def claim_guarded(
    store: Store, execution_ids: Sequence[str | UUID], lease_s: float, worker: str, caps: Caps = NO_CAPS, *,
    late_after_s: float = 60.0, down_after_s: float = 15.0, due_by: datetime | None = None,
) -> Judged:  # fmt: skip
    """Judge the due executions of guarded jobs among `execution_ids` and claim those that start.
    Ids of allow jobs, or not due, or no longer unstarted, are left alone. due_by: the instant
    due-ness is judged at (the pop's, for popped ids); None: Postgres's clock. One a verdict
    starts but a concurrency limit (its key, or `caps`) has no room for waits for a slot instead,
    judged in due order with the allow jobs' limited executions among `execution_ids` (which
    flow_claims.claim_limited claims next)."""
    if not execution_ids or not await store.job_guarded_of(execution_ids):
        return Judged()
    async with store.transaction() as tx:
        locked = await tx.job_lock_overlap(execution_ids)
        if not locked:
            return Judged()
        rows = await tx.execution_overlap_state(execution_ids, locked, due_by)
        by_job: dict[UUID, list] = {}
        for row in rows:
            by_job.setdefault(row["job_id"], []).append(row)
        start: list[UUID] = []
        skip: list[UUID] = []
        wait: list[UUID] = []
        cancel: list[UUID] = []
        steered: set[UUID] = set()  # of paused or deleted jobs: cancelled by the claim, never started
        judged: list[tuple[UUID, str, bool, Verdict[UUID], bool]] = []  # logged and counted once committed
        for job_id, due in by_job.items():
            first = due[0]
            if not first["enabled"]:  # paused or deleted since the unguarded claim: the claim cancels them
                start += [r["id"] for r in due]
                steered |= {r["id"] for r in due}
                continue
            judge, stale = superseded(first["overlap"], first["running_for"], [(r["id"], r["scheduled_for"]) for r in due])
            waiting_for = first["waiting_for"]
            older = sum(1 for r in due if r["id"] in judge and waiting_for is not None and r["scheduled_for"] < waiting_for)
            verdict: Verdict[UUID] = decide(first["overlap"], first["busy"], first["waiting_id"], judge, older)
            if stale:
                verdict = replace(verdict, skip=verdict.skip + stale)
            start += [verdict.start] if verdict.start is not None else []
            wait += [verdict.wait] if verdict.wait is not None else []
            skip += verdict.skip
            asked = verdict.cancel_running and not first["cancel_requested"]
            if asked:
                cancel.append(job_id)
            judged.append((job_id, first["overlap"], first["busy"], verdict, asked))
        skipped = await tx.execution_skip_overlap(skip) if skip else set()
        settled = skipped | (await tx.execution_wait_overlap(wait) if wait else set())
        if cancel:
            await tx.execution_request_cancel(cancel)
        if start and not steered.issuperset(start):
            limited = await flow_claims.hold_back(tx, [i for i in start if i not in steered], caps, due_by, beside=execution_ids)
            settled |= {i for i in start if i not in steered} - set(limited)
            start = [i for i in start if i in steered] + limited
        claims = (
            await tx.execution_claim_guarded(
                start, lease_s, worker, late_after_s=late_after_s, down_after_s=down_after_s, due_by=due_by
            )
            if start else []
        )  # fmt: skip
    if skipped:
        metrics.LATE.labels("overlap").inc(len(skipped))  # each one skipped is a run that never happened
    for job_id, policy, busy, verdict, asked in judged:
        _count(policy, verdict, cancel_requested=asked)
        if verdict.skip or verdict.wait is not None:
            log.info(
                "overlap.judged", job_id=str(job_id), policy=policy, busy=busy, started=_text(verdict.start),
                waiting=_text(verdict.wait), skipped=[str(i) for i in verdict.skip], cancel_requested=asked,
            )  # fmt: skip
    # A replaced waiting occurrence was not among the popped ids: only those count as settled.
    return Judged(claims, len((settled | steered) & {r["id"] for r in rows}))


async def release(store: Store, job_ids: Sequence[UUID]) -> list[Enqueue]:
    """After executions of these guarded jobs stopped running: start their waiting occurrences.
    Returns them for ZADD. Safe to call for any job, any number of times."""
    if not job_ids:
        return []
    async with store.transaction() as tx:
        await tx.job_lock_many(sorted(set(job_ids)))
        released = await tx.execution_release_waiting(sorted(set(job_ids)))
    for _, policy in released:
        metrics.OVERLAP_DECISIONS.labels(policy, "released").inc()
    return [entry for entry, _ in released]


def _count(policy: str, verdict: Verdict[UUID], *, cancel_requested: bool) -> None:
    for decision, count in (("started", verdict.start is not None), ("waiting", verdict.wait is not None),
                            ("skipped", len(verdict.skip)), ("cancel_requested", cancel_requested)):  # fmt: skip
        if count:
            metrics.OVERLAP_DECISIONS.labels(policy, decision).inc(int(count))


def _text(value: UUID | None) -> str | None:
    return str(value) if value is not None else None
