"""One attempt: resolve the handler, call it (on the event loop or in the worker's thread pool)
until it ends or its claim's timeout stops it (Deadline), and turn how it ended into the Result
the loop records. No store, no queue: the loop (loop.py) claims before and writes after.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import json
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from schedulerd.errors import UnknownTaskError
from schedulerd.models import AttemptOutcome, Claim
from schedulerd.tasks import registry

ERROR_MAX_CHARS = 4000  # an attempt's recorded error (message plus the end of the traceback)
DETAIL_MAX_CHARS = 4000  # an attempt's recorded detail (what the handler returned, as JSON)


def describe_error(exc: BaseException) -> str:
    """'ValueError: bad input' plus the innermost frames, bounded."""
    text = "".join(traceback.format_exception(exc, limit=-3)).strip()
    return text if len(text) <= ERROR_MAX_CHARS else "…" + text[-ERROR_MAX_CHARS:]


def describe_detail(value: Any) -> str | None:
    """What a handler returned (or an error carried), as bounded JSON for the attempt's detail."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= DETAIL_MAX_CHARS else text[:DETAIL_MAX_CHARS] + "…"


class Stop(enum.StrEnum):
    """Why the loop cancelled a running attempt on purpose."""

    LEASE_LOST = "lease_lost"  # its lease was reclaimed: a newer attempt owns the execution, nothing to record
    HANDED_BACK = "handed_back"  # the drain gave it back unfinished: the hand-back is its record
    CANCELLED = "cancelled"  # a cancel or an overlap policy (cancel_other) asked it to stop: recorded as cancelled
    TIMED_OUT = "timed_out"  # its claim's timeout passed (Deadline): recorded as timed out


@dataclass(slots=True)
class Running:
    claim: Claim
    task: asyncio.Task[None] | None = None
    stopped: Stop | None = None  # set just before the loop cancels the task
    deadline: Deadline | None = None


class Deadline:
    """One timer for the attempts a claim batch started with the same timeout: when it fires, each
    of them still running is stopped as timed out. A timer per attempt (asyncio.timeout) cost more
    than a tenth of a busy worker's CPU. Each attempt leaves when it ends, and the timer is
    cancelled when the last one has, so quick attempts are not held until a long timeout passes."""

    __slots__ = ("_running", "_timer")

    def __init__(self, running: list[Running], timeout_s: float) -> None:
        self._running = {r.claim.id: r for r in running}
        self._timer = asyncio.get_running_loop().call_later(timeout_s, self._expire)
        for r in running:
            r.deadline = self

    def ended(self, running: Running) -> None:
        if self._running.get(running.claim.id) is running:
            del self._running[running.claim.id]
            if not self._running:
                self._timer.cancel()

    def _expire(self) -> None:
        for running in self._running.values():
            if running.task is not None and running.stopped is None and not running.task.done():
                running.stopped = Stop.TIMED_OUT
                running.task.cancel()
        self._running = {}


@dataclass(frozen=True, slots=True)
class Result:
    """How an attempt ended, as the retry decision (core/retry.py) and the finish write take it."""

    outcome: AttemptOutcome
    error: str | None = None
    detail: str | None = None  # bounded JSON: what the handler returned, or what its error carried
    permanent: bool = False  # PermanentError: no retry, whatever attempts are left
    retry_after_s: float | None = None  # RetryAfter: the next attempt waits at least this long


_SUCCEEDED = Result(AttemptOutcome.SUCCEEDED)  # most handlers return nothing: one shared Result for them


async def run(running: Running, ctx: registry.TaskContext, threads: ThreadPoolExecutor, worker_id: str) -> Result | None:
    """Run `running`'s attempt to its Result; None when the loop stopped it on purpose with its
    record written elsewhere (lease lost, handed back). Its timeout is the Deadline the loop armed
    (running.deadline). A cancellation the loop did not ask for propagates."""
    claim = running.claim
    try:
        task = registry.get(claim.task)
        if task.is_async:
            result = await task.handler(ctx, claim.params)
        elif task.inline:  # here only while tracing is on (its span is this task's): still on the loop
            result = task.handler(ctx, claim.params)
        else:
            # A thread cannot be interrupted: on timeout the attempt is recorded as timed out,
            # but the function runs on in its thread until it returns.
            call = functools.partial(task.handler, ctx, claim.params)
            result = await asyncio.get_running_loop().run_in_executor(threads, call)
        detail = describe_detail(result)
    except asyncio.CancelledError:
        if running.stopped is Stop.TIMED_OUT:
            return Result(AttemptOutcome.TIMED_OUT, f"timed out after {claim.timeout_s:g} s")
        if running.stopped is Stop.CANCELLED:
            return Result(AttemptOutcome.CANCELLED, (
                "cancelled: a newer occurrence of the job came due while this one ran (overlap policy cancel_other)"
            ))  # fmt: skip
        if running.stopped is not None:
            ctx.log.warning(f"worker.{running.stopped}")
            return None
        raise
    except Exception as exc:
        return _failed(exc, worker_id)
    return _SUCCEEDED if detail is None else Result(AttemptOutcome.SUCCEEDED, detail=detail)


def run_inline(claim: Claim, ctx: registry.TaskContext, worker_id: str) -> Result:
    """An inline task's attempt (registry.task(inline=True)), called here and now: it returns
    before anything else runs, so nothing can stop or time it out."""
    try:
        detail = describe_detail(registry.get(claim.task).handler(ctx, claim.params))
    except Exception as exc:
        return _failed(exc, worker_id)
    return _SUCCEEDED if detail is None else Result(AttemptOutcome.SUCCEEDED, detail=detail)


def _failed(exc: Exception, worker_id: str) -> Result:
    """How an error a handler raised (or the lookup of its task type) is recorded."""
    if isinstance(exc, UnknownTaskError):  # task type not registered in this process
        return Result(AttemptOutcome.FAILED, f"{exc} on worker {worker_id}")
    if isinstance(exc, registry.PermanentError):
        return Result(AttemptOutcome.FAILED, f"not retried (permanent): {exc}", describe_detail(exc.detail), permanent=True)
    if isinstance(exc, registry.RetryAfter):
        return Result(AttemptOutcome.FAILED, str(exc), describe_detail(exc.detail), retry_after_s=exc.delay_s)
    return Result(AttemptOutcome.FAILED, describe_error(exc), describe_detail(getattr(exc, "detail", None)))
