"""The errors a call to Redis raises for a passing reason, stated once for every caller: the queue,
the breakers, the rate counters, the loops (schedulerd/transient.py adds Postgres's) and the CLI."""

from __future__ import annotations

import redis.asyncio as redis
from redis.exceptions import ClusterDownError, SlotNotCoveredError, TryAgainError

# Redis is down, paused, unreachable or failing over: callers fall back to Postgres and try again later.
UNREACHABLE: tuple[type[BaseException], ...] = (
    redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError, OSError, TimeoutError,
    ClusterDownError, SlotNotCoveredError, TryAgainError,
)  # fmt: skip
# Every error a call to Redis may raise for a passing reason (unreachable, loading, out of memory).
REDIS_ERRORS: tuple[type[BaseException], ...] = (redis.RedisError, OSError, TimeoutError, SlotNotCoveredError)
