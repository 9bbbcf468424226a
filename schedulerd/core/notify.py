"""Notifications, the pure half: the events a tenant may subscribe to, checking a notification URL
and event list, which event a finished execution is, when a job has failed often enough to be
paused, the notice's JSON body and the redelivery schedule. Pure: no I/O (the caller resolves
hosts; schedulerd/notifier.py finds the transitions and sends).
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from schedulerd.core.backoff import retry_delay
from schedulerd.core.targets import host_listed, redact, refusal

FAILURE, RECOVERY, LATE, DEAD_LETTER = "failure", "recovery", "late", "dead_letter"
EVENTS = (FAILURE, RECOVERY, LATE, DEAD_LETTER)
DEFAULT_EVENTS = (FAILURE, RECOVERY)  # a URL given without events
TEST = "test"  # the event of a notice sent by POST /v1/notifications/test
MAX_URL = 2000  # characters of a notification URL
MAX_PAUSE_AFTER_FAILURES = 1000
ID_HEADER = "X-Schedulerd-Notification-Id"  # stable across redeliveries of one notice: receivers dedupe on it
EVENT_HEADER = "X-Schedulerd-Event"
_LOCAL_NAMES = ("localhost",)  # names every resolver answers with loopback, refused before any lookup


class NotifyError(ValueError):
    """A notification setting refused: `field` names it as the API body does (notify.url, notify.on)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def check_events(events: Iterable[str], field: str = "notify.on") -> tuple[str, ...]:
    """The events in EVENTS order, each once; an unknown one is refused naming it.

    >>> check_events(["recovery", "failure", "failure"])
    ('failure', 'recovery')
    """
    given = list(events)
    for event in given:
        if not isinstance(event, str) or event not in EVENTS:
            raise NotifyError(field, f"must name events among {', '.join(EVENTS)}, got {event!r}")
    return tuple(e for e in EVENTS if e in given)


def check_url(url: str, allow_hosts: Sequence[str], allow_private: bool, field: str = "notify.url") -> str:
    """An absolute http(s) URL whose host the http task could call: on the allow-list when there
    is one, and never a refused address class (core/targets.py) written as a literal address or
    as localhost. A host name is judged again by its resolved addresses at every send."""
    if not isinstance(url, str) or not url:
        raise NotifyError(field, "must be an absolute http:// or https:// URL")
    if len(url) > MAX_URL:
        raise NotifyError(field, f"is {len(url)} characters; the limit is {MAX_URL}")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise NotifyError(field, "contains a space or a control character")
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise NotifyError(field, f"is not a valid URL ({redact(url)}): {exc}") from None
    host = (parts.hostname or "").rstrip(".")
    if parts.scheme not in ("http", "https") or not host:
        raise NotifyError(field, f"must be an absolute http:// or https:// URL, got {redact(url)!r}")
    try:
        addresses = [str(ipaddress.ip_address(host))]
    except ValueError:  # a name: only localhost's answer is known without a lookup
        if host not in _LOCAL_NAMES and not host.endswith(".localhost"):
            if allow_hosts and not host_listed(host, allow_hosts, port):
                raise NotifyError(field, f"refused: host {host!r} (port {port}) is not in http.allow_hosts") from None
            return url
        addresses = ["127.0.0.1"]
    reason = refusal(host, addresses, allow_hosts, allow_private, port)
    if reason is not None:
        raise NotifyError(field, f"refused: {reason}")
    return url


def failed_event(redrives: int) -> str:
    """A failed execution's event: failure on its own run, dead_letter when a redrive of it failed again."""
    return FAILURE if redrives == 0 else DEAD_LETTER


def consecutive_failures(statuses: Sequence[str]) -> int:
    """How many of the newest ended executions (newest first: succeeded or failed) failed in a row.

    >>> consecutive_failures(["failed", "failed", "succeeded", "failed"])
    2
    """
    count = 0
    for status in statuses:
        if status != "failed":
            break
        count += 1
    return count


def should_pause(statuses: Sequence[str], pause_after_failures: int | None) -> bool:
    """Whether the job's newest ended executions (newest first) are pause_after_failures failures in a row."""
    return pause_after_failures is not None and consecutive_failures(statuses) >= pause_after_failures


def pause_note(failures: int, last_error: str | None, limit: int = 500) -> str:
    """The note a pause after repeated failures carries, cut to `limit` characters.

    >>> pause_note(3, "boom")
    'paused after 3 consecutive failed runs; last error: boom'
    """
    note = f"paused after {failures} consecutive failed runs; last error: {error_line(last_error) or 'none recorded'}"
    return note if len(note) <= limit else note[: limit - 1] + "…"


def error_line(error: str | None) -> str | None:
    r"""An error's last non-empty line: the exception itself, without the traceback above it.

    >>> error_line("Traceback (most recent call last):\n  ...\nValueError: boom\n")
    'ValueError: boom'
    """
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    return lines[-1] if lines else None


def dashboard_link(public_url: str, execution_id: str) -> str:
    """The dashboard page of an execution: absolute under [notify].public_url, else a path."""
    return f"{public_url.rstrip('/')}/#/executions/{execution_id}"


def payload(
    *, notification_id: str, event: str, job: dict[str, Any], execution: dict[str, Any], attempts: int,
    error: str | None, at: datetime, public_url: str, paused: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """The JSON body of a notice. `job`: id, name, task; `execution`: id, scheduled_for (UTC
    datetime), status, and for a late one its late_reason. The error is the last attempt's."""
    execution = {**execution, "scheduled_for": execution["scheduled_for"].isoformat()}
    return {
        "id": notification_id, "event": event, "at": at.isoformat(), "job": job, "execution": execution,
        "attempts": {"count": attempts, "last_error": error}, "error": error, "paused": paused,
        "dashboard": dashboard_link(public_url, execution["id"]),
    }  # fmt: skip


def redelivery_delay_s(attempt: int, base_s: float, max_s: float, rng: random.Random | None = None) -> float:
    """Wait before sending a notice again after its `attempt`-th try failed: full jitter under a
    ceiling doubling from base_s up to max_s (core/backoff.py), so receivers coming back after an
    outage are not all called at once."""
    return retry_delay(attempt, base_s, 2.0, max_s, rng)


SENT, PENDING, GIVEN_UP, UNSENT = "sent", "pending", "given_up", "unsent"  # a notice's states
_RETRIED_STATUSES = frozenset({408, 425, 429})  # client errors that say "later", not "never"


def verdict(http_status: int | None, attempt: int, max_attempts: int, permanent: bool = False) -> str:
    """What a send's answer makes of a notice: sent (2xx), pending (try again: no answer, a 5xx,
    408, 425 or 429, attempts left) or given_up (another 4xx or 3xx, a refused or unsendable
    URL: `permanent`, or attempts spent).

    >>> verdict(204, 1, 10), verdict(503, 1, 10), verdict(None, 10, 10), verdict(404, 1, 10)
    ('sent', 'pending', 'given_up', 'given_up')
    """
    if http_status is not None and 200 <= http_status < 300:
        return SENT
    retried = http_status is None or http_status >= 500 or http_status in _RETRIED_STATUSES
    if permanent or not retried or attempt >= max_attempts:
        return GIVEN_UP
    return PENDING
