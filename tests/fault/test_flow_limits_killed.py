"""Flow control under kills, judged from the handlers' own start and end records (witness_events):

- 2,000 executions over 20 concurrency keys with limit 2, three replicas, one SIGKILLed every
  few seconds: never more than 2 running per key at any instant (a killed holder counts as
  running until its lease expired and the sweeper reclaimed it), every execution succeeded, and
  no attempt was charged for waiting (every attempt but the succeeded one is a killed holder's);
- a quiet tenant's start lag beside a tenant whose in-flight quota is full;
- a rate limit shared by three replicas holds within one window.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import random
from datetime import datetime, timedelta

import pytest

from tests.fault.conftest import WITNESS, insert_workload, wait_settled

SEED = int(os.environ.get("SCHEDULERD_FAULT_SEED", "26"))
KEYS, LIMIT = 20, 2


async def _intervals(store, tenant: str, kills: list[datetime]) -> list[tuple[str, datetime, datetime, bool]]:  # type: ignore[no-untyped-def]
    """(concurrency key, start, end, killed) of every handler run: from its start event to its
    applied or rejected event; a run with neither was killed, and ends at the first kill after it."""
    rows = await store.db.fetch(
        """SELECT j.concurrency_key AS key, s.at AS started, min(d.at) AS ended
           FROM witness_events s JOIN executions e ON e.id = s.execution_id JOIN jobs j ON j.id = e.job_id
           LEFT JOIN witness_events d ON d.execution_id = s.execution_id AND d.fence = s.fence AND d.event <> 'start'
           WHERE s.event = 'start' AND e.tenant = $1
           GROUP BY j.concurrency_key, s.execution_id, s.fence, s.at""",
        tenant,
    )
    runs = []
    for r in rows:
        if r["ended"] is not None:
            runs.append((r["key"], r["started"], r["ended"], False))
        else:
            killed_at = min((k for k in kills if k >= r["started"]), default=None)
            assert killed_at is not None, f"a run that neither ended nor was killed: {dict(r)}"
            runs.append((r["key"], r["started"], killed_at, True))
    return runs


def _peak(runs: list[tuple[datetime, datetime]]) -> int:
    edges = sorted([(s, 1) for s, _ in runs] + [(e, -1) for _, e in runs])
    peak = now = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


@pytest.mark.timeout(240)
async def test_keys_hold_their_limit_while_replicas_are_killed(witness, fleet) -> None:
    store = witness
    rng = random.Random(SEED)
    fleet.start(3, **WITNESS)
    await fleet.ready()
    ids, _ = await insert_workload(store, 2000, start_in_s=2.0, spread_s=10.0, task="witness.record",
                                   params={"sleep_s": 0.2}, max_attempts=5)  # fmt: skip
    await store.db.execute(
        """UPDATE jobs j SET concurrency_key = 'customer:' || (abs(hashtext(j.id::text)) % $1), concurrency_limit = $2
           WHERE j.tenant = 'fault'""",
        KEYS, LIMIT,
    )  # fmt: skip
    kills: list[datetime] = []
    killed: set[str] = set()  # worker ids of the processes killed
    await asyncio.sleep(3)
    while True:
        left = await store.db.fetchval("SELECT count(*) FROM executions WHERE tenant = 'fault' AND status <> 'succeeded'")
        if left < 200 or len(kills) >= 12:
            break
        slot = rng.randint(1, 3)
        killed.add(f"replica-{slot}.{fleet.replicas[slot].generation}")
        fleet.kill(slot)
        kills.append(await store.clock_now())
        await asyncio.sleep(1.0)  # systemd's RestartSec
        fleet.restart(slot)
        await asyncio.sleep(rng.uniform(2, 4))
    counts = await wait_settled(store, timeout_s=120)
    assert counts == {"succeeded": 2000}, counts

    runs = await _intervals(store, "fault", kills)
    by_key: dict[str, list[tuple[datetime, datetime]]] = collections.defaultdict(list)
    for key, started, ended, _ in runs:
        by_key[key].append((started, ended))
    peaks = {key: _peak(r) for key, r in by_key.items()}
    killed_runs = sum(1 for *_, killed in runs if killed)
    # Attempts other than the succeeded one: each must be a killed holder's (its lease expired).
    attempts = await store.db.fetch(
        "SELECT a.outcome, a.worker FROM attempt_history a JOIN executions e ON e.id = a.execution_id WHERE e.tenant = 'fault'"
    )
    outcomes = collections.Counter(r["outcome"] for r in attempts)
    waited = await store.db.fetchval("SELECT count(*) FROM executions WHERE tenant = 'fault' AND reason = 'concurrency_limit'")
    print("\n[fault] concurrency keys under SIGKILL: " + json.dumps({
        "executions": len(ids), "keys": KEYS, "limit": LIMIT, "kills": len(kills), "killed_runs": killed_runs,
        "peak_per_key": max(peaks.values()), "keys_at_limit": sum(1 for p in peaks.values() if p == LIMIT),
        "over_limit_keys": sum(1 for p in peaks.values() if p > LIMIT), "attempt_outcomes": dict(outcomes),
        "waited_for_a_slot": waited,
    }))  # fmt: skip
    assert len(by_key) == KEYS and max(peaks.values()) <= LIMIT, peaks
    assert sum(1 for p in peaks.values() if p == LIMIT) >= KEYS // 2  # loaded enough for the limit to matter
    assert waited > 0
    assert set(outcomes) <= {"succeeded", "lease_expired"}, outcomes
    assert outcomes["succeeded"] == 2000
    # Killed mid-run, claimed just before a kill, or ended with its outcome not yet written (more
    # of those the slower the box): never a live replica's.
    assert {r["worker"] for r in attempts if r["outcome"] == "lease_expired"} <= killed, killed
    assert len(kills) >= 3


@pytest.mark.timeout(180)
async def test_a_quiet_tenant_beside_a_full_quota(witness, fleet) -> None:
    store = witness
    fleet.start(3, **WITNESS, SCHEDULERD_CONCURRENCY_TENANTS=json.dumps({"busy": 4}))
    await fleet.ready()
    await insert_workload(store, 3000, start_in_s=2.0, spread_s=0.0, task="witness.record", params={"sleep_s": 0.2},
                          tenant="busy")  # fmt: skip
    await insert_workload(store, 200, start_in_s=4.0, spread_s=10.0, task="noop", tenant="quiet")
    await wait_settled(store, timeout_s=60, tenant="quiet")
    lag = await store.db.fetchrow(
        """SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM first_started_at - scheduled_for)) AS p99,
                  max(extract(epoch FROM first_started_at - scheduled_for)) AS max
           FROM executions WHERE tenant = 'quiet'"""
    )
    busy = await store.db.fetch(
        "SELECT s.at AS started, min(d.at) AS ended FROM witness_events s JOIN executions e ON e.id = s.execution_id "
        "LEFT JOIN witness_events d ON d.execution_id = s.execution_id AND d.fence = s.fence AND d.event <> 'start' "
        "WHERE s.event = 'start' AND e.tenant = 'busy' GROUP BY s.execution_id, s.fence, s.at"
    )
    finished = [(r["started"], r["ended"]) for r in busy if r["ended"] is not None]
    print("\n[fault] quiet tenant beside a full quota: " + json.dumps({
        "quiet_p99_lag_ms": round(float(lag["p99"]) * 1000, 1), "quiet_max_lag_ms": round(float(lag["max"]) * 1000, 1),
        "busy_started": len(busy), "busy_peak": _peak(finished),
    }))  # fmt: skip
    assert _peak(finished) <= 4
    # Held back behind the busy tenant, the quiet one would wait for its backlog (3,000 x 0.2 s at 4
    # at once: minutes). The figure printed above is the fairness measurement (issue bar: 16 ms;
    # 13-29 ms on a 2-core box, varying run to run with the machine's load): a target for the
    # benchmarks, so the test asserts only what separates fair from starved.
    assert float(lag["p99"]) < 0.1, lag


@pytest.mark.timeout(120)
async def test_a_rate_limit_holds_across_three_replicas(witness, fleet) -> None:
    store = witness
    rate, window_s, count = 20, 1.0, 160
    fleet.start(3, **WITNESS, SCHEDULERD_RATE_LIMITS_TASKS=json.dumps({"witness.record": f"{rate}/1s"}))
    await fleet.ready()
    await insert_workload(store, count, start_in_s=2.0, spread_s=0.0, task="witness.record", params={"sleep_s": 0.01})
    counts = await wait_settled(store, timeout_s=60)
    assert counts == {"succeeded": count}, counts
    starts = sorted(r["at"] for r in await store.db.fetch("SELECT at FROM witness_events WHERE event = 'start'"))
    window = timedelta(seconds=window_s)
    busiest = max(sum(1 for t in starts[i:] if t < s + window) for i, s in enumerate(starts))
    span_s = (starts[-1] - starts[0]).total_seconds()
    attempts = await store.db.fetchval("SELECT max(attempt) FROM executions WHERE tenant = 'fault'")
    print("\n[fault] rate limit across 3 replicas: " + json.dumps(
        {"limit": f"{rate}/1s", "starts": len(starts), "busiest_window": busiest, "span_s": round(span_s, 2)}
    ))  # fmt: skip
    # A full bucket's burst (rate) plus what refills within the window (rate): never more.
    assert busiest <= 2 * rate, busiest
    assert span_s >= (count - rate) / rate * 0.95, span_s  # the rest came at the refill rate, not faster
    assert attempts == 1  # waiting for a token used no attempt
