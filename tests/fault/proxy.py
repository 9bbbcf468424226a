"""A TCP proxy on loopback, run on the test's event loop, between daemons and Postgres: it can cut
every connection at once (as a restarting router or a server-side kill does) and freeze the open
ones (half-open: bytes are swallowed, nothing is ever answered and nothing is closed)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field


@dataclass
class _Link:
    client: asyncio.StreamWriter
    server: asyncio.StreamWriter
    frozen: asyncio.Event = field(default_factory=asyncio.Event)

    def abort(self) -> None:
        for writer in (self.client, self.server):
            writer.transport.abort()


class Proxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.links: list[_Link] = []
        self.cuts = 0
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[1]

    async def start(self) -> Proxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def cut(self) -> int:
        """Reset every open connection; new ones are accepted as before. Returns how many."""
        links, self.links = self.links, []
        for link in links:
            link.abort()
        self.cuts += 1
        return len(links)

    def freeze(self) -> int:
        """Make every open connection half-open: what is sent is swallowed, nothing comes back,
        nothing is closed. New connections work. Returns how many were frozen."""
        for link in self.links:
            link.frozen.set()
        return len(self.links)

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.target)
        except OSError:
            client_writer.transport.abort()
            return
        link = _Link(client_writer, server_writer)
        self.links.append(link)
        await asyncio.gather(
            self._pipe(client_reader, server_writer, link), self._pipe(server_reader, client_writer, link),
            return_exceptions=True,
        )  # fmt: skip

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                if link.frozen.is_set():
                    continue  # swallowed: the peer waits for an answer that never comes
                writer.write(data)
                await writer.drain()
        if not link.frozen.is_set():
            writer.transport.abort()
