"""`schedulerd job create --from-file FILE|-`: NDJSON, one job per line with the API's fields
(POST /v1/jobs/batch items, plus an optional "tenant"), streamed through the client's batched
enqueue. A refused line is reported with its number and writes nothing; the others are written.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from pydantic import ValidationError as PydanticValidationError

from schedulerd.api.schemas import BODY_FIELDS, JobBatchItem, pydantic_field
from schedulerd.client import Client
from schedulerd.intake import Item, Refused

BATCH_SIZE = 1000  # lines per transaction


@dataclass
class LineError:
    line: int  # 1-based
    field: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.field}: {self.message}"


@dataclass
class Report:
    lines: int = 0  # non-blank lines read
    created: int = 0
    replayed: int = 0
    errors: list[LineError] = field(default_factory=list)
    first_job_ids: list[str] = field(default_factory=list)  # of the first few created, for the summary


def parse_line(text: str, number: int, tenant: str, traceparent: str | None = None) -> Item | LineError:
    """One NDJSON line as an intake item carrying the trace context `traceparent`, or why it is
    refused (field named as the API does)."""
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        return LineError(number, "line", f"is not valid JSON ({exc})")
    if not isinstance(document, dict):
        return LineError(number, "line", f"must be a JSON object, got {type(document).__name__}")
    line_tenant = document.pop("tenant", tenant)
    if not isinstance(line_tenant, str):
        return LineError(number, "tenant", "must be a string")
    try:
        body = JobBatchItem.model_validate(document)
    except PydanticValidationError as exc:
        return LineError(number, *pydantic_field(exc, "line"))
    return Item(body.spec(line_tenant), body.idempotency_key, debounce=body.debounced(), traceparent=traceparent)


def numbered_lines(stream: IO[str]) -> Iterator[tuple[int, str]]:
    for number, text in enumerate(stream, 1):
        if text.strip():
            yield number, text


class _Progress:
    """A one-line progress report on a terminal (standard error), nothing otherwise."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.enabled = out.isatty()
        self.started = time.monotonic()

    def show(self, report: Report) -> None:
        if not self.enabled:
            return
        rate = (report.created + report.replayed) / max(1e-9, time.monotonic() - self.started)
        self.out.write(f"\r{report.lines} lines: {report.created} created, {report.replayed} replayed, "
                       f"{len(report.errors)} refused ({rate:,.0f} jobs/s)\x1b[K")  # fmt: skip
        self.out.flush()

    def done(self) -> None:
        if self.enabled:
            self.out.write("\n")


async def create_from_lines(
    client: Client, lines: Iterable[tuple[int, str]], tenant: str, *, errors_out: IO[str] = sys.stderr,
    batch_size: int = BATCH_SIZE, traceparent: str | None = None,
) -> Report:  # fmt: skip
    """Parse and enqueue every line, each carrying the trace context `traceparent` (the CLI's);
    refused lines are printed to `errors_out` as they are found."""
    report = Report()
    progress = _Progress(errors_out)
    line_of: list[int] = []  # the line number of each item sent, by its index in the stream

    def refuse(error: LineError) -> None:
        report.errors.append(error)
        if progress.enabled:
            errors_out.write("\r\x1b[K")
        print(f"schedulerd: {error}", file=errors_out)

    def items() -> Iterator[Item]:
        for number, text in lines:
            report.lines += 1
            parsed = parse_line(text, number, tenant, traceparent)
            if isinstance(parsed, LineError):
                refuse(parsed)
                continue
            line_of.append(number)
            yield parsed

    async for batch in client.enqueue_batches(items(), batch_size=batch_size):
        for result in batch:
            if isinstance(result, Refused):
                refuse(LineError(line_of[result.index], BODY_FIELDS.get(result.field, result.field), result.message))
            elif result.replayed:
                report.replayed += 1
            else:
                report.created += 1
                if len(report.first_job_ids) < 3:
                    report.first_job_ids.append(str(result.job_id))
        progress.show(report)
    progress.done()
    report.errors.sort(key=lambda e: e.line)
    return report


def summary(report: Report) -> dict[str, Any]:
    return {"lines": report.lines, "created": report.created, "replayed": report.replayed,
            "refused": [{"line": e.line, "field": e.field, "message": e.message} for e in report.errors]}  # fmt: skip
