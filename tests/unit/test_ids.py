"""Execution ids carry scheduled_for, so batch statements can name the partitions they visit."""

from __future__ import annotations

import uuid

import pytest
from asyncpg.pgproto import pgproto
from hypothesis import given
from hypothesis import strategies as st
from datetime import UTC, datetime, timedelta

from schedulerd.core.ids import EARLIEST, LATEST, covering_days, execution_id, scheduled_for_bounds, scheduled_ms

MIDNIGHT = datetime(2026, 11, 29, tzinfo=UTC)


def test_an_id_is_an_rfc_9562_version_8_uuid_carrying_its_millisecond():
    scheduled_for = MIDNIGHT + timedelta(hours=13, microseconds=123_456)
    execution = execution_id(scheduled_for)
    assert execution.version == 8 and execution.variant == uuid.RFC_4122
    assert scheduled_ms(execution) == int(scheduled_for.timestamp() * 1000)
    assert scheduled_ms(str(execution)) == scheduled_ms(execution)


def test_ids_of_one_instant_differ_and_sort_by_time():
    same = {execution_id(MIDNIGHT) for _ in range(1000)}
    assert len(same) == 1000
    assert execution_id(MIDNIGHT) < execution_id(MIDNIGHT + timedelta(milliseconds=1))


def test_bounds_cover_every_id_and_nothing_a_millisecond_beyond():
    times = [MIDNIGHT + timedelta(seconds=s, microseconds=999) for s in (5, 0, 86_400 * 3)]
    low, high = scheduled_for_bounds([execution_id(t) for t in times])
    assert low == MIDNIGHT
    assert high == MIDNIGHT + timedelta(days=3, milliseconds=1)
    assert all(low <= t < high for t in times)


def test_an_id_without_a_time_widens_the_bounds_to_everything():
    ids = [execution_id(MIDNIGHT), uuid.uuid4(), uuid.uuid7() if hasattr(uuid, "uuid7") else uuid.uuid1()]
    assert scheduled_for_bounds(ids) == (EARLIEST, LATEST)
    assert scheduled_ms(uuid.uuid4()) is None


def test_no_ids_is_an_empty_range():
    low, high = scheduled_for_bounds([])
    assert not low < high


def test_a_time_outside_the_48_bit_range_gets_a_plain_random_id():
    assert execution_id(datetime(1969, 12, 31, tzinfo=UTC)).version == 4


@pytest.mark.parametrize("text", ["ffffffff-ffff-8fff-bfff-ffffffffffff", "e8d4a510-0000-8000-8000-000000000000"])
def test_an_id_whose_time_is_past_year_9999_narrows_nothing(text):
    # 48 bits of milliseconds reach year 10889; Python's datetime stops at 9999.
    assert scheduled_ms(text) is not None
    assert scheduled_for_bounds([text]) == (EARLIEST, LATEST)
    assert scheduled_for_bounds([execution_id(MIDNIGHT), text]) == (EARLIEST, LATEST)


@pytest.mark.parametrize(
    ("times", "days"),
    [
        ([MIDNIGHT + timedelta(hours=13)], (0, 1)),
        ([MIDNIGHT, MIDNIGHT + timedelta(hours=23, minutes=59, seconds=59, milliseconds=999)], (0, 1)),
        ([MIDNIGHT - timedelta(milliseconds=1), MIDNIGHT], (-1, 1)),
        ([MIDNIGHT + timedelta(days=3, hours=1), MIDNIGHT + timedelta(hours=5)], (0, 4)),
    ],
)
def test_covering_days_are_the_whole_utc_days_of_the_ids(times, days):
    low, high = scheduled_for_bounds([execution_id(t) for t in times])
    assert covering_days(low, high) == (MIDNIGHT + timedelta(days=days[0]), MIDNIGHT + timedelta(days=days[1]))


@pytest.mark.parametrize(
    "ids", [[], [uuid.uuid4()], ["ffffffff-ffff-8fff-bfff-ffffffffffff"], [datetime(9999, 12, 31, 23, tzinfo=UTC)]]
)
def test_ids_that_narrow_nothing_have_no_covering_days(ids):
    ids = [execution_id(i) if isinstance(i, datetime) else i for i in ids]
    assert covering_days(*scheduled_for_bounds(ids)) is None


@given(st.integers(min_value=0, max_value=2**128 - 1))
def test_an_id_reads_the_same_from_its_bits_as_from_its_text(bits):
    """scheduled_ms reads a UUID from its bits and text by its characters: they agree on every
    id, of any version and variant, and asyncpg's own UUID type reads as the standard one."""
    any_id = uuid.UUID(int=bits)
    as_v8 = uuid.UUID(int=(bits & ~(0xF << 76) & ~(0x3 << 62)) | (0x8 << 76) | (0x2 << 62))
    for candidate in (any_id, as_v8, pgproto.UUID(str(as_v8))):
        assert scheduled_ms(candidate) == scheduled_ms(str(candidate))
    assert scheduled_ms(as_v8) == bits >> 80
