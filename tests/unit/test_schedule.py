"""Unit tests for schedulerd.core.schedule: cron parsing, the DST rule, errors, caching, smear."""

from __future__ import annotations

import doctest
import functools
import math
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from schedulerd.core import schedule
from schedulerd.core.schedule import CronSchedule, ScheduleError, smear_offset_s

UTC = timezone.utc
NY = "America/New_York"
LONDON = "Europe/London"
LORD_HOWE = "Australia/Lord_Howe"  # +10:30 standard, +11:00 summer: a 30-minute shift


def utc(text: str) -> datetime:
    """'2026-03-08 07:00' -> aware UTC datetime."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def local_day(expression: str, zone: str, day: date) -> list[datetime]:
    """Runs whose instant falls within the local calendar day `day` in `zone`."""
    tz = ZoneInfo(zone)
    start = datetime(day.year, day.month, day.day, tzinfo=tz).astimezone(UTC)
    end = datetime.combine(day + timedelta(days=1), datetime.min.time(), tz).astimezone(UTC)
    tick = timedelta(microseconds=1)  # occurrences() is (after, until]; we want [start, end)
    return CronSchedule.parse(expression, zone).occurrences(start - tick, end - tick)


# (expression, zone, local day, expected UTC runs that day)
DST_EXACT = [
    # Spring forward in New York: 02:00-02:59 does not exist; fixed times run at 03:00 EDT.
    ("30 2 * * *", NY, date(2026, 3, 8), ["2026-03-08 07:00"]),
    ("0,15,30,45 2 * * *", NY, date(2026, 3, 8), ["2026-03-08 07:00"]),  # collapse into one
    ("0,30 2-3 * * *", NY, date(2026, 3, 8), ["2026-03-08 07:00", "2026-03-08 07:30"]),
    # Fall back in New York: 01:00-01:59 happens twice; fixed times run the first time only.
    ("30 1 * * *", NY, date(2026, 11, 1), ["2026-11-01 05:30"]),
    ("*/30 1 * * *", NY, date(2026, 11, 1),  # cadence: both passes of the hour
     ["2026-11-01 05:00", "2026-11-01 05:30", "2026-11-01 06:00", "2026-11-01 06:30"]),
    # London: 01:00 GMT -> 02:00 BST on 03-29, 02:00 BST -> 01:00 GMT on 10-25.
    ("30 1 * * *", LONDON, date(2026, 3, 29), ["2026-03-29 01:00"]),
    ("0 9 * * *", LONDON, date(2026, 3, 29), ["2026-03-29 08:00"]),
    ("30 1 * * *", LONDON, date(2026, 10, 25), ["2026-10-25 00:30"]),
    ("*/30 1 * * *", LONDON, date(2026, 10, 25),
     ["2026-10-25 00:00", "2026-10-25 00:30", "2026-10-25 01:00", "2026-10-25 01:30"]),
    # Lord Howe spring 2026-10-04: 02:00 +10:30 -> 02:30 +11:00, so 02:00-02:29 is the gap.
    ("30 2 * * *", LORD_HOWE, date(2026, 10, 4), ["2026-10-03 15:30"]),  # exists: not in the gap
    ("0 2 * * *", LORD_HOWE, date(2026, 10, 4), ["2026-10-03 15:30"]),  # gap -> 02:30 +11:00
    ("15 2 * * *", LORD_HOWE, date(2026, 10, 4), ["2026-10-03 15:30"]),
    # Lord Howe autumn 2026-04-05: 02:00 +11:00 -> 01:30 +10:30, so 01:30-01:59 repeats.
    ("30 2 * * *", LORD_HOWE, date(2026, 4, 5), ["2026-04-04 16:00"]),  # after the repeat: once
    ("30 1 * * *", LORD_HOWE, date(2026, 4, 5), ["2026-04-04 14:30"]),  # first pass, +11:00
    ("45 1 * * *", LORD_HOWE, date(2026, 4, 5), ["2026-04-04 14:45"]),
    ("15 1 * * *", LORD_HOWE, date(2026, 4, 5), ["2026-04-04 14:15"]),  # before the repeat
    # Santiago springs forward at midnight on 2026-09-06 (00:00 -04 -> 01:00 -03).
    ("0 0 * * *", "America/Santiago", date(2026, 9, 6), ["2026-09-06 04:00"]),
    # ... and falls back at midnight on 2026-04-05 (00:00 -03 -> 23:00 -04 on 04-04).
    ("30 23 * * *", "America/Santiago", date(2026, 4, 4), ["2026-04-05 02:30"]),
    # Dublin's winter time is "negative DST" in tzdata; wall clocks behave like London's.
    ("0 9 * * *", "Europe/Dublin", date(2026, 1, 15), ["2026-01-15 09:00"]),
    ("0 9 * * *", "Europe/Dublin", date(2026, 7, 1), ["2026-07-01 08:00"]),
    ("30 1 * * *", "Europe/Dublin", date(2026, 10, 25), ["2026-10-25 00:30"]),
    ("30 1 * * *", "Europe/Dublin", date(2026, 3, 29), ["2026-03-29 01:00"]),
]


@pytest.mark.parametrize("expression,zone,day,expected", DST_EXACT)
def test_dst_exact_runs(expression: str, zone: str, day: date, expected: list[str]) -> None:
    assert local_day(expression, zone, day) == [utc(t) for t in expected]


# (expression, zone, local day, number of runs that day)
DST_COUNTS = [
    ("0 * * * *", NY, date(2026, 11, 1), 25),
    ("0 * * * *", NY, date(2026, 3, 8), 23),
    ("0 * * * *", NY, date(2026, 6, 1), 24),
    ("@hourly", NY, date(2026, 11, 1), 25),
    ("0 0-23 * * *", NY, date(2026, 11, 1), 24),  # no '*': fixed wall-clock times, 01:00 once
    ("0 0-23 * * *", NY, date(2026, 3, 8), 23),  # 02:00 maps onto 03:00 and collapses
    ("0 * * * *", LONDON, date(2026, 3, 29), 23),
    ("0 * * * *", LONDON, date(2026, 10, 25), 25),
    ("0 * * * *", "Europe/Dublin", date(2026, 3, 29), 23),
    ("0 * * * *", "Europe/Dublin", date(2026, 10, 25), 25),
    ("*/30 * * * *", LORD_HOWE, date(2026, 10, 4), 47),  # 02:00 does not exist
    ("*/30 * * * *", LORD_HOWE, date(2026, 4, 5), 49),  # 01:30 happens twice
    ("0 * * * *", LORD_HOWE, date(2026, 4, 5), 24),  # the repeat is :30-:59, no :00 in it
    ("0 * * * *", "America/Santiago", date(2026, 9, 6), 23),
    ("* * * * *", "UTC", date(2026, 3, 8), 1440),
]


@pytest.mark.parametrize("expression,zone,day,count", DST_COUNTS)
def test_dst_run_counts(expression: str, zone: str, day: date, count: int) -> None:
    assert len(local_day(expression, zone, day)) == count


def test_midnight_spring_forward_sequence() -> None:
    # Daily midnight in Santiago around its 2026-09-06 00:00 -> 01:00 jump.
    s = CronSchedule.parse("@daily", "America/Santiago")
    assert s.next_runs(utc("2026-09-04 12:00"), 3) == [
        utc("2026-09-05 04:00"),  # 00:00 -04
        utc("2026-09-06 04:00"),  # 00:00 does not exist: 01:00 -03
        utc("2026-09-07 03:00"),  # 00:00 -03
    ]


# Zones with unusual transitions: 30/45-minute offsets, 30-minute and 2-hour shifts, midnight
# changes, negative DST, Ramadan suspensions, and Samoa skipping 2011-12-30 entirely.
ZONES_YEARS = [
    (NY, 2026), (LONDON, 2026), ("Europe/Dublin", 2026), (LORD_HOWE, 2026),
    ("America/Santiago", 2026), ("America/Havana", 2026), ("Asia/Beirut", 2026),
    ("Antarctica/Troll", 2026), ("Africa/Casablanca", 2026), ("Pacific/Chatham", 2026),
    ("Australia/Sydney", 2026), ("Asia/Kathmandu", 2026), ("Pacific/Apia", 2011),
    ("America/St_Johns", 2026), ("UTC", 2026),
]


@functools.cache
def transitions(zone_name: str, year: int) -> tuple[datetime, ...]:
    """UTC instants (to the quarter hour) where the zone's offset changes during `year`."""
    zone, out, u = ZoneInfo(zone_name), [], datetime(year, 1, 1, tzinfo=UTC)
    prev = u.astimezone(zone).utcoffset()
    while u.year == year:
        u += timedelta(minutes=15)
        if (off := u.astimezone(zone).utcoffset()) != prev:
            out.append(u)
            prev = off
    return tuple(out) or (datetime(year, 6, 1, tzinfo=UTC),)  # no DST: still test a window


@functools.cache
def walls_around(zone_name: str, t: datetime) -> tuple[tuple[datetime, datetime], ...]:
    """(instant, naive wall clock) for every minute from t - 3 days to t + 4 days."""
    zone, start = ZoneInfo(zone_name), t - timedelta(days=3)
    minutes = (start + timedelta(minutes=i) for i in range(7 * 24 * 60))
    return tuple((u, u.astimezone(zone).replace(tzinfo=None, fold=0)) for u in minutes)


def brute_force(expression: str, wall_clock: bool, window: tuple[datetime, datetime],
                walls: tuple[tuple[datetime, datetime], ...]) -> list[datetime]:
    """The DST rule restated minute by minute over real instants, independent of the module."""
    spec = schedule._compile(expression)
    after, until = window

    def wanted(wall: datetime) -> bool:
        return spec.matches(wall.date()) and timedelta(hours=wall.hour, minutes=wall.minute) in spec.times

    if not wall_clock:
        return [u for u, w in walls if after < u <= until and wanted(w)]
    first: dict[datetime, datetime] = {}
    for u, w in walls:
        first.setdefault(w, u)
    runs: set[datetime] = set()
    day, last = walls[0][1].date() + timedelta(days=1), walls[-1][1].date() - timedelta(days=1)
    while day <= last:
        if spec.matches(day):
            for td in spec.times:
                n = datetime(day.year, day.month, day.day) + td
                # Exists: its first instant. In a gap: the first instant whose clock is past it.
                runs.add(first[n] if n in first else next(u for u, w in walls if w > n))
        day += timedelta(days=1)
    return sorted(u for u in runs if after < u <= until)


@pytest.mark.parametrize("zone_name,year", ZONES_YEARS)
@pytest.mark.parametrize("expression", ["*/15 * * * *", "0 * * * *", "30 2 * * *", "0 0 * * *",
                                        "0,30 1-3 * * *", "45 23 * * *"])
def test_matches_brute_force_around_transitions(expression: str, zone_name: str, year: int) -> None:
    s = CronSchedule.parse(expression, zone_name)
    for t in transitions(zone_name, year):
        window = (t - timedelta(days=2), t + timedelta(days=2))
        got = s.occurrences(*window)
        expected = brute_force(expression, s.wall_clock, window, walls_around(zone_name, t))
        assert got == expected, (zone_name, t)
        assert all(a < b for a, b in zip(got, got[1:]))  # strictly increasing, no shared instant


@pytest.mark.parametrize("zone_name", ["Europe/Dublin", NY, LORD_HOWE, "Pacific/Apia", "Africa/Casablanca"])
@pytest.mark.parametrize("expression", ["* * * * *", "*/7 * * * *", "30 1 * * *", "0,15,30,45 2 * * *"])
def test_whole_year_strictly_increasing(expression: str, zone_name: str) -> None:
    year = (utc("2026-01-01 00:00"), utc("2027-01-01 00:00"))
    runs = CronSchedule.parse(expression, zone_name).occurrences(*year)
    assert runs and all(a < b for a, b in zip(runs, runs[1:]))
    assert all(r.tzinfo is UTC for r in runs)


# In UTC there is no DST, so croniter is a fair oracle for the field semantics.
ORACLE = ["*/7 * * * *", "0 9-17/2 * * MON-FRI", "15,45 3 1,15 * *", "0 0 1 JAN,JUL *", "0 12 * * SUN",
          "0 12 * * 7", "0 0 13 * FRI", "30 4 1-7 * 1", "5 4 * * sun", "0 0 1 jan *", "@weekly",
          "@monthly", "@yearly", "@annually", "@daily", "@midnight", "@hourly", "0 0 29 2 *",
          "59 23 31 DEC *", "0-10/5,50 */6 * * *"]


@pytest.mark.parametrize("expression", ORACLE)
def test_utc_agrees_with_croniter(expression: str) -> None:
    start = utc("2026-01-01 00:00")
    it = croniter(expression, start)
    assert CronSchedule.parse(expression).next_runs(start, 40) == [it.get_next(datetime) for _ in range(40)]


def test_names_and_macros() -> None:
    week = CronSchedule.parse("0 9 * * MON-FRI").occurrences(
        utc("2026-03-01 00:00"), utc("2026-03-08 00:00"))
    assert [r.strftime("%a %d") for r in week] == ["Mon 02", "Tue 03", "Wed 04", "Thu 05", "Fri 06"]
    assert CronSchedule.parse("0 0 1 JAN *").next_runs(utc("2026-06-01 00:00"), 2) == [
        utc("2027-01-01 00:00"), utc("2028-01-01 00:00")]
    day = (utc("2026-05-01 00:00"), utc("2026-05-02 00:00"))
    assert len(CronSchedule.parse("@hourly").occurrences(*day)) == 24
    assert CronSchedule.parse("0 9 * * mon-fri").occurrences(*day) == [utc("2026-05-01 09:00")]


def test_day_fields_or_when_both_restricted_and_when_star() -> None:
    # Both restricted: the 13th OR any Friday. A '*/2' day-of-month counts as unrestricted (Vixie
    # cron), so it ANDs with Friday: odd-dated Fridays only. (croniter 7 ORs here; we follow cron.)
    start, until = utc("2026-02-01 00:00"), utc("2026-03-01 00:00")
    either = CronSchedule.parse("0 0 13 * FRI").occurrences(start, until)
    assert [r.day for r in either] == [6, 13, 20, 27]
    both = CronSchedule.parse("0 0 */2 * FRI").occurrences(start, until)
    assert [r.day for r in both] == [13, 27]


@pytest.mark.parametrize("expression,wall_clock", [
    ("30 2 * * *", True), ("0,30 9-17 * * *", True), ("@daily", True), ("0 0-23/2 * * *", True),
    ("0 * * * *", False), ("*/15 9 * * *", False), ("@hourly", False), ("* * * * *", False),
])
def test_wall_clock_classification(expression: str, wall_clock: bool) -> None:
    assert CronSchedule.parse(expression).wall_clock is wall_clock


def bad(expr: str, detail: str) -> tuple[str, str, str]:
    return (expr, "UTC", f"bad cron expression {expr!r}: {detail}")


def bad_zone(zone: str, message: str) -> tuple[str, str, str]:
    return ("0 0 * * *", zone, message.format(zone=repr(zone)))


FIVE = "expected 5 fields (minute hour day-of-month month day-of-week)"
OFFSET = ("time zone {zone} is a UTC offset, which ignores daylight saving; "
          "use an IANA zone name such as 'Europe/Berlin' (or 'UTC')")
NOT_IANA = "time zone {zone} is not an IANA zone name such as 'Europe/London'"
MACROS = "@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly"
ERRORS = [
    bad("* * * *", f"{FIVE}, got 4"),
    bad("* * * * * *", f"{FIVE}, got 6"),
    bad("", f"{FIVE}, got 0"),
    bad("61 * * * *", "minute field '61': 61 is out of range 0-59"),
    bad("0 24 * * *", "hour field '24': 24 is out of range 0-23"),
    bad("0 0 0 * *", "day-of-month field '0': 0 is out of range 1-31"),
    bad("0 0 * 13 *", "month field '13': 13 is out of range 1-12"),
    bad("0 0 * * 8", "day-of-week field '8': 8 is out of range 0-7"),
    bad("0 0-70 * * *", "hour field '0-70': 70 is out of range 0-23"),
    bad("*/0 * * * *", "minute field '*/0': step must be at least 1, got 0"),
    bad("*/x * * * *", "minute field '*/x': step 'x' is not a number"),
    bad("5/15 * * * *", "minute field '5/15': a step needs '*' or a range, e.g. '5-59/15'"),
    bad("0 0 * * FRI-MON", "day-of-week field 'FRI-MON': range 'FRI-MON' runs backwards"),
    bad("foo bar baz qux quux", "minute field 'foo': 'foo' is not a number"),
    bad("0 0 * FOO *", "month field 'FOO': 'FOO' is not a number or a name like JAN"),
    bad("0 0 * * MONDAY", "day-of-week field 'MONDAY': 'MONDAY' is not a number or a name like SUN"),
    bad("1,,2 * * * *", "minute field '1,,2': '' is not a number"),
    bad("0 0 L * FRI-L", "day-of-week field 'FRI-L': not a day-of-week form: use a weekday, FRI#2 (the second "
                         "Friday) or FRIL / 5L (the last Friday), never in a range or step"),
    bad("@reboot", f"unknown macro; use one of {MACROS}, or '@every 5m' for an interval"),
    ("0 0 31 2 *", "UTC", "cron expression '0 0 31 2 *' never fires: no month in '2' has a day '31'"),
    ("0 0 30,31 FEB *", "UTC",
     "cron expression '0 0 30,31 FEB *' never fires: no month in 'FEB' has a day '30,31'"),
    ("0 0 31 4,6,9,11 *", "UTC",
     "cron expression '0 0 31 4,6,9,11 *' never fires: no month in '4,6,9,11' has a day '31'"),
    bad_zone("Mars/Olympus", "unknown time zone {zone}: not in the IANA tz database"),
    bad_zone("America", "unknown time zone {zone}: not in the IANA tz database"),  # a directory
    bad_zone("+02:00", OFFSET),
    bad_zone("UTC+2", OFFSET),
    bad_zone("GMT-5", OFFSET),
    bad_zone("-0530", OFFSET),
    bad_zone("../etc/passwd", NOT_IANA),
    bad_zone("/etc/passwd", NOT_IANA),
    bad_zone("zone.tab", NOT_IANA),
    bad_zone("", NOT_IANA),
    bad_zone("localtime", "time zone 'localtime' depends on the host; name the IANA zone"),
]


@pytest.mark.parametrize("expression,zone,message", ERRORS)
def test_errors_name_the_problem(expression: str, zone: str, message: str) -> None:
    with pytest.raises(ScheduleError) as info:
        CronSchedule.parse(expression, zone)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)
    with pytest.raises(ScheduleError):  # direct construction validates too
        CronSchedule(expression, zone)


@pytest.mark.parametrize("expression", ["0 0 29 2 *", "0 0 31 * *", "0 0 31 2 MON", "0 0 30 2 MON"])
def test_rare_but_possible_schedules_accepted(expression: str) -> None:
    # Feb 29 exists in leap years; day 31 in some months; with both day fields restricted they OR,
    # so '0 0 31 2 MON' fires every Monday even though Feb 31 never comes.
    assert len(CronSchedule.parse(expression).next_runs(utc("2026-01-01 00:00"), 3)) == 3


def test_never_fires_with_anded_weekday() -> None:
    # '*/7' starts with '*', so the day fields AND: Feb 30 on a Sunday never comes.
    with pytest.raises(ScheduleError, match="never fires: no month in '2' has a day '30'"):
        CronSchedule.parse("0 0 30 2 */7")


def test_leap_day_sunday_waits_decades() -> None:
    # Feb 29 that is also a Sunday ('*/7' starts with '*', so the day fields AND): 2032, 2060.
    runs = CronSchedule.parse("0 0 29 2 */7").next_runs(utc("2026-01-01 00:00"), 2)
    assert runs == [utc("2032-02-29 00:00"), utc("2060-02-29 00:00")]


@pytest.mark.parametrize("call", [
    lambda s: s.occurrences(datetime(2026, 1, 1), utc("2026-01-02 00:00")),
    lambda s: s.occurrences(utc("2026-01-01 00:00"), datetime(2026, 1, 2)),
    lambda s: s.next_runs(datetime(2026, 1, 1), 1),
])
def test_naive_datetimes_refused(call: Callable[[CronSchedule], object]) -> None:
    with pytest.raises(ValueError, match="must be a timezone-aware datetime, got naive 2026-01-0"):
        call(CronSchedule.parse("* * * * *"))


def test_next_runs_count_and_bounds() -> None:
    s = CronSchedule.parse("*/15 * * * *", NY)
    after = utc("2026-11-01 04:50")
    runs = s.next_runs(after, 10)
    assert len(runs) == 10 and runs[0] > after
    assert runs == s.occurrences(after, runs[-1])  # same answer as the window form
    assert s.next_runs(after, 0) == []
    assert s.next_runs(runs[0], 1) == [runs[1]]  # strictly after
    with pytest.raises(ValueError, match="count must be >= 0"):
        s.next_runs(after, -1)


def test_window_is_after_exclusive_until_inclusive_and_zone_agnostic() -> None:
    s = CronSchedule.parse("0 * * * *")
    assert s.occurrences(utc("2026-01-01 00:00"), utc("2026-01-01 02:00")) == [
        utc("2026-01-01 01:00"), utc("2026-01-01 02:00")]
    assert s.occurrences(utc("2026-01-01 02:00"), utc("2026-01-01 01:00")) == []
    tokyo = timezone(timedelta(hours=9))
    in_tokyo = (datetime(2026, 1, 1, 9, tzinfo=tokyo), datetime(2026, 1, 1, 11, tzinfo=tokyo))
    assert s.occurrences(*in_tokyo) == [utc("2026-01-01 01:00"), utc("2026-01-01 02:00")]


def test_next_runs_stops_at_the_end_of_time() -> None:
    assert CronSchedule.parse("@yearly").next_runs(utc("9998-06-01 00:00"), 5) == [utc("9999-01-01 00:00")]


def test_cache_shared_across_schedules_and_results_are_copies() -> None:
    schedule._cached.cache_clear()
    window = (utc("2026-01-01 00:00"), utc("2026-01-01 06:00"))
    first = CronSchedule.parse("* * * * *").occurrences(*window)
    first.clear()  # callers may mutate their list
    second = CronSchedule("* * * * *", "UTC").occurrences(*window)
    assert len(second) == 360
    info = schedule._cached.cache_info()
    assert (info.hits, info.misses) == (1, 1)


def test_docstring_examples() -> None:
    assert doctest.testmod(schedule, raise_on_error=False).failed == 0


def test_smear_is_stable_bounded_and_uniform() -> None:
    assert smear_offset_s("job-42", 60.0) == smear_offset_s("job-42", 60.0)
    assert smear_offset_s("job-42", 60.0) == 25.77839567590646  # pinned: same in every process
    assert smear_offset_s("job-42", 0) == 0.0
    buckets = [0] * 10
    for i in range(20_000):
        offset = smear_offset_s(f"job-{i}", 60.0)
        assert 0.0 <= offset < 60.0
        buckets[int(offset // 6)] += 1
    assert all(1_800 < b < 2_200 for b in buckets), buckets  # ~4.5 sigma either side of 2,000
    assert smear_offset_s("x", 5e-324) < 5e-324  # even the smallest window stays half-open
    for bad in (-1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="window_s must be finite and >= 0"):
            smear_offset_s("job", bad)



# --- the calendar's ends -----------------------------------------------------------------------

FIRST, LAST = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)


@pytest.mark.parametrize(("expression", "zone", "after", "count", "first", "total"), [
    # A start on 0001-01-01 (the first instant Python holds) in UTC, behind UTC and ahead of it.
    ("0 0 * * *", "UTC", FIRST, 3, datetime(1, 1, 2, tzinfo=UTC), 3),
    ("* * * * *", "UTC", FIRST, 3, datetime(1, 1, 1, 0, 1, tzinfo=UTC), 3),
    ("0 0 * * *", "America/New_York", FIRST, 3, datetime(1, 1, 1, 4, 56, 2, tzinfo=UTC), 3),  # LMT -4:56:02
    ("0 0 * * *", "Asia/Tokyo", FIRST, 3, datetime(1, 1, 1, 14, 41, 1, tzinfo=UTC), 3),  # LMT +9:18:59: local 01-02 00:00
    # Runs up to 9999-12-31, in UTC and in zones ahead of and behind it; then no more.
    ("0 0 * * *", "UTC", datetime(9999, 12, 29, tzinfo=UTC), 5, datetime(9999, 12, 30, tzinfo=UTC), 2),
    ("59 23 31 12 *", "UTC", datetime(9999, 1, 1, tzinfo=UTC), 5, datetime(9999, 12, 31, 23, 59, tzinfo=UTC), 1),
    ("0 0 * * *", "Pacific/Kiritimati", datetime(9999, 12, 29, tzinfo=UTC), 5, datetime(9999, 12, 29, 10, tzinfo=UTC), 2),
    ("0 12 * * *", "Asia/Tokyo", datetime(9999, 12, 29, tzinfo=UTC), 5, datetime(9999, 12, 29, 3, tzinfo=UTC), 3),
    ("30 23 * * *", "America/New_York", datetime(9999, 12, 29, tzinfo=UTC), 5, datetime(9999, 12, 29, 4, 30, tzinfo=UTC), 3),
    ("0 0 1 1 *", "UTC", datetime(9999, 6, 1, tzinfo=UTC), 5, None, 0),
    ("* * * * *", "UTC", LAST - timedelta(minutes=2, seconds=30), 5, datetime(9999, 12, 31, 23, 58, tzinfo=UTC), 2),
])  # fmt: skip
def test_the_calendars_ends(expression, zone, after, count, first, total) -> None:
    schedule = CronSchedule.parse(expression, zone)
    runs = schedule.next_runs(after, count)
    assert len(runs) == total, runs
    assert (runs[0] if runs else None) == first
    assert [r.at for r in schedule.labelled_runs(after, count)] == runs
    assert all(a < b for a, b in zip(runs, runs[1:]))
    window_end = LAST if LAST - after < timedelta(days=400) else after + timedelta(days=10)
    assert schedule.occurrences(after, window_end)[:count] == runs
    for run in runs:  # each is a real local wall time of the schedule, readable in its zone
        run.astimezone(ZoneInfo(zone))


def test_a_dst_zone_near_year_9999_keeps_its_rules() -> None:
    # New York's POSIX rule still springs forward in 9999: 23 hourly runs on that day.
    runs = CronSchedule.parse("0 * * * *", "America/New_York").occurrences(
        datetime(9999, 3, 14, 5, tzinfo=UTC) - timedelta(microseconds=1), datetime(9999, 3, 15, 4, tzinfo=UTC) - timedelta(microseconds=1))
    assert len(runs) == 23


def _weekdays(expression: str) -> list[str]:
    """The weekdays of the runs in the first two weeks of 2026 (Thu 1 .. Wed 14 January)."""
    runs = CronSchedule.parse(expression).occurrences(utc("2026-01-01 00:00") - timedelta(seconds=1), utc("2026-01-14 23:59"))
    return [r.strftime("%a %d") for r in runs]


# (day-of-week field, the runs of `0 0 * * <field>` from Thu 2026-01-01 to Wed 2026-01-14)
WEEKDAY_FIELDS = [
    ("SUN", ["Sun 04", "Sun 11"]),
    ("Sun-Sun", ["Sun 04", "Sun 11"]),  # a range from Sunday to Sunday is Sunday alone, not 0-7
    ("SUN-SUN", ["Sun 04", "Sun 11"]),
    ("0-SUN", ["Sun 04", "Sun 11"]),
    ("SUN-0", ["Sun 04", "Sun 11"]),
    ("0-0", ["Sun 04", "Sun 11"]),
    ("7", ["Sun 04", "Sun 11"]),
    ("7-7", ["Sun 04", "Sun 11"]),
    ("SAT-SUN", ["Sat 03", "Sun 04", "Sat 10", "Sun 11"]),  # ending on SUN after a later day: 6-7
    ("FRI-SUN", ["Fri 02", "Sat 03", "Sun 04", "Fri 09", "Sat 10", "Sun 11"]),
    ("SUN-MON", ["Sun 04", "Mon 05", "Sun 11", "Mon 12"]),
    ("SUN-SAT", ["Thu 01", "Fri 02", "Sat 03", "Sun 04", "Mon 05", "Tue 06", "Wed 07",
                 "Thu 08", "Fri 09", "Sat 10", "Sun 11", "Mon 12", "Tue 13", "Wed 14"]),
    ("0-7/7", ["Sun 04", "Sun 11"]),
    ("MON-SUN/7", ["Mon 05", "Mon 12"]),  # 1-7 step 7: Monday only
]


@pytest.mark.parametrize("field,expected", WEEKDAY_FIELDS)
def test_weekday_ranges(field: str, expected: list[str]) -> None:
    assert _weekdays(f"0 0 * * {field}") == expected


# (day-of-week field, the first three runs of `0 0 * * <field>` after 2026-01-01): `<day>L` is
# Quartz's last such weekday of the month, for a name or a number (0 and 7 both Sunday).
LAST_WEEKDAY_FIELDS = [
    ("MONL", ["Mon 2026-01-26", "Mon 2026-02-23", "Mon 2026-03-30"]),
    ("monL", ["Mon 2026-01-26", "Mon 2026-02-23", "Mon 2026-03-30"]),
    ("1L", ["Mon 2026-01-26", "Mon 2026-02-23", "Mon 2026-03-30"]),
    ("SUNL", ["Sun 2026-01-25", "Sun 2026-02-22", "Sun 2026-03-29"]),
    ("0L", ["Sun 2026-01-25", "Sun 2026-02-22", "Sun 2026-03-29"]),
    ("7L", ["Sun 2026-01-25", "Sun 2026-02-22", "Sun 2026-03-29"]),
    ("MONL,FRIL", ["Mon 2026-01-26", "Fri 2026-01-30", "Mon 2026-02-23"]),
]


@pytest.mark.parametrize("field,expected", LAST_WEEKDAY_FIELDS)
def test_last_weekday_of_the_month(field: str, expected: list[str]) -> None:
    runs = CronSchedule.parse(f"0 0 * * {field}").next_runs(utc("2026-01-01 00:00"), 3)
    assert [r.strftime("%a %Y-%m-%d") for r in runs] == expected


@pytest.mark.parametrize("field", ["L", "MON-FRIL", "MONL-FRI", "MONL/2", "MONDAYL", "8L", "LMON"])
def test_last_weekday_forms_refused(field: str) -> None:
    with pytest.raises(ScheduleError):
        CronSchedule.parse(f"0 0 * * {field}")
