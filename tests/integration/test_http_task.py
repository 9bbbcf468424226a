"""The built-in http task against a local HTTP server: headers, retry and no-retry cases,
Retry-After, timeouts, and the target check refusing a private address."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest

from schedulerd.tasks import http
from schedulerd.config import HttpConfig
from schedulerd.models import ExecutionStatus
from tests.http_target import Reply, Target, serve
from tests.integration.conftest import run_until_idle, settle


@pytest.fixture
def target() -> Iterator[Target]:
    yield from serve()


@pytest.fixture
def allow_local() -> Iterator[None]:
    http.configure(HttpConfig(allow_hosts=("127.0.0.1:*",)))
    yield
    http.configure(HttpConfig())


async def test_success_sends_ids_and_records_status_and_excerpt(target, allow_local, make_job, make_worker, store) -> None:
    target.success = Reply(201, b"created " + b"x" * 5000)
    _, execution = await make_job("http", params={"url": target.url + "/hook", "json": {"a": 1}, "headers": {"X-T": "v"}})

    finished = await run_until_idle(make_worker(), store, execution.id)

    assert finished.status == ExecutionStatus.SUCCEEDED
    [received] = target.requests
    assert (received.method, received.path) == ("POST", "/hook")
    assert received.headers["Idempotency-Key"] == str(execution.id)
    assert received.headers["X-Fence-Token"] == "1" and received.headers["X-T"] == "v"
    assert json.loads(received.body) == {"a": 1}
    [attempt] = await store.attempt_list(execution.id)
    detail = json.loads(attempt.detail)
    assert detail["status"] == 201 and detail["body"].startswith("created ")
    assert len(detail["body"]) == HttpConfig().excerpt_bytes  # bounded excerpt


@pytest.mark.parametrize("failure", [Reply(503, b"busy"), Reply(500, b"boom"), Reply(429, b"slow down")])
async def test_server_errors_and_429_retry_then_succeed(failure, target, allow_local, make_job, make_worker, store) -> None:
    target.script = [failure, failure]
    _, execution = await make_job("http", params={"url": target.url}, max_attempts=3, backoff_base_s=0.05)

    finished = await run_until_idle(make_worker(), store, execution.id)

    assert finished.status == ExecutionStatus.SUCCEEDED and finished.attempt == 3
    attempts = await store.attempt_list(execution.id)
    assert [a.outcome for a in attempts] == ["failed", "failed", "succeeded"]
    assert f"answered {failure.status}" in attempts[0].error
    assert json.loads(attempts[0].detail) == {"status": failure.status, "body": failure.body.decode()}
    assert [r.headers["Idempotency-Key"] for r in target.requests] == [str(execution.id)] * 3
    assert [r.headers["X-Fence-Token"] for r in target.requests] == ["1", "2", "3"]


@pytest.mark.parametrize("status", [400, 404, 410, 422, 301])
async def test_client_errors_fail_at_once_without_retries(status, target, allow_local, make_job, make_worker, store) -> None:
    target.success = Reply(status, b"no such hook")
    _, execution = await make_job("http", params={"url": target.url}, max_attempts=5)

    finished = await run_until_idle(make_worker(), store, execution.id)

    assert finished.status == ExecutionStatus.FAILED and finished.attempt == 1
    assert target.count() == 1
    assert "not retried" in finished.last_error and f"answered {status}" in finished.last_error


async def test_retry_after_sets_the_next_attempt_time(target, allow_local, make_job, make_worker, store) -> None:
    target.script = [Reply(503, b"maintenance", {"Retry-After": "3"})]
    _, execution = await make_job("http", params={"url": target.url}, max_attempts=3, backoff_base_s=0.01)
    worker = make_worker()

    assert await worker.run_once() == 1
    await settle(worker)

    retried = await store.execution_get(execution.id)
    [attempt] = await store.attempt_list(execution.id)
    assert retried.status == ExecutionStatus.QUEUED
    assert "Retry-After 3 s" in attempt.error
    # Backoff alone would allow at most 0.01 s; the header asks for 3 s.
    assert retried.due_at - attempt.finished_at >= timedelta(seconds=2.9)


async def test_timeouts_and_connection_errors_retry(target, allow_local, make_job, make_worker, store) -> None:
    target.script = [Reply(200, b"late", delay_s=2.0)]
    _, slow = await make_job("http", params={"url": target.url, "timeout_s": 0.3}, max_attempts=2)
    closed = Target()
    closed.close()  # nothing listens on its port now
    _, refused = await make_job("http", params={"url": closed.url}, max_attempts=2)
    worker = make_worker()

    assert await worker.run_once() == 2
    await settle(worker)

    for execution, expected in ((slow, "timed out after 0.3 s"), (refused, "failed to connect")):
        row = await store.execution_get(execution.id)
        assert row.status == ExecutionStatus.QUEUED and row.attempt == 1, row
        assert expected in row.last_error


async def test_private_address_is_refused_unless_allowed(target, make_job, make_worker, store) -> None:
    http.configure(HttpConfig())  # the default: private ranges refused
    _, execution = await make_job("http", params={"url": target.url}, max_attempts=3)

    finished = await run_until_idle(make_worker(), store, execution.id)

    assert finished.status == ExecutionStatus.FAILED and finished.attempt == 1
    assert "resolves to a private address (127.0.0.1)" in finished.last_error
    assert target.count() == 0  # refused before any connection


async def test_bad_params_fail_at_once_naming_the_field(allow_local, make_job, make_worker, store) -> None:
    _, execution = await make_job("http", params={"url": "ftp://example.com/x"}, max_attempts=3)
    finished = await run_until_idle(make_worker(), store, execution.id)
    assert finished.status == ExecutionStatus.FAILED and finished.attempt == 1
    assert "params.url must be an absolute http:// or https:// URL" in finished.last_error


async def test_one_deadline_for_the_whole_request(target, allow_local, make_job, make_worker, store) -> None:
    # Each byte comes well within the timeout; the whole answer takes 3 s. One deadline: 0.5 s.
    target.script = [Reply(200, b"x" * 30, trickle_s=0.1)]
    _, execution = await make_job("http", params={"url": target.url, "timeout_s": 0.5}, max_attempts=1)

    finished = await run_until_idle(make_worker(), store, execution.id)

    [attempt] = await store.attempt_list(execution.id)
    assert "timed out after 0.5 s" in attempt.error
    assert attempt.duration_s < 1.5, attempt.duration_s
    assert finished.status == ExecutionStatus.FAILED


async def test_local_failures_are_permanent_and_never_count_against_the_breaker(
    target, allow_local, make_job, make_worker, store, queue, config
) -> None:
    """A request that fails before a byte is sent (a header value no header can carry, a reserved
    header) is the params' fault: failed at once, the target never called, its breaker untouched."""
    from schedulerd.queue import Breakers

    bad = [{"X-A": "a\r\nX-Injected: 1"}, {"X-A": "\u20ac"}, {"host": "evil.example"}, {"Transfer-Encoding": "chunked"}]
    executions = [(await make_job("http", params={"url": target.url, "headers": h}, max_attempts=3))[1]
                  for h in bad * 4]  # fmt: skip
    worker = make_worker()
    for execution in executions:
        finished = await run_until_idle(worker, store, execution.id)
        assert finished.status == ExecutionStatus.FAILED and finished.attempt == 1, finished
        assert "not retried (permanent)" in finished.last_error
    assert target.count() == 0
    assert await Breakers(queue.client, queue.prefix).states() == {}


async def test_credentials_in_the_url_stay_out_of_errors(target, allow_local, make_job, make_worker, store) -> None:
    target.success = Reply(404, b"no")
    url = target.url.replace("http://", "http://bob:s3cret@") + "/hook"
    _, execution = await make_job("http", params={"url": url}, max_attempts=1)
    finished = await run_until_idle(make_worker(), store, execution.id)
    [attempt] = await store.attempt_list(execution.id)
    assert "answered 404" in attempt.error and "s3cret" not in attempt.error and "bob" not in attempt.error
    assert "s3cret" not in (finished.last_error or "")
