"""Execution ids that carry their occurrence's time, so a lookup by id can name its partition.

`executions` and `attempts` are partitioned by day of `scheduled_for`. A worker holds only ids
(Redis members), so each id embeds its scheduled_for: an RFC 9562 UUIDv8 ("custom") with the
Unix milliseconds of scheduled_for in the top 48 bits, then the version, 12 random bits, the
variant and 62 random bits. Postgres's schedulerd_execution_id() (migration 0007) builds the
same layout. Any other id (rows written before partitioning, ids from other tools) stays valid:
a lookup that includes one just cannot be narrowed to its partitions.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
_MS_BITS = 48
EARLIEST = datetime.min.replace(tzinfo=UTC)
LATEST = datetime.max.replace(tzinfo=UTC)


def execution_id(scheduled_for: datetime) -> uuid.UUID:
    """A fresh id for an execution scheduled at `scheduled_for`."""
    ms = (scheduled_for - _EPOCH) // _ONE_MS
    if not 0 <= ms < 1 << _MS_BITS:
        return uuid.uuid4()  # outside 1970..10889: valid, just not narrowable
    random_bits = int.from_bytes(secrets.token_bytes(10), "big")  # 80 bits, 74 of them used
    value = (
        ms << 80
        | 0x8 << 76  # version 8
        | (random_bits >> 62 & 0xFFF) << 64
        | 0b10 << 62  # RFC 9562 variant
        | random_bits & ((1 << 62) - 1)
    )
    return uuid.UUID(int=value)


def scheduled_ms(execution_id: uuid.UUID | str) -> int | None:
    """The Unix milliseconds of scheduled_for an id carries, or None for an id of another kind."""
    if isinstance(execution_id, uuid.UUID):  # from its bits: formatting it as text cost more than the rest
        bits = execution_id.int
        if (bits >> 76) & 0xF != 8 or (bits >> 62) & 0x3 != 0x2:  # version 8, RFC 4122 variant
            return None
        return bits >> 80
    text = str(execution_id)
    if len(text) != 36 or text[14] != "8" or text[19] not in "89ab":
        return None
    return int(text[0:8] + text[9:13], 16)


def scheduled_for_bounds(execution_ids: Iterable[uuid.UUID | str]) -> tuple[datetime, datetime]:
    """[low, high) of scheduled_for covering these executions: the partitions a batch statement
    needs to visit. Any id without a time widens it to everything."""
    lowest = highest = None
    for execution_id in execution_ids:
        ms = scheduled_ms(execution_id)
        if ms is None:
            return EARLIEST, LATEST
        lowest = ms if lowest is None or ms < lowest else lowest
        highest = ms if highest is None or ms > highest else highest
    if lowest is None or highest is None:
        return EARLIEST, EARLIEST  # no ids: an empty range
    if highest >= _LAST_MS:
        # 48 bits reach year 10889: an id made elsewhere (or made up) may name a time Python
        # cannot hold. Such an id narrows nothing, like an id without a time.
        return EARLIEST, LATEST
    return _EPOCH + lowest * _ONE_MS, _EPOCH + (highest + 1) * _ONE_MS


_LAST_MS = (LATEST - _EPOCH) // _ONE_MS
_ONE_DAY = timedelta(days=1)


def covering_days(low: datetime, high: datetime) -> tuple[datetime, datetime] | None:
    """[low, high) of scheduled_for_bounds widened to whole UTC days (the partitions' own
    bounds), or None when they cannot be: no ids, or an id without a time."""
    if low == EARLIEST or high > LATEST - _ONE_DAY:
        return None
    first = datetime(low.year, low.month, low.day, tzinfo=UTC)
    last = datetime(high.year, high.month, high.day, tzinfo=UTC)
    return first, last if last == high else last + _ONE_DAY
