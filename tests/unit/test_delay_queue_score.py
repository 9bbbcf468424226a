"""A delay queue entry's score: its due time in whole milliseconds, rounded up, so the pop (which
compares with Redis TIME rounded down) never hands out an entry before its due time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from schedulerd.queue import score_ms

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@given(st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(9000, 1, 1), timezones=st.just(UTC)))
def test_the_score_is_the_due_time_in_milliseconds_rounded_up(due_at: datetime) -> None:
    microseconds = (due_at - EPOCH) // timedelta(microseconds=1)
    assert score_ms(due_at) == -(-microseconds // 1000)
    assert EPOCH + timedelta(milliseconds=score_ms(due_at)) >= due_at > EPOCH + timedelta(milliseconds=score_ms(due_at) - 1)
