"""Per-job overrides of the DST rule (dst_repeated, dst_missing), the labelled preview, and the
zone-rules hook that simulates a tz database upgrade. Real transitions of 2026."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from schedulerd.core.schedule import CronSchedule, ScheduleError, zone_rules

UTC = timezone.utc
NY, LONDON, LORD_HOWE = "America/New_York", "Europe/London", "Australia/Lord_Howe"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def local_day(schedule: CronSchedule, day: date) -> list[datetime]:
    """Runs whose instant falls within the local calendar day `day`."""
    tz = ZoneInfo(schedule.timezone)
    start = datetime(day.year, day.month, day.day, tzinfo=tz).astimezone(UTC)
    end = datetime.combine(day + timedelta(days=1), datetime.min.time(), tz).astimezone(UTC)
    tick = timedelta(microseconds=1)
    return schedule.occurrences(start - tick, end - tick)


# (expression, zone, day, dst_repeated, dst_missing, expected UTC runs that local day)
OVERRIDES = [
    # New York fall back 2026-11-01: 01:00-01:59 twice (EDT = 05:xx UTC, then EST = 06:xx UTC).
    ("30 1 * * *", NY, date(2026, 11, 1), None, None, ["2026-11-01 05:30"]),  # the rule: first
    ("30 1 * * *", NY, date(2026, 11, 1), "both", None, ["2026-11-01 05:30", "2026-11-01 06:30"]),
    ("30 1 * * *", NY, date(2026, 11, 1), "first", "skip", ["2026-11-01 05:30"]),
    ("30 * * * *", NY, date(2026, 11, 1), "first", None,  # cadence made to run each wall time once
     [f"2026-11-01 {h:02d}:30" for h in [4, 5, *range(7, 24)]] + [f"2026-11-02 {h:02d}:30" for h in range(5)]),
    # New York spring forward 2026-03-08: 02:00-02:59 does not exist; 03:00 EDT = 07:00 UTC.
    ("30 2 * * *", NY, date(2026, 3, 8), None, None, ["2026-03-08 07:00"]),  # the rule: shift
    ("30 2 * * *", NY, date(2026, 3, 8), None, "skip", []),
    ("0,30 2-3 * * *", NY, date(2026, 3, 8), None, "skip", ["2026-03-08 07:00", "2026-03-08 07:30"]),
    ("30 * * * *", NY, date(2026, 3, 8), None, "shift",  # cadence: the missing 02:30 runs at 03:00
     ["2026-03-08 05:30", "2026-03-08 06:30", "2026-03-08 07:00"] + [f"2026-03-08 {h:02d}:30" for h in range(7, 24)]
     + ["2026-03-09 00:30", "2026-03-09 01:30", "2026-03-09 02:30", "2026-03-09 03:30"]),
    # London: 01:00 GMT -> 02:00 BST on 03-29; 02:00 BST -> 01:00 GMT on 10-25.
    ("30 1 * * *", LONDON, date(2026, 3, 29), None, "skip", []),
    ("30 1 * * *", LONDON, date(2026, 3, 29), None, "shift", ["2026-03-29 01:00"]),
    ("30 1 * * *", LONDON, date(2026, 10, 25), "both", None, ["2026-10-25 00:30", "2026-10-25 01:30"]),
    ("0 9 * * *", LONDON, date(2026, 10, 25), "both", "skip", ["2026-10-25 09:00"]),  # 09:00 is ordinary
    # Lord Howe: 30-minute shifts. Spring 2026-10-04 02:00 +10:30 -> 02:30 +11:00 (02:00-02:29 missing);
    # autumn 2026-04-05 02:00 +11:00 -> 01:30 +10:30 (01:30-01:59 twice).
    ("15 2 * * *", LORD_HOWE, date(2026, 10, 4), None, None, ["2026-10-03 15:30"]),
    ("15 2 * * *", LORD_HOWE, date(2026, 10, 4), None, "skip", []),
    ("45 1 * * *", LORD_HOWE, date(2026, 4, 5), None, None, ["2026-04-04 14:45"]),
    ("45 1 * * *", LORD_HOWE, date(2026, 4, 5), "both", None, ["2026-04-04 14:45", "2026-04-04 15:15"]),
    ("*/30 1 * * *", LORD_HOWE, date(2026, 4, 5), "first", None,  # 01:00 once, 01:30 once
     ["2026-04-04 14:00", "2026-04-04 14:30"]),
    ("*/30 1 * * *", LORD_HOWE, date(2026, 4, 5), None, None,  # the cadence rule: 01:30 twice
     ["2026-04-04 14:00", "2026-04-04 14:30", "2026-04-04 15:00"]),
]


@pytest.mark.parametrize("expression,zone,day,repeated,missing,expected", OVERRIDES)
def test_overrides_at_real_transitions(expression: str, zone: str, day: date, repeated: str | None,
                                       missing: str | None, expected: list[str]) -> None:
    schedule = CronSchedule.parse(expression, zone, repeated, missing)
    assert local_day(schedule, day) == [utc(t) for t in expected]


def test_none_means_the_documented_rule() -> None:
    fixed, cadence = CronSchedule.parse("30 2 * * *", NY), CronSchedule.parse("0 * * * *", NY)
    assert (fixed.repeated, fixed.missing) == ("first", "shift")
    assert (cadence.repeated, cadence.missing) == ("both", "skip")
    explicit = CronSchedule.parse("30 2 * * *", NY, "first", "shift")
    year = (utc("2026-01-01 00:00"), utc("2027-01-01 00:00"))
    assert explicit.occurrences(*year) == fixed.occurrences(*year)
    assert CronSchedule.parse("0 * * * *", NY, "both", "skip").occurrences(*year) == cadence.occurrences(*year)


def test_overrides_differ_only_on_transition_days() -> None:
    year = (utc("2026-01-01 00:00"), utc("2027-01-01 00:00"))
    rule = set(CronSchedule.parse("30 1 * * *", NY).occurrences(*year))
    both = set(CronSchedule.parse("30 1 * * *", NY, "both", "skip").occurrences(*year))
    assert both - rule == {utc("2026-11-01 06:30")}  # the second 01:30
    assert rule - both == set()  # 01:30 exists on spring-forward night (the gap is 02:xx)


@pytest.mark.parametrize("repeated,missing,message", [
    ("twice", None, "dst_repeated must be one of first, both, got 'twice'"),
    (None, "later", "dst_missing must be one of shift, skip, got 'later'"),
    ("", None, "dst_repeated must be one of first, both, got ''"),
])
def test_bad_override_values_are_refused(repeated: str | None, missing: str | None, message: str) -> None:
    with pytest.raises(ScheduleError) as info:
        CronSchedule.parse("30 2 * * *", NY, repeated, missing)
    assert str(info.value) == message


def labels(expression: str, zone: str, after: str, count: int, **policy: str) -> list[tuple[str, tuple[str, ...]]]:
    runs = CronSchedule(expression, zone, **policy).labelled_runs(utc(after), count)
    return [(r.at.strftime("%m-%d %H:%M"), r.labels) for r in runs]


def test_preview_labels_shifted_and_skipped() -> None:
    assert labels("30 2 * * *", NY, "2026-03-07 12:00", 2) == [("03-08 07:00", ("dst_shifted",)), ("03-09 06:30", ())]
    assert labels("30 2 * * *", NY, "2026-03-07 12:00", 2, dst_missing="skip") == [
        ("03-09 06:30", ("dst_skipped_before",)), ("03-10 06:30", ())]
    # A cadence skips the missing hour by the rule: the next run says so.
    assert labels("0 * * * *", NY, "2026-03-08 05:30", 3) == [
        ("03-08 06:00", ()), ("03-08 07:00", ("dst_skipped_before",)), ("03-08 08:00", ())]
    assert labels("15 2 * * *", LORD_HOWE, "2026-10-03 00:00", 1) == [("10-03 15:30", ("dst_shifted",))]


def test_preview_labels_deduplicated_and_repeated() -> None:
    assert labels("30 1 * * *", LONDON, "2026-10-24 12:00", 2) == [("10-25 00:30", ("dst_deduplicated",)), ("10-26 01:30", ())]
    assert labels("30 1 * * *", LONDON, "2026-10-24 12:00", 3, dst_repeated="both") == [
        ("10-25 00:30", ("dst_repeated",)), ("10-25 01:30", ("dst_repeated",)), ("10-26 01:30", ())]
    assert labels("0 9 * * *", LONDON, "2026-10-24 12:00", 1) == [("10-25 09:00", ())]  # ordinary


def test_preview_notes_say_what_happened_in_local_time() -> None:
    runs = CronSchedule("0,15,30,45 2 * * *", NY).labelled_runs(utc("2026-03-08 00:00"), 1)
    assert runs[0].note == ("2026-03-08 02:00, 02:15, 02:30, 02:45 did not exist (clocks sprang forward): "
                            "run once at the first instant after the gap")
    first, second = CronSchedule("30 1 * * *", NY, "both").labelled_runs(utc("2026-11-01 00:00"), 2)
    assert first.note == "2026-11-01 01:30 happened twice (EDT, then EST): this is the first pass"
    assert second.note == "2026-11-01 01:30 happened twice (EDT, then EST): this is the second pass"
    (dedup,) = CronSchedule("30 1 * * *", NY).labelled_runs(utc("2026-11-01 00:00"), 1)
    assert dedup.note == "2026-11-01 01:30 happened twice (EDT, then EST): runs at the first pass only"
    (plain,) = CronSchedule("30 1 * * *", NY).labelled_runs(utc("2026-06-01 00:00"), 1)
    assert plain.labels == () and plain.note is None


def test_preview_runs_are_next_runs() -> None:
    schedule = CronSchedule("*/20 * * * *", LORD_HOWE, "first", "shift")
    after = utc("2026-04-04 12:00")
    assert [r.at for r in schedule.labelled_runs(after, 50)] == schedule.next_runs(after, 50)


def test_zone_rules_swap_the_tz_database_for_a_block() -> None:
    schedule = CronSchedule.parse("0 9 * * *", NY)
    summer = (utc("2026-07-01 00:00"), utc("2026-07-02 00:00"))
    assert schedule.occurrences(*summer) == [utc("2026-07-01 13:00")]
    # "New York abolishes daylight saving": the same zone name, permanent standard time.
    with zone_rules(lambda name: ZoneInfo("EST") if name == NY else ZoneInfo(name)):
        assert schedule.occurrences(*summer) == [utc("2026-07-01 14:00")]
    assert schedule.occurrences(*summer) == [utc("2026-07-01 13:00")]  # caches cleared on the way out
