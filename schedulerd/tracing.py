"""OpenTelemetry traces across the queue (docs/tracing.md): the producer's context, a W3C
traceparent stored with the execution; a span per attempt; the daemon's SDK set up from the
standard OTEL_* variables. A no-op where opentelemetry-api is absent or no tracer provider is set:
the worker then holds no tracer (attempt_tracer returns None) and adds nothing per execution.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import structlog

from schedulerd.core import traceparent
from schedulerd.models import Claim

try:
    from opentelemetry import trace
    from opentelemetry.context import Context
except ImportError:  # the optional extra is not installed: every function here is a no-op
    trace = None  # type: ignore[assignment]

log = structlog.get_logger("schedulerd.tracing")

ATTEMPT_SPAN = "schedulerd.attempt"
# Any of these asks the daemon to set up the SDK itself (configure); OTEL_TRACES_EXPORTER=none does not.
WANTED_BY = ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
# OTEL_TRACES_EXPORTER's otlp is the grpc exporter, or the http one when the protocol says so (the SDK's rule).
_OTLP_BY_PROTOCOL = {"grpc": "otlp_proto_grpc", "http/protobuf": "otlp_proto_http"}
# Outcomes that mark an attempt's span as failed; the others (cancelled, lease_lost, handed_back) are not errors.
_ERRORS = frozenset({"failed", "timed_out"})


def current() -> str | None:
    """The caller's current span as a traceparent (what Client.enqueue stores); None when there is
    none, or the API is not installed."""
    if trace is None:
        return None
    span = trace.get_current_span().get_span_context()
    return traceparent.formatted(span.trace_id, span.span_id, span.trace_flags) if span.is_valid else None


def of_request(header: str | None) -> str | None:
    """A create request's trace context: the current span's when the server is traced itself (its
    span is the header's child), else the request's traceparent header when well-formed. A
    malformed header is ignored, as W3C Trace Context says: the execution carries none."""
    return current() or traceparent.normalised(header)


class AttemptTracer:
    """The worker's spans of attempts, `schedulerd.attempt`, kind CONSUMER. A first attempt is a
    child of the producer's span; a later attempt (a retry) starts a trace of its own with a link
    to it (OpenTelemetry's messaging conventions: the producer's trace is not held open for
    retries hours later). An execution without a producer context starts a trace at each attempt."""

    def __init__(self, tracer: Any, worker_id: str) -> None:
        self._tracer = tracer
        self._worker_id = worker_id

    @contextlib.contextmanager
    def started(self, claim: Claim) -> Iterator[Any]:
        """A span for this claim's attempt, current inside the block (a handler's own spans nest
        under it) and ended on leaving it; an exception leaving the block is recorded on it."""
        producer = _remote(claim.traceparent)
        links = None
        if producer is not None and claim.attempt == 1:
            parent = trace.set_span_in_context(trace.NonRecordingSpan(producer), Context())
        else:
            parent = Context()  # empty: a root span, whatever the worker's own context holds
            links = [trace.Link(producer)] if producer is not None else None
        attributes = {
            "messaging.system": "schedulerd",
            "messaging.operation.type": "process",
            "messaging.operation.name": "attempt",
            "messaging.destination.name": claim.task,
            "messaging.message.id": str(claim.id),
            "messaging.client.id": self._worker_id,
            "schedulerd.job.id": str(claim.job_id),
            "schedulerd.tenant": claim.tenant,
            "schedulerd.attempt": claim.attempt,
            "schedulerd.fence": claim.fence,
            "schedulerd.scheduled_for": claim.scheduled_for.isoformat(),
            "schedulerd.due_at": claim.due_at.isoformat(),
            "schedulerd.start_lag_s": max(0.0, claim.start_lag_s),
        }
        span = self._tracer.start_span(ATTEMPT_SPAN, context=parent, kind=trace.SpanKind.CONSUMER, attributes=attributes,
                                       links=links)  # fmt: skip
        with trace.use_span(span, end_on_exit=True):
            yield span

    @staticmethod
    def traceparent(span: Any) -> str:
        """The attempt span's own traceparent: what the handler passes downstream (TaskContext)."""
        context = span.get_span_context()
        return traceparent.formatted(context.trace_id, context.span_id, context.trace_flags)

    @staticmethod
    def ended(span: Any, outcome: str, error: str | None) -> None:
        """Record how the attempt ended: its outcome (an AttemptOutcome, or why the worker stopped
        it: lease_lost, handed_back), and an error status for a failure or a timeout."""
        span.set_attribute("schedulerd.outcome", outcome)
        if outcome in _ERRORS:
            lines = (error or outcome).strip().splitlines() or [outcome]
            span.set_status(trace.Status(trace.StatusCode.ERROR, lines[-1][:200]))


def attempt_tracer(worker_id: str, provider: Any = None) -> AttemptTracer | None:
    """The worker's AttemptTracer from `provider` (an OpenTelemetry TracerProvider; None: the
    global one), or None when tracing is off: the API is not installed, or no provider is set
    (the API's default is a no-op). Asked once, when the worker is built: set the provider first
    (the daemon does, configure)."""
    if trace is None:
        return None
    provider = provider if provider is not None else trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return AttemptTracer(provider.get_tracer("schedulerd"), worker_id)


def configure(environ: Mapping[str, str]) -> Callable[[], None] | None:
    """`schedulerd run`: set up the OpenTelemetry SDK from the standard variables when one of
    WANTED_BY is set: a TracerProvider (resource from OTEL_SERVICE_NAME and
    OTEL_RESOURCE_ATTRIBUTES, service name schedulerd by default; sampler from OTEL_TRACES_SAMPLER)
    with a batch processor per exporter OTEL_TRACES_EXPORTER names (default otlp, which reads
    OTEL_EXPORTER_OTLP_*). Not when OTEL_SDK_DISABLED is true, nor when a provider is set already
    (opentelemetry-instrument's). Returns the provider's shutdown (it flushes what is batched);
    None when nothing was set up, a missing package said in a warning."""
    if not any(environ.get(name) for name in WANTED_BY) or environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if trace is None:
        log.warning("tracing.not_installed", hint="pip install 'schedulerd[otel]' opentelemetry-sdk opentelemetry-exporter-otlp")
        return None
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        log.info("tracing.provider_given")  # opentelemetry-instrument (or the application) set one up
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("tracing.sdk_missing", hint="pip install opentelemetry-sdk opentelemetry-exporter-otlp")
        return None
    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    if protocol and protocol.strip() not in _OTLP_BY_PROTOCOL:
        log.warning("tracing.protocol_unknown", protocol=protocol, using="grpc", known=sorted(_OTLP_BY_PROTOCOL))
    exporters = []
    for name in exporter_names(environ):
        found = importlib.metadata.entry_points(group="opentelemetry_traces_exporter", name=name)
        if not found:
            log.warning("tracing.exporter_missing", exporter=name, hint="pip install opentelemetry-exporter-otlp")
            continue
        exporters.append(next(iter(found)).load()())
    if not exporters:
        return None
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "schedulerd"}))
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    log.info("tracing.configured", service=resource.attributes.get("service.name"), exporters=exporter_names(environ))
    return provider.shutdown


def exporter_names(environ: Mapping[str, str]) -> list[str]:
    """The span exporters' entry point names OTEL_TRACES_EXPORTER asks for (default otlp: grpc, or
    http/protobuf per OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL).

    >>> exporter_names({"OTEL_TRACES_EXPORTER": "otlp,console", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
    ['otlp_proto_http', 'console']
    """
    names = [n.strip() for n in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]
    protocol = (environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "grpc").strip()
    otlp = _OTLP_BY_PROTOCOL.get(protocol, "otlp_proto_grpc")
    return [otlp if n == "otlp" else n for n in names if n.lower() != "none"]


def _remote(text: str | None) -> Any:
    """The producer's span context from its stored traceparent; None when there is none."""
    parsed = traceparent.parse(text)
    if parsed is None:
        return None
    return trace.SpanContext(parsed.trace_id, parsed.span_id, is_remote=True, trace_flags=trace.TraceFlags(parsed.flags))
