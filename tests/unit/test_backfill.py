"""The backfill planner (pure): which occurrences of a range, when each falls due, what is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from schedulerd.core.backfill import plan_backfill
from schedulerd.core.schedule import CronSchedule
from schedulerd.dead_letters import FailedFilter
from schedulerd.errors import ValidationError

NOW = datetime(2026, 11, 10, 12, 0, tzinfo=UTC)


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


@pytest.mark.parametrize(
    ("expression", "zone", "start", "end", "expected"),
    [
        # Half-open: an occurrence at `from` is included, one at `to` is not.
        ("0 * * * *", "UTC", "2026-11-01T00:00:00+00:00", "2026-11-01T03:00:00+00:00",
         ["2026-11-01T00:00:00+00:00", "2026-11-01T01:00:00+00:00", "2026-11-01T02:00:00+00:00"]),
        # The DST rule applies: a fixed 01:30 on fall-back night in New York runs once (EDT).
        ("30 1 * * *", "America/New_York", "2026-11-01T00:00:00+00:00", "2026-11-02T00:00:00+00:00",
         ["2026-11-01T05:30:00+00:00"]),
        # A cadence keeps real time: 25 hourly runs on the 25-hour day.
        ("0 * * * *", "America/New_York", "2026-11-01T04:00:00+00:00", "2026-11-02T05:00:00+00:00", 25),
        # Bounds given in another offset mean the same instants.
        ("0 0 * * *", "Asia/Tokyo", "2026-11-01T00:00:00+09:00", "2026-11-03T00:00:00+09:00",
         ["2026-10-31T15:00:00+00:00", "2026-11-01T15:00:00+00:00"]),
    ],
)  # fmt: skip
def test_occurrences_of_the_range(expression: str, zone: str, start: str, end: str, expected: list[str] | int) -> None:
    plan = plan_backfill(CronSchedule(expression, zone), at(start), at(end), NOW, max_occurrences=100, per_s=10.0)
    instants = [s for s, _ in plan.occurrences]
    if isinstance(expected, int):
        assert len(instants) == expected
    else:
        assert instants == [at(e) for e in expected]


def test_due_times_are_spread_from_now_oldest_first() -> None:
    plan = plan_backfill(CronSchedule("*/15 * * * *"), NOW - timedelta(hours=1), NOW, NOW, max_occurrences=10, per_s=4.0)
    assert [(d - NOW).total_seconds() for _, d in plan.occurrences] == [0.0, 0.25, 0.5, 0.75]


@pytest.mark.parametrize(
    ("start", "end", "field", "message", "limit"),
    [
        (NOW - timedelta(hours=1), NOW + timedelta(seconds=1), "to", "is in the future", None),
        (NOW - timedelta(hours=1), NOW - timedelta(hours=1), "to", "must be after from", None),
        (NOW - timedelta(hours=1), NOW - timedelta(hours=2), "to", "must be after from", None),
        (datetime(2026, 11, 1), NOW, "from", "must carry a UTC offset", None),
        (NOW - timedelta(minutes=101), NOW, "to", "more than 100 occurrences", "jobs.backfill_max_occurrences"),
        (NOW - timedelta(seconds=50), NOW - timedelta(seconds=10), "from", "no occurrence", None),
    ],
)
def test_bad_ranges_are_refused_precisely(start: datetime, end: datetime, field: str, message: str, limit: str | None) -> None:
    with pytest.raises(ValidationError, match=message) as refused:
        plan_backfill(CronSchedule("* * * * *"), start, end, NOW, max_occurrences=100, per_s=10.0)
    assert (refused.value.field, refused.value.limit) == (field, limit)


def test_exactly_the_cap_is_allowed() -> None:
    plan = plan_backfill(CronSchedule("* * * * *"), NOW - timedelta(minutes=100), NOW, NOW, max_occurrences=100, per_s=10.0)
    assert len(plan.occurrences) == 100


def test_a_huge_range_is_refused_without_listing_it() -> None:
    with pytest.raises(ValidationError, match="more than 10 occurrences"):
        plan_backfill(CronSchedule("* * * * *"), datetime(2000, 1, 1, tzinfo=UTC), NOW, NOW, max_occurrences=10, per_s=1.0)


@pytest.mark.parametrize(
    ("which", "field"),
    [
        (FailedFilter(error=""), "error"),
        (FailedFilter(error="x" * 501), "error"),
        (FailedFilter(error="a\x00b"), "error"),
        (FailedFilter(since=datetime(2026, 1, 1)), "since"),
        (FailedFilter(since=NOW, until=NOW - timedelta(seconds=1)), "until"),
    ],
)
def test_dead_letter_filters_are_checked(which: FailedFilter, field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        which.check()
    assert refused.value.field == field


def test_a_filter_with_any_criterion_is_not_empty() -> None:
    assert FailedFilter().empty
    assert not FailedFilter(since=datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=2)))).empty
