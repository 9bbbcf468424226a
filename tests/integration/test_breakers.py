"""Circuit breakers on real Redis and a local HTTP target that fails on demand: the Lua state
machine, and an outage that trips, parks, probes and closes without failing any execution."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from schedulerd.tasks import http
from schedulerd.config import BreakerConfig, HttpConfig
from schedulerd.core.breaker import parse
from schedulerd.models import ExecutionStatus
from schedulerd.queue import Breakers
from schedulerd.worker import Worker
from tests.http_target import Target, serve


@pytest.fixture
def target() -> Iterator[Target]:
    http.configure(HttpConfig(allow_hosts=("127.0.0.1:*",)))
    yield from serve()
    http.configure(HttpConfig())


async def test_state_machine_in_lua(queue) -> None:
    breakers = Breakers(queue.client, queue.prefix)
    assert await breakers.record_outcomes({"t": (False, 2)}, threshold=3, open_s=60) == []
    assert parse("t", (await breakers.states())["t"]).failures == 2
    assert await breakers.record_outcomes({"t": (True, 0)}, 3, 60) == []  # a success resets the count...
    assert await breakers.states() == {}  # ...and a healthy breaker leaves no trace
    assert await breakers.record_outcomes({"t": (False, 3)}, 3, 60) == [("t", "open")]
    got, probe_at_ms, now_ms = await breakers.take_probe("t", probe_timeout_s=5)
    assert not got and probe_at_ms - now_ms > 55_000  # still waiting
    assert await breakers.record_outcomes({"t": (False, 1)}, 3, 0.001) == []  # open stays open
    assert parse("t", (await breakers.states())["t"]).failures == 4
    await breakers.reset("t")
    assert await breakers.record_outcomes({"t": (False, 3)}, 3, 0.001) == [("t", "open")]
    await asyncio.sleep(0.01)
    got, probe_at_ms, now_ms = await breakers.take_probe("t", probe_timeout_s=5)
    assert got and parse("t", (await breakers.states())["t"]).state == "half_open"
    assert (await breakers.take_probe("t", 5))[0] is False  # one probe at a time
    assert await breakers.record_outcomes({"t": (False, 1)}, 3, 60) == [("t", "open")]  # probe failed
    assert await breakers.reset("t") and await breakers.states() == {}
    await breakers.record_outcomes({"t": (False, 3)}, 3, 0.001)
    await asyncio.sleep(0.01)
    assert (await breakers.take_probe("t", 5))[0]
    assert await breakers.record_outcomes({"t": (True, 0)}, 3, 60) == [("t", "closed")]  # probe succeeded


async def test_outage_trips_parks_probes_and_recovers_without_failures(target, store, queue, config, make_job) -> None:
    target.failing = True
    count = 300
    executions = [
        (await make_job("http", params={"url": target.url + "/hook"}, max_attempts=5, backoff_base_s=1.0))[1]
        for _ in range(count)
    ]
    worker = Worker(
        store, queue, replace(config.worker, concurrency=32, batch_size=100), "worker-b", horizon_s=300,
        breaker_config=BreakerConfig(failures=100, open_s=1.0, recheck_s=0.3, probe_timeout_s=5.0),
    )  # fmt: skip
    breakers = Breakers(queue.client, queue.prefix)
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        # The outage: the target fails every request. Wait until the breaker has opened and a
        # couple of probes have failed against it.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            states = await breakers.states()
            if "http:127.0.0.1" in states and parse("http:127.0.0.1", states["http:127.0.0.1"]).tripped:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError(f"breaker never opened; target saw {target.count()} requests")
        at_trip = target.count()
        await asyncio.sleep(2.5)  # open for a while: probes fail, everything else stays parked
        during_outage = target.count()
        rows = [await store.execution_get(e.id) for e in executions]
        assert not [r for r in rows if r.status == ExecutionStatus.FAILED]
        parked = sum(1 for r in rows if r.reason == "breaker_open")
        # 100 failures to trip it, what was in flight or already claimed when it did (a few
        # batches of 32 at most), then ~1 probe a second: not 300 executions x 5 attempts.
        assert 100 <= at_trip <= 100 + 3 * 32, at_trip
        assert during_outage - at_trip <= 32 + 6, (at_trip, during_outage)
        assert parked > 0 and worker.stats.parked > 0

        target.failing = False  # the target recovers
        healed_at = time.monotonic()

        async def statuses() -> list[str]:
            return [(await store.execution_get(e.id)).status for e in executions]

        while time.monotonic() - healed_at < 60:
            current = await statuses()
            if current.count(ExecutionStatus.SUCCEEDED) == count:
                break
            await asyncio.sleep(0.1)
        recovered_s = time.monotonic() - healed_at
    finally:
        stop.set()
        await asyncio.wait_for(running, 15)

    current = await statuses()
    print(f"\nbreaker: {at_trip} requests until it opened, {during_outage} in all during the outage reached the failing target for {count} executions "
          f"({parked} of them parked, {worker.stats.parked} parkings in all); all succeeded {recovered_s:.1f} s after it recovered")
    assert current == [ExecutionStatus.SUCCEEDED] * count  # none failed for the outage
    assert await breakers.states() == {}  # closed, and no failures left counting
    attempts = [len(await store.attempt_list(e.id)) for e in executions]
    assert max(attempts) <= 4  # parking did not burn attempts


async def test_cli_lists_and_resets_breakers(queue, database_url, redis_url, redis_prefix) -> None:
    import json
    import os
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    breakers = Breakers(queue.client, queue.prefix)
    await breakers.record_outcomes({"http:hooks.example.com": (False, 3), "report": (False, 1)}, 3, 60)
    env = {**os.environ, "SCHEDULERD_CONFIG": str(REPO_ROOT / "config.toml"), "SCHEDULERD_DATABASE_URL": database_url,
           "SCHEDULERD_REDIS_URL": redis_url, "SCHEDULERD_REDIS_PREFIX": redis_prefix}  # fmt: skip

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "schedulerd", "breakers", *args], env=env, cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=60)  # fmt: skip

    listed = await asyncio.to_thread(cli, "--json")
    assert listed.returncode == 0, listed.stderr
    by_key = {b["key"]: b for b in json.loads(listed.stdout)}
    assert by_key["http:hooks.example.com"]["state"] == "open" and by_key["http:hooks.example.com"]["host"] == "hooks.example.com"
    assert by_key["http:hooks.example.com"]["next_probe_at"] is not None
    assert by_key["report"]["state"] == "closed" and by_key["report"]["consecutive_failures"] == 1
    reset = await asyncio.to_thread(cli, "--reset", "http:hooks.example.com")
    assert reset.returncode == 0 and "closed" in reset.stdout
    assert list(await breakers.states()) == ["report"]
    missing = await asyncio.to_thread(cli, "--reset", "nothing")
    assert missing.returncode == 1 and "no breaker 'nothing'" in missing.stderr
