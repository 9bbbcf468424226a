"""Overrun math (core/overrun.py): p95 of recent durations against the cron interval."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schedulerd.core.overrun import MIN_SAMPLES, Overrun, assess, p95, shortest_interval_s, worth_checking
from schedulerd.core.schedule import CronSchedule

NOW = datetime(2026, 6, 1, 12, 0, 7, tzinfo=UTC)


@pytest.mark.parametrize(
    ("expression", "zone", "expected_s"),
    [
        ("* * * * *", "UTC", 60.0),
        ("*/5 * * * *", "UTC", 300.0),
        ("0 9,17 * * *", "UTC", 8 * 3600.0),  # gaps of 8 h and 16 h: the shorter one overlaps first
        ("0 * * * *", "Europe/London", 3600.0),
        ("30 2 * * *", "America/New_York", 86400.0),
    ],
)
def test_shortest_interval(expression: str, zone: str, expected_s: float) -> None:
    assert shortest_interval_s(CronSchedule.parse(expression, zone), NOW) == expected_s


def test_shortest_interval_sees_a_short_day_across_spring_forward() -> None:
    # A fixed 01:30 in New York around 2026-03-08: 02:00 jumps to 03:00, so one day lasts 23 h.
    before = datetime(2026, 3, 6, tzinfo=UTC)
    assert shortest_interval_s(CronSchedule.parse("30 1 * * *", "America/New_York"), before, lookahead=5) == 23 * 3600.0


def test_p95_is_nearest_rank() -> None:
    assert p95([float(n) for n in range(1, 21)]) == 19.0
    assert p95([float(n) for n in range(1, 101)]) == 95.0
    assert p95([7.0]) == 7.0
    assert p95([3.0, 1.0, 2.0]) == 3.0
    with pytest.raises(ValueError):
        p95([])


@pytest.mark.parametrize(
    ("durations", "interval_s", "fraction", "expected"),
    [
        ([250.0] * 20, 300.0, 0.8, Overrun(250.0, 300.0, 250.0 / 300.0, 20, True)),
        ([100.0] * 19 + [290.0], 300.0, 0.8, Overrun(100.0, 300.0, 100.0 / 300.0, 20, False)),  # one slow run is not the p95
        ([100.0] * 18 + [290.0] * 2, 300.0, 0.8, Overrun(290.0, 300.0, 290.0 / 300.0, 20, True)),
        ([240.0] * 10, 300.0, 0.8, Overrun(240.0, 300.0, 0.8, 10, True)),  # exactly the fraction warns
        ([299.0] * (MIN_SAMPLES - 1), 300.0, 0.8, Overrun(299.0, 300.0, 299.0 / 300.0, MIN_SAMPLES - 1, False)),
        ([400.0] * 5, 300.0, 1.5, Overrun(400.0, 300.0, 400.0 / 300.0, 5, False)),
    ],
)
def test_assess(durations: list[float], interval_s: float, fraction: float, expected: Overrun) -> None:
    assert assess(durations, interval_s, fraction) == expected


def test_nothing_to_judge_without_runs_or_interval() -> None:
    assert assess([], 300.0, 0.8) is None
    assert assess([10.0] * 5, None, 0.8) is None


def test_only_long_attempts_are_worth_a_look() -> None:
    assert not worth_checking(47.9, 0.8)
    assert worth_checking(48.0, 0.8)
    assert worth_checking(6.0, 0.1)


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"SCHEDULERD_JOBS_OVERRUN_FRACTION": "0"}, "jobs.overrun_fraction must be above 0"),
        ({"SCHEDULERD_JOBS_OVERRUN_SAMPLES": "2"}, "jobs.overrun_samples between 3 and 1000"),
        ({"SCHEDULERD_JOBS_OVERRUN_FRACTION": "most"}, "jobs.overrun_fraction = 'most' is not a valid float"),
    ],
)
def test_overrun_settings_are_checked(tmp_path, environ: dict[str, str], message: str) -> None:
    from schedulerd import config
    from schedulerd.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        config.load(tmp_path / "none.toml", environ=environ)
    assert config.load(tmp_path / "none.toml", environ={"SCHEDULERD_JOBS_OVERRUN_FRACTION": "0.5"}).jobs.overrun_fraction == 0.5
