"""Which occurrences of a cron job to write next, where its cursor moves, and how written ones
differ from a schedule's current answer (after a tz database change). Pure: no I/O.

The cursor (`materialised_to`) means "every occurrence up to here is written". A pass writes
(cursor, now + horizon], with the end aligned down to the minute so jobs sharing an expression
and zone share cached windows.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime, timedelta

from schedulerd.core.bounds import UNBOUNDED, Bounds, clip, finished
from schedulerd.core.durations import shifted
from schedulerd.core.schedule import CronSchedule, smear_offset_s

ALIGN_S = 60


@dataclass(frozen=True)
class Plan:
    occurrences: list[tuple[datetime, datetime]]  # (scheduled_for, due_at), oldest first
    cursor: datetime  # the job's new materialised_to
    unrecorded: tuple[datetime, datetime] | None  # a stretch older than the lookback, not written
    done: bool = False  # a bounded schedule with nothing left to write after this pass


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
    bounds: Bounds = UNBOUNDED,
) -> Plan:
    """Occurrences in (cursor, now + horizon]; a new job (cursor None) starts after `now`.

    A cursor older than `lookback_s` (the scheduler was down for days) restarts at now - lookback:
    those older occurrences are reported as `unrecorded` rather than written by the thousand.
    Smearing delays each due time by a stable offset in [0, window_s) derived from the job id;
    scheduled_for stays the nominal instant (the unique slot). Bounds (core/bounds.py): only
    instants in [start_at, end_at) are written, at most runs_left of them; `done` says none is left.
    """
    # shifted(): a clock (or a test's) near the calendar's ends must not overflow the window.
    end = shifted(now, timedelta(seconds=horizon_s))
    until = datetime.fromtimestamp(end.timestamp() // ALIGN_S * ALIGN_S, end.tzinfo)
    start = now if cursor is None else cursor
    unrecorded = None
    oldest = shifted(now, -timedelta(seconds=lookback_s))
    if start < oldest:
        unrecorded, start = (start, oldest), oldest
    if until <= start:
        return Plan([], start, unrecorded, bounds.bounded and _finished(schedule, bounds, 0, start))
    instants = schedule.occurrences(start, until)
    left = bounds.runs_left
    if bounds.bounded:
        instants = clip(instants, bounds, limit=max_occurrences + 1 if left is None else min(left, max_occurrences + 1))
    if len(instants) > max_occurrences:
        instants = instants[:max_occurrences]
        until = instants[-1]
    elif left is not None and len(instants) == left and instants:
        until = instants[-1]  # the last run it may have: the cursor stops there
    offset = timedelta(seconds=smear_offset_s(job_id, window_s))
    done = bounds.bounded and _finished(schedule, bounds, len(instants), until)
    return Plan([(t, shifted(t, offset)) for t in instants], until, unrecorded, done)


def _finished(schedule: CronSchedule, bounds: Bounds, written: int, cursor: datetime) -> bool:
    return finished(bounds, written, lambda t: next(iter(schedule.next_runs(t, 1)), None), cursor)


@dataclass(frozen=True)
class Reconciled:
    """How written occurrences differ from what the schedule now produces."""

    remove: list[datetime]  # written, no longer produced; oldest first
    add: list[datetime]  # produced, not written; oldest first
    moves: list[tuple[datetime | None, datetime | None]]  # (old, new), paired in time order


def reconcile(written: list[datetime], expected: list[datetime]) -> Reconciled:
    """Compare a job's written future occurrences with those its schedule produces now (after a tz
    database change). Moves pair removed and added instants in time order; when their counts
    differ (a rule dropped or added a run) the extras have no partner.

    >>> t = lambda h: datetime(2026, 7, 1, h)
    >>> reconcile([t(13), t(14)], [t(14), t(15)]).moves == [(t(13), t(15))]
    True
    """
    written_set, expected_set = set(written), set(expected)
    remove = sorted(written_set - expected_set)
    add = sorted(expected_set - written_set)
    moves = list(itertools.zip_longest(remove, add))
    return Reconciled(remove, add, moves)
