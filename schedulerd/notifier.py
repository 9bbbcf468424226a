"""Notifier: finds the transitions users asked to hear about (a run failed, the job recovered, a
run started late) in Postgres, records each once (notifications: unique per execution, round and
event, so replicas and restarts never record one twice), pauses a job after pause_after_failures
failed runs in a row, and POSTs the notices due through the http task's send path, at least once,
retried with backoff and jitter. It reads finished executions by itself: the worker's claim and
finish do nothing for it. The pure decisions are core/notify.py's.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import structlog

from schedulerd import __version__, metrics
from schedulerd.config import HttpConfig, NotifyConfig
from schedulerd.core import notify
from schedulerd.core.targets import redact
from schedulerd.jobs import MAX_PAUSE_NOTE, pause_in
from schedulerd.loops import every
from schedulerd.errors import UnsealError
from schedulerd.signing_keys import Signer
from schedulerd.store import Store
from schedulerd.tasks import http
from schedulerd.tasks.registry import PermanentError

log = structlog.get_logger("schedulerd.notifier")
PAUSED_BY = "schedulerd:pause_after_failures"
_ENCODER = json.JSONEncoder(default=str, allow_nan=False)
_RESULT = {notify.SENT: "sent", notify.PENDING: "retried", notify.GIVEN_UP: "given_up"}  # a send's metric label


@dataclass(frozen=True)
class NotifyResult:
    failures: int = 0  # failed runs judged (a failure or dead_letter transition recorded)
    recoveries: int = 0  # recoveries recorded
    late: int = 0  # late starts recorded
    paused: int = 0  # jobs paused after repeated failures
    sent: int = 0  # notices the receiver took (2xx)
    retried: int = 0  # sends that failed and will be tried again
    given_up: int = 0  # notices given up (refused, a 4xx, or tries spent)
    pruned: int = 0  # settled notices deleted after [notify].keep_s


@dataclass(frozen=True)
class Answer:
    """A send's outcome: the receiver's HTTP status (None: no answer), and the error if it failed."""

    status: int | None
    error: str | None
    permanent: bool = False  # refused, or could not be sent: trying again cannot help


def headers_for(notice_id: str, event: str) -> dict[str, str]:
    """schedulerd's headers on a notice (send() adds them to every one)."""
    # The id also as Idempotency-Key: a receiver verifies a notice's signature with the same code
    # as the http task's requests (docs/webhooks.md), and deduplicates on it as on those.
    return {"Content-Type": "application/json", "User-Agent": f"schedulerd/{__version__}",
            notify.ID_HEADER: notice_id, notify.EVENT_HEADER: event, "Idempotency-Key": notice_id}  # fmt: skip


async def send(
    url: str, body: str, notice_id: str, event: str, settings: HttpConfig, timeout_s: float, *, tenant: str,
    signer: Signer | None = None,
) -> Answer:  # fmt: skip
    """POST one notice through the http task's send path (its target check and allow-list).
    Every notice, queued or the test one, is sent here with its final body in hand, and signed as
    the http task's requests are when the tenant holds a signing key (the notice id in the
    Idempotency-Key position, no fence: docs/webhooks.md)."""
    try:
        request = http.parse_params(
            {"url": url, "method": "POST", "body": body, "timeout_s": min(timeout_s, settings.timeout_s)}, settings
        )
        headers = headers_for(notice_id, event)
        if signer is not None:
            try:
                headers.update(await signer.sign_request(tenant, "POST", url, body.encode(), idempotency_key=notice_id))
            except UnsealError as exc:
                return Answer(None, f"cannot open this tenant's signing key: {exc}", permanent=True)
        status, _, _ = await http.call(request, settings, headers)
    except http.RefusedError as exc:
        return Answer(None, f"refused: {exc.reason}", permanent=True)
    except PermanentError as exc:
        return Answer(None, str(exc), permanent=True)
    except http.TargetError as exc:
        return Answer(None, str(exc))
    return Answer(status, None if 200 <= status < 300 else f"{redact(url)} answered {status}")


class Notifier:
    def __init__(self, store: Store, config: NotifyConfig, http_config: HttpConfig, signer: Signer | None = None) -> None:
        self.store = store
        self.config = config
        self.http_config = http_config
        self.signer = signer  # None: no [secrets].key, so no tenant holds a signing key

    async def run(self, stop: asyncio.Event) -> None:
        await every("notifier", self.config.interval_s, self.run_once, stop)

    async def run_once(self) -> NotifyResult:
        """Judge new failures (pausing where due), then recoveries, then late starts; send what is due."""
        failures, paused = await self._failures()
        recoveries = await self._recoveries()
        late = await self._late()
        sent, retried, given_up = await self._send_due()
        pruned = await self.store.notification_prune(self.config.keep_s)
        result = NotifyResult(failures, recoveries, late, paused, sent, retried, given_up, pruned)
        if result != NotifyResult():
            log.info("notifier.pass", **{k: v for k, v in result.__dict__.items() if v})
        return result

    def _payload(self, notice_id: UUID, event: str, row: dict[str, Any], now: datetime, paused: bool = False) -> str:
        """The notice's JSON body for this execution's row (a candidate query's)."""
        execution = {"id": str(row["id"]), "scheduled_for": row["scheduled_for"], "status": row["status"]}
        if event == notify.LATE:
            execution["late_reason"] = row["late_reason"]
        body = notify.payload(
            notification_id=str(notice_id), event=event,
            job={"id": str(row["job_id"]), "name": row["name"], "task": row["task"]}, execution=execution,
            attempts=row["attempt"], error=row["last_error"] if event != notify.RECOVERY else None, at=now,
            public_url=self.config.public_url, paused=paused,
        )  # fmt: skip
        return _ENCODER.encode(body)

    async def _failures(self) -> tuple[int, int]:
        judged = paused = 0
        for row in await self.store.notify_failed_candidates(self.config.lookback_s, self.config.batch_size):
            async with self.store.transaction() as tx:
                pause_now = await self._pause_due(tx, row)
                event = notify.failed_event(row["redrives"])
                events, url = row["events"], row["url"]
                now = await tx.clock_now()
                notice_id = uuid.uuid4()
                state = notify.PENDING if event in events and url else notify.UNSENT
                if not await tx.notification_insert(
                    notice_id, row["tenant"], row["job_id"], row["id"], row["redrives"], event, row["finished_at"], url,
                    self._payload(notice_id, event, row, now, paused=pause_now), state,
                ):  # fmt: skip
                    continue  # another replica judged it first
                judged += 1
                # Failing until a run succeeds: kept for every watched job, so recovery added to its
                # events later still hears of the next success.
                await tx.notify_job_failed(row["job_id"], row["tenant"], row["finished_at"], row["scheduled_for"])
                if pause_now:
                    note = notify.pause_note(row["pause_after_failures"], row["last_error"], MAX_PAUSE_NOTE)
                    await pause_in(tx, row["job_id"], now, note, PAUSED_BY)
                    await tx.notify_job_streak(row["job_id"], row["tenant"], now)
                    paused += 1
                    metrics.PAUSED_AFTER_FAILURES.inc()
                    log.warning("notifier.paused", job_id=str(row["job_id"]), tenant=row["tenant"],
                                failures=row["pause_after_failures"], execution_id=str(row["id"]))  # fmt: skip
        return judged, paused

    async def _pause_due(self, tx: Store, row: dict[str, Any]) -> bool:
        """Whether this failure pauses its job: it has pause_after_failures, is live and running,
        and its newest ended runs are that many failures. Judged holding the job's row, so a user's
        pause or resume, or another replica's judgement, is either before or after it."""
        limit = row["pause_after_failures"]
        if limit is None:
            return False
        job = await tx.job_lock_for_edit(row["job_id"])
        if job is None or not job.enabled or job.deleted_at is not None:
            return False
        return notify.should_pause(await tx.notify_job_recent_ends(job.id, limit, self.config.history_s), limit)

    async def _recoveries(self) -> int:
        recovered = 0
        for row in await self.store.notify_recovery_candidates(self.config.lookback_s, self.config.batch_size):
            async with self.store.transaction() as tx:
                if not await tx.notify_job_recovered(row["job_id"], row["failed_at"]):
                    continue  # a newer failure came, or another replica recorded this recovery
                now = await tx.clock_now()
                notice_id = uuid.uuid4()
                state = notify.PENDING if notify.RECOVERY in row["events"] and row["url"] else notify.UNSENT
                if await tx.notification_insert(
                    notice_id, row["tenant"], row["job_id"], row["id"], row["redrives"], notify.RECOVERY,
                    row["finished_at"], row["url"], self._payload(notice_id, notify.RECOVERY, row, now), state,
                ):  # fmt: skip
                    recovered += 1
        return recovered

    async def _late(self) -> int:
        late = 0
        for row in await self.store.notify_late_candidates(self.config.lookback_s, self.config.batch_size):
            now = await self.store.clock_now()
            notice_id = uuid.uuid4()
            if await self.store.notification_insert(
                notice_id, row["tenant"], row["job_id"], row["id"], 0, notify.LATE, row["finished_at"], row["url"],
                self._payload(notice_id, notify.LATE, row, now), notify.PENDING,
            ):  # fmt: skip
                late += 1
        return late

    async def _send_due(self) -> tuple[int, int, int]:
        due = await self.store.notification_claim_due(self.config.batch_size, self.config.hold_s)
        answers = await asyncio.gather(*(
            send(n["url"], n["payload"], str(n["id"]), n["event"], self.http_config, self.config.timeout_s,
                 tenant=n["tenant"], signer=self.signer)
            for n in due
        ))  # fmt: skip
        counts = {notify.SENT: 0, notify.PENDING: 0, notify.GIVEN_UP: 0}
        for n, answer in zip(due, answers, strict=True):
            state = notify.verdict(answer.status, n["attempts"], self.config.max_attempts, answer.permanent)
            delay_s = (notify.redelivery_delay_s(n["attempts"], self.config.backoff_base_s, self.config.backoff_max_s)
                       if state == notify.PENDING else None)  # fmt: skip
            if await self.store.notification_record(n["id"], n["attempts"], state, answer.status, answer.error, delay_s):
                counts[state] += 1
                metrics.NOTICES.labels(n["event"], _RESULT[state]).inc()
            if state != notify.SENT:
                log.warning("notifier.send_failed", notification_id=str(n["id"]), tenant=n["tenant"], notice=n["event"],
                            attempt=n["attempts"], error=answer.error, next=state)  # fmt: skip
        return counts[notify.SENT], counts[notify.PENDING], counts[notify.GIVEN_UP]
