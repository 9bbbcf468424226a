"""Which task types producers may enqueue: those a live worker replica reported (recorded in
Postgres by every replica with the worker role), plus any this process registered itself.

Every create (intake.Intake) checks a task name against this set, so a producer needs no
handler modules (the Python client imports none; the API and the CLI load the configured ones,
tasks/loader.py). The set is cached for a few seconds; an unknown name is looked up again at
once before it is refused, so a type a worker just started running is not refused.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from schedulerd.store import Store
from schedulerd.tasks import registry

REFRESH_S = 5.0  # how long the set read from Postgres is trusted before it is read again


class TaskTypes:
    def __init__(self, store: Store, seen_within_s: float, refresh_s: float = REFRESH_S) -> None:
        self.store = store
        self.seen_within_s = seen_within_s  # a type no worker reported for this long is unknown
        self.refresh_s = refresh_s
        self._live: set[str] = set()
        self._read_at = float("-inf")  # monotonic time of the last read

    async def known(self, wanted: Iterable[str] = ()) -> frozenset[str]:
        """The task types producers may enqueue now. Read again when stale, or when one of
        `wanted` is missing from the cached set."""
        names = set(wanted)
        stale = time.monotonic() - self._read_at > self.refresh_s
        local = set(registry.names())
        if stale or not names <= self._live | local:
            self._live = await self.store.task_type_live(self.seen_within_s)
            self._read_at = time.monotonic()
        return frozenset(self._live | local)


async def report(store: Store, worker_id: str) -> None:
    """Record the task types this worker replica runs (its registry), as alive now."""
    await store.task_type_report(registry.names(), worker_id)
