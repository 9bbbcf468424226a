"""Errors that pass (Postgres or Redis restarting, the network blipping, a statement timing out),
one tuple built from the store's and the queue's own lists, and the one write that meets them
after a commit: adding committed executions to Redis, best effort. Loops wait these errors out."""

from __future__ import annotations

from collections.abc import Sequence

import structlog

from schedulerd.models import Enqueue
from schedulerd.queue import REDIS_ERRORS, DelayQueue
from schedulerd.store import POSTGRES_ERRORS

log = structlog.get_logger("schedulerd.transient")

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = POSTGRES_ERRORS + REDIS_ERRORS


async def enqueue_committed(
    queue: DelayQueue, entries: Sequence[Enqueue], event: str, *, only_new: bool = True, shared: bool = False
) -> bool:
    """ZADD executions whose rows have committed. Best effort: Postgres holds them, so when Redis
    fails the sweeper (queued rows), the dispatcher (pending ones) or the workers' fallback claim
    brings them back; the failure is logged as `event` and False returned. only_new: see
    DelayQueue.add; shared: through DelayQueue.add_shared (one pipeline with concurrent callers)."""
    if not entries:
        return True
    try:
        if shared:
            await queue.add_shared(list(entries))
        else:
            await queue.add(entries, only_new=only_new)
    except TRANSIENT_ERRORS as exc:
        log.warning(event, count=len(entries), error=str(exc))
        return False
    return True
