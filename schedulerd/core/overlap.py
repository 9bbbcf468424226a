"""Overlap decisions: what happens to occurrences of a job that come due while its previous
execution still runs. Pure: no I/O (schedulerd/overlap.py applies the verdict under a job lock).

    allow         every occurrence starts (the default; never reaches this module)
    skip          one runs at a time; an occurrence due meanwhile is skipped (reason overlap)
    buffer_one    it waits and starts when the running one ends; at most one waits, later ones
                  are skipped
    cancel_other  the running one is asked to stop; the newest occurrence waits for it to end and
                  then starts (an older waiting one is skipped)

Example: buffer_one, 01:00 running, 01:01 and 01:02 come due -> 01:01 waits, 01:02 is skipped,
in whichever order they are judged.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

T = TypeVar("T")


class OverlapPolicy(enum.StrEnum):
    ALLOW = "allow"
    SKIP = "skip"
    BUFFER_ONE = "buffer_one"
    CANCEL_OTHER = "cancel_other"


@dataclass(frozen=True)
class Verdict(Generic[T]):
    start: T | None = None  # claim and run now
    wait: T | None = None  # becomes the job's one waiting occurrence
    skip: list[T] = field(default_factory=list)  # marked skipped, reason overlap (a replaced waiting one too)
    cancel_running: bool = False  # ask the running execution to stop


def decide(
    policy: OverlapPolicy | str, busy: bool, waiting: T | None, due: Sequence[T], older_than_waiting: int = 0
) -> Verdict[T]:
    """Verdict for one job's due occurrences `due` (oldest first, none of them `waiting`).

    busy: an execution of the job runs now. waiting: the occurrence already waiting, if any.
    older_than_waiting: how many of `due` (the first ones) were scheduled before `waiting`: two
    replicas may judge a job's occurrences in either order, and under buffer_one the oldest waits.
    When the job is idle one occurrence starts (the newest for cancel_other, which would stop an
    older one at once; otherwise the oldest) and the others count as overlapping it."""
    policy = OverlapPolicy(policy)
    if policy is OverlapPolicy.ALLOW:
        raise ValueError("allow jobs are claimed without a verdict")
    rest = list(due)
    start = None
    if not busy and rest:
        start = rest.pop() if policy is OverlapPolicy.CANCEL_OTHER else rest.pop(0)
    if policy is OverlapPolicy.CANCEL_OTHER:
        # The newest occurrence wins; anything older, waiting or due, is skipped.
        replaced = [waiting] if waiting is not None else []
        if start is not None:
            return Verdict(start=start, skip=replaced + rest)
        if not rest:
            return Verdict()
        return Verdict(wait=rest[-1], skip=replaced + rest[:-1], cancel_running=True)
    if not rest:
        return Verdict(start=start)
    if policy is OverlapPolicy.SKIP:
        return Verdict(start=start, skip=rest)
    if waiting is not None:  # buffer_one: one waits already; an older one due takes its place
        if older_than_waiting > (start is not None):
            return Verdict(start=start, wait=rest[0], skip=[waiting, *rest[1:]])
        return Verdict(start=start, skip=rest)
    return Verdict(start=start, wait=rest[0], skip=rest[1:])


def superseded(
    policy: OverlapPolicy | str, running_for: datetime | None, due: Sequence[tuple[T, datetime]]
) -> tuple[list[T], list[T]]:
    """Split due (occurrence, scheduled_for) pairs into (judged by decide, skipped outright).

    Under cancel_other the newest occurrence wins, so one scheduled before the running one (a
    late retry of an older occurrence) must not stop it: it is skipped. Other policies: none are."""
    if OverlapPolicy(policy) is not OverlapPolicy.CANCEL_OTHER or running_for is None:
        return [item for item, _ in due], []
    return [item for item, at in due if at >= running_for], [item for item, at in due if at < running_for]
