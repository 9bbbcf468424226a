"""Dispatcher: move pending executions that fall inside the dispatch horizon into the delay queue.

The UPDATE to `queued` commits before the ZADD; if the process dies in between, the sweeper
finds the queued row missing from Redis and adds it. Several dispatchers share the work
(SKIP LOCKED), and a duplicate ZADD is harmless because only the claim confers ownership.
"""

from __future__ import annotations

import asyncio

import structlog

from schedulerd.config import DispatcherConfig
from schedulerd.loops import every
from schedulerd.queue import DelayQueue
from schedulerd.store import Store

log = structlog.get_logger("schedulerd.dispatcher")


class Dispatcher:
    def __init__(self, store: Store, queue: DelayQueue, config: DispatcherConfig) -> None:
        self.store = store
        self.queue = queue
        self.config = config

    async def run_once(self) -> int:
        """Dispatch everything due inside the horizon, in batches; returns how many."""
        total = 0
        while True:
            entries = await self.store.execution_dispatch_due(self.config.horizon_s, self.config.batch_size)
            if entries:
                await self.queue.add(entries, only_new=True)
                total += len(entries)
            if len(entries) < self.config.batch_size:
                break
        if total:
            log.debug("dispatcher.dispatched", count=total)
        return total

    async def run(self, stop: asyncio.Event) -> None:
        await every("dispatcher", self.config.interval_s, self.run_once, stop)
