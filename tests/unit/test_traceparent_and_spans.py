"""Traces across the queue without servers: the traceparent format (core/traceparent.py), the
attempt span's parent, link and attributes (tracing.AttemptTracer, on the SDK's in-memory
exporter), and the no-op: no API installed, no provider set, no OTEL_* variables."""

from __future__ import annotations

import doctest
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from schedulerd import tracing
from schedulerd.core import traceparent
from schedulerd.models import Claim
from tests.conftest import REPO_ROOT

TRACE_ID = 0x4BF92F3577B34DA6A3CE929D0E0E4736
SPAN_ID = 0x00F067AA0BA902B7
GOOD = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def test_doctests() -> None:
    assert doctest.testmod(traceparent, raise_on_error=False).failed == 0
    assert doctest.testmod(tracing, raise_on_error=False).failed == 0


@pytest.mark.parametrize(("text", "stored"), [
    (GOOD, GOOD),
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"),
    (f" {GOOD}\t", GOOD),  # optional whitespace around a header value
    # A later version is read by version 00's layout when what follows starts with "-".
    ("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds", GOOD),
    ("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", GOOD),
    (None, None),
    ("", None),
    ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", None),  # upper case hex
    ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None),  # trace id all zeros
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", None),  # parent id all zeros
    ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None),  # version ff is invalid
    (GOOD + "-extra", None),  # version 00 has exactly four fields
    ("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", None),
    ("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", None),  # trace id one digit short
    ("00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01", None),
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", None),
    ("0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None),
    ("cc-" + "a" * 600, None),  # long text is not read
    ("nonsense", None),
])  # fmt: skip
def test_a_traceparent_is_kept_when_well_formed_and_ignored_otherwise(text: str | None, stored: str | None) -> None:
    assert traceparent.normalised(text) == stored


def test_the_ids_read_are_the_ids_written() -> None:
    assert traceparent.parse(GOOD) == (TRACE_ID, SPAN_ID, 1)
    assert traceparent.formatted(TRACE_ID, SPAN_ID, 1) == GOOD


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A provider of this test's own (the global one stays unset), exporting to memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _claim(attempt: int, context: str | None) -> Claim:
    return Claim(uuid.uuid4(), uuid.uuid4(), "acme", AT, 30.0, attempt, attempt + 1,
                 2.5, "http", {}, 5.0, 3, 1.0, 2.0, 60.0, "allow", None,
                 traceparent=context)  # fmt: skip


def test_a_first_attempt_is_a_child_of_the_producer_span(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    tracer = tracing.attempt_tracer("worker-a", provider)
    assert tracer is not None
    claim = _claim(1, GOOD)

    with tracer.started(claim) as span:
        assert trace.get_current_span() is span  # a handler's own spans nest under the attempt
        context = tracer.traceparent(span)
        tracer.ended(span, "succeeded", None)

    [finished] = exporter.get_finished_spans()
    assert finished.name == "schedulerd.attempt" and finished.kind is trace.SpanKind.CONSUMER
    assert finished.parent is not None and finished.parent.span_id == SPAN_ID and finished.parent.is_remote
    assert finished.context.trace_id == TRACE_ID and not finished.links
    assert context == traceparent.formatted(TRACE_ID, finished.context.span_id, 1)
    assert dict(finished.attributes) == {
        "messaging.system": "schedulerd", "messaging.operation.type": "process", "messaging.operation.name": "attempt",
        "messaging.destination.name": "http", "messaging.message.id": str(claim.id), "messaging.client.id": "worker-a",
        "schedulerd.job.id": str(claim.job_id), "schedulerd.tenant": "acme", "schedulerd.attempt": 1,
        "schedulerd.fence": 2, "schedulerd.scheduled_for": "2026-12-01T09:00:00+00:00",
        "schedulerd.due_at": "2026-12-01T09:00:30+00:00", "schedulerd.start_lag_s": 2.5, "schedulerd.outcome": "succeeded",
    }  # fmt: skip
    assert finished.status.status_code is trace.StatusCode.UNSET


def test_a_retry_starts_a_trace_of_its_own_linked_to_the_producer(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    tracer = tracing.attempt_tracer("worker-a", provider)
    assert tracer is not None
    outer = provider.get_tracer("test")

    with outer.start_as_current_span("the worker's own context"):  # never the attempt's parent
        with tracer.started(_claim(2, GOOD)) as span:
            tracer.ended(span, "failed", "Traceback ...\nTargetError: http: POST http://h/ answered 503")

    finished = next(s for s in exporter.get_finished_spans() if s.name == "schedulerd.attempt")
    assert finished.parent is None and finished.context.trace_id != TRACE_ID
    [link] = finished.links
    assert (link.context.trace_id, link.context.span_id) == (TRACE_ID, SPAN_ID)
    assert finished.attributes["schedulerd.outcome"] == "failed"
    assert finished.status.status_code is trace.StatusCode.ERROR
    assert finished.status.description == "TargetError: http: POST http://h/ answered 503"


@pytest.mark.parametrize("attempt", [1, 3])
def test_without_a_producer_context_each_attempt_is_a_root(spans: tuple[TracerProvider, InMemorySpanExporter], attempt: int) -> None:
    provider, exporter = spans
    tracer = tracing.attempt_tracer("worker-a", provider)
    assert tracer is not None
    with tracer.started(_claim(attempt, None)) as span:
        tracer.ended(span, "lease_lost", None)
    [finished] = exporter.get_finished_spans()
    assert finished.parent is None and not finished.links
    assert finished.status.status_code is trace.StatusCode.UNSET  # the worker stopped it: not a failure


def test_an_exception_leaving_the_attempt_is_recorded_and_the_span_ended(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    tracer = tracing.attempt_tracer("worker-a", provider)
    assert tracer is not None
    with pytest.raises(RuntimeError), tracer.started(_claim(1, GOOD)):
        raise RuntimeError("the loop was torn down")
    [finished] = exporter.get_finished_spans()
    assert finished.end_time is not None and finished.status.status_code is trace.StatusCode.ERROR
    assert [e.name for e in finished.events] == ["exception"]


def test_the_current_span_is_the_producer_context(spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, _ = spans
    assert tracing.current() is None
    with provider.get_tracer("test").start_as_current_span("request") as span:
        context = span.get_span_context()
        assert tracing.current() == traceparent.formatted(context.trace_id, context.span_id, context.trace_flags)
        assert tracing.current().endswith(("-01", "-03"))  # sampled (and, with a newer SDK, a random trace id)
        # A traced server's own span wins over the header it was a child of.
        assert tracing.of_request(GOOD) == tracing.current()
    assert tracing.of_request(GOOD) == GOOD
    assert tracing.of_request(GOOD.upper()) is None and tracing.of_request(None) is None


def test_without_a_provider_the_worker_holds_no_tracer() -> None:
    """The API's default provider is a no-op: the worker's attempts then cost one check each."""
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)  # no test of this run sets the global one
    assert tracing.attempt_tracer("worker-a") is None
    assert tracing.attempt_tracer("worker-a", trace.NoOpTracerProvider()) is None
    assert tracing.configure({}) is None  # no OTEL_* variable: the daemon sets nothing up


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, ["otlp_proto_grpc"]),
    ({"OTEL_TRACES_EXPORTER": "none"}, []),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, ["otlp_proto_http"]),
    ({"OTEL_TRACES_EXPORTER": " console , otlp_proto_grpc"}, ["console", "otlp_proto_grpc"]),
])  # fmt: skip
def test_exporter_names_follow_the_standard_variables(environ: dict[str, str], expected: list[str]) -> None:
    assert tracing.exporter_names(environ) == expected


def _python(script: str, environ: dict[str, str]) -> dict[str, object]:
    """Run `script` in a fresh interpreter (a tracer provider can be set once per process); it
    prints one JSON document."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | environ
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_without_the_api_installed_everything_is_a_no_op() -> None:
    found = _python(
        "import sys, json\n"
        "sys.modules['opentelemetry'] = None  # as if the otel extra were not installed\n"
        "from schedulerd import tracing\n"
        f"good = {GOOD!r}\n"
        "print(json.dumps({'api': tracing.trace is not None, 'current': tracing.current(),\n"
        "    'request': tracing.of_request(good), 'tracer': tracing.attempt_tracer('w') is not None,\n"
        "    'configured': tracing.configure({'OTEL_TRACES_EXPORTER': 'console'}) is not None}))\n",
        {},
    )
    # The header is still stored: another worker, or a later one, may trace.
    assert found == {"api": False, "current": None, "request": GOOD, "tracer": False, "configured": False}


CONFIGURE = """\
import json, os
from opentelemetry import trace
from schedulerd import tracing
flush = tracing.configure(os.environ)
provider = trace.get_tracer_provider()
print(json.dumps({"configured": flush is not None, "tracer": tracing.attempt_tracer("w") is not None,
                  "service": getattr(provider, "resource", None) and provider.resource.attributes.get("service.name")}))
"""


@pytest.mark.parametrize(("environ", "expected"), [
    ({"OTEL_TRACES_EXPORTER": "console"}, {"configured": True, "tracer": True, "service": "schedulerd"}),
    ({"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "scheduler-eu"},
     {"configured": True, "tracer": True, "service": "scheduler-eu"}),
    ({"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}, {"configured": False, "tracer": False, "service": None}),
    ({"OTEL_TRACES_EXPORTER": "none"}, {"configured": False, "tracer": False, "service": None}),
    ({"OTEL_TRACES_EXPORTER": "no_such_exporter"}, {"configured": False, "tracer": False, "service": None}),
    ({}, {"configured": False, "tracer": False, "service": None}),
])  # fmt: skip
def test_the_daemon_sets_up_the_sdk_from_otel_variables(environ: dict[str, str], expected: dict[str, object]) -> None:
    assert _python(CONFIGURE, environ) == expected
