"""Circuit breakers, the pure half: parse a breaker's shared state, decide run/probe/park for a
claimed execution, fold outcomes for record_outcomes-1.lua. Pure: no I/O. The transitions
themselves run in Lua so replicas change one state atomically."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Decision = Literal["run", "probe", "park"]


@dataclass(frozen=True)
class BreakerState:
    key: str  # a task type ("report") or, for http, "http:<host>"
    state: str  # closed | open | half_open
    failures: int  # consecutive failures counted
    opened_ms: int  # when it last opened (Redis clock, ms since the Unix epoch)
    probe_at_ms: int  # open: when a probe may run; half_open: when a silent probe may be replaced

    @property
    def tripped(self) -> bool:
        return self.state in ("open", "half_open")

    @property
    def labels(self) -> tuple[str, str]:
        """(task, host) for the metric: "http:api.example.com" -> ("http", "api.example.com")."""
        task, _, host = self.key.partition(":")
        return task, host


def parse(key: str, value: str) -> BreakerState:
    """ "open|12|1700000000000|1700000030000" -> BreakerState (as written by the Lua scripts)."""
    state, failures, opened_ms, probe_at_ms = value.split("|")
    return BreakerState(key, state, int(failures), int(opened_ms), int(probe_at_ms))


def decide(state: BreakerState | None, now_ms: int) -> Decision:
    """Closed (or unknown): run. Open and its wait over, or half open with a silent probe: try to
    take the probe. Otherwise park."""
    if state is None or not state.tripped:
        return "run"
    return "probe" if now_ms >= state.probe_at_ms else "park"


def park_delay_s(state: BreakerState, now_ms: int, recheck_s: float, open_s: float, rng: random.Random) -> float:
    """How long a parked execution waits: until the probe instant (open) or from now (half open,
    a probe is running), plus a jitter uniform in [recheck_s / 2, max(recheck_s, open_s)].

    The spread matters twice: a backlog of 100,000 parked executions comes back to be claimed and
    parked again about once per open_s, not every recheck_s, and when the probe succeeds it
    reaches the target that just recovered over open_s rather than in one burst."""
    wait_s = max(0.0, (state.probe_at_ms - now_ms) / 1000) if state.state == "open" else 0.0
    return wait_s + rng.uniform(recheck_s / 2, max(recheck_s, open_s))


def summarise(outcomes: Iterable[tuple[str, bool]]) -> dict[str, tuple[bool, int]]:
    """Outcomes in order as (breaker key, succeeded) -> per key (saw a success, failures after
    the last success). The Lua script needs no more to keep the consecutive count.

    >>> summarise([("a", False), ("a", True), ("a", False), ("b", False)])
    {'a': (True, 1), 'b': (False, 1)}
    """
    folded: dict[str, tuple[bool, int]] = {}
    for key, succeeded in outcomes:
        saw_success, trailing = folded.get(key, (False, 0))
        folded[key] = (True, 0) if succeeded else (saw_success, trailing + 1)
    return folded
