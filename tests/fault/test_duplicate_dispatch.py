"""Item 6: dispatcher duplication. 1,000 executions due at the same instant; every one ZADDed
twice before it is due (into its tenant's queue and into another's, so two entries really
exist), then re-ZADDed over and over by a second dispatcher and a full reconcile racing the
fleet's pops. A pop confers nothing; the claim decides:
each execution runs exactly once."""

from __future__ import annotations

import asyncio

import pytest

from schedulerd.models import Enqueue
from schedulerd.sweeper import Sweeper
from tests.fault.conftest import WITNESS, check, insert_workload, wait_settled


@pytest.mark.timeout(90)
async def test_every_execution_zadded_many_times_runs_once(store, queue, config, witness, fleet) -> None:
    fleet.start(3, **WITNESS)
    await fleet.ready()
    ids, due = await insert_workload(store, 1000, start_in_s=2.0, task="witness.record")
    entries = [Enqueue(i, due, "fault") for i in ids]
    strays = [Enqueue(i, due, "default") for i in ids]  # the same ids in another tenant's queue: true duplicates
    await store.db.execute("UPDATE executions SET status = 'queued', enqueued_at = clock_timestamp() WHERE tenant = 'fault'")
    await queue.add(entries, only_new=False)  # the first write path ...
    await queue.add(strays, only_new=False)  # ... and a second one, before anything is due
    rival = Sweeper(store, queue, config.sweeper)
    zadds = 2 * len(ids)
    settled = asyncio.Event()

    async def second_dispatcher() -> None:
        nonlocal zadds
        rounds = 0
        while not settled.is_set():
            if rounds < 20:  # every id again for the first second, popped or not, claimed or not, finished or not
                await queue.add(entries, only_new=False)
                await queue.add(strays, only_new=False)
                zadds += 2 * len(entries)
            zadds += await rival.reconcile_all()  # and a full reconcile racing the pops all along
            rounds += 1
            await asyncio.sleep(0.05)

    racing = asyncio.create_task(second_dispatcher())
    try:
        counts = await wait_settled(store, timeout_s=45)
        await asyncio.sleep(1.0)  # let stale entries be popped and dropped while the race goes on
    finally:
        settled.set()
        await racing
    figures = await check(store)
    witnessed = await store.db.fetchrow(
        """SELECT count(*) FILTER (WHERE event = 'start') AS starts,
                  count(DISTINCT execution_id) FILTER (WHERE event = 'start') AS distinct_started,
                  count(*) FILTER (WHERE event = 'applied') AS applied FROM witness_events"""
    )
    print(figures.line("1,000 executions due at once, ZADDed by two racing writers", zadds=zadds, by_status=counts,
                       handler_starts=witnessed["starts"], sink_applies=witnessed["applied"]))  # fmt: skip
    assert counts == {"succeeded": 1000}
    assert figures.max_starts == 1 and figures.rerun == 0 and figures.succeeded_twice == 0, figures
    assert (witnessed["starts"], witnessed["distinct_started"], witnessed["applied"]) == (1000, 1000, 1000)
    assert zadds > 10 * len(ids)
    # Not a capacity benchmark: 1,000 claims at once while the rivals flood both queues with stale
    # entries, on a 2-core box (about 1-4 s here). What matters is the line above: once each.
    assert figures.max_lag_s < 10.0, figures
