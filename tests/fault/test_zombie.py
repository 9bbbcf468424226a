"""Item 2: a zombie. A replica frozen (SIGSTOP) mid-handler past its lease; another replica takes
the execution and finishes it; the first is thawed (SIGCONT) and its late writes are refused by
the fence: the recorded outcome is the newer attempt's, and the fenced sink saw fence 1 then 2."""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

from tests.conftest import wait_for
from tests.fault.conftest import WITNESS, insert_workload


@pytest.mark.timeout(90)
async def test_frozen_replica_cannot_overwrite_the_newer_attempt(store, witness, fleet) -> None:
    zombie = fleet.start(1, **WITNESS).replicas[1]
    await fleet.ready()
    (execution_id,), _ = await insert_workload(store, 1, start_in_s=0.2, task="witness.record", params={"sleep_s": 4})

    async def started(fence: int):
        return await store.db.fetchrow(
            "SELECT * FROM witness_events WHERE execution_id = $1 AND fence = $2 AND event = 'start'", execution_id, fence
        )

    first = await wait_for(lambda: started(1), timeout_s=20)
    zombie.daemon.signal(signal.SIGSTOP)
    frozen_at = time.monotonic()
    fleet.add()  # the rest of the fleet: takes over once the lease (2 s) has expired
    second = await wait_for(lambda: started(2), timeout_s=20)
    taken_over_s = time.monotonic() - frozen_at

    async def succeeded():
        row = await store.execution_get(execution_id)
        return row.status == "succeeded" and row

    await wait_for(succeeded, timeout_s=20)
    zombie.daemon.signal(signal.SIGCONT)

    async def zombie_done():
        return await store.db.fetchval(
            "SELECT event FROM witness_events WHERE execution_id = $1 AND fence = 1 AND event <> 'start'", execution_id
        )

    zombie_said = await wait_for(zombie_done, timeout_s=15)
    await asyncio.sleep(1.5)  # the zombie's heartbeat and finish loops have run by now
    final = await store.execution_get(execution_id)
    attempts = await store.attempt_list(execution_id)
    events = await store.db.fetch(
        "SELECT fence, pid, event FROM witness_events WHERE execution_id = $1 ORDER BY at", execution_id
    )
    sink_fence = await store.db.fetchval("SELECT fence FROM witness_sink WHERE execution_id = $1", execution_id)
    zombie_log = zombie.daemon.log_text()
    refusal = "outcome_fenced_out" if '"worker.outcome_fenced_out"' in zombie_log else (
        "lease_lost" if '"worker.lease_lost"' in zombie_log else None)  # fmt: skip
    print(f"\n[fault] zombie: frozen past the lease, taken over after {taken_over_s:.2f} s; "
          f"zombie's sink write {zombie_said}; zombie's worker writes refused ({refusal}); "
          f"attempts {[(a.fence, a.outcome, a.worker) for a in attempts]}; sink events {[(e['fence'], e['event']) for e in events]}")  # fmt: skip

    assert zombie.alive  # thawed, it carries on as a normal replica
    assert (final.status, final.fence, final.attempt, final.worker) == ("succeeded", 2, 2, "replica-2.1")
    assert [(a.fence, a.outcome, a.worker) for a in attempts] == [
        (1, "lease_expired", "replica-1.1"),
        (2, "succeeded", "replica-2.1"),
    ]
    assert [(e["fence"], e["event"]) for e in events] == [(1, "start"), (2, "start"), (2, "applied"), (1, "rejected")]
    assert first["pid"] == zombie.daemon.process.pid != second["pid"]
    assert sink_fence == 2  # the late write did not replace the newer attempt's
    assert zombie_said == "rejected"
    assert refusal is not None  # its heartbeat found the lease lost, or its outcome was refused
    assert taken_over_s < 2 + 0.5 + 5  # one lease, one sweep, and a replica's start-up
