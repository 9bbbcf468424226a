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
from schedulerd.errors import ConfigError


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # SIGTERM/SIGINT belong to the daemon, which sets `stop`


def listen(host: str, port: int, section: str = "api") -> socket.socket:
    """Bind before serving, so a taken port fails the daemon at start with a clear message."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"{section}: cannot listen on {host}:{port} ({exc.strerror}); set [{section}].port or "
                          f"SCHEDULERD_{section.upper()}_PORT") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


async def serve_api(app: Any, config: ApiConfig, stop: asyncio.Event, sock: socket.socket | None = None) -> None:
    """Serve until `stop`; in-flight requests get a few seconds to finish."""
    sock = sock or listen(config.host, config.port)
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
