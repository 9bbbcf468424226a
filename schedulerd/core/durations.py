"""Parse human durations ("30s", "5m", "1h30m", "250ms") and ISO 8601 instants. Pure: no I/O."""

from __future__ import annotations

import re
from datetime import UTC, datetime

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration_s(text: str) -> float:
    """'1h30m' -> 5400.0. Raises ValueError naming the text when it is not a duration."""
    compact = text.strip().lower().replace(" ", "")
    if not compact or _PART.sub("", compact):
        raise ValueError(f"{text!r} is not a duration (use e.g. 30s, 5m, 1h30m, 250ms)")
    return sum(float(number) * _UNIT_S[unit] for number, unit in _PART.findall(compact))


def parse_instant(text: str) -> datetime:
    """ISO 8601 with an explicit offset or Z -> aware UTC datetime. A naive time is refused,
    because guessing a zone is how jobs end up running an hour off."""
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 timestamp (e.g. 2026-12-01T09:00:00Z)") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset; add Z or +HH:MM")
    return parsed.astimezone(UTC)
