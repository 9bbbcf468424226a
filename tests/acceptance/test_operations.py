"""A daemon as operators see it: /metrics after a few runs, /readyz once its loops tick."""

from __future__ import annotations

import re
import socket

import httpx

from tests.conftest import wait_for


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_metrics_show_start_lag_after_jobs_run_and_readyz_turns_ready(make_job, store, start_daemon) -> None:
    port, ops_port = _free_port(), _free_port()
    start_daemon("replica-1", SCHEDULERD_API_ENABLED="true", SCHEDULERD_API_PORT=str(port),
                 SCHEDULERD_OPS_ENABLED="true", SCHEDULERD_OPS_PORT=str(ops_port))  # fmt: skip
    for _ in range(3):
        await make_job("noop")
    base = f"http://127.0.0.1:{ops_port}"  # operator endpoints: their own listener

    async def lag_count() -> float:
        try:
            async with httpx.AsyncClient(base_url=base, timeout=2) as http:
                text = (await http.get("/metrics")).text
        except httpx.HTTPError:
            return 0.0
        match = re.search(r'schedulerd_start_lag_seconds_count\{task="noop"\} (\S+)', text)
        return float(match.group(1)) if match else 0.0

    assert await wait_for(lag_count, timeout_s=20, interval_s=0.3) == 3.0

    async def ready():
        async with httpx.AsyncClient(base_url=base, timeout=2) as http:
            response = await http.get("/readyz")
        return response.status_code == 200 and response.json()

    body = await wait_for(ready, timeout_s=20, interval_s=0.3)
    assert set(body["last_tick_s_ago"]) == {
        "materialiser", "dispatcher", "worker", "worker.heartbeat", "worker.finish", "sweeper", "retention", "notifier",
        "observer", "quotas",
    }  # fmt: skip
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=2) as tenants:
        assert (await tenants.get("/metrics")).status_code == 404  # the tenants' listener serves no operator endpoint
