"""The README's path through real processes: `schedulerd tenant create` prints a token, the
daemon serves the API on its own event loop, a job goes in over HTTP and its execution shows up."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx

from tests.conftest import REPO_ROOT, wait_for


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cli(database_url: str, redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SCHEDULERD_CONFIG": str(REPO_ROOT / "config.toml"), "SCHEDULERD_DATABASE_URL": database_url,
           "SCHEDULERD_REDIS_URL": redis_url}  # fmt: skip
    return subprocess.run([sys.executable, "-m", "schedulerd", *args], env=env, capture_output=True, text=True, timeout=60)


def test_tenant_and_token_commands(database_url: str, redis_url: str) -> None:
    name = f"cli-{os.getpid()}-{free_port()}"
    created = cli(database_url, redis_url, "tenant", "create", name)
    assert created.returncode == 0, created.stderr
    token = created.stdout.splitlines()[-1]
    assert token.startswith("sdk_") and len(token) == 47 and f"tenant {name} created" in created.stdout
    another = cli(database_url, redis_url, "token", "create", name)
    assert another.returncode == 0 and another.stdout.splitlines()[-1] not in (token, "")
    taken = cli(database_url, redis_url, "tenant", "create", name)
    assert taken.returncode == 2 and "already exists" in taken.stderr
    assert cli(database_url, redis_url, "tenant", "create", "bad/name").returncode == 2
    missing = cli(database_url, redis_url, "token", "create", "no-such-tenant-here")
    assert missing.returncode == 1 and "not found" in missing.stderr


async def test_a_job_created_over_http_runs_in_the_daemon(
    database_url: str, redis_url: str, start_daemon: Callable[..., Any], store: Any
) -> None:
    port = free_port()
    daemon = start_daemon("api-replica", SCHEDULERD_API_ENABLED="true", SCHEDULERD_API_PORT=str(port))
    token = cli(database_url, redis_url, "tenant", "create", f"daemon-{port}").stdout.splitlines()[-1]
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}) as http:

        async def up() -> bool:
            try:
                return (await http.get("/v1/me")).status_code == 200
            except httpx.TransportError:
                return False

        await wait_for(up, timeout_s=30, interval_s=0.2)
        created = await http.post("/v1/jobs", json={"task": "log", "params": {"hello": "world"}})
        assert created.status_code == 201, created.text

        async def succeeded() -> Any:
            items = (await http.get("/v1/executions", params={"job": created.json()["job"]["id"]})).json()["items"]
            return items and items[0]["status"] == "succeeded" and items[0]

        execution = await wait_for(succeeded, timeout_s=20, interval_s=0.2)
        shown = (await http.get(f"/v1/executions/{execution['id']}")).json()
        assert [(a["outcome"], a["worker"]) for a in shown["attempts"]] == [("succeeded", "api-replica")]
        assert (await http.get("/")).text.count("/dashboard/app.js") == 1
    daemon.signal(signal.SIGTERM)  # the daemon's own handlers still own SIGTERM: a clean stop
    assert daemon.process.wait(timeout=20) == 0, daemon.log_text()[-2000:]
