"""core/notify.py: which event a failed run is, the consecutive-failure count and the pause
decision, the pause note, URL and event checks (the http task's address classes), the notice's
body, the send verdict and the redelivery backoff."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from schedulerd.core import notify


@pytest.mark.parametrize(("redrives", "event"), [(0, "failure"), (1, "dead_letter"), (3, "dead_letter")])
def test_a_failed_run_is_a_failure_and_a_failed_redrive_a_dead_letter(redrives: int, event: str) -> None:
    assert notify.failed_event(redrives) == event


@pytest.mark.parametrize(
    ("statuses", "limit", "count", "pause"),
    [
        ([], 3, 0, False),
        (["failed", "failed"], 3, 2, False),
        (["failed", "failed", "failed"], 3, 3, True),
        (["failed", "failed", "succeeded", "failed"], 3, 2, False),
        (["succeeded", "failed", "failed", "failed"], 3, 0, False),
        (["failed"], 1, 1, True),
        (["failed", "failed", "failed"], None, 3, False),
    ],
)
def test_consecutive_failures_newest_first_decide_the_pause(statuses: list[str], limit: int | None, count: int,
                                                            pause: bool) -> None:  # fmt: skip
    assert notify.consecutive_failures(statuses) == count
    assert notify.should_pause(statuses, limit) is pause


def test_the_pause_note_names_the_count_and_the_errors_last_line_within_its_limit() -> None:
    error = "Traceback (most recent call last):\n  File x\nValueError: boom\n"
    assert notify.pause_note(3, error) == "paused after 3 consecutive failed runs; last error: ValueError: boom"
    assert notify.pause_note(2, None).endswith("last error: none recorded")
    long = notify.pause_note(3, "x" * 2000, limit=500)
    assert len(long) == 500 and long.endswith("…")


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1/hook", "http://localhost:8080/", "http://api.localhost/", "http://10.1.2.3/", "http://192.168.0.1/",
     "http://169.254.169.254/latest/meta-data", "http://[::1]/", "http://[fe80::1]/", "http://100.100.100.200/",
     "http://[::ffff:10.0.0.1]/", "http://0.0.0.0/"],
)  # fmt: skip
def test_urls_of_refused_address_classes_are_refused_naming_the_field(url: str) -> None:
    with pytest.raises(notify.NotifyError) as refused:
        notify.check_url(url, (), False, "notify_url")
    assert refused.value.field == "notify_url" and "refused" in refused.value.message


@pytest.mark.parametrize("url", ["", "ftp://example.com/", "example.com/hook", "http:///nohost", "http://exa mple.com/",
                                 "http://example.com:99999/", "https://" + "a" * 2000 + ".com/"])  # fmt: skip
def test_urls_that_are_not_absolute_http_urls_are_refused(url: str) -> None:
    with pytest.raises(notify.NotifyError):
        notify.check_url(url, (), False)


def test_the_allow_list_opens_loopback_and_closes_unlisted_names() -> None:
    assert notify.check_url("http://127.0.0.1:8080/x", ("127.0.0.1:*",), False) == "http://127.0.0.1:8080/x"
    assert notify.check_url("http://10.0.0.1/x", (), True) == "http://10.0.0.1/x"  # [http].allow_private
    assert notify.check_url("https://hooks.example.com/x", (), False) == "https://hooks.example.com/x"
    with pytest.raises(notify.NotifyError, match="not in http.allow_hosts"):
        notify.check_url("https://other.example.net/x", ("hooks.example.com",), False)


def test_events_are_checked_ordered_and_deduplicated() -> None:
    assert notify.check_events(["late", "failure", "late"]) == ("failure", "late")
    assert notify.check_events([]) == ()
    with pytest.raises(notify.NotifyError) as refused:
        notify.check_events(["failure", "failures"])
    assert refused.value.field == "notify.on" and "'failures'" in refused.value.message


def test_the_notice_body_has_the_job_the_execution_the_attempts_and_a_dashboard_link() -> None:
    at = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)
    body = notify.payload(
        notification_id="n1", event="failure", job={"id": "j1", "name": "nightly", "task": "http"},
        execution={"id": "e1", "scheduled_for": at, "status": "failed"}, attempts=3, error="boom", at=at,
        public_url="https://sched.example.com/", paused=True,
    )  # fmt: skip
    assert body == {
        "id": "n1", "event": "failure", "at": "2026-12-03T09:00:00+00:00", "job": {"id": "j1", "name": "nightly", "task": "http"},
        "execution": {"id": "e1", "scheduled_for": "2026-12-03T09:00:00+00:00", "status": "failed"},
        "attempts": {"count": 3, "last_error": "boom"}, "error": "boom", "paused": True,
        "dashboard": "https://sched.example.com/#/executions/e1",
    }  # fmt: skip
    assert notify.dashboard_link("", "e1") == "/#/executions/e1"


@pytest.mark.parametrize(
    ("status", "attempt", "permanent", "state"),
    [(200, 1, False, "sent"), (204, 10, False, "sent"), (503, 1, False, "pending"), (None, 1, False, "pending"),
     (429, 2, False, "pending"), (408, 2, False, "pending"), (500, 10, False, "given_up"), (None, 10, False, "given_up"),
     (404, 1, False, "given_up"), (301, 1, False, "given_up"), (None, 1, True, "given_up")],
)  # fmt: skip
def test_a_sends_answer_decides_sent_retried_or_given_up(status: int | None, attempt: int, permanent: bool, state: str) -> None:
    assert notify.verdict(status, attempt, 10, permanent) == state


def test_redelivery_waits_grow_exponentially_under_full_jitter_up_to_the_cap() -> None:
    rng = random.Random(7)
    for attempt, ceiling in [(1, 5.0), (2, 10.0), (3, 20.0), (10, 600.0), (60, 600.0)]:
        waits = [notify.redelivery_delay_s(attempt, 5.0, 600.0, rng) for _ in range(200)]
        assert all(0.0 <= w <= ceiling for w in waits)
        assert max(waits) > ceiling * 0.8 and min(waits) < ceiling * 0.2  # spread over the whole range
