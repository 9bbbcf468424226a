"""Shared fixtures: a database of this run's own on a real Postgres, a Redis key prefix per test.

Servers: SCHEDULERD_TEST_DATABASE_URL / SCHEDULERD_TEST_REDIS_URL when set; else the local
servers on 127.0.0.1:5432 and :6379 when they answer; else the embedded ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any
from pathlib import Path

import asyncpg
import pytest
import redis

from schedulerd.config import Config, DispatcherConfig, JobsConfig, SweeperConfig, WorkerConfig
from schedulerd.errors import ValidationError
from schedulerd.intake import Debounce, Intake, Item, Refused
from schedulerd.jobs import Jobs, JobSpec
from schedulerd.log import configure as configure_logging
from schedulerd.models import Execution, Job
from schedulerd.queue import DelayQueue
from schedulerd.store import Store, migrate
from schedulerd.tasks import loader

REPO_ROOT = Path(__file__).resolve().parent.parent
configure_logging("warning", "console")  # keep test output to what the tests print
# Daemons the tests start (and the benchmark's replicas) would all bind [api].port 8080: they
# run without the API unless a test turns it on with a port of its own.
os.environ.setdefault("SCHEDULERD_API_ENABLED", "false")
os.environ.setdefault("SCHEDULERD_OPS_ENABLED", "false")  # daemons started together would share [ops].port

MakeJob = Callable[..., Awaitable[tuple[Job, Execution]]]


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(admin database URL, Redis URL) of the servers this run uses (embedded.scratch_servers)."""
    from schedulerd.embedded import scratch_servers

    with scratch_servers(tmp_path_factory.mktemp("embedded")) as found:
        yield found.admin_url, found.redis_url


def _with_database(url: str, name: str) -> str:
    base, _, _ = url.rpartition("/")
    return f"{base}/{name}"


@contextlib.asynccontextmanager
async def fresh_database(admin_url: str, kind: str) -> AsyncIterator[str]:
    """A new database on admin_url's server, migrated; dropped on leaving."""
    name = f"schedulerd_{kind}_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(admin_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = _with_database(admin_url, name)
    try:
        await migrate(url)
        yield url
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@pytest.fixture(scope="session")
async def database_url(servers: tuple[str, str]) -> AsyncIterator[str]:
    """A fresh database for this test run, migrated; dropped at the end."""
    async with fresh_database(servers[0], "test") as url:
        yield url


@pytest.fixture(scope="session")
def redis_url(servers: tuple[str, str]) -> str:
    return servers[1]


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[Store]:
    """A Store on this run's database, emptied before each test (the loops scan every row)."""
    store = await Store.connect(database_url, min_size=1, max_size=8)
    await store.db.execute("TRUNCATE jobs, executions, attempts, idempotency_keys, tenant_secrets, signing_keys, notifications, "
                           "notify_jobs, notify_settings")
    yield store
    await store.close()


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """This test's key prefix. Every key under it is deleted at the end, after whatever wrote
    there (a daemon, the CLI, a queue) has stopped: those fixtures depend on this one."""
    prefix = f"schedulerd-test-{uuid.uuid4().hex[:12]}"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    try:
        for key in client.scan_iter(match=f"{{{prefix}*", count=1000):  # {prefix}:... and {prefix:shard}:...
            client.delete(key)
    finally:
        client.close()


@pytest.fixture
async def queue(redis_url: str, redis_prefix: str) -> AsyncIterator[DelayQueue]:
    queue = DelayQueue.connect(redis_url, redis_prefix)
    yield queue
    await queue.delete_all()
    await queue.close()


@pytest.fixture
def config() -> Config:
    """Settings sized for tests: short leases and sweeps, fast retries."""
    loader.load_modules([])
    return Config(
        worker=WorkerConfig(concurrency=16, batch_size=50, poll_max_s=0.05, lease_s=2.0, heartbeat_s=0.5, shutdown_grace_s=1.0),
        dispatcher=DispatcherConfig(interval_s=0.2, horizon_s=300.0),
        sweeper=SweeperConfig(interval_s=0.2, grace_s=0.5),
        jobs=JobsConfig(backoff_base_s=0.2, backoff_factor=2.0, timeout_s=5.0),
    )


async def create_job(jobs: Jobs, spec: JobSpec, debounce: Debounce | None = None) -> tuple[Job, list[Execution]]:
    """Create one job through the one create path (intake.Intake) with the store, queue and config
    of `jobs`: the job row and its first executions as recorded. Raises ValidationError naming
    the field, as every door's refusal does."""
    (result,), _ = await Intake(jobs.store, jobs.queue, jobs.config).create_many([Item(spec, debounce=debounce)], with_jobs=True)
    if isinstance(result, Refused):
        raise ValidationError(result.field, result.message, result.limit)
    assert result.job is not None
    executions = [await jobs.store.execution_get(e.id) for e in result.executions]
    return result.job, [e for e in executions if e is not None]


@pytest.fixture
def make_job(store: Store, queue: DelayQueue, config: Config) -> MakeJob:
    """Create a one-off job through the real write path (JobSpec fields as keywords); returns
    the job and its execution."""

    async def make(task: str = "noop", **overrides: Any) -> tuple[Job, Execution]:
        job, executions = await create_job(Jobs(store, queue, config), JobSpec(task=task, **overrides))
        return job, executions[0]

    return make


async def wait_for(predicate, timeout_s: float = 10.0, interval_s: float = 0.05):  # type: ignore[no-untyped-def]
    """Poll an async predicate until it returns something truthy; fail with a timeout."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        result = await predicate()
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s (last value: {result!r})")
        await asyncio.sleep(interval_s)


FAST_SETTINGS = {
    "SCHEDULERD_WORKER_LEASE_S": "2",
    "SCHEDULERD_WORKER_HEARTBEAT_S": "0.5",
    "SCHEDULERD_WORKER_POLL_MAX_S": "0.05",
    "SCHEDULERD_SWEEPER_INTERVAL_S": "0.5",
    "SCHEDULERD_SWEEPER_GRACE_S": "1",
    "SCHEDULERD_DISPATCHER_INTERVAL_S": "0.5",
    # Replicas report every 0.5 s and count as down after 1.5 s of silence, so a killed or frozen
    # one loses its leases as soon as they expire (see [sweeper].live_holder_grace_s).
    "SCHEDULERD_DAEMON_OBSERVE_INTERVAL_S": "0.5",
    "SCHEDULERD_LATE_DOWN_AFTER_S": "1.5",
    "SCHEDULERD_LOG_FORMAT": "json",
}


class Daemon:
    def __init__(self, name: str, env: dict[str, str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "schedulerd", "run"], env=env, cwd=REPO_ROOT, stdout=self._log, stderr=subprocess.STDOUT
        )

    def signal(self, signum: int) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signum)

    def stop(self) -> None:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)
        self.process.wait(timeout=10)
        self._log.close()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def start_daemon(database_url: str, redis_url: str, redis_prefix: str, tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """Start `schedulerd run` subprocesses on this test's database and key prefix."""
    started: list[Daemon] = []

    def start(name: str, **settings: str) -> Daemon:
        env = {
            **os.environ,
            **FAST_SETTINGS,
            "SCHEDULERD_CONFIG": str(REPO_ROOT / "config.toml"),
            "SCHEDULERD_DATABASE_URL": database_url,
            "SCHEDULERD_REDIS_URL": redis_url,
            "SCHEDULERD_REDIS_PREFIX": redis_prefix,
            "SCHEDULERD_DAEMON_WORKER_ID": name,
            **settings,
        }
        daemon = Daemon(name, env, tmp_path / f"{name}.log")
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.stop()
