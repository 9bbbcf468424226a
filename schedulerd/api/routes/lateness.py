"""The tenant endpoints about lateness: late and missed occurrences, "why didn't job X run at T?", and the
known future load. Scoped to the caller's tenant like every /v1 route; another tenant's job is
"not found". Included before the executions router, so /v1/executions/late is not read as an id."""

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Query

from schedulerd.api import schemas
from schedulerd.api.errors import ERRORS, ApiError
from schedulerd.api.services import Services
from schedulerd.api.views import attempt_view, execution_view
from schedulerd.core import late
from schedulerd.late_runs import LateRuns
from schedulerd.tenants import Principal


def router(services: Services, caller: Callable[..., Awaitable[Principal]]) -> APIRouter:
    api = APIRouter(prefix="/v1", responses=ERRORS)
    jobs, store, config = services.jobs, services.store, services.config
    runs = LateRuns(store, config)
    Caller = Annotated[Principal, Depends(caller)]
    PageSize = Annotated[int, Query(ge=1, le=config.api.page_size_max, description="items (api.page_size_max)")]

    @api.get("/executions/late", response_model=schemas.LatePage, tags=["executions"],
             summary="occurrences that did not start within their grace, each with its late reason")  # fmt: skip
    async def list_late(
        who: Caller, job: UUID | None = None,
        since: Annotated[schemas.Instant | None, Query(description="scheduled at or after (ISO 8601); default 24 h ago")] = None,
        reason: schemas.LateReasonName | None = None, limit: PageSize = 50,
    ) -> Any:  # fmt: skip
        if job is not None:
            await jobs.get(job, who.tenant)  # another tenant's job: 404, like a missing one
        since = since or datetime.now(UTC) - timedelta(days=1)
        listed = await runs.list(since=since, tenant=who.tenant, job_id=job, reason=reason, limit=limit)
        return {"items": [{**execution_view(x.execution), "late_reason": x.why} for x in listed], "since": since}

    @api.get("/jobs/{job_id}/why", response_model=schemas.WhyAnswer, tags=["jobs"],
             summary="why didn't the job run at this time? Its nearest occurrence and what became of it")  # fmt: skip
    async def why(
        job_id: UUID, who: Caller,
        at: Annotated[str, Query(min_length=1, max_length=64,
                                 description="ISO 8601 with offset, or HH:MM: the latest such time in the job's zone")],
    ) -> Any:  # fmt: skip
        job = await jobs.get(job_id, who.tenant)
        try:
            instant = late.resolve_at(at, job.timezone, datetime.now(UTC))
        except (ValueError, OverflowError) as exc:
            raise ApiError(422, "validation", str(exc), field="at") from None
        answer = await runs.why(job, instant)
        execution = None
        if answer.execution is not None:
            attempts = await store.attempt_list(answer.execution.id)
            execution = {**execution_view(answer.execution), "attempts": [attempt_view(a) for a in attempts]}
        return {"job_id": job.id, "asked_at": instant, "scheduled_for": answer.scheduled_for, "execution": execution,
                "late_reason": answer.late_reason, "answer": answer.answer}  # fmt: skip

    @api.get("/forecast", response_model=schemas.Forecast, tags=["operator"],
             summary="known future load: this tenant's executions due in the next 1, 5, 15 and 60 minutes")  # fmt: skip
    async def forecast(who: Caller) -> Any:
        result = await runs.forecast(who.tenant)
        counts = result.by_tenant.get(who.tenant, (0,) * len(result.windows_s))
        return {"tenant": who.tenant, "now": result.now,
                "windows": [{"window": late.window_label(w), "seconds": w, "due": n} for w, n in zip(result.windows_s, counts)]}  # fmt: skip

    return api
