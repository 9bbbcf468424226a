"""core/retry.py: the retry decision after an attempt, without a worker."""

from __future__ import annotations

import random

import pytest

from schedulerd.core.retry import Next, RetryPolicy, after_attempt

POLICY = RetryPolicy(max_attempts=3, backoff_base_s=5.0, backoff_factor=5.0, backoff_max_s=300.0)


class _Ceiling(random.Random):
    """Full jitter at its ceiling, so the delays are the schedule's deterministic ones."""

    def uniform(self, a: float, b: float) -> float:
        return b


@pytest.mark.parametrize("outcome, attempt, permanent, retry_after_s, horizon_s, expected", [
    ("succeeded", 1, False, None, 300.0, Next("succeeded")),
    ("cancelled", 1, False, None, 300.0, Next("cancelled")),
    ("failed", 1, False, None, 300.0, Next("queued", 5.0)),  # 5 s ceiling after attempt 1
    ("timed_out", 2, False, None, 300.0, Next("queued", 25.0)),  # 25 s after attempt 2
    ("failed", 3, False, None, 300.0, Next("failed")),  # attempts spent
    ("failed", 1, True, None, 300.0, Next("failed")),  # permanent: not retried, attempts left or not
    ("failed", 1, False, 60.0, 300.0, Next("queued", 60.0)),  # Retry-After beyond the backoff wins
    ("failed", 2, False, 1.0, 300.0, Next("queued", 25.0)),  # ... but never shortens it
    ("failed", 1, False, 86400.0, 300.0, Next("queued", 300.0)),  # capped by backoff_max_s
    ("failed", 2, False, None, 10.0, Next("pending", 25.0)),  # due past the dispatch horizon: pending
    ("failed", 3, True, 60.0, 300.0, Next("failed")),  # permanent ignores Retry-After
])  # fmt: skip
def test_after_attempt(
    outcome: str, attempt: int, permanent: bool, retry_after_s: float | None, horizon_s: float, expected: Next
) -> None:
    got = after_attempt(outcome, attempt, POLICY, horizon_s=horizon_s, permanent=permanent,
                        retry_after_s=retry_after_s, rng=_Ceiling())  # fmt: skip
    assert got == expected


def test_jitter_stays_under_the_ceiling() -> None:
    rng = random.Random(1)
    delays = [after_attempt("failed", 2, POLICY, horizon_s=300.0, rng=rng).delay_s for _ in range(200)]
    assert all(d is not None and 0.0 <= d <= 25.0 for d in delays) and len(set(delays)) > 100
