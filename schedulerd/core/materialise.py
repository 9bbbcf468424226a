"""Which occurrences of a cron job to write next, and where its cursor moves. Pure: no I/O.

The cursor (`materialised_to`) means "every occurrence up to here is written". A pass writes
(cursor, now + horizon], with the end aligned down to the minute so jobs sharing an expression
and zone share cached windows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from schedulerd.core.schedule import CronSchedule, smear_offset_s

ALIGN_S = 60


@dataclass(frozen=True)
class Plan:
    occurrences: list[tuple[datetime, datetime]]  # (scheduled_for, due_at), oldest first
    cursor: datetime  # the job's new materialised_to
    unrecorded: tuple[datetime, datetime] | None  # a stretch older than the lookback, not written


def plan(
    schedule: CronSchedule,
    job_id: str,
    window_s: float,
    cursor: datetime | None,
    now: datetime,
    *,
    horizon_s: float,
    lookback_s: float,
    max_occurrences: int,
) -> Plan:
    """Occurrences in (cursor, now + horizon]; a new job (cursor None) starts after `now`.

    A cursor older than `lookback_s` (the scheduler was down for days) restarts at now - lookback:
    those older occurrences are reported as `unrecorded` rather than written by the thousand.
    Smearing delays each due time by a stable offset in [0, window_s) derived from the job id;
    scheduled_for stays the nominal instant (the unique slot).
    """
    end = now + timedelta(seconds=horizon_s)
    until = datetime.fromtimestamp(end.timestamp() // ALIGN_S * ALIGN_S, end.tzinfo)
    start = now if cursor is None else cursor
    unrecorded = None
    oldest = now - timedelta(seconds=lookback_s)
    if start < oldest:
        unrecorded, start = (start, oldest), oldest
    if until <= start:
        return Plan([], start, unrecorded)
    instants = schedule.occurrences(start, until)
    if len(instants) > max_occurrences:
        instants = instants[:max_occurrences]
        until = instants[-1]
    offset = timedelta(seconds=smear_offset_s(job_id, window_s))
    return Plan([(t, t + offset) for t in instants], until, unrecorded)
