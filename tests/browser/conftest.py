"""Debian's Chromium, driven by Playwright (the project installs it; tests never download a browser)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.api.test_daemon_api import cli, free_port
from tests.conftest import wait_for

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


@pytest.fixture
def chromium() -> str:
    if not os.path.exists(CHROMIUM):
        message = f"{CHROMIUM} is missing: scripts/install installs Debian's chromium when run as root"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    return CHROMIUM


@dataclass(frozen=True)
class Served:
    url: str  # http://127.0.0.1:<port>, no trailing slash
    token: str
    tenant: str
    ops_url: str  # the daemon's [ops] listener, same form


@pytest.fixture
def serve_dashboard(database_url: str, redis_url: str, start_daemon: Callable[..., Any]) -> Callable[..., Awaitable[Served]]:
    """Start a daemon with its API and [ops] listener on free ports (and `settings`, SCHEDULERD_*
    variables), create a tenant `<prefix>-<port>` and wait until its token is accepted."""

    async def serve(name: str, tenant_prefix: str, **settings: str) -> Served:
        port, ops_port = free_port(), free_port()
        start_daemon(name, SCHEDULERD_API_ENABLED="true", SCHEDULERD_API_PORT=str(port),
                     SCHEDULERD_OPS_ENABLED="true", SCHEDULERD_OPS_PORT=str(ops_port), **settings)  # fmt: skip
        tenant = f"{tenant_prefix}-{port}"
        token = cli(database_url, redis_url, "tenant", "create", tenant).stdout.splitlines()[-1]
        url = f"http://127.0.0.1:{port}"

        async def up() -> bool:
            try:
                async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=1) as http:
                    return (await http.get(url + "/v1/me")).status_code == 200
            except httpx.TransportError:
                return False

        await wait_for(up, timeout_s=30, interval_s=0.2)
        return Served(url, token, tenant, f"http://127.0.0.1:{ops_port}")

    return serve
