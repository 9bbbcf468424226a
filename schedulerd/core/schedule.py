"""Cron schedules in an explicit IANA zone, turned into UTC run instants with a fixed DST rule.

Pure: no I/O beyond reading tzdata through zoneinfo, no asyncio.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo, available_timezones

UTC = timezone.utc
_DAY = timedelta(days=1)
_SECOND = timedelta(seconds=1)
# Keep the one-day margins below away from datetime.min/max.
_MIN = datetime(1, 1, 3, tzinfo=UTC)
_MAX = datetime(9999, 12, 29, tzinfo=UTC)

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


class ScheduleError(ValueError):
    """A cron expression or time zone that cannot be scheduled; the message says what is wrong."""


@dataclass(frozen=True)
class _Spec:
    times: tuple[timedelta, ...]  # sorted offsets from local midnight of every (hour, minute)
    months: frozenset[int]
    doms: frozenset[int]
    dows: frozenset[int]  # 0 = Sunday
    day_or: bool  # both day fields restricted: a day matches if EITHER does (Vixie cron)
    wall_clock: bool  # minute and hour both free of '*': fixed wall-clock times

    def matches(self, d: date) -> bool:
        if d.month not in self.months:
            return False
        dom_ok = d.day in self.doms
        dow_ok = (d.weekday() + 1) % 7 in self.dows
        return (dom_ok or dow_ok) if self.day_or else (dom_ok and dow_ok)


def _parse_field(expr: str, text: str, index: int) -> frozenset[int]:
    name, low, high, names = _FIELDS[index]

    def fail(why: str) -> ScheduleError:
        return ScheduleError(f"bad cron expression {expr!r}: {name} field {text!r}: {why}")

    def value(token: str) -> int:
        if token.isascii() and token.isdigit():
            v = int(token)
        elif token.upper() in names:
            v = names[token.upper()]
        else:
            example = f" or a name like {next(iter(names))}" if names else ""
            raise fail(f"{token!r} is not a number{example}")
        if not low <= v <= high:
            raise fail(f"{v} is out of range {low}-{high}")
        return v

    values: set[int] = set()
    for part in text.split(","):
        base, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not (step_text.isascii() and step_text.isdigit()):
                raise fail(f"step {step_text!r} is not a number")
            step = int(step_text)
            if step == 0:
                raise fail("step must be at least 1, got 0")
        if base == "*":
            start, end = low, high
        elif "-" in base:
            a, _, b = base.partition("-")
            start, end = value(a), value(b)
            if start > end:
                raise fail(f"range {base!r} runs backwards")
        elif slash:
            # Vixie cron rejects 'N/step'; croniter reads it as N-max/step. Refuse the ambiguity.
            raise fail(f"a step needs '*' or a range, e.g. '{base}-{high}/{step}'")
        else:
            start = end = value(base)
        values.update(range(start, end + 1, step))
    if index == 4 and 7 in values:
        values = (values - {7}) | {0}
    return frozenset(values)


@lru_cache(maxsize=4096)
def _compile(expression: str) -> _Spec:
    text = expression.strip()
    if text.startswith("@"):
        if text.lower() not in _MACROS:
            raise ScheduleError(
                f"bad cron expression {expression!r}: unknown macro; use one of {', '.join(_MACROS)}"
            )
        text = _MACROS[text.lower()]
    fields = text.split()
    if len(fields) != 5:
        raise ScheduleError(
            f"bad cron expression {expression!r}: expected 5 fields "
            f"(minute hour day-of-month month day-of-week), got {len(fields)}"
        )
    minutes, hours, doms, months, dows = (_parse_field(expression, f, i) for i, f in enumerate(fields))
    dom_star, dow_star = fields[2].startswith("*"), fields[4].startswith("*")
    day_or = not (dom_star or dow_star)
    # With AND semantics (either day field starts with '*') the schedule fires iff some chosen month
    # has some chosen day-of-month: every (month, day) pair falls on every weekday in some year.
    # With OR semantics the weekday alone fires in every month. Exact, so no search is needed.
    if not day_or and not any(d <= _DAYS_IN_MONTH[m] for m in months for d in doms):
        raise ScheduleError(
            f"cron expression {expression!r} never fires: no month in {fields[3]!r} "
            f"has a day {fields[2]!r}"
        )
    times = tuple(sorted(timedelta(hours=h, minutes=m) for h in hours for m in minutes))
    wall_clock = "*" not in fields[0] and "*" not in fields[1]
    return _Spec(times, months, doms, dows, day_or, wall_clock)


@lru_cache(maxsize=1)
def _known_zones() -> frozenset[str]:
    return frozenset(available_timezones())


@lru_cache(maxsize=1024)
def _zone(name: str) -> ZoneInfo:
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
        return ZoneInfo(name)
    except (ValueError, OSError) as exc:  # a file in tzdata that is not a zone (e.g. 'zone.tab')
        raise ScheduleError(f"unknown time zone {name!r}: {exc}") from exc


def _off(zone: ZoneInfo, naive: datetime) -> timedelta:
    """UTC offset of a local wall-clock time; naive.fold picks the first (0) or second (1) reading."""
    offset = zone.utcoffset(naive)
    assert offset is not None  # ZoneInfo always knows its offset
    return offset


def _gap_end(zone: ZoneInfo, naive: datetime, low: datetime, high: datetime) -> datetime:
    """First real instant whose wall clock reaches `naive`, which lies in a gap; low < it <= high."""
    # Transitions fall on whole seconds, so bisecting seconds is exact.
    while high - low > _SECOND:
        mid = low + timedelta(seconds=(high - low) // _SECOND // 2)
        if mid.astimezone(zone).replace(tzinfo=None) >= naive:
            high = mid
        else:
            low = mid
    return high


def _day_with_transition(spec: _Spec, zone: ZoneInfo, day: date) -> list[datetime]:
    """Every run instant of one local day that contains an offset change (slow, exact path)."""
    midnight = datetime(day.year, day.month, day.day)
    out: list[datetime] = []
    for td in spec.times:
        naive = midnight + td
        off0, off1 = _off(zone, naive), _off(zone, naive.replace(fold=1))
        u0, u1 = (naive - off0).replace(tzinfo=UTC), (naive - off1).replace(tzinfo=UTC)
        if off0 == off1:  # exists once
            out.append(u0)
        elif off0 > off1:  # happens twice (fall back): u0 is the first
            out.extend((u0,) if spec.wall_clock else (u0, u1))
        elif spec.wall_clock:  # does not exist (spring forward)
            # fold=0 reads it with the pre-gap offset, fold=1 with the post-gap one, so the
            # transition instant (the first moment after the gap) lies in (u1, u0].
            out.append(_gap_end(zone, naive, u1, u0))
    return out


def _compute(expression: str, tz: str, after: datetime, until: datetime) -> tuple[datetime, ...]:
    spec, zone = _compile(expression), _zone(tz)
    after, until = max(after, _MIN), min(until, _MAX)
    if until <= after:
        return ()
    out: list[datetime] = []
    irregular = False
    # One day of margin each side: a fixed time in a gap can run on the next local date.
    day = after.astimezone(zone).date() - _DAY
    last = until.astimezone(zone).date() + _DAY
    while day <= last:
        if spec.matches(day):
            start = datetime(day.year, day.month, day.day)
            end = start + _DAY
            offs = {_off(zone, start), _off(zone, start.replace(fold=1)),
                    _off(zone, end), _off(zone, end.replace(fold=1))}
            if len(offs) == 1:
                # One offset all day (tzdata has no two transitions within 36 h since 1970), so
                # run instants are midnight-in-UTC plus the wall-clock offsets; bisect the window.
                base = start.replace(tzinfo=UTC) - offs.pop()
                i = bisect.bisect_right(spec.times, after - base)
                j = bisect.bisect_right(spec.times, until - base)
                out.extend([base + td for td in spec.times[i:j]])
            else:
                irregular = True
                out.extend(u for u in _day_with_transition(spec, zone, day) if after < u <= until)
        day += _DAY
    if irregular:
        # Transition days can emit out of order (both folds of a repeated hour) or collide
        # (several times in one gap). Sorting a nearly sorted list is linear; a set() of aware
        # datetimes would hash through utcoffset() and cost more than the whole window.
        out.sort()
        out = [u for i, u in enumerate(out) if i == 0 or u != out[i - 1]]
    return tuple(out)


@lru_cache(maxsize=1024)
def _cached(expression: str, tz: str, after: datetime, until: datetime) -> tuple[datetime, ...]:
    return _compute(expression, tz, after, until)


def _utc(name: str, value: datetime) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got naive {value.isoformat()}")
    return value.astimezone(UTC)


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

    Day fields follow Vixie cron: if both day-of-month and day-of-week are restricted (neither
    starts with '*'), a day matches when either does (croniter 7 also ORs ``*/2`` with a weekday;
    we do not). ``N/step`` is refused: write ``N-59/step``. Results are strictly increasing.
    """

    expression: str
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        _compile(self.expression)  # raise ScheduleError now, never at materialisation time
        _zone(self.timezone)

    @classmethod
    def parse(cls, expression: str, timezone: str = "UTC") -> CronSchedule:
        """Validate and build; raises ScheduleError naming the bad field, value or zone."""
        return cls(expression, timezone)

    @property
    def wall_clock(self) -> bool:
        """True for fixed wall-clock times, False for a real-time cadence (see class docstring)."""
        return _compile(self.expression).wall_clock

    def occurrences(self, after: datetime, until: datetime) -> list[datetime]:
        """UTC instants t with after < t <= until. Cached per (expression, zone, window).

        >>> s = CronSchedule.parse("30 2 * * *", "America/New_York")
        >>> s.occurrences(datetime(2026, 3, 8, tzinfo=UTC), datetime(2026, 3, 9, tzinfo=UTC))
        [datetime.datetime(2026, 3, 8, 7, 0, tzinfo=datetime.timezone.utc)]
        """
        return list(_cached(self.expression, self.timezone, _utc("after", after), _utc("until", until)))

    def next_runs(self, after: datetime, count: int) -> list[datetime]:
        """The first `count` UTC instants strictly after `after` (fewer only past year 9999)."""
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        start = _utc("after", after)
        out: list[datetime] = []
        span = timedelta(hours=1)
        while len(out) < count and start < _MAX:
            # Widening windows: cheap for '* * * * *', still quick for '0 0 29 2 *'.
            end = start + span if _MAX - start > span else _MAX  # no overflow near year 9999
            out.extend(_compute(self.expression, self.timezone, start, end))
            start, span = end, min(span * 2, timedelta(days=366))
        return out[:count]


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
