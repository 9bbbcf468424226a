"""Metrics and the observer loop against real Postgres and Redis."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

import pytest
from prometheus_client import REGISTRY

from schedulerd.jobs import Jobs, JobSpec
from schedulerd.observer import Observer, replica_roles
from tests.conftest import create_job
from tests.integration.conftest import run_until_idle


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_running_executions_update_counters_and_the_lag_histogram(make_job, make_worker, store) -> None:
    before_lag = sample("schedulerd_start_lag_seconds_count", task="log")
    before_ok = sample("schedulerd_executions_finished_total", task="log", outcome="succeeded")
    before_failed = sample("schedulerd_executions_finished_total", task="fail", outcome="failed")
    before_retries = sample("schedulerd_retries_total", task="fail")
    _, ok = await make_job("log")
    _, failing = await make_job("fail", max_attempts=2)
    worker = make_worker()
    await run_until_idle(worker, store, ok.id)
    await run_until_idle(worker, store, failing.id)

    assert sample("schedulerd_start_lag_seconds_count", task="log") == before_lag + 1
    assert sample("schedulerd_executions_finished_total", task="log", outcome="succeeded") == before_ok + 1
    assert sample("schedulerd_executions_finished_total", task="fail", outcome="failed") == before_failed + 2
    assert sample("schedulerd_retries_total", task="fail") == before_retries + 1
    assert sample("schedulerd_in_flight") == 0


async def test_observer_samples_gauges_and_reports_the_replica(store, queue, config) -> None:
    await create_job(Jobs(store, queue, config), JobSpec(task="noop", cron="* * * * *"))
    observer = Observer(store, queue, config, "observer-test")

    await observer.run_once()

    assert sample("schedulerd_queue_depth") >= 1
    assert sample("schedulerd_pending_in_horizon") >= 1
    assert 5 * 3600 < sample("schedulerd_materialiser_horizon_seconds") <= 6 * 3600
    assert 0 < sample("schedulerd_round_trip_seconds", server="postgres") < 1
    assert 0 < sample("schedulerd_round_trip_seconds", server="redis") < 1
    assert abs(sample("schedulerd_clock_skew_seconds", server="redis")) < 1  # one host, one clock
    (replica,) = [r for r in await store.replica_list(60) if r["worker_id"] == "observer-test"]
    assert replica["roles"] == list(replica_roles(config)) and replica["version"]
    assert replica["roles"][: len(config.daemon.roles)] == list(config.daemon.roles) and "observer" in replica["roles"]


async def test_a_slow_forecast_is_refreshed_less_often_and_a_failing_one_not_at_every_sample(
    store, queue, config, monkeypatch
) -> None:
    """The forecast's count grows with what is due within the hour: a replica waits 20 times what
    the last refresh took (core/late.py FORECAST_SPACING) when that is longer than its interval,
    and a refresh that fails waits its interval like any other."""
    config = replace(config, forecast=replace(config.forecast, interval_s=0.5))
    observer = Observer(store, queue, config, "observer-forecast")
    real = store.execution_due_forecast

    async def slow(*args: Any) -> Any:
        await asyncio.sleep(0.1)
        return await real(*args)

    monkeypatch.setattr(store, "execution_due_forecast", slow)
    await observer.run_once()
    assert observer._forecast_due - time.monotonic() > 1.5  # 20 x 0.1 s, not the 0.5 s interval

    async def broken(*args: Any) -> Any:
        raise ConnectionResetError("gone")

    monkeypatch.setattr(store, "execution_due_forecast", broken)
    observer._forecast_due = 0.0
    with pytest.raises(ConnectionResetError):
        await observer.run_once()
    assert 0.3 < observer._forecast_due - time.monotonic() <= 0.5
