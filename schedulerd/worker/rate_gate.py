"""The worker's side of the fleet-wide rate limits: which buckets each claim needs (core/rate.py),
one script call per batch that needs any (queue/token_buckets.py), and the claims it refused with
the wait until their token is due. While Redis cannot answer each process counts alone: the fleet
then allows up to one limit per replica, and nothing waits for Redis to come back."""

from __future__ import annotations

import time

import structlog

from schedulerd.core import rate
from schedulerd.models import Claim
from schedulerd.queue import REDIS_ERRORS, TokenBuckets
from schedulerd.tasks import registry

log = structlog.get_logger("schedulerd.worker")


class RateGate:
    def __init__(self, buckets: TokenBuckets, limits: rate.RateLimits) -> None:
        self.buckets = buckets
        self.limits = limits
        # Buckets ((tat, booked), ms on this host's clock) used while Redis cannot be asked: the
        # limit then holds per process, so the fleet allows at most one limit per replica.
        self.local_buckets: dict[str, tuple[float, float]] = {}

    def buckets_of(self, claim: Claim) -> tuple[rate.Bucket, ...]:
        """Every bucket `claim` must take a token from to start (all of them, or it waits)."""
        host = registry.target_host(claim.task, claim.params) if self.limits.hosts else None
        configured = self.limits.buckets(claim.task, host) if self.limits.enabled else ()
        if claim.rate_key is None or claim.rate_limit is None or claim.rate_window_s is None:
            return configured
        # A job's own limit: its key belongs to its tenant, as a concurrency key does.
        own = rate.bucket("key", f"{claim.tenant}/{claim.rate_key}", rate.Rate(claim.rate_limit, claim.rate_window_s))
        return (*configured, own)

    async def sort(self, claims: list[Claim], redis_up: bool = True) -> tuple[list[Claim], list[tuple[Claim, float]]]:
        """(claims to run, claims to park with their delay in s). No call at all when no claim of
        the batch is limited; a claim refused by one of its buckets takes no token from the others."""
        needs = [(claim, found) for claim in claims if (found := self.buckets_of(claim))]
        if not needs:
            return claims, []
        requests = [found for _, found in needs]
        answers = None
        if redis_up:
            try:
                now_ms, answers = await self.buckets.take(requests)
            except REDIS_ERRORS as exc:  # unreachable, failing over, out of memory: never hold the batch for it
                log.warning("rate.redis_failed", count=len(requests), error=f"{type(exc).__name__}: {exc}", counted="per process")
        if answers is None:
            now_ms = int(time.time() * 1000)
            answers = rate.take(self.local_buckets, requests, now_ms)
        refused = {
            claim.id: rate.park_delay_s(at_ms, now_ms) for (claim, _), (granted, at_ms) in zip(needs, answers) if not granted
        }
        if not refused:
            return claims, []
        return [c for c in claims if c.id not in refused], [(c, refused[c.id]) for c in claims if c.id in refused]
