"""Fleet-wide concurrency limits (flow_claims.py): a job's concurrency key, a task type's cap and a
tenant's quota hold across replicas; executions over a limit wait without using an attempt and
start once a slot frees, oldest first; a dead holder's slot frees when its lease is reclaimed."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from schedulerd.config import ConcurrencyConfig
from schedulerd.core.flow import Caps
from schedulerd.models import ExecutionStatus
from schedulerd.sweeper import Sweeper
from schedulerd.tasks.registry import TaskContext, task
from schedulerd.tenant_quotas import QuotaRefresh
from tests.conftest import wait_for

RUNS: list[tuple[str, float, float]] = []  # (group, start, end) of every probe handler run (monotonic s)


@task("test.flow_probe")
async def flow_probe(ctx: TaskContext, params: dict[str, Any]) -> None:
    started = time.monotonic()
    try:
        await asyncio.sleep(params.get("seconds", 0.1))
    finally:
        RUNS.append((params.get("group", ""), started, time.monotonic()))


def most_at_once(runs: Iterable[tuple[float, float]]) -> int:
    """The largest number of intervals open at one instant (an end before a start at a tie)."""
    runs = list(runs)
    edges = sorted([(s, 1) for s, _ in runs] + [(e, -1) for _, e in runs], key=lambda edge: (edge[0], edge[1]))
    open_now = peak = 0
    for _, step in edges:
        open_now += step
        peak = max(peak, open_now)
    return peak


def peaks_by_group() -> dict[str, int]:
    by_group: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    for group, start, end in RUNS:
        by_group[group].append((start, end))
    return {group: most_at_once(runs) for group, runs in by_group.items()}


async def _run_fleet(workers, sweeper, store, execution_ids, timeout_s: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    """Run the workers' and the sweeper's loops until every execution succeeded."""
    stop = asyncio.Event()
    loops = [asyncio.create_task(w.run(stop)) for w in workers] + [asyncio.create_task(sweeper.run(stop))]

    async def all_succeeded() -> bool:
        rows = [await store.execution_get(i) for i in execution_ids]
        return all(r.status == ExecutionStatus.SUCCEEDED for r in rows)

    try:
        await wait_for(all_succeeded, timeout_s=timeout_s, interval_s=0.1)
    finally:
        stop.set()
        await asyncio.gather(*loops, return_exceptions=True)


async def test_a_key_runs_at_most_its_limit_across_two_replicas(make_job, make_worker, store, queue, config) -> None:
    RUNS.clear()
    made = [
        await make_job("test.flow_probe", params={"seconds": 0.15, "group": f"k{n % 3}"},
                       concurrency_key=f"customer:{n % 3}", concurrency_limit=2)
        for n in range(24)
    ]  # fmt: skip
    workers = [make_worker("replica-a"), make_worker("replica-b")]
    await _run_fleet(workers, Sweeper(store, queue, config.sweeper), store, [e.id for _, e in made])

    assert peaks_by_group() == {"k0": 2, "k1": 2, "k2": 2}  # busy enough to reach the limit, never past it
    rows = [await store.execution_get(e.id) for _, e in made]
    assert all(r.attempt == 1 for r in rows)  # waiting used no attempt
    assert any(r.reason == "concurrency_limit" for r in rows)  # some waited for a slot
    histories = [await store.attempt_list(r.id) for r in rows]
    assert [[a.outcome for a in h] for h in histories] == [["succeeded"]] * len(rows)  # nothing failed or reclaimed


async def test_waiting_executions_start_oldest_first(make_job, make_worker, store, queue, config) -> None:
    RUNS.clear()
    made = [
        await make_job("test.flow_probe", params={"seconds": 0.05, "group": str(n)}, concurrency_key="one", concurrency_limit=1)
        for n in range(8)
    ]  # fmt: skip
    await _run_fleet([make_worker("replica-a")], Sweeper(store, queue, config.sweeper), store, [e.id for _, e in made])
    order = [group for group, _, _ in sorted(RUNS, key=lambda run: run[1])]
    assert order == [str(n) for n in range(8)]  # created (and due) in this order
    assert most_at_once((s, e) for _, s, e in RUNS) == 1


async def test_a_task_cap_holds_fleet_wide(make_job, make_worker, store, queue, config) -> None:
    RUNS.clear()
    made = [(await make_job("test.flow_probe", params={"seconds": 0.1, "group": "all"}))[1] for _ in range(20)]
    caps = Caps(tasks={"test.flow_probe": 3})
    workers = [make_worker("replica-a", caps=caps), make_worker("replica-b", caps=caps)]
    sweeper = Sweeper(store, queue, config.sweeper, concurrency=ConcurrencyConfig(tasks={"test.flow_probe": 3}))
    await _run_fleet(workers, sweeper, store, [e.id for e in made])
    assert peaks_by_group() == {"all": 3}


async def test_a_full_tenant_quota_does_not_hold_back_another_tenant(make_job, make_worker, store, queue, config) -> None:
    RUNS.clear()
    busy = [(await make_job("test.flow_probe", tenant="busy", params={"seconds": 0.5, "group": "busy"}))[1] for _ in range(10)]
    quiet = [(await make_job("test.flow_probe", tenant="quiet", params={"seconds": 0.01, "group": "quiet"}))[1] for _ in range(5)]
    caps = Caps(tenants={"busy": 2})
    workers = [make_worker("replica-a", caps=caps), make_worker("replica-b", caps=caps)]
    sweeper = Sweeper(store, queue, config.sweeper, concurrency=ConcurrencyConfig(tenants={"busy": 2}))
    started = time.monotonic()
    stop = asyncio.Event()
    loops = [asyncio.create_task(w.run(stop)) for w in workers] + [asyncio.create_task(sweeper.run(stop))]
    try:
        async def quiet_done() -> bool:
            return all([(await store.execution_get(e.id)).status == ExecutionStatus.SUCCEEDED for e in quiet])

        await wait_for(quiet_done, timeout_s=10)
        quiet_s = time.monotonic() - started
        await wait_for(lambda: _all_done(store, busy), timeout_s=30, interval_s=0.1)
    finally:
        stop.set()
        await asyncio.gather(*loops, return_exceptions=True)
    assert quiet_s < 1.5  # the busy tenant's 10 x 0.5 s at 2 at once take 2.5 s
    assert peaks_by_group()["busy"] == 2


async def _all_done(store, executions) -> bool:  # type: ignore[no-untyped-def]
    return all([(await store.execution_get(e.id)).status == ExecutionStatus.SUCCEEDED for e in executions])


async def test_a_dead_holders_slot_frees_when_its_lease_is_reclaimed(make_job, make_worker, store, queue, config) -> None:
    RUNS.clear()
    made = [
        (await make_job("test.flow_probe", params={"seconds": 0.05, "group": "k"}, concurrency_key="k", concurrency_limit=1))[1]
        for _ in range(3)
    ]  # fmt: skip
    dead = make_worker("replica-dead")
    assert await dead.run_once() == 1  # holds the one slot, then "dies": no heartbeat, no finish
    for running in dead.running.values():
        running.task.cancel()  # type: ignore[union-attr]
    live = make_worker("replica-live")
    await live.run_once()
    statuses = [(await store.execution_get(e.id)).status for e in made]
    assert statuses.count(ExecutionStatus.RUNNING) == 1
    sweeper = Sweeper(store, queue, replace(config.sweeper, live_holder_grace_s=0.0))
    await _run_fleet([live], sweeper, store, [e.id for e in made], timeout_s=20)
    rows = [await store.execution_get(e.id) for e in made]
    assert sorted(r.attempt for r in rows) == [1, 1, 2]  # the dead holder's attempt was charged, no other


async def test_pausing_a_job_cancels_its_waiting_execution(make_job, make_worker, store, queue, config) -> None:
    from schedulerd.jobs import Jobs

    _, holder = await make_job("test.flow_probe", params={"seconds": 0.5}, concurrency_key="p", concurrency_limit=1)
    waiter_job, waiter = await make_job("test.flow_probe", params={"seconds": 0.01}, concurrency_key="p", concurrency_limit=1)
    worker = make_worker("replica-a")
    await worker.run_once()
    assert (await store.execution_get(waiter.id)).reason == "concurrency_limit"
    await Jobs(store, queue, config).pause(waiter_job.id)
    assert (await store.execution_get(waiter.id)).status == ExecutionStatus.CANCELLED
    await _run_fleet([worker], Sweeper(store, queue, config.sweeper), store, [holder.id], timeout_s=20)
    assert (await store.execution_get(waiter.id)).status == ExecutionStatus.CANCELLED  # the holder's release left it


async def test_an_edit_that_removes_the_key_lets_a_waiting_execution_start(make_job, make_worker, store, queue, config) -> None:
    from schedulerd.jobs import Jobs

    _, holder = await make_job("test.flow_probe", params={"seconds": 1.5}, concurrency_key="e", concurrency_limit=1)
    waiter_job, waiter = await make_job("test.flow_probe", params={"seconds": 0.01}, concurrency_key="e", concurrency_limit=1)
    worker = make_worker("replica-a")
    await worker.run_once()
    assert (await store.execution_get(waiter.id)).status == ExecutionStatus.PENDING
    edited = await Jobs(store, queue, config).update(waiter_job.id, {"concurrency_key": None})
    assert edited.job.concurrency_key is None and edited.job.concurrency_limit is None
    started = time.monotonic()
    await _run_fleet([worker], Sweeper(store, queue, config.sweeper), store, [waiter.id], timeout_s=10)
    assert time.monotonic() - started < 1.2  # it did not wait for the holder's 1.5 s


async def test_a_guarded_jobs_occurrence_waits_for_its_keys_slot_too(make_job, make_worker, store, queue, config) -> None:
    _, holder = await make_job("test.flow_probe", params={"seconds": 0.4}, concurrency_key="g", concurrency_limit=1)
    _, guarded = await make_job("test.flow_probe", params={"seconds": 0.01}, overlap="skip", concurrency_key="g", concurrency_limit=1)
    worker = make_worker("replica-a")
    await worker.run_once()
    rows = [await store.execution_get(holder.id), await store.execution_get(guarded.id)]
    # One popped batch, judged by two claims (the overlap one, then the limited one): one slot, and
    # it goes to the one due first (the unguarded holder), although the guarded claim judges first.
    assert [(r.status, r.reason, r.attempt) for r in rows] == [
        (ExecutionStatus.RUNNING, None, 1), (ExecutionStatus.PENDING, "concurrency_limit", 0)]
    await _run_fleet([worker], Sweeper(store, queue, config.sweeper), store, [holder.id, guarded.id], timeout_s=20)
    assert [(await store.execution_get(e.id)).attempt for e in (holder, guarded)] == [1, 1]


async def test_a_tenant_quota_set_at_runtime_holds_on_every_replica_and_clears(make_job, make_worker, store, queue, config) -> None:
    RUNS.clear()
    concurrency = ConcurrencyConfig(tenants={"runtime-quota": 5})  # config's quota; the runtime one replaces it
    workers = [make_worker("replica-a", caps=concurrency.caps), make_worker("replica-b", caps=concurrency.caps)]
    sweeper = Sweeper(store, queue, config.sweeper, concurrency=concurrency)
    refresh = QuotaRefresh(store, concurrency, [*workers, sweeper])
    await store.tenant_quota_set("runtime-quota", 1)
    try:
        assert (await refresh.run_once()).tenant_limit("runtime-quota") == 1
        assert all(w.caps.tenant_limit("runtime-quota") == 1 for w in workers) and sweeper.caps.tenant_limit("runtime-quota") == 1
        made = [
            (await make_job("test.flow_probe", tenant="runtime-quota", params={"seconds": 0.05, "group": "q"}))[1]
            for _ in range(8)
        ]  # fmt: skip
        await _run_fleet(workers, sweeper, store, [e.id for e in made])
        assert peaks_by_group() == {"q": 1}  # not config's 5
        rows = [await store.execution_get(e.id) for e in made]
        assert all(r.attempt == 1 for r in rows) and any(r.reason == "concurrency_limit" for r in rows)
    finally:
        cleared = await store.tenant_quota_clear("runtime-quota")
    assert cleared is not None and cleared.in_flight == 1
    assert (await refresh.run_once()).tenant_limit("runtime-quota") == 5  # config's again, on every holder
    assert all(w.caps.tenant_limit("runtime-quota") == 5 for w in workers)
    assert await store.tenant_quota_clear("runtime-quota") is None
