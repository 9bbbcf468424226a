"""Errors that pass: Postgres or Redis restarting, the network blipping, a statement timing out.
One tuple, built from the store's and the queue's own lists; loops wait these out."""

from __future__ import annotations

from schedulerd.queue import REDIS_ERRORS
from schedulerd.store import POSTGRES_ERRORS

TRANSIENT_ERRORS: tuple[type[BaseException], ...] = POSTGRES_ERRORS + REDIS_ERRORS
