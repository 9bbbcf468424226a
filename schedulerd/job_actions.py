"""Bulk job actions by label selector: pause, resume, trigger, delete, or cancel the unstarted runs
of every job of a tenant whose labels match, with a dry-run count first and a record of who did it
and when (job_actions). Each job goes through Jobs' own steering (one transaction per job, jobs in
id order, read a page at a time), so a bulk pause means exactly what a pause means."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from uuid import UUID, uuid4

import structlog

from schedulerd.cancels import CancelFilter, Cancels
from schedulerd.core.labels import check_labels, parse_selector
from schedulerd.errors import NotFoundError, ValidationError
from schedulerd.jobs import Jobs, check_actor
from schedulerd.models import JobAction

log = structlog.get_logger("schedulerd.job_actions")

JOB_PAGE = 200  # job ids read at a time (each job is then steered in its own transaction)


class Action(enum.StrEnum):
    PAUSE = "pause"
    RESUME = "resume"
    TRIGGER = "trigger"
    DELETE = "delete"
    CANCEL = "cancel"  # the unstarted (pending, queued) runs of the matching jobs


# Which jobs each action applies to: enabled ones (True), paused ones (False), or any undeleted (None).
_APPLIES_TO: dict[Action, bool | None] = {
    Action.PAUSE: True, Action.RESUME: False, Action.TRIGGER: True, Action.DELETE: None, Action.CANCEL: None,
}  # fmt: skip


@dataclass(frozen=True)
class ActionResult:
    """What a bulk action did or, as a dry run, would do."""

    action: Action
    selector: dict[str, str]
    dry_run: bool
    jobs: int  # jobs it applied to (a dry run: that match now)
    executions: int  # executions cancelled (pause, delete, cancel) or created (trigger)
    skipped: list[UUID]  # matched but refused on the way (a one-off cannot be resumed; deleted meanwhile)
    record: JobAction | None = None  # the audit record (not for a dry run)


def selector_of(text: str | dict[str, str], field: str = "selector") -> dict[str, str]:
    """A non-empty selector: `team=billing` text or a {key: value} object (an empty one would
    act on every job of the tenant, which no one means by accident)."""
    selector = parse_selector(text, field) if isinstance(text, str) else check_labels(text, field)
    if not selector:
        raise ValidationError(field, "must name at least one label")
    return selector


class JobActions:
    def __init__(self, jobs: Jobs, cancels: Cancels) -> None:
        self.jobs = jobs
        self.cancels = cancels
        self.store = jobs.store

    async def run(self, tenant: str, action: Action, selector: dict[str, str], *, dry_run: bool, by: str) -> ActionResult:
        """Apply `action` to every undeleted job of `tenant` matching `selector` (see Action for
        which ones each takes). A dry run counts the jobs and, for pause, delete and cancel, their
        unstarted executions, and writes nothing; a real run records itself in job_actions."""
        check_actor(by)
        applies_to = _APPLIES_TO[action]
        if dry_run:
            jobs, unstarted = await self.store.job_selected_count(tenant, selector, enabled=applies_to)
            made = jobs if action is Action.TRIGGER else 0 if action is Action.RESUME else unstarted
            return ActionResult(action, selector, True, jobs, made, [])
        if action is Action.CANCEL:
            jobs, _ = await self.store.job_selected_count(tenant, selector, enabled=None)
            executions, _ = await self.cancels.cancel_pages(tenant, CancelFilter(selector=selector), by=by)
            return await self._recorded(ActionResult(action, selector, False, jobs, executions, []), tenant, by)
        done = executions = 0
        skipped: list[UUID] = []
        after: UUID | None = None
        while page := await self.store.job_selected_page(tenant, selector, after=after, limit=JOB_PAGE, enabled=applies_to):
            for job_id in page:
                try:
                    executions += await self._one(action, job_id, tenant, by)
                except (NotFoundError, ValidationError):  # deleted, paused or a one-off meanwhile
                    skipped.append(job_id)
                    continue
                done += 1
            after = page[-1]
        return await self._recorded(ActionResult(action, selector, False, done, executions, skipped), tenant, by)

    async def _one(self, action: Action, job_id: UUID, tenant: str, by: str) -> int:
        """Steer one job; returns the executions it cancelled or created."""
        if action is Action.PAUSE:
            return (await self.jobs.pause(job_id, tenant, by=by))[1]
        if action is Action.RESUME:
            await self.jobs.resume(job_id, tenant)
            return 0
        if action is Action.TRIGGER:
            await self.jobs.trigger(job_id, tenant)
            return 1
        return (await self.jobs.delete(job_id, tenant))[1]

    async def _recorded(self, result: ActionResult, tenant: str, by: str) -> ActionResult:
        record = await self.store.job_action_insert(
            uuid4(), tenant, result.action, result.selector, {}, result.jobs, result.executions, by
        )  # fmt: skip
        log.info("job_actions.done", tenant=tenant, action=str(result.action), selector=result.selector, jobs=result.jobs,
                 executions=result.executions, skipped=len(result.skipped), by=by)  # fmt: skip
        return ActionResult(result.action, result.selector, False, result.jobs, result.executions, result.skipped, record)
