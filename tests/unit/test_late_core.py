"""core/late.py: naming late reasons, the occurrence an operator means, the forecast's tenant cap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedulerd import config
from schedulerd.core.late import (
    EXPLANATIONS, FORECAST_SPACING, OTHER_TENANTS, LateReason, cap_tenants, for_misfire, forecast_pause_s,
    nearest_occurrence, of_execution, resolve_at, window_label,
)  # fmt: skip
from schedulerd.core.schedule import CronSchedule
from schedulerd.errors import ConfigError


def test_every_late_reason_has_an_explanation() -> None:
    assert set(EXPLANATIONS) == set(LateReason)
    assert {r.value for r in LateReason} == {
        "scheduler_down", "backlog", "misfire_skip", "overlap", "paused", "breaker_open", "tenant_cap", "rate_limited",
        "concurrency_limit",
    }  # fmt: skip


@pytest.mark.parametrize("down, runs_late, expected", [
    (True, True, LateReason.SCHEDULER_DOWN), (True, False, LateReason.SCHEDULER_DOWN),
    (False, True, LateReason.BACKLOG), (False, False, LateReason.MISFIRE_SKIP),
])  # fmt: skip
def test_misfire_reasons(down: bool, runs_late: bool, expected: LateReason) -> None:
    assert for_misfire(down, runs_late) is expected


@pytest.mark.parametrize("late_reason, reason, expected", [
    ("backlog", "late_replay", LateReason.BACKLOG),  # recorded wins
    (None, "paused", LateReason.PAUSED),
    (None, "overlap", LateReason.OVERLAP),  # the overlap policy sets only `reason`
    (None, "misfire_skip", LateReason.MISFIRE_SKIP),
    (None, "task_limit", LateReason.TENANT_CAP),
    (None, "rate_limited", LateReason.RATE_LIMITED), (None, "concurrency_limit", LateReason.CONCURRENCY_LIMIT),
    (None, "deleted", None), (None, "late_replay", None), (None, None, None),
])  # fmt: skip
def test_the_late_reason_of_an_execution(late_reason: str | None, reason: str | None, expected: LateReason | None) -> None:
    assert of_execution(late_reason, reason) == expected


@pytest.mark.parametrize("expression, zone, at, expected", [
    ("0 2 * * *", "UTC", datetime(2026, 5, 1, 2, 7, tzinfo=UTC), datetime(2026, 5, 1, 2, tzinfo=UTC)),
    ("0 2 * * *", "UTC", datetime(2026, 5, 1, 14, 0, tzinfo=UTC), datetime(2026, 5, 1, 2, tzinfo=UTC)),  # tie: earlier
    ("*/15 * * * *", "UTC", datetime(2026, 5, 1, 9, 8, tzinfo=UTC), datetime(2026, 5, 1, 9, 15, tzinfo=UTC)),
    # Spring forward in New York: 02:30 does not exist on 2026-03-08 and runs at 03:00 EDT (07:00 UTC).
    ("30 2 * * *", "America/New_York", datetime(2026, 3, 8, 7, 30, tzinfo=UTC), datetime(2026, 3, 8, 7, tzinfo=UTC)),
    ("0 0 1 1 *", "UTC", datetime(2026, 6, 15, tzinfo=UTC), None),  # nothing within a day
])  # fmt: skip
def test_the_nearest_occurrence(expression: str, zone: str, at: datetime, expected: datetime | None) -> None:
    assert nearest_occurrence(CronSchedule(expression, zone), at) == expected


def test_an_exact_occurrence_is_its_own_nearest() -> None:
    at = datetime(2026, 5, 1, 2, tzinfo=UTC)
    assert nearest_occurrence(CronSchedule("0 2 * * *"), at, timedelta(minutes=1)) == at


@pytest.mark.parametrize("text, zone, now, expected", [
    ("02:00", "UTC", datetime(2026, 5, 1, 3, tzinfo=UTC), datetime(2026, 5, 1, 2, tzinfo=UTC)),
    ("02:00", "UTC", datetime(2026, 5, 1, 1, tzinfo=UTC), datetime(2026, 4, 30, 2, tzinfo=UTC)),
    ("02:00", "UTC", datetime(2026, 5, 1, 2, tzinfo=UTC), datetime(2026, 5, 1, 2, tzinfo=UTC)),  # at now: today's
    ("2:00", "Europe/London", datetime(2026, 7, 1, 12, tzinfo=UTC), datetime(2026, 7, 1, 1, tzinfo=UTC)),  # BST
    ("2026-05-01T02:00:00+02:00", "UTC", datetime(2026, 6, 1, tzinfo=UTC), datetime(2026, 5, 1, 0, tzinfo=UTC)),
])  # fmt: skip
def test_resolving_the_instant_asked_about(text: str, zone: str, now: datetime, expected: datetime) -> None:
    assert resolve_at(text, zone, now) == expected


@pytest.mark.parametrize("text, message", [
    ("24:00", "not a wall-clock time"), ("02:60", "not a wall-clock time"),
    ("2026-05-01T02:00:00", "no UTC offset"), ("yesterday", "not an ISO 8601 timestamp"),
])  # fmt: skip
def test_bad_instants_are_refused_with_the_text(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_at(text, "UTC", datetime(2026, 5, 1, tzinfo=UTC))


def test_window_labels() -> None:
    assert [window_label(w) for w in (60, 300, 900, 3600)] == ["1m", "5m", "15m", "60m"]


@pytest.mark.parametrize("counts, top, expected", [
    ({}, 3, {}),
    ({"a": (1, 2)}, 3, {"a": (1, 2)}),
    ({"a": (1, 5), "b": (0, 9), "c": (2, 2)}, 2, {"b": (0, 9), "a": (1, 5), OTHER_TENANTS: (2, 2)}),
    ({"a": (1, 5), "b": (0, 9), "c": (2, 2)}, 0, {OTHER_TENANTS: (3, 16)}),
    ({"b": (1, 4), "a": (2, 4)}, 1, {"a": (2, 4), OTHER_TENANTS: (1, 4)}),  # a tie goes by name
])  # fmt: skip
def test_capping_tenants_keeps_the_total(counts: dict, top: int, expected: dict) -> None:
    capped = cap_tenants(counts, top)
    assert capped == expected
    totals = [sum(column) for column in zip(*counts.values())]
    assert [sum(column) for column in zip(*capped.values())] == totals


@pytest.mark.parametrize("name, value", [
    ("SCHEDULERD_LATE_DOWN_AFTER_S", "0"), ("SCHEDULERD_FORECAST_INTERVAL_S", "-1"),
    ("SCHEDULERD_FORECAST_TOP_TENANTS", "-2"),
])  # fmt: skip
def test_bad_late_and_forecast_settings_are_refused(name: str, value: str, tmp_path) -> None:
    with pytest.raises(ConfigError, match="late.down_after_s and forecast.interval_s"):
        config.load(tmp_path / "none.toml", environ={name: value})


def test_down_after_must_exceed_the_report_interval(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"late.down_after_s \(5.0\) must exceed daemon.observe_interval_s \(5.0\)"):
        config.load(tmp_path / "none.toml", environ={"SCHEDULERD_LATE_DOWN_AFTER_S": "5"})


def test_a_slow_forecast_waits_longer_than_its_interval_before_the_next() -> None:
    assert forecast_pause_s(15.0, 0.05) == 15.0  # cheap: the configured interval
    assert forecast_pause_s(15.0, 15.0 / FORECAST_SPACING) == 15.0
    assert forecast_pause_s(15.0, 2.0) == 2.0 * FORECAST_SPACING  # at most 1/20 of the time counting
