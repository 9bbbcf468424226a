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


def kept(policy: MisfirePolicy | str, catch_up_limit: int) -> int:
    """How many of a job's latest missed occurrences its policy runs."""
    policy = MisfirePolicy(policy)
    if policy is MisfirePolicy.SKIP:
        return 0
    if policy is MisfirePolicy.RUN_ONCE:
        return 1
    return max(0, catch_up_limit)


def decide(policy: MisfirePolicy | str, missed: Sequence[T], catch_up_limit: int) -> Decision[T]:
    """Split `missed` (ordered oldest first) into what runs late and what is skipped."""
    cut = max(0, len(missed) - kept(policy, catch_up_limit))
    return Decision(run=list(missed[cut:]), skip=list(missed[:cut]))


def decide_oldest(policy: MisfirePolicy | str, oldest: Sequence[T], catch_up_limit: int) -> Decision[T]:
    """Judge only the oldest part of a job's missed occurrences (more follow, unseen): skip those
    older than anything the policy may run, run none. What is left is judged once the rest fits
    in one read, so a policy never runs more than it keeps.

    >>> decide_oldest("run_once", [1, 2, 3], 0)
    Decision(run=[], skip=[1, 2])
    """
    cut = max(0, len(oldest) - kept(policy, catch_up_limit))
    return Decision(run=[], skip=list(oldest[:cut]))


def replay_delays_s(count: int, rate_per_s: float) -> list[float]:
    """Spread `count` late runs at `rate_per_s`, so a recovery is not a second outage.

    >>> replay_delays_s(3, 2.0)
    [0.0, 0.5, 1.0]
    """
    return [i / rate_per_s for i in range(count)]
