"""Migrations at start: what is pending is read without yoyo, and yoyo (with its psycopg driver)
is loaded only to apply something, so a replica starting on a current schema never holds them."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid

import asyncpg

from schedulerd.store import migrate, migrations_pending
from schedulerd.store.store import MIGRATIONS_DIR

PROBE = """
import asyncio, sys
from schedulerd.store import migrate
applied = asyncio.run(migrate(sys.argv[1]))
print(applied, "yoyo" in sys.modules, "psycopg" in sys.modules)
"""


async def test_pending_migrations_are_listed_in_order_then_none_once_applied(servers: tuple[str, str]) -> None:
    admin_url = servers[0]
    name = f"schedulerd_migrations_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(admin_url)
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = f"{admin_url.rpartition('/')[0]}/{name}"
    try:
        every = sorted(p.stem for p in MIGRATIONS_DIR.glob("*.sql"))
        assert await migrations_pending(url) == every and every[0] == "0001_initial"
        assert await migrate(url) == len(every)
        assert await migrations_pending(url) == []
        probe = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-c", PROBE, url], capture_output=True, text=True, check=True, timeout=60
        )  # fmt: skip
        assert probe.stdout.split() == ["0", "False", "False"]  # nothing pending: neither module was loaded
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()
