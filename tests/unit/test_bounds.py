"""core/bounds.py and the bounded materialiser plan (core/materialise.plan): no I/O."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedulerd.core.bounds import Bounds, check_bounds, clip, next_runs
from schedulerd.core.materialise import plan
from schedulerd.core.schedule import CronSchedule
from schedulerd.errors import ValidationError

T0 = datetime(2026, 6, 1, tzinfo=UTC)
MINUTELY = CronSchedule.parse("* * * * *", "UTC")


def _plan(schedule: CronSchedule, cursor: datetime | None, now: datetime, bounds: Bounds, horizon_s: float = 3600.0):  # type: ignore[no-untyped-def]
    return plan(schedule, "job", 0.0, cursor, now, horizon_s=horizon_s, lookback_s=86400.0, max_occurrences=10000,
                bounds=bounds)  # fmt: skip


def test_check_bounds_names_the_field() -> None:
    check_bounds(T0, T0 + timedelta(hours=1), 3, recurring=True)
    check_bounds(None, None, None, recurring=False)
    for args, recurring, field in [
        ((T0, None, None), False, "start_at"), ((None, None, 2), False, "max_runs"),
        ((None, None, 0), True, "max_runs"), ((None, None, True), True, "max_runs"),
        ((T0, T0, None), True, "end_at"), ((datetime(2026, 6, 1), None, None), True, "start_at"),
    ]:  # fmt: skip
        with pytest.raises(ValidationError) as refused:
            check_bounds(*args, recurring=recurring)
        assert refused.value.field == field


def test_clip_keeps_start_inclusive_end_exclusive() -> None:
    instants = [T0 + timedelta(minutes=i) for i in range(10)]
    kept = clip(instants, Bounds(start_at=instants[2], end_at=instants[5]))
    assert kept == instants[2:5]
    assert clip(instants, Bounds(), limit=4) == instants[:4]


def test_plan_writes_at_most_max_runs_then_is_done() -> None:
    step = _plan(MINUTELY, None, T0, Bounds(max_runs=3))
    assert [t for t, _ in step.occurrences] == [T0 + timedelta(minutes=i) for i in (1, 2, 3)]
    assert step.done and step.cursor == T0 + timedelta(minutes=3)
    later = _plan(MINUTELY, step.cursor, T0 + timedelta(hours=5), Bounds(max_runs=3, runs_written=3))
    assert later.occurrences == [] and later.done


def test_plan_counts_runs_written_in_earlier_passes() -> None:
    step = _plan(MINUTELY, T0, T0, Bounds(max_runs=150, runs_written=40), horizon_s=3600.0)
    assert len(step.occurrences) == 60 and not step.done
    step = _plan(MINUTELY, step.cursor, T0, Bounds(max_runs=100, runs_written=100 - 5), horizon_s=7200.0)
    assert len(step.occurrences) == 5 and step.done


def test_plan_honours_start_and_end() -> None:
    bounds = Bounds(start_at=T0 + timedelta(minutes=10), end_at=T0 + timedelta(minutes=20))
    step = _plan(MINUTELY, None, T0, bounds)
    assert [t for t, _ in step.occurrences] == [T0 + timedelta(minutes=i) for i in range(10, 20)]
    assert step.done
    early = _plan(MINUTELY, None, T0, Bounds(start_at=T0 + timedelta(hours=3)))
    assert early.occurrences == [] and not early.done


def test_end_beyond_the_horizon_is_not_done_until_the_last_occurrence_is_written() -> None:
    bounds = Bounds(end_at=T0 + timedelta(hours=2, minutes=30))
    first = _plan(MINUTELY, None, T0, bounds)
    assert not first.done and len(first.occurrences) == 60
    second = _plan(MINUTELY, first.cursor, T0 + timedelta(hours=2), bounds)
    assert second.done and max(t for t, _ in second.occurrences) == T0 + timedelta(hours=2, minutes=29)


def test_bounds_across_a_dst_change_count_instants_not_wall_times() -> None:
    """New York falls back on 2026-11-01: 01:30 happens twice. A cadence runs at both passes, and
    max_runs counts each pass; end_at is an instant, so the second 01:30 (06:30 UTC) is past an
    end of 06:00 UTC."""
    schedule = CronSchedule.parse("30 * * * *", "America/New_York")
    start = datetime(2026, 11, 1, 4, 0, tzinfo=UTC)  # 00:00 EDT
    runs = next_runs(schedule.next_runs, start, 10, Bounds(max_runs=3))
    assert runs == [datetime(2026, 11, 1, h, 30, tzinfo=UTC) for h in (4, 5, 6)]
    bounded = next_runs(schedule.next_runs, start, 10, Bounds(end_at=datetime(2026, 11, 1, 6, tzinfo=UTC)))
    assert bounded == [datetime(2026, 11, 1, h, 30, tzinfo=UTC) for h in (4, 5)]
    fixed = CronSchedule.parse("30 1 * * *", "America/New_York")  # a fixed time: the first pass only
    assert next_runs(fixed.next_runs, start, 3, Bounds(max_runs=2)) == [
        datetime(2026, 11, 1, 5, 30, tzinfo=UTC), datetime(2026, 11, 2, 6, 30, tzinfo=UTC)]


def test_next_runs_of_a_materialised_bounded_job() -> None:
    bounds = Bounds(max_runs=5, runs_written=3)
    cursor = T0 + timedelta(minutes=3)  # minutes 1-3 written
    assert next_runs(MINUTELY.next_runs, T0, 10, bounds, cursor) == [T0 + timedelta(minutes=i) for i in range(1, 6)]
    assert next_runs(MINUTELY.next_runs, T0 + timedelta(minutes=2), 10, bounds, cursor) == \
        [T0 + timedelta(minutes=i) for i in (3, 4, 5)]
    done = Bounds(max_runs=3, runs_written=3)
    assert next_runs(MINUTELY.next_runs, T0, 10, done, cursor, done=True) == [T0 + timedelta(minutes=i) for i in (1, 2, 3)]
    assert next_runs(MINUTELY.next_runs, T0, 4, Bounds(start_at=T0 + timedelta(minutes=30))) == \
        [T0 + timedelta(minutes=i) for i in (30, 31, 32, 33)]
