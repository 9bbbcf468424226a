"""Outcomes survive a misbehaving connection to Postgres (issue 15, item 1). A proxy between the
replica and Postgres cuts every connection every 2 s, or leaves the open ones half-open. Every
execution may use one attempt only (max_attempts 1), so an outcome lost to the connection, or a
lease that expires under a live worker, would show as a failed execution or a lease_expired
attempt. Neither may happen: a held outcome is heartbeated until written, a write that hangs
is abandoned after write_timeout_s and tried again on a fresh connection, and a claim whose
reply was lost is adopted by the worker that made it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from schedulerd.store import Store
from tests.fault.conftest import check, insert_workload, wait_settled
from tests.fault.proxy import Proxy

EXECUTIONS = 600
SPREAD_S = 12.0
# A 4 s lease, heartbeat each second: a write that hangs is abandoned after lease / 3, any other
# statement (the dispatcher's, the sweeper's) after 10 s, so a loop that hung recovers inside the
# test's wait.
SETTINGS = {
    "SCHEDULERD_WORKER_LEASE_S": "4", "SCHEDULERD_WORKER_HEARTBEAT_S": "1",
    "SCHEDULERD_DATABASE_STATEMENT_TIMEOUT_S": "10",
}  # fmt: skip


@pytest.fixture
async def proxy(database_url: str) -> AsyncIterator[Proxy]:
    target = urlsplit(database_url)
    proxy = await Proxy(target.hostname or "127.0.0.1", target.port or 5432).start()
    yield proxy
    await proxy.close()


def through(database_url: str, proxy: Proxy) -> str:
    parts = urlsplit(database_url)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{proxy.port}"
    return urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host))


async def _run(fleet, store: Store, database_url: str, proxy: Proxy, fault) -> tuple[dict[str, int], int, str]:
    fleet.start(1, SCHEDULERD_DATABASE_URL=through(database_url, proxy), **SETTINGS)
    await fleet.ready()
    _, first = await insert_workload(store, EXECUTIONS, start_in_s=1.0, spread_s=SPREAD_S, max_attempts=1)
    end = time.monotonic() + (first - await store.clock_now()).total_seconds() + SPREAD_S
    faults = 0
    while time.monotonic() < end:
        await asyncio.sleep(2.0)
        faults += fault()
    counts = await wait_settled(store, timeout_s=60)
    return counts, faults, fleet.logs()


@pytest.mark.timeout(60)
async def test_a_statement_on_a_half_open_connection_is_abandoned(database_url, proxy) -> None:
    """Every statement is bounded, not only the worker's: a loop's walk (a transaction of
    several round trips) or a plain pool fetch on a frozen connection raises TimeoutError after
    statement_timeout_s, the connection is closed, and the next call gets a fresh one."""
    store = await Store.connect(through(database_url, proxy), min_size=1, max_size=1, statement_timeout_s=1.0)
    try:
        for statement in (
            lambda: store.execution_dispatch_due(30.0, 100),
            lambda: store.execution_queued_overdue(60.0, 100),
            store.clock_now,
        ):
            await statement()  # the pool's one connection is open and answering
            assert proxy.freeze() >= 1
            started = time.monotonic()
            with pytest.raises(TimeoutError):
                await statement()
            assert time.monotonic() - started < 5.0
            await statement()  # on a fresh connection: the frozen one was closed, not pooled
    finally:
        proxy.cut()
        await store.close()


async def _assert_nothing_lost(store: Store, counts: dict[str, int], name: str, **figures: object) -> None:
    reclaims = await store.db.fetchval("SELECT count(*) FROM attempts WHERE outcome = 'lease_expired'")
    result = await check(store)
    print(result.line(name, by_status=counts, lease_reclaims=reclaims, **figures))
    assert counts == {"succeeded": EXECUTIONS}, counts  # none failed that was allowed to succeed
    assert reclaims == 0 and result.lost == 0


@pytest.mark.timeout(120)
async def test_connections_cut_every_two_seconds_lose_no_outcome(fleet, store, database_url, proxy) -> None:
    counts, cut, logs = await _run(fleet, store, database_url, proxy, proxy.cut)
    assert cut > 0 and proxy.cuts >= 5
    await _assert_nothing_lost(
        store, counts, "Postgres connections cut every 2 s (lease 4 s)", connections_cut=cut,
        finish_retries=logs.count("worker.finish.retrying"), claim_retries=logs.count("worker.claim.retrying"),
    )  # fmt: skip


@pytest.mark.timeout(120)
async def test_half_open_connections_lose_no_outcome(fleet, store, database_url, proxy) -> None:
    counts, frozen, logs = await _run(fleet, store, database_url, proxy, proxy.freeze)
    assert frozen > 0
    await _assert_nothing_lost(
        store, counts, "open Postgres connections made half-open every 2 s (lease 4 s)", connections_frozen=frozen,
        finish_retries=logs.count("worker.finish.retrying"), heartbeat_retries=logs.count("worker.heartbeat.retrying"),
    )  # fmt: skip
