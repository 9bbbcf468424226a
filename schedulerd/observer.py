"""Observer: every few seconds, measure what an operator alerts on and publish it as gauges;
report this replica as alive in Postgres (schedulerd status lists replicas seen recently).

Measures: round trips to Postgres and Redis, this host's clock skew against each, queue depth
and the age of its earliest entry, executions due within the dispatch horizon, the
materialiser horizon, and (every [forecast].interval_s) the known future load: executions due in
the next 1, 5, 15 and 60 minutes per tenant. A failing measurement is skipped, never fatal.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from datetime import UTC, datetime

import structlog

from schedulerd import __version__, metrics, task_types
from schedulerd.config import Config
from schedulerd.core import late
from schedulerd.loops import every
from schedulerd.queue import UNREACHABLE, DelayQueue
from schedulerd.store import Store

log = structlog.get_logger("schedulerd.observer")


def replica_roles(config: Config) -> tuple[str, ...]:
    """What a replica runs, as `schedulerd status` lists it: its loops, this observer, and the
    listeners it serves (the tenant API and dashboard, the operator endpoints)."""
    listeners = (("api",) if config.api.enabled else ()) + (("ops",) if config.ops.enabled else ())
    return (*config.daemon.roles, "observer", *listeners)


class Observer:
    def __init__(self, store: Store, queue: DelayQueue, config: Config, worker_id: str) -> None:
        self.store = store
        self.queue = queue
        self.config = config
        self.worker_id = worker_id
        self.started_at = datetime.now(UTC)
        self._forecast_due = 0.0  # monotonic time of the next forecast refresh
        self._forecast_labels: set[tuple[str, str]] = set()  # (window, tenant) label sets published last

    async def run_once(self) -> None:
        await self._measure_postgres()
        try:
            await self._measure_redis()
        except UNREACHABLE as exc:
            log.debug("observer.redis_unreachable", error=str(exc))
        await self.store.replica_report(
            self.worker_id, socket.gethostname(), os.getpid(), replica_roles(self.config), __version__, self.started_at
        )
        if "worker" in self.config.daemon.roles:  # the task types producers may enqueue stay known while it lives
            await task_types.report(self.store, self.worker_id)

    async def _measure_postgres(self) -> None:
        sent = time.time()
        server_now = await self.store.clock_now()
        received = time.time()
        metrics.ROUND_TRIP.labels("postgres").set(received - sent)
        metrics.CLOCK_SKEW.labels("postgres").set((sent + received) / 2 - server_now.timestamp())
        due_soon = await self.store.execution_due_soon(self.config.dispatcher.horizon_s, metrics.PENDING_IN_HORIZON_CAP)
        metrics.PENDING_IN_HORIZON.set(due_soon)
        horizon, now = await self.store.job_horizon()
        if horizon is not None:
            metrics.HORIZON.set((horizon - now).total_seconds())
        if time.monotonic() >= self._forecast_due:
            started = time.monotonic()
            try:
                await self.refresh_forecast()
            finally:  # a failing refresh waits its interval too
                ended = time.monotonic()
                self._forecast_due = ended + late.forecast_pause_s(self.config.forecast.interval_s, ended - started)

    async def refresh_forecast(self) -> None:
        """Publish schedulerd_due_next{window, tenant}: the tenants with most due within 60 minutes,
        the rest summed as _other. Label sets that dropped out are removed only after the new
        values are set, so a scrape never sees a tenant's series missing mid-refresh."""
        forecast = await self.store.execution_due_forecast(late.FORECAST_WINDOWS_S)
        capped = late.cap_tenants(forecast.by_tenant, self.config.forecast.top_tenants)
        if not capped:  # nothing due: publish zeros rather than no series, so "sum" reads 0
            capped = {late.OTHER_TENANTS: (0,) * len(forecast.windows_s)}
        published: set[tuple[str, str]] = set()
        for tenant, counts in capped.items():
            for window_s, count in zip(forecast.windows_s, counts):
                labels = (late.window_label(window_s), tenant)
                metrics.DUE_NEXT.labels(*labels).set(count)
                published.add(labels)
        for labels in self._forecast_labels - published:
            metrics.DUE_NEXT.remove(*labels)
        self._forecast_labels = published

    async def _measure_redis(self) -> None:
        sent = time.time()
        seconds, micros = await self.queue.client.time()
        received = time.time()
        redis_now = seconds + micros / 1e6
        metrics.ROUND_TRIP.labels("redis").set(received - sent)
        metrics.CLOCK_SKEW.labels("redis").set((sent + received) / 2 - redis_now)
        depth, earliest_due_ms = await self.queue.depth_and_earliest()
        metrics.QUEUE_DEPTH.set(depth)
        metrics.OLDEST_DUE_AGE.set(redis_now - earliest_due_ms / 1000 if earliest_due_ms is not None else 0)

    async def run(self, stop: asyncio.Event) -> None:
        await every("observer", self.config.daemon.observe_interval_s, self.run_once, stop)
