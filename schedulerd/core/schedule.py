"""Cron schedules in an explicit IANA zone, turned into UTC run instants with a fixed DST rule
(which a job may override), and a preview that labels what DST did to each run. Besides classic
cron: Quartz's day forms (`L`, `L-3`, `LW`, `15W`, `FRI#2`, `5L`, `?`) and `@every` intervals.

Pure: no I/O beyond reading tzdata through zoneinfo, no asyncio.
"""

from __future__ import annotations

import bisect
import calendar
import hashlib
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from typing import Protocol
from zoneinfo import ZoneInfo, available_timezones

from schedulerd.core.durations import parse_duration_s

UTC = timezone.utc
_DAY = timedelta(days=1)
_SECOND = timedelta(seconds=1)
# The calendar's ends. Occurrences are found by local date, so the schedule covers every instant
# from 0001-01-01 to 9999-12-31 (UTC) whose local date also lies in those years.
_MIN = datetime.min.replace(tzinfo=UTC)
_MAX = datetime.max.replace(tzinfo=UTC)

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {n: i for i, n in enumerate("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split(), 1)}
_DOWS = {n: i for i, n in enumerate("SUN MON TUE WED THU FRI SAT".split())}
# (name, low, high, names); day-of-week accepts 7 as a second Sunday.
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day-of-month", 1, 31, {}),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 7, _DOWS),
)
_DAYS_IN_MONTH = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # Feb 29 exists in leap years
_OFFSET_LIKE = re.compile(r"(?i)(utc|gmt|z)?\s*[+-]\s*\d{1,2}(:?\d{2})?")
_ZONE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*")

# Per-job overrides of the DST rule (None: the rule, decided by the minute and hour fields).
DST_REPEATED = ("first", "both")  # a wall time that happens twice: run at its first pass, or at both
DST_MISSING = ("shift", "skip")  # a wall time that does not exist: run after the gap, or not at all
# Preview labels (see CronSchedule.labelled_runs and README "The DST rule").
DST_SHIFTED = "dst_shifted"
DST_SKIPPED_BEFORE = "dst_skipped_before"
DST_DEDUPLICATED = "dst_deduplicated"
DST_REPEATED_LABEL = "dst_repeated"


class ScheduleError(ValueError):
    """A cron expression or time zone that cannot be scheduled; the message says what is wrong."""


# `@every 5m`: an interval of elapsed time counted from an anchor (the job's creation), as
# Temporal's interval specs and robfig/cron's @every. At least a minute, cron's finest step.
_EVERY = "@every"
MIN_INTERVAL_S = 60


@lru_cache(maxsize=1024)
def _interval_s(expression: str) -> int | None:
    """The interval of an `@every` expression in whole seconds; None for a cron expression."""
    text = expression.strip()
    if not text.lower().startswith(_EVERY):
        return None
    given = text[len(_EVERY):].strip()

    def fail(why: str) -> ScheduleError:
        return ScheduleError(f"bad interval {expression!r}: {why}")

    if not given:
        raise fail("say how often, e.g. '@every 5m' or '@every 1h30m'")
    try:
        seconds = parse_duration_s(given)
    except ValueError as exc:
        raise fail(str(exc)) from None
    if seconds < MIN_INTERVAL_S:
        raise fail(f"{given!r} is shorter than 1 minute, the shortest step of any schedule (as in cron)")
    if seconds != int(seconds):
        raise fail(f"{given!r} is not a whole number of seconds")
    return int(seconds)


def _interval_runs(anchor: datetime, step_s: int, after: datetime, until: datetime, limit: int | None = None) -> list[datetime]:
    """anchor + k * step for every integer k with after < it <= until (the first `limit` of them)."""
    after, until = max(after, _MIN), min(until, _MAX)
    if until <= after:
        return []
    step = timedelta(seconds=step_s)
    try:
        first = anchor + ((after - anchor) // step + 1) * step
    except OverflowError:  # the next run would lie past 9999-12-31
        return []
    count = (until - first) // step + 1 if first <= until else 0
    if limit is not None:
        count = min(count, limit)
    return [first + i * step for i in range(count)]


# Quartz's day forms, one list item each. Day-of-month: L (last day), L-n (n days before it), LW
# (last weekday), nW (the weekday nearest day n, inside its month). Day-of-week: d#k (k-th weekday
# d of the month), dL (the last one).
_DOM_SPECIAL = re.compile(r"(?i)(?:(L)(?:-(\d+))?|(LW)|(\d+)W)")
_DOW_SPECIAL = re.compile(r"(?i)(\w+?)(?:#(\d+)|(L))")
_QUARTZ_CHARS = re.compile(r"(?i)[LW#?]")  # in a token that is no name: a Quartz form
_MAX_LAST_OFFSET = 30  # L-30 is the 1st of a 31-day month


@dataclass(frozen=True)
class _Spec:
    times: tuple[timedelta, ...]  # sorted offsets from local midnight of every (hour, minute)
    months: frozenset[int]
    doms: frozenset[int]
    dows: frozenset[int]  # 0 = Sunday
    day_or: bool  # both day fields restricted: a day matches if EITHER does (Vixie cron)
    wall_clock: bool  # minute and hour both free of '*': fixed wall-clock times
    # Quartz's day forms: ("L", n) L-n, ("W", n) nW, ("LW", 0); (weekday, k) d#k, k = 0 for dL.
    dom_rules: tuple[tuple[str, int], ...] = ()
    dow_rules: tuple[tuple[int, int], ...] = ()

    def matches(self, d: date) -> bool:
        if d.month not in self.months:
            return False
        weekday = (d.weekday() + 1) % 7
        if not (self.dom_rules or self.dow_rules):  # classic cron: no month length needed
            dom_ok, dow_ok = d.day in self.doms, weekday in self.dows
            return (dom_ok or dow_ok) if self.day_or else (dom_ok and dow_ok)
        return self.day_matches(d.day, weekday, calendar.monthrange(d.year, d.month)[1])

    def day_matches(self, day: int, weekday: int, last: int) -> bool:
        """Whether a day (weekday 0 = Sunday, in a month of `last` days) passes the day fields."""
        dom_ok = day in self.doms or any(_dom_rule(kind, n, day, weekday, last) for kind, n in self.dom_rules)
        dow_ok = weekday in self.dows or any(
            wd == weekday and (day + 7 > last if k == 0 else (day + 6) // 7 == k) for wd, k in self.dow_rules
        )
        return (dom_ok or dow_ok) if self.day_or else (dom_ok and dow_ok)


def _dom_rule(kind: str, n: int, day: int, weekday: int, last: int) -> bool:
    if kind == "L":
        return day == last - n
    if kind == "LW":  # the last day, moved back to Friday when it falls on a weekend
        last_weekday = (weekday + last - day) % 7
        return day == last - {6: 1, 0: 2}.get(last_weekday, 0)
    if n > last:  # nW in a month without day n: no run, like a plain n
        return False
    # nW: day n, or the nearest weekday to it inside the month (Quartz: '1W' on a Saturday is
    # Monday the 3rd, never the last Friday of the month before).
    wd = (weekday + n - day) % 7
    if wd == 6:
        target = n - 1 if n > 1 else n + 2
    elif wd == 0:
        target = n + 1 if n < last else n - 2
    else:
        target = n
    return day == target


def _parse_field(
    expr: str, text: str, index: int, dom_rules: list[tuple[str, int]], dow_rules: list[tuple[int, int]]
) -> frozenset[int]:
    """A field's plain values; Quartz's day forms go to dom_rules / dow_rules."""
    name, low, high, names = _FIELDS[index]

    def fail(why: str) -> ScheduleError:
        return ScheduleError(f"bad cron expression {expr!r}: {name} field {text!r}: {why}")

    def item(part: str) -> str:  # names the list item, when the field has several
        return "" if part == text else f"{part!r}: "

    def value(token: str, part: str) -> int:
        if token.isascii() and token.isdigit():
            v = int(token)
        elif token.upper() in names:
            v = names[token.upper()]
        elif _QUARTZ_CHARS.search(token):
            raise fail(item(part) + _quartz_misuse(part, index))
        else:
            example = f" or a name like {next(iter(names))}" if names else ""
            raise fail(f"{token!r} is not a number{example}")
        if not low <= v <= high:
            raise fail(f"{v} is out of range {low}-{high}")
        return v

    if text == "?":
        if index not in (2, 4):
            raise fail("'?' is allowed only in the day-of-month and day-of-week fields (it means '*')")
        text = "*"
    values: set[int] = set()
    for part in text.split(","):
        if index == 2 and (dom := _DOM_SPECIAL.fullmatch(part)):
            last, offset, last_weekday, near = dom.groups()
            if last_weekday:
                dom_rules.append(("LW", 0))
            elif last:
                n = int(offset) if offset else 0
                if n > _MAX_LAST_OFFSET:
                    raise fail(f"{item(part)}days counted back from the last must be 0-{_MAX_LAST_OFFSET}, got {n}")
                dom_rules.append(("L", n))
            else:
                dom_rules.append(("W", value(near, part)))
            continue
        if index == 4 and (dow := _DOW_SPECIAL.fullmatch(part)):
            day_text, nth, _ = dow.groups()
            weekday = value(day_text, part) % 7
            k = 0 if nth is None else int(nth)
            if nth is not None and not 1 <= k <= 5:
                raise fail(f"{item(part)}the week of the month after '#' must be 1-5, got {k}")
            dow_rules.append((weekday, k))
            continue
        base, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not (step_text.isascii() and step_text.isdigit()):
                if _QUARTZ_CHARS.search(step_text):
                    raise fail(item(part) + _quartz_misuse(part, index))
                raise fail(f"step {step_text!r} is not a number")
            step = int(step_text)
            if step == 0:
                raise fail("step must be at least 1, got 0")
        if base == "*":
            start, end = low, high
        elif "-" in base:
            a, _, b = base.partition("-")
            start, end = value(a, part), value(b, part)
            if index == 4 and end == 0 and start > 0 and b.upper() == "SUN":
                # MON-SUN: Sunday closes the week (Quartz, croner). SUN-SUN stays Sunday alone.
                end = 7
            if start > end:
                raise fail(f"range {base!r} runs backwards")
        elif slash and _QUARTZ_CHARS.search(base):
            raise fail(item(part) + _quartz_misuse(part, index))
        elif slash:
            # Vixie cron rejects 'N/step'; croniter reads it as N-max/step. Refuse the ambiguity.
            raise fail(f"a step needs '*' or a range, e.g. '{base}-{high}/{step}'")
        else:
            start = end = value(base, part)
        values.update(range(start, end + 1, step))
    if index == 4 and 7 in values:
        values = (values - {7}) | {0}
    return frozenset(values)


def _quartz_misuse(part: str, index: int) -> str:
    """Why a list item holding L, W, # or ? is not one of the forms its field accepts."""
    if index not in (2, 4):
        return "'L', 'W', '#' and '?' are allowed only in the day-of-month and day-of-week fields"
    if "?" in part:
        return "'?' stands alone for the whole field (it means '*')"
    if index == 2:
        return ("not a day-of-month form: use a number, L, L-3, LW or 15W "
                "(L and W stand alone in a list item, never in a range or step)")  # fmt: skip
    if part.upper() == "L":
        return ("'L' alone is ambiguous in day-of-week (Quartz reads it as Saturday): write 5L or FRIL for the "
                "last Friday of the month, or put L in the day-of-month field for the month's last day")  # fmt: skip
    return ("not a day-of-week form: use a weekday, FRI#2 (the second Friday) or FRIL / 5L "
            "(the last Friday), never in a range or step")  # fmt: skip


def _fires_somewhere(spec: _Spec) -> bool:
    """Whether any month of the schedule has a matching day. Exact: over 400 years every month
    starts on every weekday, February with 28 days and with 29."""
    for month in spec.months:
        for last in (28, 29) if month == 2 else (_DAYS_IN_MONTH[month],):
            for first in range(7):
                if any(spec.day_matches(day, (first + day - 1) % 7, last) for day in range(1, last + 1)):
                    return True
    return False


@lru_cache(maxsize=4096)
def _compile(expression: str) -> _Spec:
    text = expression.strip()
    if text.startswith("@"):
        if text.lower() not in _MACROS:
            raise ScheduleError(
                f"bad cron expression {expression!r}: unknown macro; use one of {', '.join(_MACROS)}, "
                "or '@every 5m' for an interval"
            )
        text = _MACROS[text.lower()]
    fields = text.split()
    if len(fields) != 5:
        raise ScheduleError(
            f"bad cron expression {expression!r}: expected 5 fields "
            f"(minute hour day-of-month month day-of-week), got {len(fields)}"
        )
    dom_rules: list[tuple[str, int]] = []
    dow_rules: list[tuple[int, int]] = []
    minutes, hours, doms, months, dows = (
        _parse_field(expression, f, i, dom_rules, dow_rules) for i, f in enumerate(fields)
    )
    # '?' is Quartz's '*' for a day field: it leaves the other day field to decide alone.
    dom_star, dow_star = fields[2].startswith(("*", "?")), fields[4].startswith(("*", "?"))
    day_or = not (dom_star or dow_star)
    times = tuple(sorted(timedelta(hours=h, minutes=m) for h in hours for m in minutes))
    wall_clock = "*" not in fields[0] and "*" not in fields[1]
    spec = _Spec(times, months, doms, dows, day_or, wall_clock, tuple(dict.fromkeys(dom_rules)),
                 tuple(dict.fromkeys(dow_rules)))  # fmt: skip
    if not (dom_rules or dow_rules):
        # With AND semantics (either day field starts with '*') the schedule fires iff some chosen
        # month has some chosen day-of-month: every (month, day) pair falls on every weekday in
        # some year. With OR semantics the weekday alone fires in every month.
        if not day_or and not any(d <= _DAYS_IN_MONTH[m] for m in months for d in doms):
            raise ScheduleError(
                f"cron expression {expression!r} never fires: no month in {fields[3]!r} "
                f"has a day {fields[2]!r}"
            )
    elif not _fires_somewhere(spec):
        joined = "or" if day_or else "and"
        raise ScheduleError(
            f"cron expression {expression!r} never fires: no day of a month in {fields[3]!r} matches "
            f"day-of-month {fields[2]!r} {joined} day-of-week {fields[4]!r}"
        )
    return spec


@lru_cache(maxsize=1)
def _known_zones() -> frozenset[str]:
    return frozenset(available_timezones())


ZoneLookup = Callable[[str], tzinfo]
_zone_lookup: ZoneLookup = ZoneInfo  # the installed tz database; swapped only by zone_rules()


@contextmanager
def zone_rules(lookup: ZoneLookup) -> Iterator[None]:
    """Resolve zone names with `lookup` inside the block (tests simulate a tz database upgrade:
    the same name, other rules). Caches are cleared on the way in and out."""
    global _zone_lookup
    previous, _zone_lookup = _zone_lookup, lookup
    _zone.cache_clear()
    _cached.cache_clear()
    try:
        yield
    finally:
        _zone_lookup = previous
        _zone.cache_clear()
        _cached.cache_clear()


@lru_cache(maxsize=1024)
def _zone(name: str) -> tzinfo:
    if _OFFSET_LIKE.fullmatch(name.strip()):
        raise ScheduleError(
            f"time zone {name!r} is a UTC offset, which ignores daylight saving; "
            "use an IANA zone name such as 'Europe/Berlin' (or 'UTC')"
        )
    if not _ZONE_NAME.fullmatch(name):
        raise ScheduleError(f"time zone {name!r} is not an IANA zone name such as 'Europe/London'")
    if name == "localtime":  # a host-dependent link, not a zone
        raise ScheduleError("time zone 'localtime' depends on the host; name the IANA zone")
    if name not in _known_zones():
        raise ScheduleError(f"unknown time zone {name!r}: not in the IANA tz database")
    try:
        return _zone_lookup(name)
    except (ValueError, OSError) as exc:  # a file in tzdata that is not a zone (e.g. 'zone.tab')
        raise ScheduleError(f"unknown time zone {name!r}: {exc}") from exc


def _off(zone: tzinfo, naive: datetime) -> timedelta:
    """UTC offset of a local wall-clock time; naive.fold picks the first (0) or second (1) reading."""
    offset = zone.utcoffset(naive)
    assert offset is not None  # a zone always knows its offset
    return offset


def _gap_end(zone: tzinfo, naive: datetime, low: datetime, high: datetime) -> datetime:
    """First real instant whose wall clock reaches `naive`, which lies in a gap; low < it <= high."""
    # Transitions fall on whole seconds, so bisecting seconds is exact.
    while high - low > _SECOND:
        mid = low + timedelta(seconds=(high - low) // _SECOND // 2)
        if mid.astimezone(zone).replace(tzinfo=None) >= naive:
            high = mid
        else:
            low = mid
    return high


@dataclass(frozen=True)
class _Event:
    """What the DST rule did with one nominal wall-clock time of a day with an offset change."""

    at: datetime | None  # the run instant (UTC), or None: not run
    wall: datetime  # the nominal local time (naive)
    kind: str  # plain | shifted | skipped | deduplicated | repeated_first | repeated_second
    gap: tuple[datetime, datetime] | None = None  # in a gap: bounds (low, high] of its end


def _day_events(spec: _Spec, zone: tzinfo, day: date, both: bool, shift: bool) -> list[_Event]:
    """Every nominal time of one local day that contains an offset change (slow, exact path)."""
    midnight = datetime(day.year, day.month, day.day)
    out: list[_Event] = []
    for td in spec.times:
        naive = midnight + td
        off0, off1 = _off(zone, naive), _off(zone, naive.replace(fold=1))
        try:
            u0, u1 = (naive - off0).replace(tzinfo=UTC), (naive - off1).replace(tzinfo=UTC)
        except OverflowError:  # its instant lies before 0001-01-01 or after 9999-12-31 UTC
            continue
        if off0 == off1:  # exists once
            out.append(_Event(u0, naive, "plain"))
        elif off0 > off1:  # happens twice (fall back): u0 is the first
            if both:
                out.extend((_Event(u0, naive, "repeated_first"), _Event(u1, naive, "repeated_second")))
            else:
                out.append(_Event(u0, naive, "deduplicated"))
        elif shift:  # does not exist (spring forward)
            # fold=0 reads it with the pre-gap offset, fold=1 with the post-gap one, so the
            # transition instant (the first moment after the gap) lies in (u1, u0].
            out.append(_Event(_gap_end(zone, naive, u1, u0), naive, "shifted", (u1, u0)))
        else:
            out.append(_Event(None, naive, "skipped", (u1, u0)))
    return out


def _day_offsets(zone: tzinfo, day: date) -> set[timedelta]:
    start = datetime(day.year, day.month, day.day)
    end = start + _DAY if day < date.max else datetime.max  # the calendar's last day ends at its last instant
    return {_off(zone, start), _off(zone, start.replace(fold=1)), _off(zone, end), _off(zone, end.replace(fold=1))}


def _local_date(at: datetime, zone: tzinfo, margin_days: int) -> date:
    """The local date of `at` in `zone`, moved by margin_days, held inside date.min..date.max
    (at the calendar's ends a local date can be year 0 or 10000, which Python cannot hold)."""
    try:
        day = at.astimezone(zone).date()
    except OverflowError:
        return date.min if at.year == 1 else date.max
    try:
        return day + timedelta(days=margin_days)
    except OverflowError:
        return date.min if margin_days < 0 else date.max


def _days(first: date, last: date) -> Iterator[date]:
    """first..last inclusive, stopping at date.max instead of overflowing."""
    day = first
    while day <= last:
        yield day
        if day == date.max:
            return
        day += _DAY


def _compute(
    expression: str, tz: str, after: datetime, until: datetime, both: bool, shift: bool
) -> tuple[datetime, ...]:
    spec, zone = _compile(expression), _zone(tz)
    after, until = max(after, _MIN), min(until, _MAX)
    if until <= after:
        return ()
    out: list[datetime] = []
    irregular = False
    # One day of margin each side: a fixed time in a gap can run on the next local date.
    for day in _days(_local_date(after, zone, -1), _local_date(until, zone, 1)):
        if spec.matches(day):
            offs = _day_offsets(zone, day)
            if len(offs) == 1:
                # One offset all day (tzdata has no two transitions within 36 h since 1970), so
                # run instants are midnight-in-UTC plus the wall-clock offsets; bisect the window.
                offset = offs.pop()
                try:
                    base = datetime(day.year, day.month, day.day, tzinfo=UTC) - offset
                except OverflowError:  # local 0001-01-01 began in UTC's year 0, or 9999-12-31 ends in 10000
                    out.extend(_edge_day(spec.times, day, offset, after, until))
                    continue
                i = bisect.bisect_right(spec.times, after - base)
                j = bisect.bisect_right(spec.times, until - base)
                out.extend([base + td for td in spec.times[i:j]])
            else:
                irregular = True
                events = _day_events(spec, zone, day, both, shift)
                out.extend(e.at for e in events if e.at is not None and after < e.at <= until)
    if irregular:
        # Transition days can emit out of order (both folds of a repeated hour) or collide
        # (several times in one gap). Sorting a nearly sorted list is linear; a set() of aware
        # datetimes would hash through utcoffset() and cost more than the whole window.
        out.sort()
        out = [u for i, u in enumerate(out) if i == 0 or u != out[i - 1]]
    return tuple(out)


def _edge_day(times: tuple[timedelta, ...], day: date, offset: timedelta, after: datetime, until: datetime) -> list[datetime]:
    """The fast path's runs of a local day whose midnight in UTC is outside the calendar: the same
    sums, kept as offsets from the Unix epoch until they are known to be inside (after, until]."""
    base = timedelta(days=(day - _EPOCH_DATE).days) - offset
    low, high = after - _EPOCH, until - _EPOCH
    return [_EPOCH + base + td for td in times if low < base + td <= high]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DATE = _EPOCH.date()


@lru_cache(maxsize=1024)
def _cached(
    expression: str, tz: str, after: datetime, until: datetime, both: bool, shift: bool
) -> tuple[datetime, ...]:
    return _compute(expression, tz, after, until, both, shift)


def _utc(name: str, value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got naive {value.isoformat()}")
    return value.astimezone(UTC)


@dataclass(frozen=True)
class Run:
    """A preview entry: a run instant and what DST did to it (labels empty: an ordinary run)."""

    at: datetime  # UTC
    labels: tuple[str, ...]  # dst_shifted, dst_skipped_before, dst_deduplicated, dst_repeated
    note: str | None  # the same in words, in the zone's local time


@dataclass(frozen=True)
class CronSchedule:
    """A 5-field cron expression (or @hourly/@daily/...) read in an IANA zone.

    Occurrences are computed on the zone's wall clock and returned as aware UTC datetimes.
    DST rule, decided by the minute and hour fields:

    * Both free of '*' (``30 2 * * *``, ``0,30 9-17 * * *``): fixed wall-clock times.
      A time skipped by spring-forward runs at the first instant after the gap
      (``30 2 * * *`` America/New_York on 2026-03-08 -> 03:00 EDT = 07:00 UTC); several times in
      one gap (``0,15,30,45 2 * * *``) all map there and collapse into one run. A time repeated
      by fall-back runs once, at its first occurrence (``30 1 * * *`` on 2026-11-01 -> 01:30 EDT
      = 05:30 UTC only).
    * Either has a '*' (``0 * * * *``, ``*/15 * * * *``): a real-time cadence. It runs at every
      real instant whose wall clock matches: 25 runs of ``0 * * * *`` in New York on 2026-11-01,
      23 on 2026-03-08 (the skipped 02:00 does not exist, so it does not run).

    The test is textual: any '*' in minute or hour (``*/15`` too) means cadence, so
    ``0 0-23 * * *`` is 24 fixed times (01:00 runs once on fall-back) while ``0 * * * *`` is not.

    A job may override either half of the rule: ``dst_repeated`` ``first`` (fixed times' default)
    or ``both`` (cadence's default) for a wall time that happens twice; ``dst_missing`` ``shift``
    (fixed times' default: run at the first instant after the gap) or ``skip`` (cadence's
    default: no run) for one that does not exist. None keeps the rule.

    Day fields follow Vixie cron: if both day-of-month and day-of-week are restricted (neither
    starts with '*' or is '?'), a day matches when either does (croniter 7 also ORs ``*/2`` with a
    weekday; we do not). ``N/step`` is refused: write ``N-59/step``. Results are strictly increasing.

    Quartz's day forms choose dates only; the times on those dates follow the DST rule above.
    Day-of-month: ``L`` (last day), ``L-3`` (three before it), ``LW`` (last weekday), ``15W``
    (the weekday nearest the 15th, never in another month: ``1W`` on a Saturday is Monday the
    3rd; ``31W`` in a 30-day month does not run). Day-of-week: ``FRI#2`` / ``5#2`` (second
    Friday; no run in a month without one), ``FRIL`` / ``5L`` (last Friday). ``?`` is ``*`` in
    either day field; a range from a later day ending on ``SUN`` reads it as 7 (``MON-SUN``;
    ``SUN-SUN`` is Sunday alone). Weekdays count 0 or 7 = Sunday as in cron, not Quartz's
    1 = Sunday.

    ``@every 5m`` / ``@every 1h30m``: every interval of elapsed time from ``anchor`` (the job's
    creation, to the second), first run one interval after it. DST never moves an interval: the
    runs keep their spacing in real time and their local times shift with the clocks.
    """

    expression: str
    timezone: str = "UTC"
    dst_repeated: str | None = None  # first | both | None (the rule)
    dst_missing: str | None = None  # shift | skip | None (the rule)
    anchor: datetime | None = None  # @every: what the intervals count from (the job's creation)

    def __post_init__(self) -> None:
        # Raise ScheduleError now, never at materialisation time.
        if _interval_s(self.expression) is None:
            _compile(self.expression)
        elif self.dst_repeated is not None or self.dst_missing is not None:
            raise ScheduleError(f"dst_repeated and dst_missing do not apply to {self.expression.strip()!r}: "
                                "an interval is elapsed time, which DST never moves")  # fmt: skip
        _zone(self.timezone)
        if self.dst_repeated not in (None, *DST_REPEATED):
            raise ScheduleError(f"dst_repeated must be one of {', '.join(DST_REPEATED)}, got {self.dst_repeated!r}")
        if self.dst_missing not in (None, *DST_MISSING):
            raise ScheduleError(f"dst_missing must be one of {', '.join(DST_MISSING)}, got {self.dst_missing!r}")

    @classmethod
    def parse(
        cls, expression: str, timezone: str = "UTC", dst_repeated: str | None = None, dst_missing: str | None = None,
        anchor: datetime | None = None,
    ) -> CronSchedule:  # fmt: skip
        """Validate and build; raises ScheduleError naming the bad field, value or zone."""
        return cls(expression, timezone, dst_repeated, dst_missing, anchor)

    @property
    def interval_s(self) -> int | None:
        """An `@every` schedule's interval in seconds; None for a cron expression."""
        return _interval_s(self.expression)

    def _grid(self) -> tuple[datetime, int] | None:
        """(anchor to the whole second, interval) of an @every schedule; None for cron."""
        step = _interval_s(self.expression)
        if step is None:
            return None
        if self.anchor is None:
            raise ValueError(f"{self.expression.strip()!r} counts from an anchor (the job's creation time); none was given")
        return _utc("anchor", self.anchor).replace(microsecond=0), step

    @property
    def wall_clock(self) -> bool:
        """True for fixed wall-clock times, False for a real-time cadence (see class docstring)."""
        return _interval_s(self.expression) is None and _compile(self.expression).wall_clock

    @property
    def repeated(self) -> str:
        """The policy in force for a wall time that happens twice: first | both."""
        return self.dst_repeated or ("first" if self.wall_clock else "both")

    @property
    def missing(self) -> str:
        """The policy in force for a wall time that does not exist: shift | skip."""
        return self.dst_missing or ("shift" if self.wall_clock else "skip")

    def occurrences(self, after: datetime, until: datetime) -> list[datetime]:
        """UTC instants t with after < t <= until. Cached per (expression, zone, policy, window).

        >>> s = CronSchedule.parse("30 2 * * *", "America/New_York")
        >>> s.occurrences(datetime(2026, 3, 8, tzinfo=UTC), datetime(2026, 3, 9, tzinfo=UTC))
        [datetime.datetime(2026, 3, 8, 7, 0, tzinfo=datetime.timezone.utc)]
        """
        after, until = _utc("after", after), _utc("until", until)
        if (grid := self._grid()) is not None:
            return _interval_runs(*grid, after, until)
        both, shift = self.repeated == "both", self.missing == "shift"
        return list(_cached(self.expression, self.timezone, after, until, both, shift))

    def next_runs(self, after: datetime, count: int) -> list[datetime]:
        """The first `count` UTC instants strictly after `after` (fewer only when the calendar
        ends first, at 9999-12-31 in UTC and in the zone)."""
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        start = _utc("after", after)
        if (grid := self._grid()) is not None:
            return _interval_runs(*grid, start, _MAX, count)
        both, shift = self.repeated == "both", self.missing == "shift"
        out: list[datetime] = []
        span = timedelta(hours=1)
        while len(out) < count and start < _MAX:
            # Widening windows: cheap for '* * * * *', still quick for '0 0 29 2 *'.
            end = start + span if _MAX - start > span else _MAX  # no overflow near year 9999
            out.extend(_compute(self.expression, self.timezone, start, end, both, shift))
            start, span = end, min(span * 2, timedelta(days=366))
        return out[:count]

    def labelled_runs(self, after: datetime, count: int) -> list[Run]:
        """next_runs(after, count), each labelled with what DST did to it:

        * ``dst_shifted``: stands for wall time(s) that did not exist (spring forward); runs at
          the first instant after the gap (several such times share one run).
        * ``dst_skipped_before``: wall time(s) since the previous run did not exist and were
          skipped (``dst_missing = skip``).
        * ``dst_deduplicated``: its wall time happened twice (fall back); it runs at the first
          pass only.
        * ``dst_repeated``: its wall time happened twice and the job runs at both passes; the
          note says which pass this is.

        >>> [r.labels for r in CronSchedule("30 2 * * *", "America/New_York").labelled_runs(
        ...     datetime(2026, 3, 7, 12, tzinfo=UTC), 2)]
        [('dst_shifted',), ()]
        """
        runs = self.next_runs(after, count)
        if not runs or self.interval_s is not None:  # elapsed time: DST never touches an interval
            return [Run(run, (), None) for run in runs]
        spec, zone = _compile(self.expression), _zone(self.timezone)
        both, shift = self.repeated == "both", self.missing == "shift"
        start = _utc("after", after)
        found: dict[datetime, dict[str, list[_Event]]] = {run: {} for run in runs}
        for day in _days(_local_date(start, zone, -1), _local_date(runs[-1], zone, 1)):
            if spec.matches(day) and len(_day_offsets(zone, day)) > 1:
                for event in _day_events(spec, zone, day, both, shift):
                    if event.kind == "plain":
                        continue
                    target = event.at
                    if event.kind == "skipped":  # told on the first run after the gap
                        assert event.gap is not None
                        gap_end = _gap_end(zone, event.wall, *event.gap)
                        i = bisect.bisect_left(runs, gap_end)
                        target = runs[i] if gap_end > start and i < len(runs) else None
                    if target in found:
                        found[target].setdefault(event.kind, []).append(event)
        return [Run(run, *_label(zone, kinds)) for run, kinds in found.items()]


_LABELS = {"shifted": DST_SHIFTED, "skipped": DST_SKIPPED_BEFORE, "deduplicated": DST_DEDUPLICATED,
           "repeated_first": DST_REPEATED_LABEL, "repeated_second": DST_REPEATED_LABEL}  # fmt: skip


def _describe(zone: tzinfo, kind: str, events: list[_Event]) -> str:
    walls = [e.wall for e in events]
    text = walls[0].strftime("%Y-%m-%d %H:%M") + "".join(
        ", " + w.strftime("%H:%M" if w.date() == walls[0].date() else "%Y-%m-%d %H:%M") for w in walls[1:]
    )
    if kind == "shifted":
        runs = "runs" if len(walls) == 1 else "run once"
        return f"{text} did not exist (clocks sprang forward): {runs} at the first instant after the gap"
    if kind == "skipped":
        return f"{text} did not exist (clocks sprang forward): skipped"
    first, second = zone.tzname(walls[0]), zone.tzname(walls[0].replace(fold=1))
    if kind == "deduplicated":
        return f"{text} happened twice ({first}, then {second}): runs at the first pass only"
    return f"{text} happened twice ({first}, then {second}): this is the {kind.removeprefix('repeated_')} pass"


def _label(zone: tzinfo, kinds: dict[str, list[_Event]]) -> tuple[tuple[str, ...], str | None]:
    labels = tuple(dict.fromkeys(_LABELS[k] for k in kinds))
    return labels, "; ".join(_describe(zone, kind, events) for kind, events in kinds.items()) or None


class ScheduledJob(Protocol):
    """What a schedule needs of a job record (models.Job)."""

    @property
    def cron(self) -> str | None: ...
    @property
    def timezone(self) -> str: ...
    @property
    def dst_repeated(self) -> str | None: ...
    @property
    def dst_missing(self) -> str | None: ...
    @property
    def created_at(self) -> datetime: ...


def schedule_of(job: ScheduledJob) -> CronSchedule:
    """A cron job's schedule with its DST overrides, an @every job's anchored at its creation.
    Every reader of a job's schedule (materialiser, previews, backfill, why, overrun) uses this."""
    return CronSchedule(job.cron or "", job.timezone, job.dst_repeated, job.dst_missing, job.created_at)


def smear_offset_s(job_id: str, window_s: float) -> float:
    """Stable offset in [0, window_s) from the job id, uniform over ids; 0.0 if window_s == 0.

    Same id, same offset in every process and release (blake2b, not the per-process salted
    hash()): smear_offset_s("job-42", 60.0) == 25.778..., so that job always runs 25.8 s after
    each scheduled instant, while 10,000 jobs on "0 * * * *" spread evenly over the minute.
    """
    if not (math.isfinite(window_s) and window_s >= 0):
        raise ValueError(f"window_s must be finite and >= 0, got {window_s}")
    digest = hashlib.blake2b(job_id.encode(), digest_size=8, person=b"schedulerd.smear").digest()
    # 53 bits fit a float exactly, so the fraction is < 1; the min() guards rounding up to window_s.
    offset = (int.from_bytes(digest, "big") >> 11) / float(1 << 53) * window_s
    return min(offset, math.nextafter(window_s, 0.0)) if window_s else 0.0
