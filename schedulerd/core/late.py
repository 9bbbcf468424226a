"""Late and missed occurrences, the pure half: the vocabulary of late reasons, how a cause is
named, which scheduled occurrence an operator means by "at 02:00", and the due-load forecast's
windows and tenant cap. Pure: no I/O.

An occurrence is late when its first attempt did not start within the grace
([materialiser].misfire_grace_s) after its scheduled time, or never started at all.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from schedulerd.core.durations import parse_instant, shifted
from schedulerd.core.schedule import CronSchedule


class LateReason(enum.StrEnum):
    SCHEDULER_DOWN = "scheduler_down"  # no replica with the worker role was alive at its scheduled time
    BACKLOG = "backlog"  # replicas were up but did not start it in time (saturated, or far behind)
    MISFIRE_SKIP = "misfire_skip"  # missed while the fleet was up; the misfire policy skipped it
    OVERLAP = "overlap"  # the overlap policy skipped it: the previous run was still going
    PAUSED = "paused"  # its job was paused across it
    BREAKER_OPEN = "breaker_open"  # parked behind an open circuit breaker
    TENANT_CAP = "tenant_cap"  # parked by a concurrency cap (per task type, [worker].task_concurrency)
    RATE_LIMITED = "rate_limited"  # parked by a fleet-wide rate limit ([rate_limits]) until its token was due
    CONCURRENCY_LIMIT = "concurrency_limit"  # parked by its job's own concurrency limit


EXPLANATIONS: dict[LateReason, str] = {
    LateReason.SCHEDULER_DOWN: "no scheduler replica with the worker role was running at its scheduled time",
    LateReason.BACKLOG: "replicas were running but did not start it within the grace (saturated or far behind)",
    LateReason.MISFIRE_SKIP: "it was missed while replicas were running, and the job's misfire policy skipped it",
    LateReason.OVERLAP: "the job's overlap policy skipped it because the previous run was still going",
    LateReason.PAUSED: "the job was paused",
    LateReason.BREAKER_OPEN: "its circuit breaker was open (the task or its target kept failing), so it was held back",
    LateReason.TENANT_CAP: "a concurrency cap was full ([worker].task_concurrency), so it was held back",
    LateReason.RATE_LIMITED: "a rate limit was reached ([rate_limits]), so it waited for its turn",
    LateReason.CONCURRENCY_LIMIT: "its job's concurrency limit was reached, so it waited for a running one to finish",
}

# Execution reasons that explain a non-start on their own, for a row that carries no late reason
# (written before late_reason existed, or parked while still within its grace). The late reason
# recorded by Postgres (schedulerd_late_reason) always wins over these.
_BY_REASON = {"paused": LateReason.PAUSED, "misfire_skip": LateReason.MISFIRE_SKIP, "overlap": LateReason.OVERLAP,
              "breaker_open": LateReason.BREAKER_OPEN, "task_limit": LateReason.TENANT_CAP, "tenant_cap": LateReason.TENANT_CAP,
              "rate_limited": LateReason.RATE_LIMITED, "concurrency_limit": LateReason.CONCURRENCY_LIMIT}  # fmt: skip


def for_misfire(scheduler_down: bool, runs_late: bool) -> LateReason:
    """A missed cron occurrence: the fleet being down explains it whatever the policy decided;
    otherwise a skipped one is misfire_skip and one that runs late is backlog."""
    if scheduler_down:
        return LateReason.SCHEDULER_DOWN
    return LateReason.BACKLOG if runs_late else LateReason.MISFIRE_SKIP


def of_execution(late_reason: str | None, reason: str | None) -> LateReason | None:
    """The recorded late reason, else the one `reason` implies (None when neither explains)."""
    if late_reason is not None:
        return LateReason(late_reason)
    return _BY_REASON.get(reason or "")


def nearest_occurrence(schedule: CronSchedule, at: datetime, within: timedelta = timedelta(days=1)) -> datetime | None:
    """The occurrence of `schedule` closest to `at` within +-`within` (an earlier one wins a tie),
    or None when there is none.

    >>> from datetime import UTC
    >>> nearest_occurrence(CronSchedule("0 2 * * *"), datetime(2026, 5, 1, 2, 7, tzinfo=UTC))
    datetime.datetime(2026, 5, 1, 2, 0, tzinfo=datetime.timezone.utc)
    """
    # shifted(): an instant asked about may sit at either end of the calendar.
    candidates = schedule.occurrences(shifted(at, -within - timedelta(microseconds=1)), shifted(at, within))
    return min(candidates, key=lambda t: (abs(t - at), t)) if candidates else None


_WALL_TIME = re.compile(r"^(\d{1,2}):(\d{2})$")


def resolve_at(text: str, zone: str, now: datetime) -> datetime:
    """An instant an operator names: ISO 8601 with an offset, or "HH:MM" meaning the latest
    moment at or before `now` whose wall clock in `zone` reads HH:MM (today's, else yesterday's).
    Raises ValueError naming the text.

    >>> from datetime import UTC
    >>> resolve_at("02:00", "UTC", datetime(2026, 5, 1, 1, 0, tzinfo=UTC)).isoformat()
    '2026-04-30T02:00:00+00:00'
    """
    match = _WALL_TIME.match(text.strip())
    if match is None:
        return parse_instant(text)
    hour, minute = int(match.group(1)), int(match.group(2))
    if hour > 23 or minute > 59:
        raise ValueError(f"{text!r} is not a wall-clock time (HH:MM, 00:00 to 23:59)")
    local_zone = ZoneInfo(zone)
    local_now = now.astimezone(local_zone)
    for days_back in (0, 1, 2):  # 2: a time skipped by spring-forward today and yesterday is impossible
        day = (local_now - timedelta(days=days_back)).date()
        candidate = datetime(day.year, day.month, day.day, hour, minute, tzinfo=local_zone).astimezone(now.tzinfo)
        if candidate <= now:
            return candidate
    raise ValueError(f"{text!r} did not occur in {zone} in the last two days")


# The forecast's windows: executions due in the next 1, 5, 15 and 60 minutes.
FORECAST_WINDOWS_S: tuple[int, ...] = (60, 300, 900, 3600)
OTHER_TENANTS = "_other"  # tenant names start with a letter or digit, so this label never collides
# The forecast counts every execution due within the hour, so its statement grows with the load:
# 2,000,000 due cost about 1 s of Postgres, and a cron fleet at 10,000/s materialised hours ahead
# has 36,000,000 due within any hour. A replica waits at least this many times what its last
# refresh took before the next: the forecast then grows stale under load (at most 1/20 of a
# backend per replica) instead of taking a Postgres core per replica.
FORECAST_SPACING = 20


def forecast_pause_s(interval_s: float, took_s: float) -> float:
    """Seconds until the next forecast refresh: the configured interval, or longer when the last
    refresh took more than interval / FORECAST_SPACING."""
    return max(interval_s, took_s * FORECAST_SPACING)


def window_label(window_s: int) -> str:
    """60 -> "1m"."""
    return f"{window_s // 60}m"


def cap_tenants(by_tenant: Mapping[str, Sequence[int]], top: int) -> dict[str, tuple[int, ...]]:
    """Keep the `top` tenants with the most due in the widest window (ties by name); sum the rest
    under "_other", so a metric's label count stays bounded and its sum stays the total.

    >>> cap_tenants({"a": (1, 5), "b": (0, 9), "c": (2, 2)}, 1)
    {'b': (0, 9), '_other': (3, 7)}
    """
    ranked = sorted(by_tenant.items(), key=lambda item: (-item[1][-1], item[0]))
    kept = {tenant: tuple(counts) for tenant, counts in ranked[: max(0, top)]}
    rest = [counts for _, counts in ranked[max(0, top) :]]
    if rest:
        kept[OTHER_TENANTS] = tuple(sum(column) for column in zip(*rest))
    return kept
