"""Item 8: a replica whose clock is 10 s fast (SCHEDULERD_CLOCK_OFFSET_S=10, the injectable
clock in schedulerd/clock.py) starts nothing early and expires no lease early, because due-ness
is judged by the Redis server's TIME and leases by Postgres's clock_timestamp()."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from schedulerd.clock import SystemClock
from schedulerd.jobs import Jobs, JobSpec
from tests.fault.conftest import LEASE_S, check, insert_workload, wait_settled

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
    job, _ = await jobs.create(JobSpec(task="noop", cron="0 0 1 1 *"))
    execution = await jobs.trigger(job.id)
    now = await store.clock_now()
    assert abs(execution.due_at - now) < timedelta(seconds=1)


@pytest.mark.parametrize("skew_s", [-3600.0, 3600.0])
async def test_due_times_set_on_a_skewed_host_come_from_postgres(store, queue, config, skew_s) -> None:
    """Every door that sets a due time takes "now" from Postgres: a job created without a time, one
    created to run in 60 s (the CLI's --in), a trigger, a backfill's spread and a redrive's."""
    jobs = Jobs(store, queue, config, clock=SystemClock(offset_s=skew_s))
    _, (now_run,) = await jobs.create(JobSpec(task="noop"))
    db_now = await store.clock_now()
    assert abs(now_run.due_at - db_now) < timedelta(seconds=1)
    _, (later,) = await jobs.create(JobSpec(task="noop", delay_s=60.0))
    assert abs(later.due_at - (await store.clock_now() + timedelta(seconds=60))) < timedelta(seconds=1)
    job, _ = await jobs.create(JobSpec(task="noop", cron="0 * * * *"))
    triggered = await jobs.trigger(job.id)
    assert abs(triggered.due_at - await store.clock_now()) < timedelta(seconds=1)
    done = await jobs.backfill(job.id, db_now - timedelta(hours=3), db_now - timedelta(hours=1))
    assert done.created and all(abs(e.due_at - db_now) < timedelta(seconds=5) for e in done.created)
