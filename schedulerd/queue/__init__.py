"""Redis: the only package that imports redis. The delay queue (delay_queue.py), the circuit
breakers' shared state (breaker_states.py), the API's rate counters (rate_limits.py), the fleet's
token buckets (token_buckets.py), the Lua scripts they run (scripts.py) and the errors Redis raises
for a passing reason (errors.py)."""

from schedulerd.queue.breaker_states import Breakers
from schedulerd.queue.delay_queue import DelayQueue, Pop, score_ms, shard_of, shard_tags
from schedulerd.queue.errors import REDIS_ERRORS, UNREACHABLE
from schedulerd.queue.rate_limits import RequestCounter
from schedulerd.queue.token_buckets import TokenBuckets

__all__ = ["REDIS_ERRORS", "UNREACHABLE", "Breakers", "DelayQueue", "Pop", "RequestCounter", "TokenBuckets", "score_ms", "shard_of", "shard_tags"]
