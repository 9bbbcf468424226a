"""Which claimed executions may start now, under per-task concurrency limits and the slow pool.
Pure: no I/O; the worker hands the others back (deferred, no attempt used)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence


def admit(
    tasks: Sequence[str],
    running: Mapping[str, int],
    limits: Mapping[str, int],
    slow_tasks: Collection[str],
    slow_free: int,
) -> list[bool]:
    """For each claimed execution (by task type, in claim order): may it start?

    A task in `limits` runs at most that many at once in this process; a task in `slow_tasks`
    also needs a slot of the slow pool (`slow_free` left), never one of the main pool.

    >>> admit(["sleep", "sleep", "noop"], {"sleep": 3}, {"sleep": 4}, ["sleep"], 8)
    [True, False, True]
    """
    counts = dict(running)
    verdicts = []
    for task in tasks:
        slow = task in slow_tasks
        ok = counts.get(task, 0) < limits.get(task, len(tasks) + counts.get(task, 0) + 1) and (not slow or slow_free > 0)
        if ok:
            counts[task] = counts.get(task, 0) + 1
            slow_free -= slow
        verdicts.append(ok)
    return verdicts
