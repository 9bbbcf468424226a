import random
import statistics

import pytest

from schedulerd.core.backoff import after_failure, apply_jitter, delay_without_jitter


@pytest.mark.parametrize(
    ("failed_attempt", "base_s", "factor", "max_s", "expected_s"),
    [
        (1, 5, 5, 3600, 5),
        (2, 5, 5, 3600, 25),
        (3, 5, 5, 3600, 125),
        (6, 5, 5, 3600, 3600),  # 15625 capped
        (1000, 5, 5, 3600, 3600),  # no float overflow
        (4, 2, 2, 60, 16),
        (1, 2, 1, 60, 2),  # factor 1: constant
    ],
)
def test_delay_without_jitter(failed_attempt, base_s, factor, max_s, expected_s) -> None:
    assert delay_without_jitter(failed_attempt, base_s, factor, max_s) == expected_s


def test_attempt_numbers_start_at_one() -> None:
    with pytest.raises(ValueError, match="failed_attempt"):
        delay_without_jitter(0, 5, 5, 60)


def test_full_jitter_is_uniform_within_the_ceiling() -> None:
    rng = random.Random(7)
    samples = [apply_jitter(25.0, rng) for _ in range(5000)]
    assert 0 <= min(samples) and max(samples) <= 25.0
    assert abs(statistics.mean(samples) - 12.5) < 0.5
    assert statistics.pstdev(samples) == pytest.approx(25 / 12**0.5, rel=0.05)


@pytest.mark.parametrize(("failed_attempt", "max_attempts", "ceiling_s"), [(1, 3, 5), (2, 3, 25), (3, 3, None), (5, 3, None)])
def test_after_failure_defaults(failed_attempt, max_attempts, ceiling_s) -> None:
    delay_s = after_failure(failed_attempt, max_attempts, 5, 5, 3600, random.Random(1))
    if ceiling_s is None:
        assert delay_s is None
    else:
        assert 0 <= delay_s <= ceiling_s
