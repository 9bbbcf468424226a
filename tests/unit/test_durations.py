from datetime import UTC, datetime

import pytest

from schedulerd.core.durations import parse_duration_s, parse_instant


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("5m", 300), ("1h30m", 5400), ("250ms", 0.25), ("2d", 172800), (" 1.5s ", 1.5)])
def test_parse_duration(text, seconds) -> None:
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["", "5", "5x", "s", "-5s", "5s garbage", "1h-30m"])
def test_parse_duration_refuses(text) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration_s(text)


def test_parse_instant_normalises_to_utc() -> None:
    assert parse_instant("2026-12-01T10:00:00+01:00") == datetime(2026, 12, 1, 9, tzinfo=UTC)
    assert parse_instant("2026-12-01T09:00:00Z") == datetime(2026, 12, 1, 9, tzinfo=UTC)


@pytest.mark.parametrize(("text", "message"), [("2026-12-01T09:00", "no UTC offset"), ("tomorrow", "not an ISO 8601"), ("2026-13-01T00:00Z", "not an ISO 8601")])
def test_parse_instant_refuses(text, message) -> None:
    with pytest.raises(ValueError, match=message):
        parse_instant(text)
