"""Bounds of a recurring schedule: start_at, end_at, max_runs. Pure: no I/O.

An occurrence at instant t is inside the bounds when start_at <= t < end_at; of those, at most
max_runs are ever written, counted by `runs_written` (which never goes down, so dropping old rows
never lets a bounded job run again). A bounded schedule is finished ("done") once it has no
occurrence left to write: max_runs written, or nothing of it before end_at after the cursor.
The materialiser (core/materialise.plan), a job's next runs and an edit's diff all answer through
these functions, so they agree on which instants a bounded job has.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from schedulerd.errors import ValidationError

_TICK = timedelta(microseconds=1)  # schedules answer instants strictly after a given one
T = TypeVar("T")


def _itself(t: T) -> T:
    return t


@dataclass(frozen=True, slots=True)
class Bounds:
    start_at: datetime | None = None
    end_at: datetime | None = None
    max_runs: int | None = None
    runs_written: int = 0

    @property
    def bounded(self) -> bool:
        return self.start_at is not None or self.end_at is not None or self.max_runs is not None

    @property
    def runs_left(self) -> int | None:
        """Occurrences still to be written (None: no cap)."""
        return None if self.max_runs is None else max(0, self.max_runs - self.runs_written)


UNBOUNDED = Bounds()


def check_bounds(start_at: datetime | None, end_at: datetime | None, max_runs: int | None, *, recurring: bool) -> None:
    """Refuse bounds that cannot be: naming the field (start_at, end_at or max_runs)."""
    given = [(name, value) for name, value in (("start_at", start_at), ("end_at", end_at), ("max_runs", max_runs))
             if value is not None]  # fmt: skip
    if given and not recurring:
        raise ValidationError(given[0][0], "applies to recurring (cron or @every) jobs only; a one-off job runs once")
    for name, value in (("start_at", start_at), ("end_at", end_at)):
        if value is not None and (not isinstance(value, datetime) or value.utcoffset() is None):
            raise ValidationError(name, "must be an instant with a UTC offset")
    if max_runs is not None and (isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1):
        raise ValidationError("max_runs", f"must be an integer of at least 1, got {max_runs!r}")
    if start_at is not None and end_at is not None and not start_at < end_at:
        raise ValidationError("end_at", f"must be after start_at ({start_at.isoformat()}), got {end_at.isoformat()}")


def after_start(after: datetime, bounds: Bounds) -> datetime:
    """The instant to look for occurrences strictly after, so that none before start_at is found."""
    if bounds.start_at is not None and after < bounds.start_at:
        return bounds.start_at - _TICK
    return after


def clip(instants: Iterable[datetime], bounds: Bounds, *, limit: int | None = None) -> list[datetime]:
    """The instants (oldest first) inside [start_at, end_at), at most `limit` of them."""
    kept: list[datetime] = []
    for t in instants:
        if limit is not None and len(kept) >= limit:
            break
        if bounds.end_at is not None and t >= bounds.end_at:
            break
        if bounds.start_at is None or t >= bounds.start_at:
            kept.append(t)
    return kept


def finished(bounds: Bounds, written: int, first_after: Callable[[datetime], datetime | None], cursor: datetime) -> bool:
    """Whether, after a pass wrote `written` occurrences and moved the cursor to `cursor`, the
    schedule has none left to write. first_after(t): the schedule's first instant after t."""
    left = bounds.runs_left
    if left is not None and written >= left:
        return True
    if bounds.end_at is None:
        return False
    if cursor >= bounds.end_at:
        return True
    following = first_after(after_start(cursor, bounds))
    return following is None or following >= bounds.end_at


def next_runs(
    next_after: Callable[[datetime, int], list[T]], after: datetime, count: int, bounds: Bounds,
    cursor: datetime | None = None, done: bool = False, at: Callable[[T], datetime] = _itself,
) -> list[T]:  # fmt: skip
    """A bounded schedule's next `count` runs scheduled after `after`. next_after(t, n): the
    schedule's first n runs after t; at(run): its scheduled instant. cursor: the job's
    materialised_to; the occurrences up to it are written (runs_written counts them), of those
    after it at most runs_left will be. A done job writes nothing more: only what it wrote up to
    the cursor is left."""
    runs = [r for r in next_after(after_start(after, bounds), count) if inside(at(r), bounds)]
    if bounds.end_at is not None:
        runs = list(itertools.takewhile(lambda r: at(r) < bounds.end_at, runs))  # type: ignore[operator]
    left = bounds.runs_left
    if cursor is None:  # not yet materialised: the first runs_left are what it will write
        return runs if left is None else runs[:left]
    written = [r for r in runs if at(r) <= cursor]
    if bounds.max_runs is not None:
        # Written from the job's creation on: the latest runs_written instants up to the cursor
        # (an `after` before the creation sees earlier instants that were never written).
        written = written[len(written) - min(len(written), bounds.runs_written):]
    if done:
        return written
    later = [r for r in runs if at(r) > cursor]
    return written + (later if left is None else later[:left])


def inside(t: datetime, bounds: Bounds) -> bool:
    """start_at <= t < end_at."""
    return (bounds.start_at is None or t >= bounds.start_at) and (bounds.end_at is None or t < bounds.end_at)
