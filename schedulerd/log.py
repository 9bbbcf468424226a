"""structlog setup: JSON lines under systemd/journald, key=value on a terminal.

Event names are stable "component.event" strings; fields carry ids, never prose.
"""

from __future__ import annotations

import logging
import sys

import structlog


def configure(level: str = "info", format: str = "auto") -> None:
    use_console = format == "console" or (format == "auto" and sys.stderr.isatty())
    renderer = structlog.dev.ConsoleRenderer() if use_console else structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
