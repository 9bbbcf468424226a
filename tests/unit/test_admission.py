"""Admission under per-task limits and the slow pool (pure)."""

import pytest

from schedulerd.core.limits import admit


@pytest.mark.parametrize(
    ("tasks", "running", "limits", "slow", "slow_free", "expected"),
    [
        (["a", "a", "a"], {}, {}, (), 0, [True, True, True]),  # no limits
        (["a", "a", "a"], {}, {"a": 2}, (), 0, [True, True, False]),
        (["a", "b", "a"], {"a": 1}, {"a": 2}, (), 0, [True, True, False]),  # running ones count
        (["s", "s", "f"], {}, {}, ("s",), 1, [True, False, True]),  # slow pool has one slot
        (["s", "f"], {}, {}, ("s",), 0, [False, True]),  # slow pool full: fast still runs
        (["s", "s", "s"], {"s": 1}, {"s": 2}, ("s",), 5, [True, False, False]),  # both limits apply
    ],
)  # fmt: skip
def test_admit(tasks, running, limits, slow, slow_free, expected) -> None:
    assert admit(tasks, running, limits, slow, slow_free) == expected
