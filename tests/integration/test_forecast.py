"""Known future load on real Postgres and Redis: executions due in the next 1, 5, 15 and 60
minutes per tenant (Store.execution_due_forecast), and the observer's schedulerd_due_next gauges."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from prometheus_client import REGISTRY

from schedulerd.config import ForecastConfig
from schedulerd.core.late import FORECAST_WINDOWS_S
from schedulerd.observer import Observer


def due_next(window: str, tenant: str) -> float | None:
    return REGISTRY.get_sample_value("schedulerd_due_next", {"window": window, "tenant": tenant})


async def make_due_in(make_job, tenant: str, *offsets_s: float) -> None:  # type: ignore[no-untyped-def]
    for offset_s in offsets_s:
        await make_job("noop", tenant=tenant, run_at=datetime.now(UTC) + timedelta(seconds=offset_s))


async def test_the_forecast_counts_what_falls_due_in_each_window_per_tenant(store, make_job) -> None:
    # acme: one due in each window and one beyond the hour; globex: one within 1 minute, one within 5.
    await make_due_in(make_job, "acme", 30, 200, 600, 1800, 7200)
    await make_due_in(make_job, "globex", 40, 250)
    overdue, started = await make_job("noop", tenant="acme"), await make_job("noop", tenant="acme")
    await store.db.execute("UPDATE executions SET due_at = now() - interval '1 minute' WHERE id = $1", overdue[1].id)
    await store.db.execute("UPDATE executions SET status = 'running' WHERE id = $1", started[1].id)

    forecast = await store.execution_due_forecast(FORECAST_WINDOWS_S)
    acme_only = await store.execution_due_forecast(FORECAST_WINDOWS_S, tenant="acme")

    assert forecast.by_tenant == {"acme": (1, 2, 3, 4), "globex": (1, 2, 2, 2)}
    assert forecast.total == (2, 4, 5, 6)
    assert acme_only.by_tenant == {"acme": (1, 2, 3, 4)}  # overdue and running ones are not future load
    assert abs((forecast.now - datetime.now(UTC)).total_seconds()) < 5


async def test_an_empty_forecast_is_zeros_with_the_time(store) -> None:
    forecast = await store.execution_due_forecast(FORECAST_WINDOWS_S)
    assert forecast.by_tenant == {} and forecast.total == (0, 0, 0, 0) and forecast.now is not None


async def test_pending_executions_beyond_the_dispatch_horizon_are_counted(store, make_job) -> None:
    await make_due_in(make_job, "acme", 1200)  # 20 minutes: past the 300 s dispatch horizon, so pending
    status = await store.db.fetchval("SELECT status FROM executions")
    assert status == "pending"
    assert (await store.execution_due_forecast(FORECAST_WINDOWS_S)).by_tenant == {"acme": (0, 0, 0, 1)}


async def test_the_observer_publishes_the_top_tenants_and_sums_the_rest(store, queue, config, make_job) -> None:
    await make_due_in(make_job, "big", 30, 30, 30)
    await make_due_in(make_job, "mid", 30, 30)
    await make_due_in(make_job, "small", 30)
    observer = Observer(store, queue, replace(config, forecast=ForecastConfig(top_tenants=1)), "forecast-test")

    await observer.refresh_forecast()

    assert due_next("1m", "big") == 3 and due_next("60m", "big") == 3
    assert due_next("1m", "_other") == 3  # mid + small
    assert due_next("1m", "mid") is None and due_next("1m", "small") is None

    await store.db.execute("UPDATE executions SET status = 'succeeded' WHERE tenant = 'big'")
    await observer.refresh_forecast()
    assert due_next("1m", "mid") == 2 and due_next("1m", "_other") == 1
    assert due_next("1m", "big") is None  # a tenant that dropped out of the top loses its series

    await store.db.execute("UPDATE executions SET status = 'succeeded'")
    await observer.refresh_forecast()
    assert due_next("5m", "_other") == 0 and due_next("5m", "mid") is None


async def test_the_observer_refreshes_the_forecast_every_interval(store, queue, config, make_job) -> None:
    await make_due_in(make_job, "acme", 30)
    observer = Observer(store, queue, replace(config, forecast=ForecastConfig(interval_s=3600.0)), "forecast-interval")

    await observer.run_once()
    assert due_next("1m", "acme") == 1
    await make_due_in(make_job, "acme", 30)
    await observer.run_once()  # within the interval: not counted again
    assert due_next("1m", "acme") == 1
