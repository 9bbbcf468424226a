"""Item 1: SIGKILL one of three replicas every few seconds during a 5,000-execution workload.
Every execution ends succeeded, none is started more than a bounded number of times, and
executions due outside the fault windows start within 2 s."""

from __future__ import annotations

import asyncio
import os
import random
from datetime import timedelta

import pytest

from tests.fault.conftest import R_CRASH_S, check, insert_workload, wait_settled

SEED = int(os.environ.get("SCHEDULERD_FAULT_SEED", "8"))


async def _kill_replicas_during_workload(store, fleet, *, executions: int, spread_s: float, kill_every_s: tuple[float, float]):
    rng = random.Random(SEED)
    fleet.start(3)
    await fleet.ready()
    # Handlers take 0.2 s, so a kill always catches executions mid-handler.
    _, first = await insert_workload(store, executions, start_in_s=1.5, spread_s=spread_s, task="sleep",
                                     params={"seconds": 0.2})  # fmt: skip
    last = first + timedelta(seconds=spread_s)
    await asyncio.sleep(3)
    kills = []
    while (now := await store.clock_now()) < last - timedelta(seconds=1):
        slot = rng.randint(1, 3)
        fleet.kill(slot)
        kills.append(now)
        await asyncio.sleep(1.0)  # systemd's RestartSec
        fleet.restart(slot)
        await asyncio.sleep(rng.uniform(*kill_every_s))
    counts = await wait_settled(store, timeout_s=60)
    windows = [(k - timedelta(seconds=1), k + timedelta(seconds=R_CRASH_S)) for k in kills]
    figures = await check(store, windows=windows)
    print(figures.line(f"SIGKILL one of 3 replicas, {len(kills)} kills (seed {SEED})", kills=len(kills), by_status=counts,
                       outside_fault_windows=await _outside(store, windows)))  # fmt: skip
    assert figures.lost == 0 and figures.never_started == 0, figures
    assert figures.executions == executions
    assert figures.succeeded_twice == 0 and figures.overlaps == 0, figures
    assert figures.max_starts <= 3, figures  # attempts are capped at 3; in practice 2
    assert figures.early == 0, figures
    assert figures.max_lag_outside_s is not None and figures.max_lag_outside_s < 2.0, figures
    assert len(kills) >= 3


async def _outside(store, windows) -> int:
    return await store.db.fetchval(
        """SELECT count(*) FROM executions e WHERE tenant = 'fault' AND NOT EXISTS (
               SELECT 1 FROM unnest($1::timestamptz[], $2::timestamptz[]) w(a, b) WHERE e.scheduled_for BETWEEN w.a AND w.b)""",
        [w[0] for w in windows], [w[1] for w in windows],
    )  # fmt: skip


@pytest.mark.timeout(180)
async def test_sigkill_one_of_three_replicas_every_few_seconds(store, fleet) -> None:
    await _kill_replicas_during_workload(store, fleet, executions=5000, spread_s=40, kill_every_s=(5, 8))


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_sigkill_one_of_three_replicas_for_three_minutes(store, fleet) -> None:
    await _kill_replicas_during_workload(store, fleet, executions=20000, spread_s=180, kill_every_s=(3, 6))


@pytest.mark.timeout(120)
async def test_replicas_dying_between_pop_and_claim_and_after_the_claim(store, fleet) -> None:
    """SIGKILL at the worst instants (schedulerd/faults.py): after a pop, before the claim (ids
    out of Redis, owned by nobody) and after a claim, before any handler starts (rows running,
    nobody heartbeating). Replicas are restarted as systemd would; nothing is lost."""
    fleet.start(3, SCHEDULERD_FAULTS="after_pop:0.003,after_claim:0.01")
    fleet.supervise(restart_after_s=0.5)
    await fleet.ready()
    # A death after a claim uses up the attempt of every execution in that batch (a crash counts,
    # as for a poison task); 5 attempts keep a run of bad luck from failing one here.
    await insert_workload(store, 1500, start_in_s=1.0, spread_s=15.0, task="noop", max_attempts=5)
    counts = await wait_settled(store, timeout_s=60)
    await fleet.stop_supervising()
    figures = await check(store)
    print(figures.line("SIGKILL after pop / after claim (fault points)", by_status=counts, replicas_died=fleet.deaths))
    assert counts == {"succeeded": 1500} and figures.lost == 0, counts
    assert figures.succeeded_twice == 0 and figures.overlaps == 0 and figures.early == 0, figures
    assert figures.max_starts <= 5, figures
    assert fleet.deaths >= 1  # the fault points did fire
