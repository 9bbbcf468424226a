"""The host's clock, injectable: what a replica believes the time is.

schedulerd judges due times and leases by the servers' clocks, never by this one: a popped id's
due-ness by Redis TIME end to end (the pop script, then the claim at the pop's instant), the
Redis-down fallback's by Postgres's, and leases by Postgres clock_timestamp() (every claim,
heartbeat and reclaim). The host
clock is read only where no server is at hand: validating a job's timestamps before connecting,
and reporting how far this host drifts from Postgres. Tests skew it with
SCHEDULERD_CLOCK_OFFSET_S (seconds, may be negative) to prove that a replica with a wrong clock
neither starts work early nor expires leases early.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Protocol

import structlog

log = structlog.get_logger("schedulerd.clock")

OFFSET_ENV = "SCHEDULERD_CLOCK_OFFSET_S"
SKEW_WARN_S = 1.0  # a host clock further than this from Postgres's is logged as a warning


class Clock(Protocol):
    def now(self) -> datetime:
        """Aware UTC now."""
        ...


class SystemClock:
    """The host clock, shifted by offset_s (default: $SCHEDULERD_CLOCK_OFFSET_S, else 0)."""

    def __init__(self, offset_s: float | None = None) -> None:
        if offset_s is None:
            offset_s = float(os.environ.get(OFFSET_ENV) or 0.0)
        self.offset = timedelta(seconds=offset_s)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset


def system() -> Clock:
    return SystemClock()


async def report_skew(store: object, clock: Clock | None = None) -> float | None:
    """Compare this host's clock with Postgres's (the one that judges leases) and log it; a skew
    above SKEW_WARN_S is a warning, as it would shift anything a client computes from it.
    Returns the skew in seconds, or None when Postgres did not answer (nothing depends on it)."""
    clock = clock or system()
    before = clock.now()
    try:
        server = await store.clock_now()  # type: ignore[attr-defined]
    except Exception as exc:  # informational only: never stop a daemon for it
        log.debug("clock.skew_unknown", error=f"{type(exc).__name__}: {exc}")
        return None
    after = clock.now()
    skew_s = ((before + (after - before) / 2) - server).total_seconds()
    (log.warning if abs(skew_s) > SKEW_WARN_S else log.debug)("clock.skew", skew_s=round(skew_s, 3))
    return skew_s


class ServerClock:
    """Postgres's clock, read through this host's: the offset between the two is measured at
    first use and again every `refresh_s`, so producers date "now" and "in 30 s" by the clock
    that judges due times without a round trip per job. Error: half a round trip plus drift."""

    def __init__(self, store: object, refresh_s: float = 30.0, host: Clock | None = None) -> None:
        self.store = store
        self.refresh_s = refresh_s
        self.host = host or SystemClock(0.0)
        self._offset = timedelta(0)
        self._measured_at: datetime | None = None  # host time of the last measurement

    async def now(self) -> datetime:
        host_now = self.host.now()
        if self._measured_at is None or (host_now - self._measured_at).total_seconds() > self.refresh_s:
            before = self.host.now()
            server = await self.store.clock_now()  # type: ignore[attr-defined]
            after = self.host.now()
            self._offset = server - (before + (after - before) / 2)
            self._measured_at = host_now = after
        return host_now + self._offset
