"""Liveness and readiness: which loops ticked recently, and whether the servers answer.

Loops call `tick(name)` after every completed pass; `/readyz` and the systemd watchdog read it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from schedulerd import metrics

_last_tick: dict[str, float] = {}  # loop name -> monotonic time of its last completed pass
_expected: dict[str, float] = {}  # loop name -> longest acceptable gap, for the loops this process runs


def tick(loop: str) -> None:
    _last_tick[loop] = time.monotonic()
    metrics.LOOP_LAST_TICK.labels(loop).set_to_current_time()


def forget() -> None:
    """For tests and restarts: no loop has ticked yet."""
    _last_tick.clear()


def expect(budgets: dict[str, float]) -> LoopHealth:
    """The daemon declares the loops it runs, each with its longest acceptable gap (seconds)."""
    _expected.clear()
    _expected.update(budgets)
    return current()


def current() -> LoopHealth:
    return LoopHealth(dict(_expected))


@dataclass(frozen=True)
class LoopHealth:
    expected: dict[str, float]  # loop name -> longest acceptable gap between ticks (seconds)

    def ages(self, now: float | None = None) -> dict[str, float | None]:
        """Seconds since each expected loop's last tick (None: never ticked)."""
        now = time.monotonic() if now is None else now
        return {loop: (round(now - _last_tick[loop], 3) if loop in _last_tick else None) for loop in self.expected}

    def stale(self, now: float | None = None) -> dict[str, float | None]:
        """The loops that have not ticked within their budget, with their ages."""
        return {
            loop: age for loop, age in self.ages(now).items() if age is None or age > self.expected[loop]
        }
