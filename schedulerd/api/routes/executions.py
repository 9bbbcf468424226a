"""The /v1 execution endpoints: list and read executions with their attempts; cancel one or every
one matching a filter; list the failed ones (dead letters) and redrive them. Scoped to the caller's tenant: another tenant's job or execution
is "not found", exactly like a missing one."""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Request

from schedulerd.api import schemas
from schedulerd.api.errors import ERRORS, ApiError
from schedulerd.api.routes.common import PAGE_SIZE_DOC, Cursor, actor, decode_cursor, encode_cursor, read_job
from schedulerd.api.services import Services
from schedulerd.api.views import attempt_view, execution_view, job_action_view, redrive_view
from schedulerd.cancels import UNSTARTED, CancelFilter, Cancels
from schedulerd.core.labels import parse_selector
from schedulerd.dead_letters import DeadLetters, FailedFilter
from schedulerd.errors import TooLateError, ValidationError
from schedulerd.tenants import Principal

FAILED_FILTERS = {"job", "task", "error", "since", "until", "limit", "cursor"}  # GET /v1/executions/failed
TOO_LATE = {409: {"model": schemas.ErrorBody, "description": "the execution settled first (succeeded, failed, skipped)"}}


def router(services: Services, caller: Callable[..., Awaitable[Principal]]) -> APIRouter:
    api = APIRouter(prefix="/v1", responses=ERRORS)
    jobs, store, reads = services.jobs, services.store, services.reads
    dead_letters = DeadLetters(store, services.queue, services.config)
    cancels = Cancels(store)
    Caller = Annotated[Principal, Depends(caller)]
    PageSize = Annotated[int, Query(ge=1, le=services.config.api.page_size_max, description=PAGE_SIZE_DOC)]

    @api.get("/executions", response_model=schemas.ExecutionPage, tags=["executions"],
             summary="this tenant's executions, newest scheduled first (when=upcoming: soonest first)")  # fmt: skip
    async def list_executions(
        who: Caller, job: UUID | None = None, status: schemas.Status | None = None,
        since: Annotated[schemas.Instant | None, Query(description="scheduled at or after (ISO 8601)")] = None,
        until: Annotated[schemas.Instant | None, Query(description="scheduled before (ISO 8601)")] = None,
        when: Annotated[schemas.Phase | None, Query(
            description="past: started or settled (not pending or queued) and scheduled by now, newest first; "
                        "upcoming: not yet started (pending or queued), soonest first, read forward from `since` (give one "
                        "to skip the history); unset: all, newest first")] = None,
        limit: PageSize = 50, cursor: Cursor = None,
    ) -> Any:  # fmt: skip
        if job is not None:
            await read_job(services, job, who.tenant)  # another tenant's job: 404, like a missing one
        listed = await reads.execution_page(who.tenant, job_id=job, status=status, since=since, until=until,
                                            after=decode_cursor(cursor), limit=limit + 1, phase=when)  # fmt: skip
        page, more = listed[:limit], len(listed) > limit
        return {"items": [execution_view(e) for e in page],
                "next_cursor": encode_cursor(page[-1].scheduled_for, page[-1].id) if more else None}  # fmt: skip

    # Declared before /executions/{execution_id}, which would otherwise take "failed" for an id.
    @api.get("/executions/failed", response_model=schemas.FailedExecutionPage, tags=["dead letters"],
             summary="this tenant's failed executions, most recently failed first")  # fmt: skip
    async def list_failed(
        request: Request, who: Caller, job: UUID | None = None,
        task: Annotated[str | None, Query(max_length=200, description="of this task type")] = None,
        error: Annotated[str | None, Query(min_length=1, max_length=500, description="last error contains (any case)")] = None,
        since: Annotated[schemas.Instant | None, Query(description="failed at or after (ISO 8601)")] = None,
        until: Annotated[schemas.Instant | None, Query(description="failed before (ISO 8601)")] = None,
        limit: PageSize = 50, cursor: Cursor = None,
    ) -> Any:  # fmt: skip
        # A misspelt filter (?erorr=) must not silently list every failure: what you redrive next.
        unknown = sorted(set(request.query_params) - FAILED_FILTERS)
        if unknown:
            raise ApiError(422, "validation", "is not a parameter of this request", field=unknown[0])
        if job is not None:
            await jobs.get(job, who.tenant)  # another tenant's job: 404, like a missing one
        which = FailedFilter(job_id=job, task=task, error=error, since=since, until=until)
        listed = await dead_letters.list(who.tenant, which, after=decode_cursor(cursor), limit=limit + 1)
        page, more = listed[:limit], len(listed) > limit
        last = page[-1].execution if page else None
        return {"items": [{**execution_view(f.execution), "task": f.task} for f in page],
                "next_cursor": encode_cursor(last.finished_at, last.id) if more and last and last.finished_at else None}  # fmt: skip

    async def redriving(run: Callable[[], Awaitable[Any]]) -> Any:
        """A redrive refused for an execution's state (not failed, job paused) is a conflict."""
        try:
            done = await run()
        except ValidationError as exc:
            if exc.field == "id":
                raise ApiError(409, "conflict", exc.message, field="id") from None
            raise
        return {"redriven": done.execution_ids, "not_redriven": done.not_redriven, "more": done.more}

    @api.post("/executions/redrive", response_model=schemas.Redriven, tags=["dead letters"],
              summary="give failed executions a new attempt budget: by ids, or every one matching filters")  # fmt: skip
    async def redrive_many(body: schemas.RedriveRequest, who: Caller) -> Any:
        which = FailedFilter(job_id=body.job, task=body.task, error=body.error, since=body.since, until=body.until)
        if body.ids is not None:
            if not which.empty:
                raise ApiError(422, "validation", "give ids or filters (job, task, error, since, until), not both", field="ids")
            return await redriving(lambda: dead_letters.redrive(body.ids or [], who.tenant, by=actor(who)))
        if body.job is not None:
            await jobs.get(body.job, who.tenant)
        return await redriving(lambda: dead_letters.redrive_matching(who.tenant, which, by=actor(who)))

    @api.post("/executions/{execution_id}/redrive", response_model=schemas.Redriven, tags=["dead letters"],
              summary="give one failed execution a new attempt budget (same id)")  # fmt: skip
    async def redrive_one(execution_id: UUID, who: Caller) -> Any:
        return await redriving(lambda: dead_letters.redrive([execution_id], who.tenant, by=actor(who)))

    @api.post("/executions/cancel", response_model=schemas.BulkCancelled, tags=["executions"],
              summary="cancel every execution matching a filter (dry_run: true, the default, only counts them)")  # fmt: skip
    async def cancel_many(body: schemas.CancelRequest, who: Caller) -> Any:
        if body.job is None and body.label is None and body.due_from is None and body.due_to is None and body.status is None:
            raise ApiError(422, "validation", "give at least one of job, status, label, due_from, due_to", field="body")
        if body.job is not None:
            await jobs.get(body.job, who.tenant)  # another tenant's job: 404, like a missing one
        which = CancelFilter(
            statuses=tuple(body.status) if body.status else UNSTARTED, job_id=body.job,
            selector=parse_selector(body.label) if body.label is not None else None,
            due_from=body.due_from, due_to=body.due_to,
        )  # fmt: skip
        done = await cancels.cancel_matching(who.tenant, which, dry_run=body.dry_run, by=actor(who))
        return {"dry_run": done.dry_run, "matched": done.matched, "stop_requested": done.stop_requested,
                "sample": done.sample, "action": job_action_view(done.action) if done.action else None}  # fmt: skip

    @api.post("/executions/{execution_id}/cancel", response_model=schemas.Execution, tags=["executions"], responses=TOO_LATE,
              summary="cancel one execution: unstarted ones at once, a running one at its next heartbeat")  # fmt: skip
    async def cancel_one(execution_id: UUID, who: Caller) -> Any:
        try:
            done = await cancels.cancel(execution_id, who.tenant, by=actor(who))
        except TooLateError as exc:
            raise ApiError(409, "conflict", str(exc), field="status") from None
        return execution_view(done.execution)

    @api.get("/executions/{execution_id}", response_model=schemas.ExecutionDetail, tags=["executions"],
             summary="one execution with every attempt")  # fmt: skip
    async def get_execution(execution_id: UUID, who: Caller) -> Any:
        source = reads
        execution = await reads.execution_get(execution_id)
        if (execution is None or execution.tenant != who.tenant) and reads is not store:
            source, execution = store, await store.execution_get(execution_id)  # not replicated yet?
        if execution is None or execution.tenant != who.tenant:
            raise ApiError(404, "not_found", f"execution {execution_id} not found")
        attempts = await source.attempt_list(execution_id)
        redrives = await source.redrive_list(execution_id) if execution.redrives else []
        return {**execution_view(execution), "attempts": [attempt_view(a) for a in attempts],
                "redrive_history": [redrive_view(r) for r in redrives]}  # fmt: skip

    return api
