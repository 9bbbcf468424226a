"""Cancels on request: one execution, or every one matching a filter (job, statuses, label
selector, due range), with a dry run first. Unstarted ones end at once; a running one is asked to
stop and its worker cancels the handler at the next heartbeat (the outcome is written by the
worker's finish, the sweeper's reclaim, a hand-back or a park: store/queries/leases.sql)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID, uuid4

import structlog

from schedulerd.errors import NotFoundError, TooLateError, ValidationError
from schedulerd.models import CancelPlan, Execution, ExecutionStatus, JobAction
from schedulerd.store import Store

log = structlog.get_logger("schedulerd.cancels")

CANCEL_PAGE = 500  # executions one transaction of a bulk cancel locks (in id order)
PLAN_SAMPLE = 20  # executions a dry run lists
CANCELLABLE = (ExecutionStatus.PENDING, ExecutionStatus.QUEUED, ExecutionStatus.RUNNING)
UNSTARTED = (ExecutionStatus.PENDING, ExecutionStatus.QUEUED)  # a bulk cancel's statuses unless told


@dataclass(frozen=True)
class Cancelled:
    """A cancel's answer: the execution as it is now, and whether a running one was asked to stop."""

    execution: Execution
    stop_requested: bool  # running: the handler stops at its next heartbeat


@dataclass(frozen=True)
class CancelFilter:
    """Which executions a bulk cancel takes: all criteria hold (None: any)."""

    statuses: tuple[str, ...] = UNSTARTED
    job_id: UUID | None = None
    selector: dict[str, str] | None = None  # labels of their job (core/labels.parse_selector)
    due_from: datetime | None = None  # due at or after
    due_to: datetime | None = None  # due before

    def __post_init__(self) -> None:
        unknown = sorted(set(self.statuses) - set(CANCELLABLE))
        if unknown or not self.statuses:
            raise ValidationError("status", f"must be among pending, queued, running; got {', '.join(unknown) or 'none'}")
        for name, at in (("due_from", self.due_from), ("due_to", self.due_to)):
            if at is not None and at.utcoffset() is None:
                raise ValidationError(name, "must carry a UTC offset (e.g. 2026-12-02T03:00:00Z)")
        if self.due_from is not None and self.due_to is not None and self.due_from >= self.due_to:
            raise ValidationError("due_to", "must be after due_from")

    def record(self) -> dict[str, Any]:
        """The criteria besides the selector, as JSON for job_actions.filter."""
        return {
            "statuses": list(self.statuses), "job": str(self.job_id) if self.job_id else None,
            "due_from": self.due_from.isoformat() if self.due_from else None,
            "due_to": self.due_to.isoformat() if self.due_to else None,
        }  # fmt: skip


@dataclass(frozen=True)
class BulkCancel:
    """What a bulk cancel did (or, as a dry run, would do)."""

    dry_run: bool
    matched: int  # executions it took (dry run: that match now)
    stop_requested: int  # of them, running ones asked to stop
    sample: list[dict[str, Any]]  # dry run: the first few, id order
    action: JobAction | None = None  # the record written (not for a dry run)


class Cancels:
    """A cancelled id left in Redis is popped and dropped by the claim, which starts only pending
    or queued rows: nothing here touches the queue."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def cancel(self, execution_id: UUID, tenant: str | None, *, by: str) -> Cancelled:
        """Cancel one execution of `tenant` (None: any, for the CLI and the client). Pending or
        queued: cancelled now (reason cancelled); running: asked to stop (the attempt ends
        cancelled, never retried); already cancelled: the same answer again. Settled otherwise:
        TooLateError naming its status. Another tenant's: NotFoundError, like a missing one."""
        changed = await self.store.execution_cancel(execution_id, tenant, by)
        if changed is not None:
            execution, was = changed
            log.info("cancels.cancelled", execution_id=str(execution_id), tenant=tenant, was=was, by=by)
            return Cancelled(execution, was == ExecutionStatus.RUNNING)
        execution = await self.store.execution_get(execution_id)
        if execution is None or (tenant is not None and execution.tenant != tenant):
            raise NotFoundError(f"execution {execution_id} not found")
        if execution.status == ExecutionStatus.CANCELLED:
            return Cancelled(execution, False)
        raise TooLateError(f"execution {execution_id} already {execution.status}: too late to cancel", execution.status)

    async def plan(self, tenant: str, which: CancelFilter) -> CancelPlan:
        return await self.store.execution_cancel_plan(
            tenant, which.statuses, job_id=which.job_id, selector=which.selector, due_from=which.due_from,
            due_to=which.due_to, sample=PLAN_SAMPLE,
        )  # fmt: skip

    async def cancel_matching(self, tenant: str, which: CancelFilter, *, dry_run: bool, by: str) -> BulkCancel:
        """Cancel every execution of `tenant` matching `which`, CANCEL_PAGE rows a transaction
        (locked in id order), and record who did it. A dry run counts them and lists a sample,
        writing nothing."""
        if dry_run:
            plan = await self.plan(tenant, which)
            return BulkCancel(True, plan.total, plan.running, plan.sample)
        matched, running = await self.cancel_pages(tenant, which, by=by)
        action = await self.store.job_action_insert(
            uuid4(), tenant, "cancel", which.selector or {}, which.record(), 0, matched, by
        )  # fmt: skip
        return BulkCancel(False, matched, running, [], action)

    async def cancel_pages(self, tenant: str, which: CancelFilter, *, by: str) -> tuple[int, int]:
        """The writing half of cancel_matching, without a record: (cancelled, asked to stop)."""
        matched = running = 0
        while True:
            page = await self.store.execution_cancel_page(
                tenant, which.statuses, job_id=which.job_id, selector=which.selector, due_from=which.due_from,
                due_to=which.due_to, limit=CANCEL_PAGE, by=by,
            )  # fmt: skip
            matched += len(page)
            running += sum(was == ExecutionStatus.RUNNING for _, was in page)
            if not page:  # a short page may only have lost rows to a claim meanwhile: ask again
                break
        log.info("cancels.cancelled_matching", tenant=tenant, matched=matched, stop_requested=running, by=by)
        return matched, running
