"""What an execution becomes after an attempt: the retry decision. Pure: no I/O.

    succeeded                      -> succeeded
    cancelled (overlap cancel_other) -> cancelled
    failed or timed out, permanent -> failed
    failed, attempts left          -> queued (retry due within the dispatch horizon) or pending,
                                      after the backoff delay (core/backoff.py), at least the
                                      target's Retry-After when it gave one (capped by backoff_max_s)
    failed, attempts spent         -> failed
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from schedulerd.core.backoff import after_failure


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int
    backoff_base_s: float
    backoff_factor: float
    backoff_max_s: float


@dataclass(frozen=True)
class Next:
    status: str  # the execution's next status: succeeded | cancelled | failed | queued | pending
    delay_s: float | None = None  # until the retry is due; None: no retry


def after_attempt(
    outcome: str, attempt: int, policy: RetryPolicy, *, horizon_s: float, permanent: bool = False,
    retry_after_s: float | None = None, rng: random.Random | None = None,
) -> Next:  # fmt: skip
    """The decision after attempt number `attempt` (1-based) ended with `outcome` (an attempt
    outcome: succeeded, cancelled, failed, timed_out). horizon_s: the dispatch horizon; a retry
    due within it is queued (the caller adds it to Redis) rather than left pending.

    >>> after_attempt("failed", 3, RetryPolicy(3, 5.0, 5.0, 300.0), horizon_s=300.0)
    Next(status='failed', delay_s=None)
    """
    if outcome == "succeeded":
        return Next("succeeded")
    if outcome == "cancelled":
        return Next("cancelled")
    delay_s = None if permanent else after_failure(
        attempt, policy.max_attempts, policy.backoff_base_s, policy.backoff_factor, policy.backoff_max_s, rng
    )  # fmt: skip
    if delay_s is None:
        return Next("failed")
    if retry_after_s is not None:
        # The target said when to come back; capped so a silly header cannot park a job for days.
        delay_s = max(delay_s, min(retry_after_s, policy.backoff_max_s))
    return Next("queued" if delay_s <= horizon_s else "pending", delay_s)
