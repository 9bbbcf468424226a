"""The /v1 bulk job actions: pause, resume, trigger, delete or cancel the unstarted runs of every job
matching a label selector (a dry run first), and the record of the actions taken. Scoped to the
caller's tenant: another tenant's jobs never match."""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from schedulerd.api import schemas
from schedulerd.api.errors import ERRORS
from schedulerd.api.routes.common import PAGE_SIZE_DOC, Cursor, actor, decode_cursor, encode_cursor
from schedulerd.api.services import Services
from schedulerd.api.views import job_action_view
from schedulerd.cancels import Cancels
from schedulerd.job_actions import Action, JobActions, selector_of
from schedulerd.tenants import Principal


def router(services: Services, caller: Callable[..., Awaitable[Principal]]) -> APIRouter:
    api = APIRouter(prefix="/v1", responses=ERRORS)
    actions = JobActions(services.jobs, Cancels(services.store))
    Caller = Annotated[Principal, Depends(caller)]
    PageSize = Annotated[int, Query(ge=1, le=services.config.api.page_size_max, description=PAGE_SIZE_DOC)]

    # Declared before /jobs/{job_id}/pause (the jobs router), which would otherwise take "actions" for an id.
    @api.post("/jobs/actions/{action}", response_model=schemas.JobActionDone, tags=["jobs"],
              summary="pause, resume, trigger, delete or cancel the unstarted runs of every job matching a label "
                      "selector (dry_run: true, the default, only counts them)")  # fmt: skip
    async def act(action: Action, body: schemas.JobActionRequest, who: Caller) -> Any:
        done = await actions.run(who.tenant, action, selector_of(body.selector), dry_run=body.dry_run, by=actor(who))
        return {"action": done.action, "selector": done.selector, "dry_run": done.dry_run, "jobs": done.jobs,
                "executions": done.executions, "skipped": done.skipped,
                "record": job_action_view(done.record) if done.record else None}  # fmt: skip

    @api.get("/actions", response_model=schemas.JobActionPage, tags=["jobs"],
             summary="this tenant's bulk actions (by selector or filter), newest first: what, who, when")  # fmt: skip
    async def list_actions(who: Caller, limit: PageSize = 50, cursor: Cursor = None) -> Any:
        listed = await services.store.job_action_list(who.tenant, before=decode_cursor(cursor), limit=limit + 1)
        page, more = listed[:limit], len(listed) > limit
        return {"items": [job_action_view(a) for a in page],
                "next_cursor": encode_cursor(page[-1].at, page[-1].id) if more else None}  # fmt: skip

    return api
