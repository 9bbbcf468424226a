"""Overrun warning: a recurring job whose recent runs take most of its interval will soon overlap
itself. Pure: no I/O; the instant and the durations are passed in.

Example: '*/5 * * * *' (interval 300 s), recent durations with p95 250 s, fraction 0.8 ->
ratio 0.83 >= 0.8: warn (runs will start overlapping when a slow one takes 300 s).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from schedulerd.core.schedule import CronSchedule

MIN_SAMPLES = 3  # fewer recent runs say too little to warn on
SHORTEST_CRON_INTERVAL_S = 60.0  # 5-field cron: a run shorter than fraction * this cannot overrun any job
LOOKAHEAD = 50  # occurrences examined for the interval


@dataclass(frozen=True)
class Overrun:
    p95_s: float  # of the recent attempts' durations
    interval_s: float  # the shortest gap between the job's next occurrences
    ratio: float  # p95_s / interval_s
    samples: int  # attempts the p95 was taken over
    warning: bool  # ratio >= the configured fraction, over at least MIN_SAMPLES attempts


def shortest_interval_s(schedule: CronSchedule, now: datetime, lookahead: int = LOOKAHEAD) -> float | None:
    """The shortest gap (seconds) between the next `lookahead` occurrences after `now`: the gap
    at which a slow run overlaps first ('0 9,17 * * *' -> 28800.0). None when fewer than two come."""
    runs = schedule.next_runs(now, lookahead)
    gaps = [(later - earlier).total_seconds() for earlier, later in zip(runs, runs[1:])]
    return min(gaps) if gaps else None


def p95(durations_s: Sequence[float]) -> float:
    """Nearest-rank 95th percentile: p95([1..20]) == 19; one sample is its own p95."""
    if not durations_s:
        raise ValueError("p95 of no durations")
    ordered = sorted(durations_s)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def assess(durations_s: Sequence[float], interval_s: float | None, fraction: float) -> Overrun | None:
    """The job's overrun figures, or None when there is nothing to judge (no runs, no interval)."""
    if not durations_s or interval_s is None or interval_s <= 0:
        return None
    high = p95(durations_s)
    ratio = high / interval_s
    return Overrun(high, interval_s, ratio, len(durations_s), len(durations_s) >= MIN_SAMPLES and ratio >= fraction)


def worth_checking(duration_s: float, fraction: float) -> bool:
    """Whether a finished attempt this long could put any cron job over the fraction: the worker
    looks at a job's history only then, so short runs (nearly all) cost nothing."""
    return duration_s >= fraction * SHORTEST_CRON_INTERVAL_S
