"""The notifier on real Postgres and Redis: failed runs notified once per execution even with two
notifiers, a recovery after failures, a failed redrive (dead_letter), a tenant's setting and a job
opting out, pause after repeated failures (with its note, holding for a retry in flight), a late
start, a receiver down then up (retried, the same notification id), backoff and giving up."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from schedulerd.config import Config, HttpConfig, NotifyConfig
from schedulerd.core import notify
from schedulerd.errors import ValidationError
from schedulerd.jobs import Jobs, JobSpec
from schedulerd.models import Execution, ExecutionStatus, Job
from schedulerd.notifier import Notifier
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from schedulerd.tasks import http
from tests.conftest import create_job
from tests.http_target import Reply, Target, serve
from tests.integration.conftest import run_until_idle, settle

LOCAL = HttpConfig(allow_hosts=("127.0.0.1:*",))  # the receivers run on loopback, which is refused unless listed
YEARLY = "0 0 1 1 *"  # a cron job whose own schedule stays out of the way: its runs are triggered


@pytest.fixture
def target() -> Iterator[Target]:
    """What the job's http task calls: failing or not as the test says."""
    yield from serve()


@pytest.fixture
def receiver() -> Iterator[Target]:
    """Where notices go."""
    yield from serve()


@pytest.fixture
def local_config(config: Config) -> Iterator[Config]:
    http.configure(LOCAL)
    yield replace(config, http=LOCAL, notify=NotifyConfig(backoff_base_s=0.0, interval_s=0.1, hold_s=30.0))
    http.configure(HttpConfig())


@pytest.fixture
def jobs(store: Store, queue: DelayQueue, local_config: Config) -> Jobs:
    return Jobs(store, queue, local_config)


def notifier(store: Store, config: Config, **overrides: Any) -> Notifier:
    return Notifier(store, replace(config.notify, **overrides), config.http)


async def make_cron(jobs: Jobs, target: Target, **fields: Any) -> Job:
    job, _ = await create_job(jobs, JobSpec("http", params={"url": target.url + "/task"}, cron=YEARLY, max_attempts=1,
                                            name="nightly", **fields))  # fmt: skip
    return job


async def run(jobs: Jobs, job: Job, worker: Any, store: Store) -> Execution:
    """Trigger the job once and run that execution to its end."""
    execution = await jobs.trigger(job.id)
    return await run_until_idle(worker, store, execution.id)


def notices(receiver: Target) -> list[tuple[dict[str, str], dict[str, Any]]]:
    return [(r.headers, json.loads(r.body)) for r in receiver.requests]


async def test_a_failed_run_is_notified_once_even_with_two_notifiers(
    jobs, store, local_config, target, receiver, make_worker
) -> None:  # fmt: skip
    target.failing = True
    job = await make_cron(jobs, target, notify_url=receiver.url + "/hook", notify_on=("failure",))
    failed = await run(jobs, job, make_worker(), store)
    assert failed.status == ExecutionStatus.FAILED

    first, second = notifier(store, local_config), notifier(store, local_config)
    results = await asyncio.gather(first.run_once(), second.run_once())
    results += await asyncio.gather(first.run_once(), second.run_once())

    assert sum(r.failures for r in results) == 1 and sum(r.sent for r in results) == 1
    [(headers, body)] = notices(receiver)
    assert receiver.requests[0].path == "/hook" and receiver.requests[0].method == "POST"
    assert headers[notify.ID_HEADER] == body["id"] and headers[notify.EVENT_HEADER] == "failure"
    assert body["event"] == "failure" and body["paused"] is False
    assert body["job"] == {"id": str(job.id), "name": "nightly", "task": "http"}
    assert body["execution"]["id"] == str(failed.id) and body["execution"]["status"] == "failed"
    assert body["attempts"]["count"] == 1 and "answered 503" in body["attempts"]["last_error"]
    assert body["error"] == body["attempts"]["last_error"]
    assert body["dashboard"] == f"/#/executions/{failed.id}"


async def test_recovery_follows_failures_once(jobs, store, local_config, target, receiver, make_worker) -> None:
    job = await make_cron(jobs, target, notify_url=receiver.url, notify_on=("failure", "recovery"))
    worker, watcher = make_worker(), notifier(store, local_config, public_url="https://sched.example.com/")
    target.failing = True
    await run(jobs, job, worker, store)
    await run(jobs, job, worker, store)
    await watcher.run_once()
    target.failing = False
    recovered = await run(jobs, job, worker, store)
    await watcher.run_once()
    await run(jobs, job, worker, store)  # a second success in a row is no recovery
    await watcher.run_once()

    events = [body["event"] for _, body in notices(receiver)]
    assert events == ["failure", "failure", "recovery"]
    recovery = notices(receiver)[-1][1]
    assert recovery["execution"]["id"] == str(recovered.id) and recovery["error"] is None
    assert recovery["dashboard"] == f"https://sched.example.com/#/executions/{recovered.id}"


async def test_the_tenants_setting_applies_unless_the_job_has_its_own(
    jobs, store, local_config, target, receiver, make_worker
) -> None:  # fmt: skip
    await store.notify_setting_put("default", receiver.url + "/tenant", ["failure"])
    inherits = await make_cron(jobs, target)
    opted_out = await make_cron(jobs, target, notify_on=())
    target.failing = True
    worker = make_worker()
    failed = await run(jobs, inherits, worker, store)
    await run(jobs, opted_out, worker, store)

    await notifier(store, local_config).run_once()

    [(_, body)] = notices(receiver)
    assert receiver.requests[0].path == "/tenant" and body["execution"]["id"] == str(failed.id)


async def test_pause_after_failures_pauses_with_a_note_and_holds_for_a_retry_in_flight(
    jobs, store, local_config, target, receiver, make_worker
) -> None:  # fmt: skip
    job = await make_cron(jobs, target, notify_url=receiver.url, notify_on=("failure", "recovery"), pause_after_failures=2)
    job = await jobs.update(job.id, {"max_attempts": 2, "backoff_base_s": 0.0})
    worker, watcher = make_worker(), notifier(store, local_config)
    target.failing = True
    await run(jobs, job.job, worker, store)
    await watcher.run_once()
    assert (await jobs.get(job.job.id)).enabled  # one failure: not yet
    await run(jobs, job.job, worker, store)
    # A third run is in flight (its first attempt will fail) while the notifier pauses the job.
    target.failure = Reply(503, b"slow and down", delay_s=0.5)
    in_flight = await jobs.trigger(job.job.id)
    while in_flight.status != ExecutionStatus.RUNNING:
        await worker.run_once()
        in_flight = await store.execution_get(in_flight.id)
    result = await watcher.run_once()
    await settle(worker)

    paused = await jobs.get(job.job.id)
    assert result.paused == 1 and not paused.enabled
    assert paused.paused_note.startswith("paused after 2 consecutive failed runs; last error: schedulerd.tasks.http.TargetError: http: POST")
    assert paused.paused_by == "schedulerd:pause_after_failures"
    held = await store.execution_get(in_flight.id)
    assert (held.status, held.reason, held.attempt) == (ExecutionStatus.CANCELLED, "paused", 1)  # its retry never came
    bodies = [body for _, body in notices(receiver)]
    assert [(b["event"], b["paused"]) for b in bodies] == [("failure", False), ("failure", True)]

    # Resumed, the count starts again: one more failure does not pause it; a success is a recovery.
    await jobs.resume(job.job.id)
    await run(jobs, job.job, worker, store)
    await watcher.run_once()
    assert (await jobs.get(job.job.id)).enabled
    target.failing = False
    await run(jobs, job.job, worker, store)
    await watcher.run_once()
    assert [b["event"] for _, b in notices(receiver)][-2:] == ["failure", "recovery"]


async def test_a_late_start_is_notified(jobs, store, local_config, receiver, make_worker) -> None:
    now = await store.clock_now()
    job, (execution,) = await create_job(jobs, JobSpec("noop", run_at=now - timedelta(hours=1), notify_url=receiver.url,
                                                       notify_on=("late",)))  # fmt: skip
    await run_until_idle(make_worker(), store, execution.id)

    result = await notifier(store, local_config).run_once()

    assert (result.late, result.sent, result.failures) == (1, 1, 0)
    [(_, body)] = notices(receiver)
    assert body["event"] == "late" and body["execution"]["late_reason"] == "scheduler_down"  # no replica was reporting
    assert body["execution"]["status"] == "succeeded" and body["job"]["id"] == str(job.id)


async def test_a_receiver_down_then_up_gets_the_notice_again_with_the_same_id(
    jobs, store, local_config, target, receiver, make_worker
) -> None:  # fmt: skip
    target.failing = True
    job = await make_cron(jobs, target, notify_url=receiver.url, notify_on=("failure",))
    await run(jobs, job, make_worker(), store)
    receiver.failing = True
    watcher = notifier(store, local_config)

    down = await watcher.run_once()
    [row] = await store.db.fetch("SELECT attempts, status, last_status, next_attempt_at > clock_timestamp() AS later "
                                 "FROM notifications WHERE event = 'failure'")  # fmt: skip
    assert (down.sent, down.retried) == (0, 1) and (row["attempts"], row["status"], row["last_status"]) == (1, "pending", 503)
    receiver.failing = False
    up = await watcher.run_once()
    again = await watcher.run_once()

    assert (up.sent, again.sent) == (1, 0)
    ids = [headers[notify.ID_HEADER] for headers, _ in notices(receiver)]
    assert len(ids) == 2 and len(set(ids)) == 1


async def test_a_notice_waits_its_backoff_and_is_given_up_after_its_tries(
    jobs, store, local_config, target, receiver, make_worker
) -> None:  # fmt: skip
    target.failing = True
    job = await make_cron(jobs, target, notify_url=receiver.url, notify_on=("failure",))
    await run(jobs, job, make_worker(), store)
    receiver.failing = True
    waiting = notifier(store, local_config, backoff_base_s=3600.0, backoff_max_s=3600.0)

    await waiting.run_once()
    await waiting.run_once()  # not due again yet: its wait is up to an hour (full jitter)
    [row] = await store.db.fetch("SELECT attempts, next_attempt_at - clock_timestamp() AS wait FROM notifications")
    assert receiver.count() == 1 and row["attempts"] == 1 and row["wait"] <= timedelta(hours=1)

    await store.db.execute("UPDATE notifications SET next_attempt_at = clock_timestamp()")
    last = await notifier(store, local_config, max_attempts=2).run_once()
    assert last.given_up == 1 and receiver.count() == 2
    assert await store.db.fetchval("SELECT status FROM notifications") == "given_up"


async def test_a_refused_receiver_is_given_up_at_once(jobs, store, local_config, target, make_worker) -> None:
    target.failing = True
    job = await make_cron(jobs, target, notify_url="http://127.0.0.1:9/hook", notify_on=("failure",))
    await run(jobs, job, make_worker(), store)
    strict = Notifier(store, local_config.notify, HttpConfig())  # the operator took loopback off the list since

    result = await strict.run_once()

    assert (result.failures, result.given_up) == (1, 1)
    error = await store.db.fetchval("SELECT last_error FROM notifications")
    assert error.startswith("refused: host '127.0.0.1' resolves to a private address")


async def test_the_client_takes_and_edits_the_notification_arguments(store, queue, local_config, receiver) -> None:
    from schedulerd.client import Client

    client = Client(store, queue, local_config, owned=False)
    made = await client.enqueue("noop", cron=YEARLY, notify_url=receiver.url, notify_on=["late", "failure"],
                                pause_after_failures=4)  # fmt: skip
    job = await store.job_get(made.job_id)
    assert (job.notify_url, job.notify_on, job.pause_after_failures) == (receiver.url, ["failure", "late"], 4)
    edit = await client.update_job(made.job_id, notify_on=["recovery"], pause_after_failures=None)
    assert (edit.job.notify_url, edit.job.notify_on, edit.job.pause_after_failures) == (receiver.url, ["recovery"], None)
    with pytest.raises(ValidationError) as refused:
        await client.enqueue("noop", cron=YEARLY, notify_url="http://10.0.0.1/hook")
    assert refused.value.field == "notify_url"


async def test_a_redriven_run_failing_again_is_a_dead_letter_notice(
    jobs, store, queue, local_config, target, receiver, make_worker
) -> None:  # fmt: skip
    from schedulerd.dead_letters import DeadLetters

    target.failing = True
    job = await make_cron(jobs, target, notify_url=receiver.url, notify_on=("failure", "dead_letter"))
    worker, watcher = make_worker(), notifier(store, local_config)
    failed = await run(jobs, job, worker, store)
    await watcher.run_once()
    await DeadLetters(store, queue, local_config).redrive([failed.id], None, by="test")
    again = await run_until_idle(worker, store, failed.id)
    assert again.status == ExecutionStatus.FAILED and again.redrives == 1
    await watcher.run_once()
    await watcher.run_once()

    bodies = [body for _, body in notices(receiver)]
    assert [(b["event"], b["execution"]["id"]) for b in bodies] == [("failure", str(failed.id)), ("dead_letter", str(failed.id))]
    assert len({b["id"] for b in bodies}) == 2


async def test_a_notice_is_signed_with_the_tenants_keys_as_the_http_tasks_requests_are(
    jobs, store, local_config, target, receiver, make_worker
) -> None:  # fmt: skip
    """A tenant holding a signing key: its notices carry X-Schedulerd-Signature over the notice id
    (as Idempotency-Key) and body, verified by the receiver code docs/webhooks.md shows; a receiver
    holding another secret answers 401 and the notice is given up, not retried."""
    import base64
    import os

    from schedulerd.config import SecretsConfig
    from schedulerd.keyring import Keyring
    from schedulerd.signing_keys import Signer, SigningKeys

    keyring = Keyring(base64.b64decode(base64.b64encode(os.urandom(32))))
    issued = await SigningKeys(store, keyring, SecretsConfig()).rotate("default")
    signer = Signer(store, keyring, cache_s=0)
    target.failing = True
    job = await make_cron(jobs, target, notify_url=receiver.url + "/hook", notify_on=("failure",))
    assert job.tenant == "default"
    await run(jobs, job, make_worker(), store)

    receiver.signing_secrets = [issued.secret]  # the documented verification, 401 when it fails
    signed = Notifier(store, local_config.notify, local_config.http, signer)
    result = await signed.run_once()
    assert result.sent == 1, result
    [request] = receiver.requests
    assert request.headers["X-Schedulerd-Signature"].count("v1=") == 1
    assert request.headers["Idempotency-Key"] == request.headers[notify.ID_HEADER]

    await run(jobs, job, make_worker(), store)
    receiver.signing_secrets = ["a secret the receiver was never given"]
    result = await signed.run_once()
    assert (result.sent, result.given_up) == (0, 1), result
