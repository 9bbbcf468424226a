"""Serve the API app with uvicorn on the caller's event loop until `stop` is set. The daemon
keeps its own signal handlers: uvicorn is told not to install any."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn

from schedulerd.config import ApiConfig
from schedulerd.listeners import bind


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # SIGTERM/SIGINT belong to the daemon, which sets `stop`


async def serve_api(app: Any, config: ApiConfig, stop: asyncio.Event, sock: socket.socket | None = None) -> None:
    """Serve until `stop`; in-flight requests get a few seconds to finish."""
    sock = sock or bind(config.host, config.port)
    server = _Server(uvicorn.Config(app, lifespan="off", log_config=None, access_log=False, ws="none",
                                    timeout_graceful_shutdown=5, server_header=False))  # fmt: skip
    serving = asyncio.create_task(server.serve(sockets=[sock]), name="api.serve")
    stopping = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait([serving, stopping], return_when=asyncio.FIRST_COMPLETED)
        server.should_exit = True
        await serving
    finally:
        stopping.cancel()
        if not serving.done():
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
