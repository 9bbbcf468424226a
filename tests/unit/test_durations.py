from datetime import UTC, datetime, timedelta

import pytest

from schedulerd.core.durations import EARLIEST, LATEST, parse_duration_s, parse_instant, shifted, text_problem


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


@pytest.mark.parametrize(("text", "message"), [
    ("0001-01-01T00:00:00+01:00", "outside 0001-01-01..9999-12-31"),  # year 0 in UTC
    ("0001-01-01T13:59:00+14:00", "outside"),
    ("9999-12-31T23:00:00-05:00", "outside"),  # year 10000 in UTC
    ("9999-12-31T23:59:59.999999-00:01", "outside"),
    ("2026-12-01T09:00:00Z\x00", "control character"),  # Python's parser would stop at the NUL
    ("2026-12-01T09:00:00Z\x00junk", "control character"),
    ("2026-12-01\x01T09:00:00Z", "control character"),
    ("2026-12-01T09:00:00Z\udcff", "control character or invalid text"),
    ("2" * 65, "too long"),
])  # fmt: skip
def test_parse_instant_refuses_every_instant_past_the_calendar_and_trailing_bytes(text, message) -> None:
    with pytest.raises(ValueError, match=message):
        parse_instant(text)


def test_parse_instant_takes_the_calendar_up_to_its_ends() -> None:
    assert parse_instant("0001-01-01T00:00:00Z") == datetime.min.replace(tzinfo=UTC)
    assert parse_instant("0001-01-01T01:00:00+01:00") == datetime.min.replace(tzinfo=UTC)
    assert parse_instant("9999-12-31T23:59:59.999999Z") == datetime.max.replace(tzinfo=UTC)


@pytest.mark.parametrize("text", ["999999999999d", "1" * 400 + "s", "36600d1s"])
def test_parse_duration_refuses_what_would_leave_the_calendar(text) -> None:
    with pytest.raises(ValueError):
        parse_duration_s(text)


def test_text_problem_names_nul_and_surrogates() -> None:
    assert text_problem("café 😀") is None
    assert "NUL" in (text_problem("a\x00") or "")
    assert "UTF-8" in (text_problem("caf\udce9") or "")


def test_shifted_holds_at_the_ends() -> None:
    assert shifted(LATEST, timedelta(seconds=1)) == LATEST
    assert shifted(EARLIEST, -timedelta(days=1)) == EARLIEST
    assert shifted(EARLIEST, timedelta(days=1)) == EARLIEST + timedelta(days=1)
