"""Import the task modules a worker runs: the built-ins, the http task and the configured ones, so
their @task calls register them. The daemon calls this for its workers; the API and the CLI call
it too, because the types this process registered count as known (task_types.TaskTypes): the
configured types are accepted before any worker reported them (the first `job create` after
`migrate`). The Python client never does: an application imports no handlers to enqueue."""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from schedulerd.tasks import builtins, http  # noqa: F401  (imported for their @task registrations)


def load_modules(modules: Iterable[str]) -> None:
    """Import the configured task modules (the built-ins are loaded with this module)."""
    for module in modules:
        importlib.import_module(module)
