"""The shape every loop shares: run a pass, wait, repeat until stop; ride out transient
Postgres/Redis errors with capped, jittered backoff, so a restarting server never crash-loops
the fleet. Anything else propagates and stops the process (fail fast; systemd restarts it).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from time import monotonic
from typing import Any

import structlog

from schedulerd import health
from schedulerd.transient import TRANSIENT_ERRORS

log = structlog.get_logger("schedulerd.loops")

BACKOFF_MAX_S = 10.0
HEALTHY_RUN_S = 60.0  # ran this long without an error: the next one is a new outage


async def retrying(name: str, loop: Callable[[asyncio.Event], Awaitable[None]], stop: asyncio.Event) -> None:
    """Run `loop(stop)` until it returns; restart it after a transient error, with backoff."""
    failures = 0
    while True:
        started = monotonic()
        try:
            await loop(stop)
            return
        except TRANSIENT_ERRORS as exc:
            # A loop that ran a good while since its last failure starts the backoff afresh.
            failures = 1 if monotonic() - started > HEALTHY_RUN_S else failures + 1
            delay_s = random.uniform(0.5, 1.0) * min(BACKOFF_MAX_S, 0.2 * 2**failures)
            log.warning(f"{name}.error", error=f"{type(exc).__name__}: {exc}", retry_in_s=round(delay_s, 2))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay_s)
            if stop.is_set():
                return


async def every(
    name: str,
    interval_s: float,
    tick: Callable[[], Awaitable[Any]],
    stop: asyncio.Event,
    wake: asyncio.Event | None = None,
) -> None:
    """Call `tick` every interval_s (or at once when `wake` is set) until stop, riding out errors."""
    wake = wake or asyncio.Event()

    async def loop(stop: asyncio.Event) -> None:
        while not stop.is_set():
            wake.clear()
            await tick()
            health.tick(name)
            waiters = [asyncio.create_task(stop.wait()), asyncio.create_task(wake.wait())]
            await asyncio.wait(waiters, timeout=interval_s, return_when=asyncio.FIRST_COMPLETED)
            for waiter in waiters:
                waiter.cancel()

    await retrying(name, loop, stop)
