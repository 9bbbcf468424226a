"""Quartz's day forms (L, L-n, LW, nW, d#k, dL, ?, MON-SUN) and @every intervals in
schedulerd.core.schedule: against cronsim in several zones across DST, against a restatement of
W from its definition, and hand-written vectors."""

from __future__ import annotations

import calendar
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim

from schedulerd.core.schedule import MIN_INTERVAL_S, CronSchedule, ScheduleError, schedule_of

UTC = timezone.utc
NY, LONDON, LORD_HOWE = "America/New_York", "Europe/London", "Australia/Lord_Howe"


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def days(expression: str, start: str, count: int, zone: str = "UTC") -> list[str]:
    """The local dates of the next `count` runs after `start` (UTC)."""
    runs = CronSchedule.parse(expression, zone).next_runs(utc(start), count)
    return [r.astimezone(ZoneInfo(zone)).strftime("%a %Y-%m-%d") for r in runs]


# --- cronsim as the oracle for L, LW, dL and d#k --------------------------------------------------
# cronsim follows Debian cron: OR when both day fields are restricted, fixed times (minute and
# hour not starting with '*') moved past a spring-forward gap and run once on a fall-back night,
# other times at each real instant whose wall clock matches. Our rule agrees on these forms, so
# any difference is a bug in one of the two. cronsim has no nW, L-n, '?' nor weekday names before
# L: those are checked below by restatement and by hand.

ORACLE_EXPRESSIONS = [
    "0 0 L * *", "30 2 L * *", "0 9 LW * *", "30 1 * * 0L", "30 2 * * SUN#2", "30 1 * * SUN#1",
    "0 2 * * 0#1", "15 2 * * 0#1", "0 * L * *", "*/30 1-3 * * 0L", "15 10 L 2 *", "0 12 * * 5#5",
    "0 0 1,L * *", "0 0 13 * 5L", "0 0 */2 * 5#1", "0 0 LW * FRI", "0 6 * * 1#1,5L", "45 23 L * *",
    "0 0 * 2 MON#5", "30 2 * * 7#2",
]  # fmt: skip
ORACLE_ZONES = ["UTC", NY, LONDON, LORD_HOWE, "America/Santiago", "Asia/Jerusalem"]


def cronsim_runs(expression: str, zone: str, start: datetime, count: int) -> list[datetime]:
    it = CronSim(expression, start.astimezone(ZoneInfo(zone)))
    out: list[datetime] = []
    for local in it:
        out.append(local.astimezone(UTC))
        if len(out) == count:
            break
    return out


@pytest.mark.parametrize("zone", ORACLE_ZONES)
@pytest.mark.parametrize("expression", ORACLE_EXPRESSIONS)
def test_agrees_with_cronsim_across_dst(expression: str, zone: str) -> None:
    start = utc("2025-12-20 00:00")
    ours = CronSchedule.parse(expression, zone).next_runs(start, 40)
    assert ours == cronsim_runs(expression, zone, start, 40)
    assert len(ours) == 40 and all(a < b for a, b in zip(ours, ours[1:]))


@pytest.mark.parametrize(("expression", "zone", "start", "local_runs", "label"), [
    # London's clocks change on the last Sunday of March and October, at 01:00 UTC.
    ("30 1 * * 0L", LONDON, "2026-03-01", ["2026-03-29 02:00 BST", "2026-04-26 01:30 BST"], "dst_shifted"),
    ("30 1 * * SUNL", LONDON, "2026-10-01", ["2026-10-25 01:30 BST", "2026-11-29 01:30 GMT"], "dst_deduplicated"),
    # New York: second Sunday of March (spring) and first Sunday of November (fall back).
    ("30 2 * * SUN#2", NY, "2026-03-01", ["2026-03-08 03:00 EDT", "2026-04-12 02:30 EDT"], "dst_shifted"),
    ("30 1 ? * SUN#1", NY, "2026-10-05", ["2026-11-01 01:30 EDT", "2026-12-06 01:30 EST"], "dst_deduplicated"),
    # Lord Howe: first Sunday of October, 02:00 +10:30 -> 02:30 +11.
    ("0 2 ? * SUN#1", LORD_HOWE, "2026-09-30", ["2026-10-04 02:30 +11", "2026-11-01 02:00 +11"], "dst_shifted"),
    # Israel springs forward on a Friday (02:00 -> 03:00): 2026-03-27 is 27W and L-4; in 2027 the
    # 27th is a Saturday, so 27W moves back to Friday the 26th, that year's spring-forward day.
    ("30 2 27W 3 *", "Asia/Jerusalem", "2026-03-01", ["2026-03-27 03:00 IDT", "2027-03-26 03:00 IDT"], "dst_shifted"),
    ("30 2 L-4 3 *", "Asia/Jerusalem", "2026-03-01", ["2026-03-27 03:00 IDT", "2027-03-27 02:30 IDT"], "dst_shifted"),
])  # fmt: skip
def test_day_forms_keep_the_dst_rule(expression: str, zone: str, start: str, local_runs: list[str], label: str) -> None:
    s = CronSchedule.parse(expression, zone)
    after = utc(f"{start} 00:00")
    runs = s.next_runs(after, 2)
    assert [r.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M %Z") for r in runs] == local_runs
    labelled = s.labelled_runs(after, 2)
    assert [r.at for r in labelled] == runs
    assert labelled[0].labels == (label,) and labelled[1].labels == (() if "27W" not in expression else (label,))


# --- W restated from its definition ----------------------------------------------------------------


def nearest_weekday(year: int, month: int, n: int) -> int | None:
    """The weekday (Mon-Fri) of the month closest to day n; None when the month has no day n."""
    last = calendar.monthrange(year, month)[1]
    if n > last:
        return None
    weekdays = [d for d in range(1, last + 1) if date(year, month, d).weekday() < 5]
    return min(weekdays, key=lambda d: abs(d - n))  # never a tie: weekends are two days


@pytest.mark.parametrize("n", [1, 2, 14, 15, 16, 28, 29, 30, 31])
def test_w_is_the_nearest_weekday_inside_the_month(n: int) -> None:
    runs = CronSchedule.parse(f"0 0 {n}W * *").occurrences(utc("2025-12-31 23:00"), utc("2029-12-31 23:00"))
    expected = [date(y, m, d) for y in range(2026, 2030) for m in range(1, 13)
                if (d := nearest_weekday(y, m, n)) is not None]  # fmt: skip
    assert [r.date() for r in runs] == expected


@pytest.mark.parametrize("n", [0, 1, 2, 5, 27, 30])
def test_l_minus_n_counts_back_from_the_last_day(n: int) -> None:
    runs = CronSchedule.parse(f"0 0 L-{n} * *").occurrences(utc("2025-12-31 23:00"), utc("2028-12-31 23:00"))
    expected = [date(y, m, calendar.monthrange(y, m)[1] - n) for y in range(2026, 2029) for m in range(1, 13)
                if calendar.monthrange(y, m)[1] - n >= 1]  # fmt: skip
    assert [r.date() for r in runs] == expected


# --- hand-written vectors ------------------------------------------------------------------------


@pytest.mark.parametrize(("expression", "start", "expected"), [
    ("0 0 L 2 *", "2027-01-01", ["Sun 2027-02-28", "Tue 2028-02-29", "Wed 2029-02-28"]),  # leap year
    ("0 0 L 4,6,9,11 *", "2026-01-01", ["Thu 2026-04-30", "Tue 2026-06-30", "Wed 2026-09-30"]),  # 30 days
    ("0 0 L-3 2 *", "2026-01-01", ["Wed 2026-02-25", "Thu 2027-02-25", "Sat 2028-02-26"]),
    ("0 0 L-30 * *", "2026-01-01", ["Sun 2026-03-01", "Fri 2026-05-01", "Wed 2026-07-01"]),  # 31-day months only
    # 31W: Jan 31 2026 is a Saturday -> Friday 30th; no day 31 in Feb, Apr; May 31 is a Sunday and
    # the last day, so the nearest weekday inside the month is Friday 29th.
    ("0 0 31W * *", "2026-01-01", ["Fri 2026-01-30", "Tue 2026-03-31", "Fri 2026-05-29"]),
    # 1W: Aug 1 2026 is a Saturday -> Monday 3rd (never back into July); Nov 1 is a Sunday -> 2nd.
    ("0 0 1W 8,11 *", "2026-01-01", ["Mon 2026-08-03", "Mon 2026-11-02", "Mon 2027-08-02"]),
    ("0 0 15W * *", "2026-02-01", ["Mon 2026-02-16", "Mon 2026-03-16", "Wed 2026-04-15"]),
    # 29W: leap Februaries only; 2032-02-29 is a Sunday and the last day -> Friday 27th.
    ("0 0 29W 2 *", "2026-01-01", ["Tue 2028-02-29", "Fri 2032-02-27", "Fri 2036-02-29"]),
    # LW: May 31 2026 is a Sunday -> Friday 29th; Jan 31 2026 a Saturday -> Friday 30th.
    ("0 0 LW * *", "2026-01-01", ["Fri 2026-01-30", "Fri 2026-02-27", "Tue 2026-03-31"]),
    ("0 0 LW 5 *", "2026-01-01", ["Fri 2026-05-29", "Mon 2027-05-31", "Wed 2028-05-31"]),
    # 5#5: only months with a fifth Friday (none in Feb 2026).
    ("0 0 * * 5#5", "2026-01-01", ["Fri 2026-01-30", "Fri 2026-05-29", "Fri 2026-07-31", "Fri 2026-10-30"]),
    ("0 0 * 2 FRI#5", "2026-01-01", ["Fri 2036-02-29", "Fri 2064-02-29"]),
    ("0 0 * * FRI#2", "2026-01-01", ["Fri 2026-01-09", "Fri 2026-02-13", "Fri 2026-03-13"]),
    ("0 0 * * FRIL", "2026-01-01", ["Fri 2026-01-30", "Fri 2026-02-27", "Fri 2026-03-27"]),
    ("0 0 * * 7L", "2026-01-01", ["Sun 2026-01-25", "Sun 2026-02-22", "Sun 2026-03-29"]),  # 7 is Sunday
    ("0 0 * * mon#1,fril", "2026-01-01", ["Mon 2026-01-05", "Fri 2026-01-30", "Mon 2026-02-02"]),
    ("0 0 1,15,L * *", "2026-01-01", ["Thu 2026-01-15", "Sat 2026-01-31", "Sun 2026-02-01"]),
])  # fmt: skip
def test_hand_vectors(expression: str, start: str, expected: list[str]) -> None:
    assert days(expression, f"{start} 00:00", len(expected)) == expected


def test_question_mark_and_sunday_ending_ranges() -> None:
    after = utc("2026-01-01 00:00")
    week = CronSchedule.parse("0 9 * * *").next_runs(after, 30)
    assert CronSchedule.parse("0 9 ? * *").next_runs(after, 30) == week
    assert CronSchedule.parse("0 9 * * ?").next_runs(after, 30) == week
    assert CronSchedule.parse("0 9 * * MON-SUN").next_runs(after, 30) == week
    assert days("0 9 * * SAT-SUN", "2026-01-01 00:00", 3) == ["Sat 2026-01-03", "Sun 2026-01-04", "Sat 2026-01-10"]
    assert days("0 9 * * FRI-SUN", "2026-01-01 00:00", 3) == ["Fri 2026-01-02", "Sat 2026-01-03", "Sun 2026-01-04"]
    assert days("0 9 * * SUN-SAT", "2026-01-01 00:00", 2) == ["Thu 2026-01-01", "Fri 2026-01-02"]


def test_day_fields_or_and_and_rule_holds_for_the_new_forms() -> None:
    # Both restricted (neither starts with '*' nor is '?'): either matches (Vixie cron, cronsim).
    assert days("0 0 L * FRI", "2026-01-01 00:00", 6) == [
        "Fri 2026-01-02", "Fri 2026-01-09", "Fri 2026-01-16", "Fri 2026-01-23", "Fri 2026-01-30", "Sat 2026-01-31"]
    assert days("0 0 1-7 * FRI", "2025-12-31 00:00", 4) == [
        "Thu 2026-01-01", "Fri 2026-01-02", "Sat 2026-01-03", "Sun 2026-01-04"]  # classic: OR
    # '?' (like '*') leaves the other field alone: the first Friday only.
    assert days("0 0 ? * FRI#1", "2026-01-01 00:00", 2) == ["Fri 2026-01-02", "Fri 2026-02-06"]
    # A '*'-led day-of-month ANDs: odd-numbered days that are the month's last Friday.
    assert days("0 0 */2 * 5L", "2026-01-01 00:00", 3) == ["Fri 2026-02-27", "Fri 2026-03-27", "Fri 2026-05-29"]


@pytest.mark.parametrize(("expression", "message"), [
    ("0 0 */15 * MON#2", "cron expression '0 0 */15 * MON#2' never fires: no day of a month in '*' matches "
                         "day-of-month '*/15' and day-of-week 'MON#2'"),
    ("0 0 L-30 2 *", "cron expression '0 0 L-30 2 *' never fires: no day of a month in '2' matches "
                     "day-of-month 'L-30' and day-of-week '*'"),
    ("0 0 30W 2 *", "cron expression '0 0 30W 2 *' never fires: no day of a month in '2' matches "
                    "day-of-month '30W' and day-of-week '*'"),
])  # fmt: skip
def test_never_fires_is_found_exactly(expression: str, message: str) -> None:
    with pytest.raises(ScheduleError) as info:
        CronSchedule.parse(expression)
    assert str(info.value) == message


def bad(expression: str, detail: str) -> tuple[str, str]:
    return expression, f"bad cron expression {expression!r}: {detail}"


ONLY_DAYS = "'L', 'W', '#' and '?' are allowed only in the day-of-month and day-of-week fields"
DOM_FORMS = ("not a day-of-month form: use a number, L, L-3, LW or 15W (L and W stand alone in a list item, "
             "never in a range or step)")  # fmt: skip
DOW_FORMS = ("not a day-of-week form: use a weekday, FRI#2 (the second Friday) or FRIL / 5L (the last Friday), "
             "never in a range or step")  # fmt: skip


@pytest.mark.parametrize(("expression", "message"), [
    bad("L * * * *", f"minute field 'L': {ONLY_DAYS}"),
    bad("0 L * * *", f"hour field 'L': {ONLY_DAYS}"),
    bad("0 0 * 2#1 *", f"month field '2#1': {ONLY_DAYS}"),
    bad("0 0 * 1,L *", f"month field '1,L': 'L': {ONLY_DAYS}"),
    bad("? 0 * * *", "minute field '?': '?' is allowed only in the day-of-month and day-of-week fields (it means '*')"),
    bad("0 0 ?,1 * *", "day-of-month field '?,1': '?': '?' stands alone for the whole field (it means '*')"),
    bad("0 0 * * 8#1", "day-of-week field '8#1': 8 is out of range 0-7"),
    bad("0 0 * * FRI#6", "day-of-week field 'FRI#6': the week of the month after '#' must be 1-5, got 6"),
    bad("0 0 * * MON#0", "day-of-week field 'MON#0': the week of the month after '#' must be 1-5, got 0"),
    bad("0 0 * * FOO#1", "day-of-week field 'FOO#1': 'FOO' is not a number or a name like SUN"),
    bad("0 0 * * #2", f"day-of-week field '#2': {DOW_FORMS}"),
    bad("0 0 * * 1#1-2", f"day-of-week field '1#1-2': {DOW_FORMS}"),
    bad("0 0 * * 8L", "day-of-week field '8L': 8 is out of range 0-7"),
    bad("0 0 * * L", "day-of-week field 'L': 'L' alone is ambiguous in day-of-week (Quartz reads it as Saturday): "
                     "write 5L or FRIL for the last Friday of the month, or put L in the day-of-month field for the "
                     "month's last day"),
    bad("0 0 * * 1,W", f"day-of-week field '1,W': 'W': {DOW_FORMS}"),
    bad("0 0 32W * *", "day-of-month field '32W': 32 is out of range 1-31"),
    bad("0 0 0W * *", "day-of-month field '0W': 0 is out of range 1-31"),
    bad("0 0 W * *", f"day-of-month field 'W': {DOM_FORMS}"),
    bad("0 0 1-5W * *", f"day-of-month field '1-5W': {DOM_FORMS}"),
    bad("0 0 L/2 * *", f"day-of-month field 'L/2': {DOM_FORMS}"),
    bad("0 0 1-L * *", f"day-of-month field '1-L': {DOM_FORMS}"),
    bad("0 0 LW-1 * *", f"day-of-month field 'LW-1': {DOM_FORMS}"),
    bad("0 0 L-31 * *", "day-of-month field 'L-31': days counted back from the last must be 0-30, got 31"),
    bad("0 0 1,L-40 * *", "day-of-month field '1,L-40': 'L-40': days counted back from the last must be 0-30, got 40"),
    bad("0 0 * * SAT-MON", "day-of-week field 'SAT-MON': range 'SAT-MON' runs backwards"),  # no wrapping
    bad("0 0 * * 1-0", "day-of-week field '1-0': range '1-0' runs backwards"),  # only the name SUN ends as 7
    ("@every 0s", "bad interval '@every 0s': '0s' is shorter than 1 minute, the shortest step of any schedule (as in cron)"),
    ("@every 59s", "bad interval '@every 59s': '59s' is shorter than 1 minute, the shortest step of any schedule (as in cron)"),
    ("@every 5x", "bad interval '@every 5x': '5x' is not a duration (use e.g. 30s, 5m, 1h30m, 250ms)"),
    ("@every", "bad interval '@every': say how often, e.g. '@every 5m' or '@every 1h30m'"),
    ("@every 90.5s", "bad interval '@every 90.5s': '90.5s' is not a whole number of seconds"),
    ("@every 40000d", "bad interval '@every 40000d': '40000d' is longer than 100 years"),
    ("@everyday", "bad interval '@everyday': 'day' is not a duration (use e.g. 30s, 5m, 1h30m, 250ms)"),
])  # fmt: skip
def test_bad_forms_name_the_problem(expression: str, message: str) -> None:
    with pytest.raises(ScheduleError) as info:
        CronSchedule.parse(expression)
    assert str(info.value) == message


# --- @every ----------------------------------------------------------------------------------------

ANCHOR = datetime(2026, 3, 7, 12, 0, 5, 654321, tzinfo=UTC)


def test_every_counts_from_the_anchor_to_the_second() -> None:
    s = CronSchedule.parse("@every 1h30m", anchor=ANCHOR)
    assert s.interval_s == 5400 and not s.wall_clock
    assert s.next_runs(ANCHOR, 3) == [utc("2026-03-07 13:30:05"), utc("2026-03-07 15:00:05"), utc("2026-03-07 16:30:05")]
    # (after, until]: an instant on the grid is excluded as `after`, included as `until`.
    assert s.occurrences(utc("2026-03-07 13:30:05"), utc("2026-03-07 16:30:05")) == [
        utc("2026-03-07 15:00:05"), utc("2026-03-07 16:30:05")]
    assert s.occurrences(utc("2026-03-07 16:30:05"), utc("2026-03-07 16:30:05")) == []
    # The grid runs back past the anchor too, so a backfill of a range before creation has runs.
    assert s.next_runs(utc("2026-03-07 08:00:00"), 2) == [utc("2026-03-07 09:00:05"), utc("2026-03-07 10:30:05")]
    assert CronSchedule.parse("@EVERY 90S", anchor=ANCHOR).next_runs(ANCHOR, 1) == [utc("2026-03-07 12:01:35")]


@pytest.mark.parametrize("zone", [NY, LONDON, LORD_HOWE])
def test_every_is_elapsed_time_across_dst(zone: str) -> None:
    s = CronSchedule.parse("@every 1h", zone, anchor=utc("2026-01-01 00:00"))
    for after in (utc("2026-03-07 00:00"), utc("2026-03-28 00:00"), utc("2026-10-03 00:00"), utc("2026-10-24 00:00"),
                  utc("2026-04-04 00:00"), utc("2026-10-31 00:00")):  # fmt: skip
        runs = s.next_runs(after, 72)
        assert all((b - a) == timedelta(hours=1) for a, b in zip(runs, runs[1:]))
        assert all(r.labels == () and r.note is None for r in s.labelled_runs(after, 72))
    # The local time of day shifts with the clocks: 24 runs, 23 or 25 distinct local hours that day.
    local = [r.astimezone(ZoneInfo(NY)) for r in CronSchedule.parse("@every 1h", NY, anchor=ANCHOR).occurrences(
        utc("2026-03-08 05:00"), utc("2026-03-09 04:00"))]  # fmt: skip
    assert len(local) == 23 and local[0].strftime("%H:%M %Z") == "00:00 EST" and local[3].strftime("%H:%M %Z") == "04:00 EDT"


def test_every_needs_its_anchor_and_refuses_dst_overrides() -> None:
    s = CronSchedule.parse("@every 5m")  # validates without one (a job is checked before it exists)
    with pytest.raises(ValueError, match="counts from an anchor"):
        s.next_runs(ANCHOR, 1)
    for repeated, missing in (("both", None), (None, "skip")):
        with pytest.raises(ScheduleError, match="do not apply to '@every 5m': an interval is elapsed time"):
            CronSchedule.parse("@every 5m", "UTC", repeated, missing)
    assert MIN_INTERVAL_S == 60


def test_every_at_the_calendars_end() -> None:
    s = CronSchedule.parse("@every 1d", anchor=utc("2026-01-01 00:00"))
    assert s.next_runs(utc("9999-12-29 12:00"), 5) == [utc("9999-12-30 00:00"), utc("9999-12-31 00:00")]
    assert s.occurrences(utc("9999-12-31 00:00"), datetime.max.replace(tzinfo=UTC)) == []


def test_schedule_of_a_job_uses_its_creation_and_overrides() -> None:
    class Job:
        cron, timezone, dst_repeated, dst_missing, created_at = "@every 10m", NY, None, None, ANCHOR

    assert schedule_of(Job()).next_runs(ANCHOR, 1) == [utc("2026-03-07 12:10:05")]
    Job.cron, Job.dst_missing = "30 2 * * *", "skip"
    assert schedule_of(Job()).missing == "skip"
