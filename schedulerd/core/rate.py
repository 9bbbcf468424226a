"""Fleet-wide rate limits, the pure half: a rate ("100/1s") parsed and checked, the token buckets
a claimed execution is subject to (its task type's, its http target host's), and the bucket's
arithmetic, the same lua/take_tokens-1.lua runs in Redis (used here per process while Redis is
unreachable). Pure: no I/O."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field

from schedulerd.core.durations import parse_duration_s

MAX_LIMIT = 1_000_000  # starts per window; beyond it a limit protects nothing a worker could reach
MAX_WINDOW_S = 86400.0  # a day: longer windows are quotas, not rates
PARK_SLACK_S = 0.005  # a parked claim comes back this much after its token is due, never just before it
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\S+)\s*$")


@dataclass(frozen=True)
class Rate:
    limit: int  # starts per window, and the burst a full bucket allows
    window_s: float  # the bucket refills `limit` tokens over this long, continuously

    def __str__(self) -> str:
        return f"{self.limit}/{self.window_s:g}s"


def parse_rate(text: str) -> Rate:
    """ "N/<duration>": N starts per window, the window a duration (a bare unit means one of it).
    Raises ValueError saying what is wrong.

    >>> parse_rate("100/1s"), parse_rate("5/m"), parse_rate("20/250ms")
    (Rate(limit=100, window_s=1.0), Rate(limit=5, window_s=60.0), Rate(limit=20, window_s=0.25))
    """
    match = _RATE.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError("is not a rate: write starts per window as N/<duration>, e.g. 100/1s or 600/1m")
    limit, window = int(match.group(1)), match.group(2)
    window_s = parse_duration_s("1" + window if window.isalpha() else window)
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"allows {limit} starts per window: it must be between 1 and {MAX_LIMIT}")
    if not 0.001 <= window_s <= MAX_WINDOW_S:
        raise ValueError(f"has a window of {window_s:g} s: it must be between 1 ms and {MAX_WINDOW_S:g} s (a day)")
    return Rate(limit, window_s)


def normal_host(text: str) -> str:
    """A host as rate limits and breakers name it: lower case, no trailing dot. Raises ValueError
    for anything with a scheme, path, port or spaces (a limit is per host, whatever the port).

    >>> normal_host("API.Vendor.com.")
    'api.vendor.com'
    """
    host = text.strip().lower().rstrip(".")
    if not host or any(c.isspace() or c in "/@?#[]" for c in host) or host.count(":") == 1:
        raise ValueError("is not a host name (no scheme, port or path: e.g. api.vendor.com)")
    return host


@dataclass(frozen=True)
class Bucket:
    """One token bucket, shared by every replica: `limit` starts per `window_ms`, burst `limit`."""

    key: str  # "task:<task type>" | "host:<http target host>" | "key:<tenant>/<a job's rate key>"; the field in {prefix}:tokens
    limit: int
    window_ms: int

    @property
    def interval_ms(self) -> float:
        """The time one token takes to come back: window / limit."""
        return self.window_ms / self.limit


def bucket(kind: str, name: str, rate: Rate) -> Bucket:
    """The bucket of one limit; `kind` keeps the key spaces apart ("task", "host", "key")."""
    return Bucket(f"{kind}:{name}", rate.limit, max(1, round(rate.window_s * 1000)))


@dataclass(frozen=True)
class RateLimits:
    """The configured limits ([rate_limits]), as buckets ready for each task type and host."""

    tasks: Mapping[str, Bucket] = field(default_factory=dict)  # by task type
    hosts: Mapping[str, Bucket] = field(default_factory=dict)  # by http target host (normal_host)

    @property
    def enabled(self) -> bool:
        return bool(self.tasks or self.hosts)

    def buckets(self, task: str, host: str | None) -> tuple[Bucket, ...]:
        """Every bucket an execution of `task` (calling `host`, if it calls one) takes a token
        from: it starts only when all of them grant one. () when it is not limited."""
        by_task = self.tasks.get(task)
        by_host = self.hosts.get(host) if host is not None else None
        if by_host is None:
            return (by_task,) if by_task is not None else ()
        return (by_task, by_host) if by_task is not None else (by_host,)


def limits_from(tasks: Mapping[str, str], hosts: Mapping[str, str]) -> RateLimits:
    """[rate_limits] tasks and hosts ({name: "N/<duration>"}) -> RateLimits. Raises ValueError
    naming the entry, e.g. "tasks['send_email'] = '100/1x': '1x' is not a duration ..."."""
    by_task: dict[str, Bucket] = {}
    by_host: dict[str, Bucket] = {}
    for section, given, into in (("tasks", tasks, by_task), ("hosts", hosts, by_host)):
        for name, text in given.items():
            try:
                key = normal_host(name) if section == "hosts" else name
                if not key.strip():
                    raise ValueError("names no task type")
                if key in into:
                    raise ValueError(f"names the same host as another entry ({key})")
                into[key] = bucket(section.removesuffix("s"), key, parse_rate(text))
            except ValueError as exc:
                raise ValueError(f"{section}[{name!r}] = {text!r}: {exc}") from None
    return RateLimits(by_task, by_host)


def take(
    buckets: MutableMapping[str, tuple[float, float]], requests: Sequence[Sequence[Bucket]], now_ms: float
) -> list[tuple[bool, int]]:
    """Take one token from every bucket of each request, all or nothing, in order: per request
    (granted, the instant in ms it may start: now when granted). A refused request books the
    instant its tokens are due: the next one refused, in this call or a later one, on any
    replica, gets the instant after it, so a backlog comes back one token apart instead of all
    at once to race for each token.

    A bucket is (tat, booked), as GCRA keeps it: tat, its theoretical arrival time, is how far
    ahead of its rate the starts it granted are (full, burst `limit` available, when tat <= now;
    a token is free when tat + interval - window <= now); booked >= tat also counts the refused
    requests' instants. A grant is judged by tat alone (a claim coming back at its instant must
    find its token), and a granted request booked before is already counted in booked; one that
    took a token booked for another displaces that one, which books again. `buckets` is updated
    in place; absent is full.

    >>> b = Bucket("task:t", 2, 1000)  # 2 per second, burst 2
    >>> state = {}
    >>> take(state, [[b], [b], [b], [b]], 0.0), take(state, [[b]], 100.0)
    ([(True, 0), (True, 0), (False, 500), (False, 1000)], [(False, 1500)])
    """
    answers = []
    for request in requests:
        granted, at_ms = True, now_ms
        seen = []  # (bucket, its tat, its booked instant), both at least now
        for b in request:
            tat, booked = buckets.get(b.key, (now_ms, now_ms))
            tat = max(tat, now_ms)
            booked = max(booked, tat)
            granted = granted and tat + b.interval_ms - b.window_ms <= now_ms
            at_ms = max(at_ms, booked + b.interval_ms - b.window_ms)
            seen.append((b, tat, booked))
        for b, tat, booked in seen:
            if granted:
                buckets[b.key] = (tat + b.interval_ms, max(booked, tat + b.interval_ms))
            else:
                buckets[b.key] = (tat, max(booked, at_ms) + b.interval_ms)
        answers.append((granted, math.floor(now_ms) if granted else math.ceil(at_ms)))
    return answers


def park_delay_s(at_ms: int, now_ms: int) -> float:
    """How long a refused claim is parked: until its token is due (both instants on one clock,
    the one that judged), plus a few ms so it never comes back just before it."""
    return max(0.0, (at_ms - now_ms) / 1000) + PARK_SLACK_S
