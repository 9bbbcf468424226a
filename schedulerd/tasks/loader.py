"""Import the task modules a worker runs: the built-ins, the http task and the configured ones, so
their @task calls register them. Producers never call this (they import no handlers)."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from schedulerd.tasks import builtins, http  # noqa: F401  (imported for their @task registrations)


def load_modules(modules: Iterable[str]) -> None:
    """Import the configured task modules (the built-ins are loaded with this module)."""
    for module in modules:
        importlib.import_module(module)
