"""SIGTERM mid-handler: the replica hands the execution back and another takes it at once."""

from __future__ import annotations

import signal
import time

from schedulerd.models import ExecutionStatus
from tests.conftest import wait_for


async def test_sigterm_hands_a_running_execution_to_another_replica(make_job, store, start_daemon) -> None:
    _, execution = await make_job("sleep", params={"seconds": 60})
    first = start_daemon("replica-1", SCHEDULERD_WORKER_SHUTDOWN_GRACE_S="0.5", SCHEDULERD_WORKER_LEASE_S="30",
                         SCHEDULERD_WORKER_HEARTBEAT_S="5")

    async def running_on(worker: str):
        row = await store.execution_get(execution.id)
        return row.status == ExecutionStatus.RUNNING and row.worker == worker and row

    await wait_for(lambda: running_on("replica-1"), timeout_s=20)
    start_daemon("replica-2", SCHEDULERD_WORKER_LEASE_S="30", SCHEDULERD_WORKER_HEARTBEAT_S="5")
    first.signal(signal.SIGTERM)
    stopped_at = time.monotonic()

    taken = await wait_for(lambda: running_on("replica-2"), timeout_s=15)
    handover_s = time.monotonic() - stopped_at
    assert first.process.wait(timeout=10) == 0  # a clean exit
    print(f"\nSIGTERM hand-over took {handover_s:.2f} s (lease 30 s never had to expire)")
    assert handover_s < 5
    assert taken.attempt == 1  # not used up by the shutdown
    (attempt,) = await store.attempt_list(execution.id)
    assert (attempt.worker, attempt.outcome) == ("replica-1", "handed_back")
