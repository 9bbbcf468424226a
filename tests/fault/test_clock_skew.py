"""Item 8: a replica whose clock is 10 s fast (SCHEDULERD_CLOCK_OFFSET_S=10, the injectable
clock in schedulerd/clock.py) starts nothing early and expires no lease early, because due-ness
is judged by the Redis server's TIME and leases by Postgres's clock_timestamp(). And the Redis
host and the Postgres host a few ms apart start nothing late: the claim judges a popped id due
by the pop's instant, the clock that popped it."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import timedelta

import pytest

from schedulerd.clock import SystemClock
from schedulerd.config import Config
from schedulerd.dispatcher import Dispatcher
from schedulerd.jobs import Jobs, JobSpec
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from schedulerd.sweeper import Sweeper
from schedulerd.worker import Worker
from tests.conftest import create_job
from tests.fault.conftest import LEASE_S, check, insert_workload, wait_settled
from tests.fault.skew import skewed_postgres

SKEW_S = 10.0


@pytest.mark.timeout(90)
async def test_a_replica_with_a_fast_clock_starts_nothing_early(store, fleet) -> None:
    fast = fleet.start(1, SCHEDULERD_CLOCK_OFFSET_S=str(SKEW_S)).replicas[1]  # alone: it runs everything
    await fleet.ready()
    await insert_workload(store, 500, start_in_s=1.0, spread_s=6.0, task="noop")
    await insert_workload(store, 20, start_in_s=1.0, spread_s=1.0, task="sleep", params={"seconds": 2 * LEASE_S}, tenant="long")
    counts = await wait_settled(store, timeout_s=40)
    await wait_settled(store, timeout_s=20, tenant="long")
    figures = await check(store)
    earliest = await store.db.fetchval(
        "SELECT extract(epoch FROM min(first_started_at - scheduled_for)) FROM executions WHERE tenant = 'fault'"
    )
    long_runs = await store.db.fetchrow("SELECT max(fence) AS starts, count(*) FILTER (WHERE status = 'succeeded') AS ok "
                                        "FROM executions WHERE tenant = 'long'")  # fmt: skip
    seen = [json.loads(line) for line in fast.daemon.log_text().splitlines() if '"clock.skew"' in line]
    print(figures.line(f"one replica {SKEW_S:g} s fast", by_status=counts, earliest_start_vs_due_s=round(float(earliest), 4),
                       skew_it_reported_s=seen[0]["skew_s"] if seen else None,
                       long_handlers_max_starts=long_runs["starts"]))  # fmt: skip
    assert seen and abs(seen[0]["skew_s"] - SKEW_S) < 0.5  # the replica did run with a clock 10 s fast
    assert counts == {"succeeded": 500}
    assert figures.early == 0 and earliest >= 0, figures  # not one started before its due time
    assert figures.max_lag_s < 2.0, figures  # nor late
    assert (long_runs["starts"], long_runs["ok"]) == (1, 20)  # handlers of 2 leases: no lease expired early


async def test_trigger_and_validation_on_a_skewed_host(store, queue, config) -> None:
    """A job triggered on a host whose clock is wrong is due at Postgres's now, not the host's."""
    jobs = Jobs(store, queue, config, clock=SystemClock(offset_s=SKEW_S))
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="0 0 1 1 *"))
    execution = await jobs.trigger(job.id)
    now = await store.clock_now()
    assert abs(execution.due_at - now) < timedelta(seconds=1)


@pytest.mark.parametrize("skew_s", [-3600.0, 3600.0])
async def test_due_times_set_on_a_skewed_host_come_from_postgres(store, queue, config, skew_s) -> None:
    """Every door that sets a due time takes "now" from Postgres: a job created without a time, one
    created to run in 60 s (the CLI's --in), a trigger, a backfill's spread and a redrive's."""
    jobs = Jobs(store, queue, config, clock=SystemClock(offset_s=skew_s))
    _, (now_run,) = await create_job(jobs, JobSpec(task="noop"))
    db_now = await store.clock_now()
    assert abs(now_run.due_at - db_now) < timedelta(seconds=1)
    _, (later,) = await create_job(jobs, JobSpec(task="noop", delay_s=60.0))
    assert abs(later.due_at - (await store.clock_now() + timedelta(seconds=60))) < timedelta(seconds=1)
    job, _ = await create_job(jobs, JobSpec(task="noop", cron="0 * * * *"))
    triggered = await jobs.trigger(job.id)
    assert abs(triggered.due_at - await store.clock_now()) < timedelta(seconds=1)
    done = await jobs.backfill(job.id, db_now - timedelta(hours=3), db_now - timedelta(hours=1))
    assert done.created and all(abs(e.due_at - db_now) < timedelta(seconds=5) for e in done.created)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("redis_ahead_ms", [-100, -20, 5, 20, 100])
async def test_work_starts_on_time_when_redis_and_postgres_clocks_differ(
    store: Store, queue: DelayQueue, config: Config, database_url: str, redis_ahead_ms: int
) -> None:
    """150 executions due over 2 s with the Redis host's clock redis_ahead_ms ahead of Postgres's
    (behind when negative): none is dropped for being popped a few ms early by Postgres's clock,
    so none waits for the sweeper's overdue repair (grace_s + a sweep: 0.5-0.7 s here)."""
    async with skewed_postgres(database_url, -redis_ahead_ms / 1000) as skew:
        skewed = skew.store
        assert abs((await skewed.clock_now() - await store.clock_now()).total_seconds() + redis_ahead_ms / 1000) < 0.05
        ids, _ = await insert_workload(skewed, 150, start_in_s=0.5, spread_s=2.0)
        await Dispatcher(skewed, queue, config.dispatcher).run_once()
        worker = Worker(skewed, queue, replace(config.worker, concurrency=64, batch_size=64), "worker-skew",
                        horizon_s=config.dispatcher.horizon_s)  # fmt: skip
        sweeper = Sweeper(skewed, queue, config.sweeper)
        stop = asyncio.Event()
        loops = [asyncio.create_task(worker.run(stop)), asyncio.create_task(sweeper.run(stop))]
        try:
            counts = await wait_settled(skewed, timeout_s=20)
        finally:
            stop.set()
            await asyncio.gather(*loops, return_exceptions=True)
        lags = [float(r["lag"]) for r in await skewed.db.fetch(
            "SELECT extract(epoch FROM first_started_at - due_at) AS lag FROM executions WHERE id = ANY($1::uuid[])", ids
        )]  # fmt: skip
        await skew.set_offset(0.0)  # the helper's offset moves while its pool is in use
        assert abs((await skewed.clock_now() - await store.clock_now()).total_seconds()) < 0.05
    late = sorted(lag for lag in lags if lag > 0.4)
    print(f"redis {redis_ahead_ms:+d} ms: {counts}, max lag {max(lags):.3f} s, min {min(lags):.3f} s, {len(late)} late > 0.4 s")
    assert counts == {"succeeded": 150}
    assert not late, f"{len(late)} of 150 started more than 0.4 s late (max {late[-1]:.3f} s)"
    # Judged by the pop's clock: at most the skew early by Postgres's, never more.
    assert min(lags) >= -max(0, redis_ahead_ms) / 1000 - 0.002
