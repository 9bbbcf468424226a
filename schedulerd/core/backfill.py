"""Which occurrences a backfill creates and when each falls due. Pure: no I/O.

A backfill covers the half-open range [start, end) of a cron job's schedule, in the past only
(the future is the materialiser's), and at most `max_occurrences` of it; a larger range is
refused rather than cut, so nobody believes a range was covered when it was not. Due times are
spread from `now` at `per_s`, oldest occurrence first, so a big backfill is not an outage.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from schedulerd.core.schedule import CronSchedule
from schedulerd.errors import ValidationError

ONE_MICROSECOND = timedelta(microseconds=1)


@dataclass(frozen=True)
class BackfillPlan:
    occurrences: list[tuple[datetime, datetime]]  # (scheduled_for, due_at), oldest first


def check_range(start: datetime, end: datetime, now: datetime) -> None:
    """Raise ValidationError naming `from` or `to` unless start < end <= now (both aware)."""
    for field, value in (("from", start), ("to", end)):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValidationError(field, f"{value.isoformat()} must carry a UTC offset")
    if start >= end:
        raise ValidationError("to", f"must be after from ({end.isoformat()} is not after {start.isoformat()})")
    if end > now:
        raise ValidationError(
            "to", f"{end.isoformat()} is in the future (now is {now.isoformat()}); a backfill covers the past only, "
            "the schedule itself covers the future",
        )  # fmt: skip


def plan_backfill(
    schedule: CronSchedule, start: datetime, end: datetime, now: datetime, *, max_occurrences: int, per_s: float
) -> BackfillPlan:
    """The occurrences t with start <= t < end, each due `i / per_s` seconds after now.

    >>> from datetime import UTC
    >>> day = datetime(2026, 1, 1, tzinfo=UTC)
    >>> p = plan_backfill(CronSchedule("0 */6 * * *"), day, day + timedelta(days=1), day + timedelta(days=2),
    ...                   max_occurrences=10, per_s=2.0)
    >>> [(s.hour, (d - day).total_seconds() - 2 * 86400) for s, d in p.occurrences]
    [(0, 0.0), (6, 0.5), (12, 1.0), (18, 1.5)]
    """
    check_range(start, end, now)
    # next_runs stops after max_occurrences + 1, so a range of millions is refused without listing it.
    instants = [t for t in schedule.next_runs(start - ONE_MICROSECOND, max_occurrences + 1) if t < end]
    if len(instants) > max_occurrences:
        raise ValidationError(
            "to", f"the range holds more than {max_occurrences} occurrences of {schedule.expression!r} "
            f"in {schedule.timezone}; split it into smaller ranges", "jobs.backfill_max_occurrences",
        )  # fmt: skip
    if not instants:
        raise ValidationError(
            "from", f"no occurrence of {schedule.expression!r} in {schedule.timezone} falls in "
            f"[{start.isoformat()}, {end.isoformat()})",
        )  # fmt: skip
    return BackfillPlan([(t, now + timedelta(seconds=i / per_s)) for i, t in enumerate(instants)])
