"""Operator endpoints: /metrics (Prometheus), /healthz (the process answers), /readyz
(Postgres and Redis answer, the schema is current, every loop ticked recently), /fleet (what
`schedulerd status` shows: the same report from the same code),
/forecast (executions due in the next 1, 5, 15 and 60 minutes, for autoscalers), /stats/minutes
(the fleet's last minutes: counts and start lag) and / (a page showing the fleet). Served only on
the [ops] listener (api/app.py create_ops_app), never the tenants': /forecast and /metrics name
the busiest tenants and the hosts they call. No token: keep [ops].host private.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Query, Response
from fastapi.responses import FileResponse, JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from schedulerd import health, overview
from schedulerd.api.views import MINUTES_MAX, minute_view
from schedulerd.config import Config
from schedulerd.core import late
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from schedulerd.store.store import MIGRATIONS_DIR

CHECK_TIMEOUT_S = 2.0
PAGE = Path(__file__).with_name("dashboard") / "ops.html"  # its script and style: /dashboard/ (app.py)


def router(store: Store, queue: DelayQueue, config: Config) -> APIRouter:
    ops = APIRouter()
    top_tenants = config.forecast.top_tenants

    @ops.get("/fleet", include_in_schema=False)
    async def fleet() -> dict[str, Any]:
        """`schedulerd status --json`'s report."""
        return (await overview.fleet(store, queue, config)).report

    @ops.get("/forecast", include_in_schema=False)
    async def forecast() -> dict[str, Any]:
        """Fleet-wide: the total per window, and the top tenants (the rest summed as _other)."""
        result = await store.execution_due_forecast(late.FORECAST_WINDOWS_S)
        labels = [late.window_label(w) for w in result.windows_s]
        capped = late.cap_tenants(result.by_tenant, top_tenants)
        return {
            "now": result.now.isoformat(), "windows_s": list(result.windows_s),
            "total": dict(zip(labels, result.total)),
            "by_tenant": {tenant: dict(zip(labels, counts)) for tenant, counts in capped.items()},
        }  # fmt: skip

    @ops.get("/stats/minutes", include_in_schema=False)
    async def minute_stats(minutes: int = Query(60, ge=1, le=MINUTES_MAX)) -> dict[str, Any]:
        """Fleet-wide, per minute of the last `minutes`, oldest first (as GET /v1/stats/minutes)."""
        stats, now = await store.execution_minutes_fleet(minutes)
        return {"now": now.isoformat(), "minutes": [minute_view(m) for m in stats]}

    @ops.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(PAGE)

    @ops.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

    @ops.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @ops.get("/readyz", include_in_schema=False)
    async def readyz() -> JSONResponse:
        checks: dict[str, Any] = {}
        try:
            primary = await asyncio.wait_for(store.server_is_primary(), CHECK_TIMEOUT_S)
            applied = await asyncio.wait_for(store.migration_applied(), CHECK_TIMEOUT_S)
            # A standby answers reads; with no primary nothing can be claimed or created.
            checks["postgres"] = "ok" if primary else "a standby answers: no primary (writes are refused)"
            missing = sorted({p.stem for p in MIGRATIONS_DIR.glob("*.sql")} - applied)
            checks["migrations"] = "ok" if not missing else f"not applied: {', '.join(missing)}"
        except Exception as exc:  # any failure to answer is "not ready", with the reason
            checks["postgres"] = f"{type(exc).__name__}: {exc}"
        try:
            await asyncio.wait_for(queue.client.ping(), CHECK_TIMEOUT_S)
            checks["redis"] = "ok"
        except Exception as exc:
            checks["redis"] = f"{type(exc).__name__}: {exc}"
        loops = health.current()
        stale = loops.stale()
        checks["loops"] = "ok" if not stale else {loop: f"no tick for {age} s" if age else "never ticked" for loop, age in stale.items()}
        ready = all(value == "ok" for value in checks.values())
        body = {"status": "ready" if ready else "not ready", "checks": checks, "last_tick_s_ago": loops.ages()}
        return JSONResponse(body, status_code=200 if ready else 503)

    return ops
