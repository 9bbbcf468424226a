"""Tenant in-flight quotas set at runtime (`schedulerd tenant quota`), over [concurrency]'s: kept
in Postgres (tenant_quotas), read by every replica each [concurrency].refresh_s and handed to its
worker and sweeper as the caps in force. A quota changed on one replica holds fleet-wide within
refresh_s; until then a replica judges by the caps it read last, and a slot is never counted
twice: the count itself is always the running rows (flow_claims.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Protocol

import structlog

from schedulerd.config import ConcurrencyConfig
from schedulerd.core.flow import Caps, with_quotas
from schedulerd.loops import every
from schedulerd.store import Store

log = structlog.get_logger("schedulerd.tenant_quotas")


class HoldsCaps(Protocol):
    caps: Caps


class QuotaRefresh:
    """The loop that keeps `holders`' caps what config and tenant_quotas say together."""

    def __init__(self, store: Store, config: ConcurrencyConfig, holders: Sequence[HoldsCaps]) -> None:
        self.store = store
        self.config = config
        self.holders = holders
        self.caps = config.caps

    async def run_once(self) -> Caps:
        """Read the runtime quotas and apply them; returns the caps now in force."""
        quotas = {q.tenant: q.in_flight for q in await self.store.tenant_quota_list()}
        caps = with_quotas(self.config.caps, quotas)
        if caps != self.caps:
            log.info("tenant_quotas.applied", quotas=quotas)
            self.caps = caps
        for holder in self.holders:
            holder.caps = caps
        return caps

    async def run(self, stop: asyncio.Event) -> None:
        await every("quotas", self.config.refresh_s, self.run_once, stop)
