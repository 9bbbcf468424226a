"""One trace across the queue, on real Postgres and Redis and the SDK's in-memory exporter: a
producer's span -> Client.enqueue -> the first attempt (its child) -> a retry (a trace of its own,
linked to the producer) -> the http task's request, whose traceparent names the attempt's span."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from schedulerd import Client
from schedulerd.config import Config, HttpConfig
from schedulerd.core import traceparent
from schedulerd.models import ExecutionStatus
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from schedulerd.tasks import http
from schedulerd.worker import Worker
from tests.http_target import Reply, Target, serve
from tests.integration.conftest import run_until_idle


@pytest.fixture
def target() -> Iterator[Target]:
    http.configure(HttpConfig(allow_hosts=("127.0.0.1:*",)))
    yield from serve()
    http.configure(HttpConfig())


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    yield InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    """The test's own provider (the global one stays unset: other tests' workers stay untraced)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


@pytest.fixture
async def client(store: Store, queue: DelayQueue, config: Config) -> AsyncIterator[Client]:
    yield Client(store, queue, config, owned=False)


@pytest.fixture
def traced_worker(store: Store, queue: DelayQueue, config: Config, provider: TracerProvider) -> Iterator[Worker]:
    worker = Worker(store, queue, config.worker, "worker-traced", horizon_s=config.dispatcher.horizon_s, tracer_provider=provider)
    yield worker
    worker._threads.shutdown(wait=False, cancel_futures=True)


def _attempts(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return sorted((s for s in exporter.get_finished_spans() if s.name == "schedulerd.attempt"),
                  key=lambda s: s.attributes["schedulerd.attempt"])  # type: ignore[index]  # fmt: skip


def _named(span: ReadableSpan) -> str:
    """The traceparent naming this exported span."""
    return traceparent.formatted(span.context.trace_id, span.context.span_id, span.context.trace_flags)


def tracing_of(span: trace.Span) -> str:
    """The traceparent naming this live span."""
    context = span.get_span_context()
    return traceparent.formatted(context.trace_id, context.span_id, context.trace_flags)


async def test_one_trace_from_enqueue_to_a_retried_http_call(
    client: Client, traced_worker: Worker, target: Target, provider: TracerProvider, exporter: InMemorySpanExporter,
    store: Store,
) -> None:  # fmt: skip
    target.script = [Reply(503, b"busy")]
    # A traceparent in params is replaced by the attempt's own (so is a tracestate).
    headers = {"TraceParent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01", "tracestate": "vendor=x"}
    with provider.get_tracer("app").start_as_current_span("checkout") as producer:
        done = await client.enqueue("http", {"url": target.url + "/hook", "headers": headers}, max_attempts=3,
                                    backoff_base_s=0.05)  # fmt: skip
    stored = await store.db.fetchval("SELECT traceparent FROM executions WHERE id = $1", done.execution_id)
    assert stored == tracing_of(producer)

    finished = await run_until_idle(traced_worker, store, done.execution_id)

    assert finished.status == ExecutionStatus.SUCCEEDED and finished.attempt == 2
    first, retry = _attempts(exporter)
    producer_span = producer.get_span_context()
    # The first attempt is the producer's child, in its trace.
    assert first.parent is not None and first.parent.span_id == producer_span.span_id
    assert first.context.trace_id == producer_span.trace_id and not first.links
    assert first.attributes["schedulerd.outcome"] == "failed" and first.status.status_code is trace.StatusCode.ERROR
    # The retry is a trace of its own, linked to the producer's span.
    assert retry.parent is None and retry.context.trace_id != producer_span.trace_id
    [link] = retry.links
    assert (link.context.trace_id, link.context.span_id) == (producer_span.trace_id, producer_span.span_id)
    assert retry.attributes["schedulerd.outcome"] == "succeeded" and retry.attributes["schedulerd.attempt"] == 2
    assert retry.attributes["messaging.message.id"] == str(done.execution_id)
    # Each request names the attempt that made it; no other trace header went out.
    sent = [{k.lower(): v for k, v in r.headers.items()} for r in target.requests]
    assert [h["traceparent"] for h in sent] == [_named(first), _named(retry)]
    assert all("tracestate" not in h for h in sent)


async def test_enqueue_many_and_the_in_transaction_enqueue_carry_the_callers_span(
    client: Client, store: Store, provider: TracerProvider
) -> None:
    with provider.get_tracer("app").start_as_current_span("import") as producer:
        batch = await client.enqueue_many([{"task": "noop"}, {"task": "noop", "in_": "1h"}], batch_size=1)
        async with store.db.acquire() as connection, client.transaction(connection):
            inside = await client.enqueue("noop", connection=connection)
    cron = await client.enqueue("noop", cron="*/5 * * * *")
    ids = [r.execution_id for r in batch] + [inside.execution_id]
    rows = await store.db.fetch("SELECT id, traceparent FROM executions WHERE id = ANY($1::uuid[])", ids)
    assert {r["traceparent"] for r in rows} == {tracing_of(producer)} and len(rows) == 3
    # Outside any span, and for a cron job's occurrences: none.
    assert await store.db.fetchval("SELECT count(traceparent) FROM executions WHERE job_id = $1", cron.job_id) == 0


async def test_a_debounced_execution_carries_the_latest_creates_context(client: Client, store: Store, provider: TracerProvider) -> None:
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("first"):
        first = await client.enqueue("noop", debounce_key="k", debounce_window="1h")
    with tracer.start_as_current_span("second") as second:
        again = await client.enqueue("noop", debounce_key="k", debounce_window="1h")
    assert again.execution_id == first.execution_id
    stored = await store.db.fetchval("SELECT traceparent FROM executions WHERE id = $1", first.execution_id)
    assert stored == tracing_of(second)


async def test_an_untraced_worker_sends_no_traceparent(client: Client, make_worker, target: Target, store: Store,  # type: ignore[no-untyped-def]
                                                        provider: TracerProvider) -> None:
    with provider.get_tracer("app").start_as_current_span("checkout"):
        done = await client.enqueue("http", {"url": target.url})
    worker = make_worker()
    assert worker.tracer is None  # no provider set: one check per attempt, nothing else

    assert (await run_until_idle(worker, store, done.execution_id)).status == ExecutionStatus.SUCCEEDED
    [received] = target.requests
    assert "traceparent" not in {k.lower() for k in received.headers}


async def test_a_handed_back_attempt_span_says_so(client: Client, traced_worker: Worker, store: Store,
                                                   exporter: InMemorySpanExporter) -> None:  # fmt: skip
    from schedulerd.tasks.registry import task

    @task("tests.tracing.slow")
    async def slow(ctx, params):  # type: ignore[no-untyped-def]
        await asyncio.sleep(30)

    await client.enqueue("tests.tracing.slow")
    assert await traced_worker.run_once() == 1
    traced_worker.config = replace(traced_worker.config, shutdown_grace_s=0.05)
    await traced_worker._drain()

    [span] = _attempts(exporter)
    assert span.attributes["schedulerd.outcome"] == "handed_back"
    assert span.status.status_code is trace.StatusCode.UNSET


def test_the_sync_client_carries_the_callers_span(database_url: str, redis_url: str, redis_prefix: str,
                                                   provider: TracerProvider) -> None:  # fmt: skip
    from schedulerd import SyncClient
    from schedulerd.config import load

    config = load("/nonexistent.toml", {"SCHEDULERD_DATABASE_URL": database_url, "SCHEDULERD_REDIS_URL": redis_url,
                                        "SCHEDULERD_REDIS_PREFIX": redis_prefix})  # fmt: skip
    with SyncClient.connect(config) as client:
        with provider.get_tracer("app").start_as_current_span("sync caller") as producer:
            one = client.enqueue("noop", in_="1h")
            [many] = client.enqueue_many([{"task": "noop", "in_": "1h"}])
        ids = [one.execution_id, many.execution_id]  # type: ignore[union-attr]
        rows = client._run(client.client.store.db.fetch("SELECT traceparent FROM executions WHERE id = ANY($1::uuid[])", ids))
    assert [r["traceparent"] for r in rows] == [tracing_of(producer)] * 2
