"""User input, parsed one way for every door (API schemas, CLI flags, services): human durations
("30s", "5m", "1h30m", "250ms"), ISO 8601 instants, and text Postgres can store. Each parser
raises ValueError with a message that reads after the field's name, never OverflowError or a
driver error later. Pure: no I/O."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
# The instants Python can hold, as UTC. Anything a parser accepts lies inside them.
EARLIEST = datetime.min.replace(tzinfo=UTC)
LATEST = datetime.max.replace(tzinfo=UTC)
# Longest duration accepted: anything beyond ~100 years is a typo, and it keeps now + duration
# inside the datetime range for any now before year 9899.
MAX_DURATION_S = 100 * 366 * 86400.0
MAX_INSTANT_LENGTH = 64  # "2026-12-01T09:00:00.123456+05:30" is 32 characters


def text_problem(text: str) -> str | None:
    """Why Postgres cannot store this text (NUL, or a lone surrogate: what Python makes of bytes
    that are not UTF-8), or None when it can. The message reads after a field's name."""
    if "\x00" in text:
        return "contains a NUL character, which cannot be stored"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"is not valid UTF-8 text ({text[exc.start]!r} at position {exc.start})"
    return None


def parse_duration_s(text: str) -> float:
    """'1h30m' -> 5400.0. Raises ValueError naming the text when it is not a duration or is over
    MAX_DURATION_S (so adding it to now can never leave the calendar)."""
    compact = text.strip().lower().replace(" ", "")
    if not compact or len(compact) > 64 or _PART.sub("", compact):
        raise ValueError(f"{text[:64]!r} is not a duration (use e.g. 30s, 5m, 1h30m, 250ms)")
    seconds = sum(float(number) * _UNIT_S[unit] for number, unit in _PART.findall(compact))
    if not math.isfinite(seconds) or seconds > MAX_DURATION_S:
        raise ValueError(f"{text!r} is longer than 100 years")
    return seconds


def parse_instant(text: str) -> datetime:
    """ISO 8601 with an explicit offset or Z -> aware UTC datetime.

    Refused with a ValueError: a naive time (guessing a zone is how jobs end up running an hour
    off), any control character (a NUL after a valid instant included: Python's parser stops
    at it), and an instant whose offset carries it outside 0001-01-01..9999-12-31 UTC
    ("0001-01-01T00:00:00+01:00" is year 0 in UTC).

    >>> parse_instant("2026-12-01T10:00:00+01:00").isoformat()
    '2026-12-01T09:00:00+00:00'
    """
    if not isinstance(text, str):
        raise ValueError("must be an ISO 8601 string with a UTC offset, e.g. 2026-12-01T09:00:00Z")
    if len(text) > MAX_INSTANT_LENGTH:
        raise ValueError(f"is {len(text)} characters, too long for an ISO 8601 timestamp")
    if any(ord(c) < 0x20 or ord(c) == 0x7F or 0xD800 <= ord(c) <= 0xDFFF for c in text):
        raise ValueError(f"{text!r} contains a control character or invalid text; not an ISO 8601 timestamp")
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 timestamp (e.g. 2026-12-01T09:00:00Z)") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset; add Z or +HH:MM")
    return as_utc(parsed, text)


def as_utc(value: datetime, shown: str | None = None) -> datetime:
    """An aware datetime in UTC; ValueError when its offset carries it outside the calendar."""
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{shown or value.isoformat()!r} is outside 0001-01-01..9999-12-31 in UTC") from None


def shifted(at: datetime, delta: timedelta) -> datetime:
    """at + delta, held at the ends of the calendar instead of overflowing (for windows around
    an instant a user named).

    >>> shifted(LATEST, timedelta(days=1)) == LATEST
    True
    """
    try:
        return at + delta
    except OverflowError:
        return LATEST if delta > timedelta(0) else EARLIEST
