"""The API served in-process: create_app + uvicorn on a thread of its own (its own event loop
and connection pool) on a free port of 127.0.0.1, against this run's database and this test's
Redis key prefix. Tests talk to it over real HTTP, sync or async."""

from __future__ import annotations

import asyncio
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest

from schedulerd.api import create_app, create_ops_app, serve_api
from schedulerd.listeners import bind
from schedulerd.config import ApiConfig, Config, RedisConfig, SecretsConfig
from schedulerd.jobs import Jobs
from schedulerd.queue import DelayQueue, RequestCounter
from schedulerd.store import Store
from schedulerd.tenants import Tenants


class ApiServer:
    def __init__(self, config: Config, database_url: str, redis_url: str, read_url: str = "") -> None:
        self.config, self.database_url, self.redis_url, self.read_url = config, database_url, redis_url, read_url
        self.sock: socket.socket = bind("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.ops_sock: socket.socket = bind("127.0.0.1", 0)  # the operator endpoints' own listener
        self.ops_url = f"http://127.0.0.1:{self.ops_sock.getsockname()[1]}"
        self.ready = threading.Event()
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="api-server", daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # surfaced by start()/stop() in the test's thread
            self.failure = exc
            self.ready.set()

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.stop_event = asyncio.Event()
        store = await Store.connect(self.database_url, min_size=1, max_size=4, read_url=self.read_url)
        queue = DelayQueue.connect(self.redis_url, self.config.redis.prefix)
        try:
            app = create_app(Jobs(store, queue, self.config), store, queue, self.config)
            ops_app = create_ops_app(store, queue, self.config)
            self.ready.set()
            await asyncio.gather(serve_api(app, self.config.api, self.stop_event, self.sock),
                                 serve_api(ops_app, self.config.api, self.stop_event, self.ops_sock))  # fmt: skip
        finally:
            await RequestCounter(queue.client, self.config.redis.prefix).delete_all()
            await queue.close()
            await store.close()

    def start(self) -> ApiServer:
        self.thread.start()
        self.ready.wait(30)
        if self.failure:
            raise self.failure
        return self

    def stop(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(30)
        if self.failure:
            raise self.failure


@pytest.fixture
def start_api(config: Config, database_url: str, redis_url: str, redis_prefix: str) -> Iterator[Callable[..., ApiServer]]:
    """Start in-process API servers (keyword arguments override [api] settings; `secrets` the
    [secrets] section); stopped after."""
    started: list[ApiServer] = []

    def start(read_url: str = "", secrets: SecretsConfig | None = None, **api: Any) -> ApiServer:
        settings = replace(config, redis=RedisConfig(prefix=redis_prefix), api=ApiConfig(**api), secrets=secrets or config.secrets)
        started.append(ApiServer(settings, database_url, redis_url, read_url).start())
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def api(start_api: Callable[..., ApiServer]) -> ApiServer:
    return start_api()


@pytest.fixture
def make_tenant(store: Store) -> Callable[..., Any]:
    """Register a tenant with a unique name; returns (name, token)."""

    async def make(prefix: str = "team") -> tuple[str, str]:
        issued = await Tenants(store).create(f"{prefix}-{uuid.uuid4().hex[:10]}")
        return issued.tenant, issued.token

    return make


@pytest.fixture
async def client(api: ApiServer, make_tenant: Callable[..., Any]) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client holding a fresh tenant's token (its name in client.tenant)."""
    tenant, token = await make_tenant()
    async with httpx.AsyncClient(base_url=api.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        http.tenant = tenant  # type: ignore[attr-defined]
        yield http
