"""The overview figures, gathered in one place: the fleet's for `schedulerd status` (an operator's
screen), one tenant's for `GET /v1/overview` (nothing of other tenants). Reads only; formats nothing
for people (the CLI does) and knows nothing of HTTP (the route does)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from schedulerd.config import Config
from schedulerd.core.late import window_label
from schedulerd.late_runs import LateRuns
from schedulerd.queue import UNREACHABLE, DelayQueue
from schedulerd.store import Store

REPLICAS_SEEN_WITHIN_S = 60  # a replica silent longer is not listed
LAG_WITHIN_S = 300  # the start lag figures cover this many seconds
LATE_WITHIN_S = 3600  # late runs are counted over this many seconds


@dataclass(frozen=True)
class FleetOverview:
    now: datetime  # Postgres's clock
    oldest_queued_due_at: datetime | None
    oldest_pending_due_at: datetime | None
    report: dict[str, Any]  # every figure, JSON-ready: `schedulerd status --json` prints it as it is


async def fleet(store: Store, queue: DelayQueue, config: Config) -> FleetOverview:
    """Every replica's figures: replicas seen, queue depth (None when Redis does not answer: this is
    the screen used when things are broken), oldest queued and pending, start lag, recent outcomes,
    the materialiser horizon, what falls due next, late runs by reason, what is parked by reason and the tenant quotas in force."""
    overview = await store.execution_overview()
    horizon, now = await store.job_horizon()
    replicas = await store.replica_list(seen_within_s=REPLICAS_SEEN_WITHIN_S)
    lag = await store.execution_recent_lag(within_s=LAG_WITHIN_S)
    forecast = await LateRuns(store, config).forecast()
    late_last_hour = await store.execution_late_counts(within_s=LATE_WITHIN_S)
    parked = await store.execution_parked_counts()
    runtime_quotas = {q.tenant: q.in_flight for q in await store.tenant_quota_list()}
    try:
        depth: int | None = await queue.depth()
    except UNREACHABLE:
        depth = None

    def overdue_s(at: datetime | None) -> float | None:
        # How long past due; 0 for one not due yet (queued ahead of time), never negative.
        return round(max(0.0, (now - at).total_seconds()), 3) if at else None

    oldest_queued, oldest_pending = overview["oldest_queued_due_at"], overview["oldest_pending_due_at"]
    report = {
        "now": now.isoformat(),
        "replicas": [
            {"worker_id": r["worker_id"], "roles": r["roles"], "version": r["version"],
             "seen_s_ago": round(max(0.0, r["seen_ago"].total_seconds()), 1),
             "up_s": round(max(0.0, (now - r["started_at"]).total_seconds()))}
            for r in replicas
        ],
        "queue_depth": depth,
        "oldest_queued_due_at": oldest_queued.isoformat() if oldest_queued else None,
        "oldest_queued_due_age_s": overdue_s(oldest_queued),
        "oldest_pending_due_at": oldest_pending.isoformat() if oldest_pending else None,
        "oldest_pending_due_age_s": overdue_s(oldest_pending),
        "start_lag_last_5m_s": {k: (round(lag[k], 3) if lag[k] is not None else None) for k in ("p50", "p95", "p99")},
        "started_last_5m": lag["started"],
        "failed_last_hour": lag["failed_last_hour"],
        # How far ahead every enabled cron job is written (negative: behind); alert well before 0.
        "materialiser_horizon_s": round((horizon - now).total_seconds(), 3) if horizon else None,
        "last_hour_by_status": overview["last_hour_by_status"],
        # Known future load: not yet started and due within each window (scale before it lands).
        "due_next": dict(zip(map(window_label, forecast.windows_s), forecast.total)),
        # Occurrences of the last hour that did not start within their grace, by late reason.
        "late_last_hour_by_reason": late_last_hour,
        # Held back unrun now, attempt not used: parked by a worker, or waiting for a concurrency slot.
        "parked_by_reason": parked,
        # Tenant in-flight quotas in force: set at runtime (`schedulerd tenant quota`) over config's.
        "tenant_quotas": {"runtime": runtime_quotas, "config": dict(config.concurrency.tenants),
                          "default": config.concurrency.tenant_default},
    }  # fmt: skip
    return FleetOverview(now, oldest_queued, oldest_pending, report)


async def tenant(reads: Store, queue: DelayQueue, tenant: str, window_s: float) -> dict[str, Any]:
    """One tenant's own figures (a fleet-wide one would tell a tenant how much work, and so how many
    tenants, share the scheduler): its queue depth, how long its oldest due execution has waited,
    its cron jobs' horizon, and its start lag and runs by status over the last window_s seconds."""
    stats = await reads.execution_tenant_recent_stats(tenant, window_s)
    oldest_due_at, now = await reads.execution_oldest_due_tenant(tenant)
    horizon, _ = await reads.job_horizon_tenant(tenant)
    return {
        "tenant": tenant, "now": now, "queue_depth": await queue.tenant_depth(tenant),
        "oldest_due_age_s": max(0.0, (now - oldest_due_at).total_seconds()) if oldest_due_at and oldest_due_at <= now else None,
        "horizon_s": (horizon - now).total_seconds() if horizon else None, "window_s": window_s,
        "start_lag": {"p50_s": stats.lag_p50_s, "p90_s": stats.lag_p90_s, "p99_s": stats.lag_p99_s,
                      "max_s": stats.lag_max_s, "started": stats.started},
        "runs_by_status": stats.by_status,
    }  # fmt: skip
