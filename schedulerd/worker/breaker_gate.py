"""The worker's side of the circuit breakers: the states the last pop returned (the gauge follows
them), which claims may run and which wait behind an open breaker (one becomes the probe), and
this worker's outcomes folded into the shared state (queue/breaker_states.py). core/breaker.py judges."""

from __future__ import annotations

import random

import structlog

from schedulerd import metrics
from schedulerd.config import BreakerConfig
from schedulerd.core import breaker
from schedulerd.models import AttemptOutcome, Claim, Outcome
from schedulerd.queue import UNREACHABLE, Breakers
from schedulerd.tasks import registry

log = structlog.get_logger("schedulerd.worker")


class BreakerGate:
    def __init__(self, breakers: Breakers, config: BreakerConfig, rng: random.Random) -> None:
        self.breakers = breakers
        self.config = config
        self.rng = rng
        self.states: dict[str, breaker.BreakerState] = {}  # tripped or failing, as of the last pop

    @property
    def closed(self) -> bool:
        """Nothing to hold back: breakers are off, or none is tripped or counting failures."""
        return not (self.states and self.config.enabled)

    def see(self, states: dict[str, str]) -> None:
        """Keep the breakers the pop returned; the gauge follows them."""
        seen = {key: breaker.parse(key, value) for key, value in states.items()}
        for key, state in seen.items():
            metrics.BREAKER_OPEN.labels(*state.labels).set(1 if state.tripped else 0)
        for key in self.states.keys() - seen.keys():
            metrics.BREAKER_OPEN.labels(*self.states[key].labels).set(0)
        self.states = seen

    async def sort(self, claims: list[Claim], now_ms: int) -> tuple[list[Claim], list[tuple[Claim, float]]]:
        """(claims to run, claims to park with their delay in s): behind an open breaker a claim
        waits (attempt not used) until its probe instant; one claim per breaker whose wait is over
        becomes the probe."""
        run: list[Claim] = []
        parked: list[tuple[Claim, float]] = []
        for claim in claims:
            state = self.states.get(registry.breaker_key(claim.task, claim.params))
            decision = breaker.decide(state, now_ms)
            if decision == "probe" and state is not None:
                got, probe_at_ms, now_ms = await self.breakers.take_probe(state.key, self.config.probe_timeout_s)
                # Whoever got it or not, the breaker is half open now: the rest wait for the probe.
                self.states[state.key] = state = breaker.BreakerState(
                    state.key, "half_open", state.failures, state.opened_ms, probe_at_ms
                )  # fmt: skip
                if got:
                    log.info("breaker.probe", breaker=state.key, execution_id=str(claim.id))
                    run.append(claim)
                    continue
                decision = "park"
            if decision == "park" and state is not None:
                delay_s = breaker.park_delay_s(state, now_ms, self.config.recheck_s, self.config.open_s, self.rng)
                parked.append((claim, delay_s))
            else:
                run.append(claim)
        return run, parked

    async def tell(self, outcomes: list[Outcome]) -> None:
        """Fold this batch's outcomes into the shared breakers: one script call, and only when a
        failure happened or a breaker we know of is counting (a healthy fleet sends nothing)."""
        counted = [
            (registry.breaker_key(o.task, o.params or {}), o.outcome is AttemptOutcome.SUCCEEDED)
            for o in outcomes if o.breaker_counts
        ]  # fmt: skip
        if not counted or (all(ok for _, ok in counted) and not self.states):
            return
        summary = {k: v for k, v in breaker.summarise(counted).items() if v[1] > 0 or k in self.states}
        if not summary:
            return
        try:
            changed = await self.breakers.record_outcomes(summary, self.config.failures, self.config.open_s)
        except UNREACHABLE as exc:  # best effort: without Redis nothing is popped anyway
            log.warning("breaker.record_failed", error=f"{type(exc).__name__}: {exc}")
            return
        for key, state in changed:
            labels = breaker.BreakerState(key, state, 0, 0, 0).labels
            metrics.BREAKER_TRANSITIONS.labels(*labels, state).inc()
            metrics.BREAKER_OPEN.labels(*labels).set(1 if state != "closed" else 0)
            log.warning(f"breaker.{state}", breaker=key)
