"""The /v1 endpoints a tenant's operator watches: the last minutes' figures, the overview (queue,
materialiser horizon, recent runs) and the last tz database recompute. Every figure is the
caller's tenant's own."""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from schedulerd.api import schemas
from schedulerd.api.errors import ERRORS
from schedulerd.api.services import Services
from schedulerd import overview as overview_of
from schedulerd.api.views import MINUTES_MAX, minute_view
from schedulerd.tenants import Principal


def router(services: Services, caller: Callable[..., Awaitable[Principal]]) -> APIRouter:
    api = APIRouter(prefix="/v1", responses=ERRORS)
    store, config, reads = services.store, services.config, services.reads
    Caller = Annotated[Principal, Depends(caller)]

    @api.get("/stats/minutes", response_model=schemas.MinuteStats, tags=["operator"],
             summary="this tenant's last minutes: executions scheduled, started and by outcome, start-lag p50/p99")  # fmt: skip
    async def minute_stats(
        who: Caller, minutes: Annotated[int, Query(ge=1, le=MINUTES_MAX, description="how many minutes back")] = 60,
    ) -> Any:  # fmt: skip
        stats, now = await store.execution_minutes_tenant(who.tenant, minutes)
        return {"tenant": who.tenant, "now": now, "minutes": [minute_view(m) for m in stats]}

    @api.get("/overview", response_model=schemas.Overview, tags=["operator"],
             summary="this tenant's queue, materialiser horizon and recent runs")  # fmt: skip
    async def overview(who: Caller) -> Any:
        return await overview_of.tenant(reads, services.queue, who.tenant, config.api.overview_window_s)

    @api.get("/tz/report", response_model=schemas.TzReport, tags=["jobs"],
             summary="the last recompute after a tz database change: this tenant's jobs whose instants moved")  # fmt: skip
    async def tz_report(who: Caller) -> Any:
        last = await store.tz_recompute_last()
        moved = await store.tz_moved_job_list(last.id, tenant=who.tenant, limit=config.api.page_size_max) if last else []
        return {
            "last_recompute": {"id": last.id, "tzdata_version": last.tzdata_version, "started_at": last.started_at,
                               "finished_at": last.finished_at} if last else None,
            "moved_jobs": [{"job_id": m.job_id, "old_version": m.old_version, "removed": m.removed, "added": m.added,
                            "moves": m.moves} for m in moved],
        }  # fmt: skip

    return api
