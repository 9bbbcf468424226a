"""Nothing claimed is dropped on an error: when admitting a claimed batch fails (a probe taken
in Redis, a park written in Postgres), every execution of it is handed back unrun, its attempt
not used, and runs later; none waits for its lease to expire and is charged for it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import replace
from typing import Any

import pytest

from schedulerd.queue import Breakers
from schedulerd.config import BreakerConfig
from schedulerd.models import ExecutionStatus
from schedulerd.sweeper import Sweeper
from schedulerd.transient import TRANSIENT_ERRORS
from schedulerd.worker import Worker


def _fail_once(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, error: BaseException) -> list[int]:
    """Make owner.name raise `error` on its first call only; returns the list of calls made."""
    real, calls = getattr(owner, name), []

    async def once(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise error
        return await real(*args, **kwargs)

    monkeypatch.setattr(owner, name, once)
    return calls


async def _drive(worker: Worker, store: Any, sweeper: Sweeper, ids: list[Any], timeout_s: float = 15.0) -> list[Any]:
    """Pop, claim, run and finish until every execution is final, with the sweeper charging
    leases that expire; a pop that raises is retried, as the worker's loop does. Returns the rows."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(*TRANSIENT_ERRORS):
            await worker.run_once()
        await asyncio.gather(*(r.task for r in worker.running.values() if r.task is not None))
        await worker.flush_outcomes()
        await worker.heartbeat_once()
        await sweeper.run_once()
        rows = [await store.execution_get(i) for i in ids]
        if all(r.status in ("succeeded", "failed", "cancelled", "skipped") for r in rows):
            return rows
        await asyncio.sleep(0.02)
    raise AssertionError(f"not all final within {timeout_s} s: {[r.status for r in rows]}")


async def _assert_all_ran_once(store: Any, rows: list[Any]) -> None:
    assert [r.status for r in rows] == [ExecutionStatus.SUCCEEDED] * len(rows)
    assert [(r.attempt, r.fence > 1) for r in rows] == [(1, True)] * len(rows)  # claimed again, one attempt counted
    attempts = [[(a.attempt, a.outcome) for a in await store.attempt_list(r.id)] for r in rows]
    assert attempts == [[(1, "succeeded")]] * len(rows)  # nothing charged but the one run


async def test_a_park_that_fails_once_hands_the_batch_back(make_job, make_worker, store, sweeper, monkeypatch) -> None:
    """The task's limit parks two of three claimed executions; that park raises (the connection
    broke). Every one of the three goes back unrun and each then runs once, max_attempts 1."""
    executions = [(await make_job("sleep", params={"seconds": 0.05}, max_attempts=1))[1] for _ in range(3)]
    worker = make_worker("admission-worker", task_concurrency={"sleep": 1}, defer_s=0.2)
    calls = _fail_once(monkeypatch, store, "execution_park_many", ConnectionResetError("connection reset by peer"))

    await _assert_all_ran_once(store, await _drive(worker, store, sweeper, [e.id for e in executions]))
    assert len(calls) >= 2 and not worker._taken


async def test_a_probe_that_fails_once_hands_the_batch_back(make_job, store, queue, config, sweeper, monkeypatch) -> None:
    """A breaker's probe is due; taking it in Redis raises. The claimed batch goes back unrun,
    and once the probe is taken and succeeds every execution runs once, max_attempts 1."""
    executions = [(await make_job("noop", max_attempts=1))[1] for _ in range(3)]
    breakers = Breakers(queue.client, queue.prefix)
    assert await breakers.record_outcomes({"noop": (False, 3)}, 3, 0.2) == [("noop", "open")]
    await asyncio.sleep(0.3)  # open for 0.2 s: a probe is due
    worker = Worker(
        store, queue, replace(config.worker), "admission-worker", horizon_s=300,
        breaker_config=BreakerConfig(failures=3, open_s=0.2, recheck_s=0.05, probe_timeout_s=5.0),
    )  # fmt: skip
    try:
        calls = _fail_once(monkeypatch, worker.gate.breakers, "take_probe", ConnectionError("Connection reset by peer"))
        await _assert_all_ran_once(store, await _drive(worker, store, sweeper, [e.id for e in executions]))
        assert len(calls) >= 2 and not worker._taken
    finally:
        worker._threads.shutdown(wait=False, cancel_futures=True)


async def test_claims_stay_held_while_the_hand_back_fails_and_go_back_once_it_succeeds(
    make_job, make_worker, store, sweeper, monkeypatch
) -> None:
    """Postgres refuses the park and the hand-back for longer than the lease (2 s here): the
    claims are held meanwhile (the heartbeat extends their leases, so the sweeper does not
    charge them), and the first pop after Postgres answers hands them back; each runs once."""
    executions = [(await make_job("sleep", params={"seconds": 0.05}, max_attempts=1))[1] for _ in range(3)]
    worker = make_worker("admission-worker", task_concurrency={"sleep": 1}, defer_s=0.2)
    real_park = store.execution_park_many

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise ConnectionResetError("connection reset by peer")

    monkeypatch.setattr(store, "execution_park_many", broken)
    outage_ends = time.monotonic() + 3.0
    while time.monotonic() < outage_ends:
        with contextlib.suppress(*TRANSIENT_ERRORS):
            await worker.run_once()
        await worker.heartbeat_once()
        assert (await sweeper.run_once()).failed == 0
        await asyncio.sleep(0.3)
    assert [(await store.execution_get(e.id)).status for e in executions] == ["running"] * 3  # held, unrun

    monkeypatch.setattr(store, "execution_park_many", real_park)
    await _assert_all_ran_once(store, await _drive(worker, store, sweeper, [e.id for e in executions]))
