"""Item 7: a poison task that SIGKILLs whichever worker process runs it. Each crash counts as an
attempt (reclaimed when the lease expires), so after the attempt cap it lands in `failed`; the
replicas are restarted as systemd would, and the rest of the workload completes."""

from __future__ import annotations

import pytest

from tests.fault.conftest import WITNESS, check, insert_workload, wait_settled


@pytest.mark.timeout(120)
async def test_poison_task_fails_after_its_attempts_and_the_rest_runs(store, witness, fleet) -> None:
    fleet.start(3, **WITNESS)
    fleet.supervise(restart_after_s=0.5)
    await fleet.ready()
    # The default retry policy's first delay is up to 5 s; 2 s keeps the test short.
    await insert_workload(store, 600, start_in_s=1.0, spread_s=15.0, task="sleep", params={"seconds": 0.1}, backoff_base_s=2.0)
    (poison,), _ = await insert_workload(store, 1, start_in_s=2.0, task="witness.poison", tenant="poison", backoff_base_s=2.0)
    counts = await wait_settled(store, timeout_s=60)
    poisoned = await store.execution_get(poison)
    attempts = await store.attempt_list(poison)
    pids = await store.db.fetch("SELECT DISTINCT pid FROM witness_events WHERE execution_id = $1", poison)
    figures = await check(store)
    deaths = fleet.deaths
    print(figures.line("poison task (kills its worker) beside 600 executions", by_status=counts, poison_status=poisoned.status,
                       poison_attempts=len(attempts), replicas_killed_by_it=deaths))  # fmt: skip
    assert (poisoned.status, poisoned.attempt) == ("failed", 3)
    assert [a.outcome for a in attempts] == ["lease_expired"] * 3
    assert len(pids) == 3 and deaths == 3  # three processes died, one per attempt
    assert counts == {"succeeded": 600}
    assert figures.lost == 0 and figures.succeeded_twice == 0 and figures.overlaps == 0, figures
    # Only what was in flight beside the poison ran again: once per death it was there for (one that
    # was reclaimed onto the replica the poison killed next ran a third time).
    assert figures.max_starts <= 1 + deaths, figures
