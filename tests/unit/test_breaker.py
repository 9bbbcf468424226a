"""Circuit breaker decisions (pure): parse, run/probe/park, park delays, outcome folding."""

import random

import pytest

from schedulerd.core.breaker import BreakerState, decide, park_delay_s, parse, summarise


def test_parse_and_labels() -> None:
    state = parse("http:api.example.com", "open|12|1000|31000")
    assert state == BreakerState("http:api.example.com", "open", 12, 1000, 31000)
    assert state.tripped and state.labels == ("http", "api.example.com")
    assert parse("report", "closed|3|0|0").labels == ("report", "") and not parse("report", "closed|3|0|0").tripped


@pytest.mark.parametrize(
    ("value", "now_ms", "expected"),
    [
        (None, 5000, "run"),
        ("closed|9|0|0", 5000, "run"),  # counting failures, still closed
        ("open|10|1000|6000", 5000, "park"),
        ("open|10|1000|6000", 6000, "probe"),  # its wait is over
        ("half_open|10|1000|9000", 5000, "park"),  # a probe is running
        ("half_open|10|1000|9000", 9000, "probe"),  # the probe went silent: another may go
    ],
)
def test_decide(value, now_ms, expected) -> None:
    assert decide(parse("t", value) if value else None, now_ms) == expected


def test_park_delays_spread_the_backlog() -> None:
    rng = random.Random(1)
    delays = [park_delay_s(parse("t", "open|10|0|11000"), 1000, 1.0, 30.0, rng) for _ in range(500)]
    assert all(10.5 <= d <= 40.0 for d in delays) and max(delays) - min(delays) > 20  # spread over open_s
    half = [park_delay_s(parse("t", "half_open|10|0|99000"), 1000, 1.0, 30.0, rng) for _ in range(500)]
    assert all(0.5 <= d <= 30.0 for d in half) and sum(half) / len(half) > 10  # not back every second
    assert all(0.5 <= park_delay_s(parse("t", "half_open|1|0|0"), 0, 1.0, 0.2, rng) <= 1.0 for _ in range(50))


def test_summarise_keeps_the_consecutive_count() -> None:
    assert summarise([]) == {}
    assert summarise([("a", False)] * 3) == {"a": (False, 3)}
    assert summarise([("a", False), ("a", True)]) == {"a": (True, 0)}
    assert summarise([("a", True), ("b", False), ("a", False), ("a", False)]) == {"a": (True, 2), "b": (False, 1)}
