"""Records to models: by position when a statement returns exactly a model's fields in order, by
name otherwise, with the same result."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from schedulerd.models import Attempt


class FakeRecord:
    """What from_rows reads of an asyncpg Record: keys in column order, values by name and in order."""

    def __init__(self, **columns: Any) -> None:
        self.columns = columns

    def keys(self) -> Iterator[str]:
        return iter(self.columns)

    def __getitem__(self, name: str) -> Any:
        return self.columns[name]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.columns.values())


FIELDS = dict(
    execution_id="e", attempt=1, fence=2, worker="w", started_at=None, finished_at=None, outcome="failed",
    error="boom", detail=None,
)  # fmt: skip


def test_rows_with_exactly_the_fields_in_order_are_built_by_position() -> None:
    rows = [FakeRecord(**FIELDS), FakeRecord(**{**FIELDS, "fence": 3})]
    assert Attempt.from_rows(rows) == [Attempt(**FIELDS), Attempt(**{**FIELDS, "fence": 3})]


def test_rows_with_other_columns_or_another_order_are_built_by_name() -> None:
    reordered = FakeRecord(**dict(reversed(list(FIELDS.items()))))
    extra = FakeRecord(**FIELDS, scheduled_for=None)
    assert Attempt.from_rows([reordered]) == [Attempt(**FIELDS)]
    assert Attempt.from_rows([extra]) == [Attempt(**FIELDS)]
    assert Attempt.from_rows([]) == []
