"""Daemons as real subprocesses, killed and frozen by the tests; each test cleans up its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

FAST_SETTINGS = {
    "SCHEDULERD_WORKER_LEASE_S": "2",
    "SCHEDULERD_WORKER_HEARTBEAT_S": "0.5",
    "SCHEDULERD_WORKER_POLL_MAX_S": "0.05",
    "SCHEDULERD_SWEEPER_INTERVAL_S": "0.5",
    "SCHEDULERD_SWEEPER_GRACE_S": "1",
    "SCHEDULERD_DISPATCHER_INTERVAL_S": "0.5",
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
