"""Admission: which claimed executions start now. Behind an open breaker (BreakerGate), over a
task's concurrency limit or past the slow pool's room (core/limits.py), or over a fleet-wide rate
limit (RateGate), a claim is parked, its attempt not used. The claim comes before we know an
execution's task (Redis holds only ids), so a task at its limit is claimed and handed back:
queued again after ~defer_s, or, over a rate, when its token is due."""

from __future__ import annotations

import collections
import random

from schedulerd.config import WorkerConfig
from schedulerd.core.limits import admit
from schedulerd.models import Claim
from schedulerd.worker.breaker_gate import BreakerGate
from schedulerd.worker.parking import Parking
from schedulerd.worker.rate_gate import RateGate


class Admission:
    def __init__(
        self, config: WorkerConfig, gate: BreakerGate, parking: Parking, rng: random.Random, rates: RateGate
    ) -> None:
        self.config = config
        self.gate = gate
        self.rates = rates  # configured limits and jobs' own: a claim without either costs a lookup
        self.parking = parking
        self.rng = rng
        self.by_task: collections.Counter[str] = collections.Counter()  # running handlers per task type
        self.slow_running = 0  # of them, in the slow pool ([worker].slow_tasks)

    async def admit(self, claims: list[Claim], now_ms: int, redis_up: bool = True) -> list[Claim]:
        """The claims to start now (counted as running); the others are parked. now_ms: the
        Redis clock of the last pop, which breakers' probe instants are compared with; redis_up
        False (the worker claims from Postgres): rate limits are counted in this process alone."""
        if claims and not self.gate.closed:
            claims, held = await self.gate.sort(claims, now_ms)
            if held:
                await self.parking.park([c for c, _ in held], [d for _, d in held], "breaker_open")
        if claims and (self.config.task_concurrency or self.config.slow_tasks):
            verdicts = admit(
                [c.task for c in claims], self.by_task, self.config.task_concurrency, self.config.slow_tasks,
                self.config.slow_concurrency - self.slow_running,
            )  # fmt: skip
            deferred = [c for c, ok in zip(claims, verdicts) if not ok]
            if deferred:
                delays = [self.config.defer_s * self.rng.uniform(0.5, 1.0) for _ in deferred]
                await self.parking.park(deferred, delays, "task_limit")
            claims = [c for c, ok in zip(claims, verdicts) if ok]
        if claims:  # last: a claim parked for another reason takes no token
            claims, limited = await self.rates.sort(claims, redis_up)
            if limited:
                await self.parking.park([c for c, _ in limited], [d for _, d in limited], "rate_limited")
        for claim in claims:
            self.by_task[claim.task] += 1
            self.slow_running += claim.task in self.config.slow_tasks
        return claims

    def finished(self, claim: Claim) -> None:
        """A handler admitted here has stopped: its slot is free."""
        self.by_task[claim.task] -= 1
        self.slow_running -= claim.task in self.config.slow_tasks
