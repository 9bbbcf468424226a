"""`scripts/bench ingest --via client|client-batch|http|http-batch|cli-file --count N`: how many
jobs per second the front door accepts, through the same doors users take. A job counts once it
is committed in Postgres and its execution is in Redis: each run checks both before it reports.

No worker runs (every job is due two minutes ahead, inside the dispatch horizon, so it is queued
and stays in Redis to be counted); the HTTP modes start one `schedulerd run` replica serving the
API only. The HTTP load comes from a minimal keep-alive HTTP/1.1 client on raw sockets, so the
figure measures the server rather than a client library. Prints one JSON line last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg

from schedulerd.client import BATCH_SIZE, Client
from schedulerd.config import load
from schedulerd.queue import DelayQueue
from schedulerd.store import Store, migrate
from schedulerd.tenants import Tenants

VIAS = ("client", "client-batch", "http", "http-batch", "cli-file")
DEFAULT_CONCURRENCY = {"client": 100, "http": 32, "http-batch": 4, "client-batch": 1, "cli-file": 1}
DUE_AHEAD_S = 120.0  # inside the dispatch horizon (queued at once), far enough that the runs end first


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _percentile_ms(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


class RawHttp:
    """One keep-alive HTTP/1.1 connection: send prepared request bytes, read one response."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> RawHttp:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def call(self, request: bytes) -> tuple[int, bytes]:
        self.writer.write(request)
        status = int((await self.reader.readline()).split(b" ", 2)[1])
        length = 0
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


def post(path: str, token: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body  # fmt: skip


def _job(i: int, due: str) -> dict[str, Any]:
    return {"task": "noop", "run_at": due, "params": {"i": i}}


async def _via_client(client: Client, count: int, due: datetime, concurrency: int) -> list[float]:
    """enqueue one at a time, `concurrency` calls in flight."""
    latencies: list[float] = []
    numbers = iter(range(count))

    async def producer() -> None:
        for i in numbers:
            started = time.perf_counter()
            await client.enqueue("noop", {"i": i}, at=due)
            latencies.append(time.perf_counter() - started)

    await asyncio.gather(*(producer() for _ in range(concurrency)))
    return latencies


async def _via_client_batch(client: Client, count: int, due: datetime, batch_size: int) -> list[float]:
    results = await client.enqueue_many(({"task": "noop", "params": {"i": i}, "at": due} for i in range(count)),
                                        batch_size=batch_size)  # fmt: skip
    refused = [r for r in results if not r.ok]
    if refused:
        raise RuntimeError(f"{len(refused)} jobs refused, first: {refused[0]}")
    return []


async def _via_http(port: int, token: str, requests: Iterator[bytes], concurrency: int, expect: int) -> list[float]:
    latencies: list[float] = []
    connections = [await RawHttp.open(port) for _ in range(concurrency)]

    async def sender(http: RawHttp) -> None:
        for request in requests:  # shared by every sender: each takes the next
            started = time.perf_counter()
            status, body = await http.call(request)
            latencies.append(time.perf_counter() - started)
            if status != expect:
                raise RuntimeError(f"HTTP {status}: {body[:300]!r}")

    try:
        await asyncio.gather(*(sender(c) for c in connections))
    finally:
        for http in connections:
            await http.close()
    return latencies


async def _via_cli_file(count: int, due_iso: str, env: dict[str, str]) -> list[float]:
    with tempfile.NamedTemporaryFile("w", suffix=".ndjson", delete=False) as file:
        for i in range(count):
            file.write(json.dumps(_job(i, due_iso)) + "\n")
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "schedulerd", "job", "create", "--from-file", file.name, "--tenant", "bench",
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        out, err = await process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"schedulerd job create --from-file exited {process.returncode}: {err.decode()[-2000:]}")
    finally:
        os.unlink(file.name)
    return []


async def _wait_http(port: int, process: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the API replica exited with status {process.returncode}")
        try:
            http = await RawHttp.open(port)
        except OSError:
            await asyncio.sleep(0.2)
            continue
        status, _ = await http.call(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        await http.close()
        if status == 200:
            return
    raise RuntimeError(f"the API did not answer on port {port} within {timeout_s:g} s")


async def run_ingest(args: argparse.Namespace, admin_url: str, redis_url: str, repo_root: Path) -> dict[str, Any]:
    token_id = uuid.uuid4().hex[:10]
    db_name, prefix = f"schedulerd_bench_{token_id}", f"schedulerd-bench-{token_id}"
    database_url = f"{admin_url.rpartition('/')[0]}/{db_name}"
    env = {**os.environ, "SCHEDULERD_CONFIG": str(repo_root / "config.toml"), "SCHEDULERD_DATABASE_URL": database_url,
           "SCHEDULERD_REDIS_URL": redis_url, "SCHEDULERD_REDIS_PREFIX": prefix, "SCHEDULERD_LOG_LEVEL": "warning",
           "SCHEDULERD_API_RATE_LIMIT": "1000000000"}  # fmt: skip
    env.update({f"SCHEDULERD_{k.upper()}": v for k, v in args.settings})
    concurrency = args.concurrency or DEFAULT_CONCURRENCY[args.via]
    batch_size = args.batch_size or (BATCH_SIZE if args.via == "client-batch" else 1000)
    admin = await asyncpg.connect(admin_url)
    await admin.execute(f'CREATE DATABASE "{db_name}"')
    replica: subprocess.Popen[bytes] | None = None
    log_path = Path(tempfile.mkdtemp(prefix=f"schedulerd-bench-{token_id}-")) / "api.log"
    config = load(repo_root / "config.toml", env)
    client: Client | None = None
    try:
        await migrate(database_url)
        store = await Store.connect(database_url, min_size=1, max_size=2)
        # The task type a worker replica would report: no worker runs here, and the producers
        # import no handlers, as in production.
        await store.task_type_report(["noop"], "bench-ingest")
        token = (await Tenants(store).create("bench")).token
        port, ops_port = _free_port(), _free_port()
        if args.via.startswith("http"):
            api_env = {**env, "SCHEDULERD_API_ENABLED": "true", "SCHEDULERD_API_PORT": str(port),
                       "SCHEDULERD_OPS_ENABLED": "true", "SCHEDULERD_OPS_PORT": str(ops_port),
                       "SCHEDULERD_DAEMON_ROLES": "", "SCHEDULERD_DAEMON_WORKER_ID": "bench-api"}  # fmt: skip
            with log_path.open("wb") as log_file:
                replica = subprocess.Popen([sys.executable, "-m", "schedulerd", "run"], env=api_env, cwd=repo_root,
                                           stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
            await _wait_http(ops_port, replica)  # /healthz is an operator endpoint: on the [ops] listener
        if args.via.startswith("client"):
            client = await Client.connect(config, pool_max=max(4, min(concurrency, 20)))
        queue = DelayQueue.from_config(redis_url, config.redis, timeout_s=10.0)
        runs = []
        for _ in range(args.repeat):
            await store.db.execute("TRUNCATE jobs, executions, attempts, idempotency_keys")
            await queue.delete_all()
            due = await store.clock_now() + timedelta(seconds=DUE_AHEAD_S)
            due_iso = due.isoformat()
            started = time.perf_counter()
            if args.via == "client":
                assert client is not None
                latencies = await _via_client(client, args.count, due, concurrency)
            elif args.via == "client-batch":
                assert client is not None
                latencies = await _via_client_batch(client, args.count, due, batch_size)
            elif args.via == "http":
                requests = (post("/v1/jobs", token, json.dumps(_job(i, due_iso)).encode()) for i in range(args.count))
                latencies = await _via_http(port, token, requests, concurrency, 201)
            elif args.via == "http-batch":
                def batches() -> Iterator[bytes]:
                    for first in range(0, args.count, batch_size):
                        items = [_job(i, due_iso) for i in range(first, min(args.count, first + batch_size))]
                        yield post("/v1/jobs/batch", token, json.dumps({"items": items}).encode())

                latencies = await _via_http(port, token, batches(), concurrency, 200)
            else:
                latencies = await _via_cli_file(args.count, due_iso, env)
            elapsed_s = time.perf_counter() - started
            committed = await store.db.fetchval("SELECT count(*) FROM executions WHERE status = 'queued'")
            in_redis = await queue.depth()
            if committed != args.count or in_redis != args.count:
                raise RuntimeError(f"accepted {args.count} jobs but {committed} are committed and {in_redis} in Redis")
            runs.append({"jobs_per_s": round(args.count / elapsed_s, 1), "elapsed_s": round(elapsed_s, 3),
                         "p50_ms": _percentile_ms(latencies, 0.5), "p99_ms": _percentile_ms(latencies, 0.99)})  # fmt: skip
        await queue.delete_all()
        await queue.close()
        await store.close()
        median = statistics.median(r["jobs_per_s"] for r in runs)
        return {"scenario": "ingest", "via": args.via, "count": args.count, "concurrency": concurrency,
                "batch_size": batch_size if "batch" in args.via else None,
                "jobs_per_s_median": median, "runs": runs, "settings": dict(args.settings)}  # fmt: skip
    finally:
        if client is not None:
            await client.close()
        if replica is not None:
            replica.terminate()
            try:
                replica.wait(timeout=10)
            except subprocess.TimeoutExpired:
                replica.kill()
                replica.wait()
        await admin.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        await admin.close()


def add_parser(scenarios: Any, common: Any) -> None:
    ingest = scenarios.add_parser("ingest", help="jobs/s the front door accepts (committed and in Redis)")
    ingest.add_argument("--via", choices=VIAS, required=True, help="the door: Python client (single or batched), "
                        "HTTP (single or batch), or the CLI's --from-file")  # fmt: skip
    ingest.add_argument("--count", type=int, required=True, help="jobs per run")
    ingest.add_argument("--concurrency", type=int, help="calls in flight (default: client 100, http 32, http-batch 4)")
    ingest.add_argument("--batch-size", type=int, default=None,
                        help="items per batch: client-batch (default: enqueue_many's), http-batch (default 1000, the API's batch_max)")
    ingest.add_argument("--repeat", type=int, default=3, help="runs, each on empty tables; the median is reported")
    common(ingest, suppress=True)
