"""Overlap verdicts (core/overlap.py): one job's due occurrences against its running one."""

from __future__ import annotations

import pytest

from datetime import UTC, datetime

from schedulerd.core.overlap import Verdict, decide, superseded

CASES = [
    # policy, busy, waiting, due (oldest first), expected verdict
    ("skip", False, None, ["a"], Verdict(start="a")),
    ("skip", True, None, ["a", "b"], Verdict(skip=["a", "b"])),
    ("skip", False, None, ["a", "b", "c"], Verdict(start="a", skip=["b", "c"])),
    ("buffer_one", True, None, ["a"], Verdict(wait="a")),
    ("buffer_one", True, None, ["a", "b"], Verdict(wait="a", skip=["b"])),
    ("buffer_one", True, "w", ["a", "b"], Verdict(skip=["a", "b"])),
    ("buffer_one", False, None, ["a", "b", "c"], Verdict(start="a", wait="b", skip=["c"])),
    ("buffer_one", False, None, ["a"], Verdict(start="a")),
    ("buffer_one", True, None, [], Verdict()),
    ("cancel_other", True, None, ["a"], Verdict(wait="a", cancel_running=True)),
    ("cancel_other", True, None, ["a", "b"], Verdict(wait="b", skip=["a"], cancel_running=True)),
    ("cancel_other", True, "w", ["a"], Verdict(wait="a", skip=["w"], cancel_running=True)),
    ("cancel_other", False, None, ["a", "b"], Verdict(start="b", skip=["a"])),
    ("cancel_other", False, "w", ["a"], Verdict(start="a", skip=["w"])),
    ("cancel_other", True, "w", [], Verdict()),
]


@pytest.mark.parametrize(("policy", "busy", "waiting", "due", "expected"), CASES)
def test_verdicts(policy: str, busy: bool, waiting: str | None, due: list[str], expected: Verdict[str]) -> None:
    assert decide(policy, busy, waiting, due) == expected


def test_every_due_occurrence_gets_one_fate_and_none_starts_beside_a_running_one() -> None:
    for policy, busy, waiting, due, _ in CASES:
        verdict = decide(policy, busy, waiting, due)
        fates = [verdict.start, verdict.wait, *verdict.skip]
        assert sorted(f for f in fates if f is not None and f != waiting) == sorted(due)
        assert verdict.start is None or not busy  # nothing starts beside a running execution
        assert not verdict.cancel_running or busy


def test_under_buffer_one_an_older_occurrence_judged_later_takes_the_waiting_place() -> None:
    """Two replicas judge a job's occurrences in either order; the oldest due one waits."""
    assert decide("buffer_one", True, "w", ["a", "b"], older_than_waiting=1) == Verdict(wait="a", skip=["w", "b"])
    assert decide("buffer_one", True, "w", ["a", "b"], older_than_waiting=0) == Verdict(skip=["a", "b"])
    assert decide("buffer_one", False, "w", ["a", "b"], older_than_waiting=2) == Verdict(start="a", wait="b", skip=["w"])
    assert decide("buffer_one", False, "w", ["a", "b"], older_than_waiting=1) == Verdict(start="a", skip=["b"])


def test_allow_and_unknown_policies_are_refused() -> None:
    with pytest.raises(ValueError, match="allow"):
        decide("allow", True, None, ["a"])
    with pytest.raises(ValueError):
        decide("queue_all", True, None, ["a"])


def test_cancel_other_never_stops_a_newer_run_for_an_older_occurrence() -> None:
    at = [datetime(2026, 1, 1, h, tzinfo=UTC) for h in range(4)]
    due = [("retry-of-00:00", at[0]), ("02:00", at[2]), ("03:00", at[3])]
    assert superseded("cancel_other", at[1], due) == (["02:00", "03:00"], ["retry-of-00:00"])
    assert superseded("cancel_other", None, due) == (["retry-of-00:00", "02:00", "03:00"], [])  # nothing runs
    assert superseded("buffer_one", at[1], due) == (["retry-of-00:00", "02:00", "03:00"], [])
