"""Cron schedules in an explicit IANA zone, turned into UTC run instants with a fixed DST rule
(which a job may override), and a preview that labels what DST did to each run.

Pure: no I/O beyond reading tzdata through zoneinfo, no asyncio.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, available_timezones

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
    starts with '*'), a day matches when either does (croniter 7 also ORs ``*/2`` with a weekday;
    we do not). ``N/step`` is refused: write ``N-59/step``. Results are strictly increasing.
    """

    expression: str
    timezone: str = "UTC"
    dst_repeated: str | None = None  # first | both | None (the rule)
    dst_missing: str | None = None  # shift | skip | None (the rule)

    def __post_init__(self) -> None:
        _compile(self.expression)  # raise ScheduleError now, never at materialisation time
        _zone(self.timezone)
        if self.dst_repeated not in (None, *DST_REPEATED):
            raise ScheduleError(f"dst_repeated must be one of {', '.join(DST_REPEATED)}, got {self.dst_repeated!r}")
        if self.dst_missing not in (None, *DST_MISSING):
            raise ScheduleError(f"dst_missing must be one of {', '.join(DST_MISSING)}, got {self.dst_missing!r}")

    @classmethod
    def parse(
        cls, expression: str, timezone: str = "UTC", dst_repeated: str | None = None, dst_missing: str | None = None
    ) -> CronSchedule:
        """Validate and build; raises ScheduleError naming the bad field, value or zone."""
        return cls(expression, timezone, dst_repeated, dst_missing)

    @property
    def wall_clock(self) -> bool:
        """True for fixed wall-clock times, False for a real-time cadence (see class docstring)."""
        return _compile(self.expression).wall_clock

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
        both, shift = self.repeated == "both", self.missing == "shift"
        return list(_cached(self.expression, self.timezone, _utc("after", after), _utc("until", until), both, shift))

    def next_runs(self, after: datetime, count: int) -> list[datetime]:
        """The first `count` UTC instants strictly after `after` (fewer only when the calendar
        ends first, at 9999-12-31 in UTC and in the zone)."""
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        both, shift = self.repeated == "both", self.missing == "shift"
        start = _utc("after", after)
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
        if not runs:
            return []
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
