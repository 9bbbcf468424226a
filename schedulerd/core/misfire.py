"""Misfire decisions: which missed occurrences of a recurring job still run. Pure: no I/O.

An occurrence is missed when it had not started `grace` after its due time (the scheduler was
down, or far behind). Per job:

    skip      none of the missed run; the job continues at its next future tick
    run_once  the latest missed occurrence runs (late), standing for all of them
    catch_up  the latest `limit` missed occurrences run, oldest first; older ones are skipped

Example: missed 01:00, 02:00, 03:00 with catch_up limit 2 -> run 02:00 and 03:00, skip 01:00.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


class MisfirePolicy(enum.StrEnum):
    SKIP = "skip"
    RUN_ONCE = "run_once"
    CATCH_UP = "catch_up"


@dataclass(frozen=True)
class Decision(Generic[T]):
    run: list[T]  # oldest first
    skip: list[T]


def decide(policy: MisfirePolicy | str, missed: Sequence[T], catch_up_limit: int) -> Decision[T]:
    """Split `missed` (ordered oldest first) into what runs late and what is skipped."""
    policy = MisfirePolicy(policy)
    if policy is MisfirePolicy.SKIP:
        keep = 0
    elif policy is MisfirePolicy.RUN_ONCE:
        keep = 1
    else:
        keep = max(0, catch_up_limit)
    cut = max(0, len(missed) - keep)
    return Decision(run=list(missed[cut:]), skip=list(missed[:cut]))


def replay_delays_s(count: int, rate_per_s: float) -> list[float]:
    """Spread `count` late runs at `rate_per_s`, so a recovery is not a second outage.

    >>> replay_delays_s(3, 2.0)
    [0.0, 0.5, 1.0]
    """
    return [i / rate_per_s for i in range(count)]
