"""What a new user meets first, as subprocesses: a taken listener port is said before any slow
set-up, and a client run from an application's folder says how to find the daemon's servers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT


def _bare_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a shell that never exported a SCHEDULERD_* variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDULERD_")}
    return {**env, "SCHEDULERD_CONFIG": str(data_dir.parent / "no-config.toml"),
            "SCHEDULERD_EMBEDDED_DATA_DIR": str(data_dir), **extra}  # fmt: skip


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        yield squatter.getsockname()[1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("section", ["api", "ops"])
def test_a_taken_port_is_said_before_the_embedded_servers_start(tmp_path: Path, taken_port: int, section: str) -> None:
    data_dir = tmp_path / ".schedulerd"
    ports = {"api": str(_free_port()), "ops": str(_free_port()), section: str(taken_port)}
    env = _bare_env(data_dir, SCHEDULERD_API_PORT=ports["api"], SCHEDULERD_OPS_PORT=ports["ops"])
    run = subprocess.run([sys.executable, "-m", "schedulerd", "run"], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=30)  # fmt: skip
    assert run.returncode == 2, run
    assert f"{section}: cannot listen on 127.0.0.1:{taken_port}" in run.stderr
    assert f"SCHEDULERD_{section.upper()}_PORT" in run.stderr
    assert not data_dir.exists()  # nothing initialised, nothing migrated


def test_the_check_runs_before_anything_is_installed(tmp_path: Path, taken_port: int) -> None:
    """scripts/run calls it with the system's python from the repository, before scripts/install."""
    env = _bare_env(tmp_path / ".schedulerd", SCHEDULERD_OPS_PORT=str(taken_port), SCHEDULERD_API_PORT=str(_free_port()))
    check = subprocess.run([sys.executable, "-S", "-m", "schedulerd.listeners"], env=env, cwd=REPO_ROOT,
                           capture_output=True, text=True, timeout=30)  # fmt: skip
    assert check.returncode == 2, check
    assert f"ops: cannot listen on 127.0.0.1:{taken_port}" in check.stderr and "SCHEDULERD_OPS_PORT" in check.stderr
    env["SCHEDULERD_OPS_PORT"] = str(_free_port())
    assert subprocess.run([sys.executable, "-S", "-m", "schedulerd.listeners"], env=env, cwd=REPO_ROOT,
                          timeout=30).returncode == 0  # fmt: skip


def test_a_client_in_an_application_folder_names_the_export_lines(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    env = _bare_env(app / ".schedulerd")
    script = "import asyncio\nfrom schedulerd import Client\nasyncio.run(Client.connect())\n"
    run = subprocess.run([sys.executable, "-c", script], env=env, cwd=app, capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert f"no embedded servers run in {app / '.schedulerd'}" in run.stderr
    assert "export SCHEDULERD_DATABASE_URL=" in run.stderr and "export SCHEDULERD_REDIS_URL=" in run.stderr
