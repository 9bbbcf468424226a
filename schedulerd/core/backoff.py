"""Retry delays: a deterministic exponential ceiling, then full jitter. Pure: no I/O.

With the defaults (base 5 s, factor 5, 3 attempts) the schedule is:

    attempt 1 fails -> attempt 2 starts after uniform(0, 5 s)
    attempt 2 fails -> attempt 3 starts after uniform(0, 25 s)
    attempt 3 fails -> failed (terminal)

Full jitter (the whole delay is random) spreads a burst of failures evenly instead of letting
them return together (AWS Architecture Blog, "Exponential Backoff And Jitter").
"""

from __future__ import annotations

import random


def delay_without_jitter(failed_attempt: int, base_s: float, factor: float, max_s: float) -> float:
    """Ceiling of the delay after attempt number `failed_attempt` (1-based) failed."""
    if failed_attempt < 1:
        raise ValueError(f"failed_attempt must be >= 1, got {failed_attempt}")
    exponent = failed_attempt - 1
    # Cap before exponentiating so large attempt numbers cannot overflow a float.
    if factor > 1 and exponent > 0 and base_s * factor ** min(exponent, 64) >= max_s:
        return max_s
    return min(max_s, base_s * factor**exponent)


def apply_jitter(ceiling_s: float, rng: random.Random | None = None) -> float:
    """Full jitter: uniform in [0, ceiling_s]."""
    return (rng or random).uniform(0.0, ceiling_s)


def retry_delay(failed_attempt: int, base_s: float, factor: float, max_s: float, rng: random.Random | None = None) -> float:
    return apply_jitter(delay_without_jitter(failed_attempt, base_s, factor, max_s), rng)


def after_failure(
    failed_attempt: int,
    max_attempts: int,
    base_s: float,
    factor: float,
    max_s: float,
    rng: random.Random | None = None,
) -> float | None:
    """Delay before the next attempt, or None when the attempts are spent (terminal failure)."""
    if failed_attempt >= max_attempts:
        return None
    return retry_delay(failed_attempt, base_s, factor, max_s, rng)
