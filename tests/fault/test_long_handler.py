"""Item 3: handlers that run three times longer than the lease, kept alive by heartbeats, run
exactly once: no reclaim, no second start, one fenced write each."""

from __future__ import annotations

import pytest

from tests.fault.conftest import LEASE_S, WITNESS, check, insert_workload, wait_settled


@pytest.mark.timeout(90)
async def test_handler_longer_than_the_lease_runs_exactly_once(store, witness, fleet) -> None:
    fleet.start(2, **WITNESS)
    await fleet.ready()
    handler_s = 3 * LEASE_S
    await insert_workload(store, 40, start_in_s=0.5, spread_s=1.0, task="witness.record", params={"sleep_s": handler_s})
    counts = await wait_settled(store, timeout_s=40)
    figures = await check(store)
    starts = await store.db.fetchrow(
        """SELECT count(*) FILTER (WHERE event = 'start') AS starts, count(*) FILTER (WHERE event = 'applied') AS applied,
                  count(*) FILTER (WHERE event = 'rejected') AS rejected FROM witness_events"""
    )
    reclaimed = await store.db.fetchval("SELECT count(*) FROM attempts WHERE outcome = 'lease_expired'")
    print(figures.line(f"handler of {handler_s:g} s, lease {LEASE_S:g} s", by_status=counts, handler_starts=starts["starts"],
                       sink_applies=starts["applied"], reclaims=reclaimed))  # fmt: skip
    assert counts == {"succeeded": 40}
    assert figures.max_starts == 1 and figures.rerun == 0 and reclaimed == 0, figures
    assert (starts["starts"], starts["applied"], starts["rejected"]) == (40, 40, 0)
