"""Benchmark harness: K daemon replicas on a throwaway database and Redis prefix, a workload of
`noop` jobs fed through the Python client (or, with --feed sql, bulk-inserted straight into
Postgres), and metrics computed from the rows in Postgres (one JSON line last).
Usage: scripts/bench --quick | steady --rate R --duration S | spike --count N [--priority-probe S] [--concurrency-keys K
[--concurrency-limit L]] | cron --jobs J [--window 60s]
       [--replicas K] [--set KEY=VALUE] [--feed client|sql] [--shards N] [--redis-cluster] [--postgres-formation]
       scripts/bench ingest --via client|client-batch|http|http-batch|cli-file --count N (bench_ingest.py)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import redis.asyncio as aioredis

import bench_ingest  # beside this file: scripts/ is on the path of a script run from it
from bench_machine import calibration_line
from schedulerd.client import Client
from schedulerd.config import JobsConfig
from schedulerd.config import load as load_config
from schedulerd.core.durations import parse_duration_s
from schedulerd.embedded import ScratchServers, scratch_servers
from schedulerd.models import Enqueue
from schedulerd.queue import DelayQueue
from schedulerd.store import migrate

REPO_ROOT = Path(__file__).resolve().parent.parent
# With no SCHEDULERD_TEST_* URLs and no local servers, embedded ones run here for the benchmark.
EMBEDDED_DIR = REPO_ROOT / ".schedulerd-bench"
JOBS = 100  # executions are spread round-robin over this many 'at' jobs

INSERT_JOBS = """
INSERT INTO jobs (id, tenant, name, task, params, schedule_kind, run_at, max_attempts,
                  backoff_base_s, backoff_factor, backoff_max_s, timeout_s)
SELECT gen_random_uuid(), 'bench', 'bench-' || g, 'noop', '{}', 'at', $1, $3, $4, $5, $6, $7
FROM generate_series(0, $2 - 1) g
RETURNING id
"""
# $3: microseconds between consecutive due times (0 for a spike); in a spike, execution g gets
# g / jobs extra microseconds so scheduled_for stays unique per job (UNIQUE (job_id, scheduled_for)).
INSERT_EXECUTIONS = """
INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status)
SELECT schedulerd_execution_id(t), ($4::uuid[])[1 + g % cardinality($4::uuid[])], 'bench', t, t, 'pending'
FROM generate_series(0, $2 - 1) g,
     LATERAL (SELECT $1::timestamptz + make_interval(secs => CASE WHEN $3::float8 > 0
              THEN round(g * $3::float8) ELSE g / cardinality($4::uuid[]) END / 1e6) AS t) s
"""
# The same rows as the API writes a job due within the dispatch horizon: queued at once (the
# caller ZADDs them), so they never wait for the dispatcher.
INSERT_QUEUED_EXECUTIONS = """
INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status, enqueued_at)
SELECT schedulerd_execution_id(t), ($4::uuid[])[1 + g % cardinality($4::uuid[])], 'bench', t, t, 'queued', clock_timestamp()
FROM generate_series(0, $2 - 1) g,
     LATERAL (SELECT $1::timestamptz + make_interval(secs => round(g * $3::float8) / 1e6) AS t) s
RETURNING id, due_at, tenant
"""
INSERT_CRON_JOBS = """
INSERT INTO jobs (id, tenant, name, task, params, schedule_kind, cron, timezone, window_s, max_attempts,
                  backoff_base_s, backoff_factor, backoff_max_s, timeout_s)
SELECT gen_random_uuid(), 'bench', 'bench-cron-' || g, 'noop', '{}', 'cron', '* * * * *', 'UTC', $2, $3, $4, $5, $6, $7
FROM generate_series(0, $1 - 1) g
"""
# Cheap to poll: each EXISTS is a probe of one of the small partial indexes (status alone is in
# none: polled, it read whole partitions on the machine being measured). $1 bounds the due times
# that count (cron jobs keep producing future executions).
UNFINISHED = """
SELECT EXISTS (SELECT 1 FROM executions WHERE lane = 'pending' AND status = 'pending' AND due_at <= $1)
    OR EXISTS (SELECT 1 FROM executions WHERE lane = 'active' AND due_at <= $1)  -- queued or running
    OR EXISTS (SELECT 1 FROM executions WHERE lane = 'limited')
"""
# Over the executions scheduled in [$1, $2). Lag is measured from due_at, which is scheduled_for
# unless the job is smeared (then the smear offset is intended delay, not lag).
RESULTS = """
SELECT count(*) AS executions,
       count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       count(*) FILTER (WHERE status NOT IN ('succeeded', 'failed')) AS unfinished,
       count(*) FILTER (WHERE first_started_at IS NULL AND due_at <= clock_timestamp()) AS lost,
       count(*) FILTER (WHERE attempt > 1) AS duplicates,
       count(first_started_at) AS started,
       extract(epoch FROM max(first_started_at) - min(first_started_at)) AS start_span_s,
       1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM first_started_at - due_at)) AS lag_p50_ms,
       1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM first_started_at - due_at)) AS lag_p99_ms,
       1000 * max(extract(epoch FROM first_started_at - due_at)) AS lag_max_ms,
       extract(epoch FROM max(finished_at) - max(due_at)) AS drain_s
FROM executions WHERE scheduled_for >= $1 AND scheduled_for < $2
"""
# Attempt rows beyond one per execution: an attempt that was abandoned (lease expired) or failed.
EXTRA_ATTEMPTS = "SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM attempt_history GROUP BY execution_id) a"
LEASE_RECLAIMS = "SELECT count(*) FROM attempts WHERE outcome = 'lease_expired'"
# Log lines that fail the gate whatever the figures say: a write that deadlocked, a lease taken
# from a live worker, anything logged as an error, a traceback.
_ALARMING = re.compile(r'Deadlock|lease_expired|"level": ?"(error|critical|exception)"|Traceback')


@dataclass
class Workload:
    scenario: str
    count: int  # one-off executions, or cron jobs
    spacing_us: float  # between consecutive due times; 0 = all at once
    duration_s: float  # last due time minus the first
    window_s: float = 0.0  # cron: smearing window


@dataclass
class Replica:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    cpu_at_ready_s: float = 0.0
    rss_kb_at_ready: int = 0


def _with_database(url: str, name: str) -> str:
    """The URL naming database `name` instead (its query, e.g. target_session_attrs, kept)."""
    address, mark, query = url.partition("?")
    base, _, _ = address.rpartition("/")
    return f"{base}/{name}{mark}{query}"


def _port(url: str, default: int) -> int:
    return urlsplit(url).port or default


def _start_formation(directory: Path) -> Any:
    """A throwaway pg_auto_failover formation: monitor, primary, synchronous secondary
    (tests/fault/formation.py, so a source checkout only)."""
    sys.path.insert(0, str(REPO_ROOT))
    from tests.fault.formation import PACKAGES, Formation, tools_present

    if not tools_present():
        raise RuntimeError(f"--postgres-formation needs pg_auto_failover (Debian: {PACKAGES}; scripts/install)")
    directory.mkdir(parents=True, exist_ok=True)
    formation = Formation(directory)
    try:
        formation.start()
    except BaseException:
        formation.stop()
        raise
    return formation


def _proc_status_kb(pid: int, field: str) -> int:
    """A kB value from /proc/<pid>/status (e.g. VmHWM, the peak resident set size)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds used so far by a process (from /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _backend_cpu_s(pids: list[int]) -> dict[int, float]:
    """CPU seconds of these Postgres backends (those we cannot read are left out)."""
    cpu = {}
    for pid in pids:
        try:
            cpu[pid] = _cpu_s(pid)
        except OSError:
            pass
    return cpu


async def _server_cpu(db: asyncpg.Connection, nodes: list[aioredis.Redis]) -> tuple[dict[int, float], list[float]]:
    """(CPU per Postgres backend serving this database, each Redis server's user+sys CPU seconds)."""
    query = "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    pids = await db.fetch(query)
    infos = [await node.info("cpu") for node in nodes]
    return _backend_cpu_s([r["pid"] for r in pids]), [float(i["used_cpu_user"]) + float(i["used_cpu_sys"]) for i in infos]


def _start_cluster(directory: Path) -> Any:
    """A throwaway 3-master Redis Cluster (tests/fault/cluster.py, so a source checkout only)."""
    sys.path.insert(0, str(REPO_ROOT))
    from tests.fault.cluster import RedisClusterServers, tools_present

    if not tools_present():
        raise RuntimeError("--redis-cluster needs Debian's redis-server and redis-cli (scripts/install)")
    cluster = RedisClusterServers(directory, masters=3, replicas_per_master=0)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _connected(pid: int, ports: set[int]) -> bool:
    """Whether the process holds an established TCP connection to every one of these ports."""
    import psutil

    try:
        conns = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.Error:
        return False
    return ports <= {c.raddr.port for c in conns if c.raddr and c.status == psutil.CONN_ESTABLISHED}


def start_replicas(
    k: int, database_url: str, redis_url: str, prefix: str, settings: dict[str, str], log_dir: Path
) -> list[Replica]:
    """Start `schedulerd run` k times, each in its own session, logging to log_dir/bench-N.log."""
    replicas = []
    for n in range(1, k + 1):
        env = {
            **os.environ,
            "SCHEDULERD_CONFIG": str(REPO_ROOT / "config.toml"),
            "SCHEDULERD_DATABASE_URL": database_url,
            "SCHEDULERD_REDIS_URL": redis_url,
            "SCHEDULERD_REDIS_PREFIX": prefix,
            "SCHEDULERD_DAEMON_WORKER_ID": f"bench-{n}",
            "SCHEDULERD_LOG_LEVEL": "warning",
            "SCHEDULERD_LOG_FORMAT": "json",
            "SCHEDULERD_API_ENABLED": "false",  # replicas on one host would share [api].port
            "SCHEDULERD_OPS_ENABLED": "false",  # ... and [ops].port
            **settings,
        }
        log_path = log_dir / f"bench-{n}.log"
        with log_path.open("wb") as log_file:
            process = subprocess.Popen(
                [sys.executable, "-m", "schedulerd", "run"], env=env, cwd=REPO_ROOT,
                stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,  # Ctrl-C reaches only us
            )  # fmt: skip
        replicas.append(Replica(f"bench-{n}", process, log_path))
    return replicas


def stop_replicas(replicas: list[Replica]) -> None:
    """SIGTERM, then SIGKILL whatever is still there after 5 s."""
    for r in replicas:
        if r.process.poll() is None:
            r.process.terminate()
    deadline = time.monotonic() + 5
    for r in replicas:
        try:
            r.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            r.process.kill()
            r.process.wait()


def alarming_lines(replicas: list[Replica]) -> list[str]:
    """The replicas' log lines that fail the gate (_ALARMING), each prefixed with its replica."""
    found = []
    for r in replicas:
        for line in r.log_path.read_text(errors="replace").splitlines():
            if _ALARMING.search(line):
                found.append(f"{r.name}: {line[:300]}")
    return found


def _check_alive(replicas: list[Replica]) -> None:
    for r in replicas:
        if r.process.poll() is not None:
            tail = r.log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"replica {r.name} exited with status {r.process.returncode}; log tail:\n{tail}")


async def wait_ready(replicas: list[Replica], ports: set[int], timeout_s: float = 60.0) -> None:
    """Wait until every replica is connected to Postgres and Redis (its loops are running)."""
    deadline = time.monotonic() + timeout_s
    while not all(_connected(r.process.pid, ports) for r in replicas):
        _check_alive(replicas)
        if time.monotonic() > deadline:
            raise RuntimeError(f"replicas not connected to Postgres and Redis after {timeout_s:g} s")
        await asyncio.sleep(0.2)


async def _feed(
    database_url: str, queue: DelayQueue, t0: datetime, workload: Workload, job_ids: list[Any], ahead_s: float
) -> None:
    """Insert a steady workload one second at a time, each second `ahead_s` before it is due,
    as the API does: committed as queued, then added to the delay queue."""
    db = await asyncpg.connect(database_url)
    try:
        async for slice_start, count in _seconds_of(t0, workload, ahead_s):
            rows = await db.fetch(INSERT_QUEUED_EXECUTIONS, slice_start, count, workload.spacing_us, job_ids)
            await queue.add([Enqueue(r["id"], r["due_at"], r["tenant"]) for r in rows], only_new=True)
    finally:
        await db.close()


async def _seconds_of(t0: datetime, workload: Workload, ahead_s: float) -> AsyncIterator[tuple[datetime, int]]:
    """Each second of a steady workload (its first due time, how many fall due in it), handed
    out `ahead_s` before it begins, as a live system writes its work ahead."""
    rate = 1e6 / workload.spacing_us
    written, second = 0, 0
    while written < workload.count:
        slice_start = t0 + timedelta(seconds=second)
        wait_s = (slice_start - timedelta(seconds=ahead_s) - datetime.now(t0.tzinfo)).total_seconds()
        if wait_s > 0:
            await asyncio.sleep(wait_s)
        count = min(round(rate), workload.count - written)
        yield slice_start, count
        written, second = written + count, second + 1


async def _feed_client(client: Client, t0: datetime, workload: Workload, ahead_s: float) -> None:
    """The steady feed through the front door: each second's one-off jobs enqueued `ahead_s`
    before they fall due, with enqueue_many (one job per execution, as users make them)."""
    async for slice_start, count in _seconds_of(t0, workload, ahead_s):
        await _enqueue_all(client, [
            {"task": "noop", "tenant": "bench", "at": slice_start + timedelta(microseconds=round(i * workload.spacing_us))}
            for i in range(count)
        ])  # fmt: skip


PROBE_MIN_S = 1.5  # a probe is enqueued past the spike's measured window [t0, t0 + 1 s)


async def _priority_probe(client: Client, at: datetime) -> dict[str, Any]:
    """At `at` (mid-spike), enqueue a priority-9 one-off and, beside it, a priority-5 one (the
    control), both through the client; their ids, for the lag read after the run."""
    wait_s = (at - datetime.now(at.tzinfo)).total_seconds()
    if wait_s > 0:
        await asyncio.sleep(wait_s)
    urgent = await client.enqueue("noop", tenant="bench", priority=9)
    control = await client.enqueue("noop", tenant="bench")
    return {"urgent": urgent.execution_id, "control": control.execution_id}


async def _probe_result(db: asyncpg.Connection, ids: dict[str, Any]) -> dict[str, Any]:
    """Each probe's start lag (first start minus due time, ms; None: it had not started when the
    spike drained) and how many of the spike's executions were still waiting when it started."""
    result: dict[str, Any] = {}
    for name, execution_id in ids.items():
        row = await db.fetchrow("SELECT first_started_at, due_at, 1000 * extract(epoch FROM first_started_at - due_at) "
                                "AS lag_ms FROM executions WHERE id = $1", execution_id)  # fmt: skip
        result[f"priority_probe_{name}_lag_ms"] = None if row["lag_ms"] is None else round(float(row["lag_ms"]), 1)
        if name == "urgent" and row["first_started_at"] is not None:
            result["priority_probe_backlog_behind"] = await db.fetchval(
                "SELECT count(*) FROM executions WHERE id <> ALL($1::uuid[]) AND due_at <= $2 "
                "AND (first_started_at IS NULL OR first_started_at > $3)", list(ids.values()), row["due_at"],
                row["first_started_at"],
            )  # fmt: skip
    return result


async def _enqueue_all(client: Client, requests: list[dict[str, Any]]) -> None:
    refused = [r for r in await client.enqueue_many(requests) if not r.ok]
    if refused:
        raise RuntimeError(f"the client refused {len(refused)} of the workload's jobs, first: {refused[0]}")


async def run_bench(args: argparse.Namespace, workload: Workload, servers: ScratchServers) -> dict[str, Any]:
    """Set up, run the workload, measure, tear down. Metrics come from the rows in Postgres:

    lost: due but never started (first_started_at IS NULL). duplicates: executions started more
    than once (attempt > 1; noop never fails, so any retry is a redelivery); extra_attempts:
    attempts rows beyond one per execution (abandoned or failed attempts). lag_*_ms:
    first_started_at - scheduled_for. throughput_per_s: executions started / (last first start -
    first first start), i.e. the start rate sustained over the run; for steady it is capped by
    the offered rate, for spike it is the capacity. drain_s: last finished_at - last
    scheduled_for. rss_mb_max: largest replica's peak RSS (VmHWM, MiB); rss_mb_idle: the largest
    RSS when ready, before any work. cpu_s: all replicas' user+sys CPU seconds over their
    lifetime (cpu_workload_s: since they were ready).
    pg_cpu_s: CPU seconds of the Postgres backends serving the bench database, from ready to the
    end; redis_cpu_s: the whole Redis server's CPU seconds meanwhile (shared: others count too).
    """
    admin_url, redis_url = servers.admin_url, servers.redis_url
    token = uuid.uuid4().hex[:10]
    db_name, prefix = f"schedulerd_bench_{token}", f"schedulerd-bench-{token}"
    log_dir = Path(tempfile.mkdtemp(prefix=f"schedulerd-bench-{token}-"))
    formation = None
    postgres_port = _port(admin_url, 5432)
    if args.postgres_formation:  # every node named; the pools keep to the primary
        formation = _start_formation(Path(tempfile.mkdtemp(prefix=f"schedulerd-bench-paf-{token}-")))
        admin_url, postgres_port = _with_database(formation.url, "postgres"), formation.primary().port
    database_url = _with_database(admin_url, db_name)
    if args.shards is not None:
        args.settings = [*args.settings, ("REDIS_SHARDS", str(args.shards))]
    cluster = None
    if args.redis_cluster:
        cluster = _start_cluster(log_dir / "redis-cluster")
        redis_url = cluster.url
        args.settings = [*args.settings, ("REDIS_CLUSTER", "true")]
    settings = {f"SCHEDULERD_{k.upper()}": v for k, v in args.settings}
    replicas: list[Replica] = []
    admin = await asyncpg.connect(admin_url)
    db: asyncpg.Connection | None = None
    rds = aioredis.from_url(redis_url)
    nodes = [aioredis.from_url(f"redis://127.0.0.1:{n.port}") for n in cluster.nodes] if cluster else [rds]
    shards = int(settings.get("SCHEDULERD_REDIS_SHARDS", "1"))
    queue = DelayQueue.connect(redis_url, prefix, timeout_s=10.0, shards=shards, cluster=cluster is not None)
    client: Client | None = None
    created = False
    try:
        await admin.execute(f'CREATE DATABASE "{db_name}"')
        created = True
        await migrate(database_url)
        db = await asyncpg.connect(database_url)
        replicas = start_replicas(args.replicas, database_url, redis_url, prefix, settings, log_dir)
        await wait_ready(replicas, {postgres_port, _port(redis_url, 6379)})
        for r in replicas:
            r.cpu_at_ready_s = _cpu_s(r.process.pid)
            r.rss_kb_at_ready = _proc_status_kb(r.process.pid, "VmRSS")
        pg_cpu_before, redis_cpu_before = await _server_cpu(db, nodes)
        probing = workload.scenario == "spike" and getattr(args, "priority_probe", None) is not None
        if args.feed == "client" or probing:  # the task types the replicas reported are what the client checks against
            client_environ = {"SCHEDULERD_DATABASE_URL": database_url, "SCHEDULERD_REDIS_URL": redis_url,
                              "SCHEDULERD_REDIS_PREFIX": prefix, **settings}  # fmt: skip
            client = await Client.connect(load_config(REPO_ROOT / "config.toml", client_environ))

        # Write the workload: due times start `lead_s` from now, so start-up is not measured.
        jobs = JobsConfig()
        retry = (jobs.max_attempts, jobs.backoff_base_s, jobs.backoff_factor, jobs.backoff_max_s, jobs.timeout_s)
        insert_started = time.monotonic()
        t0: datetime = await db.fetchval("SELECT clock_timestamp() + make_interval(secs => $1)", args.lead)
        if workload.scenario == "cron":
            # Measure whole minutes of occurrences, starting at the first minute after the lead.
            if client is not None:
                await _enqueue_all(client, [{"task": "noop", "tenant": "bench", "name": f"bench-cron-{i}", "cron": "* * * * *",
                                             "window": workload.window_s} for i in range(workload.count)])  # fmt: skip
            else:
                await db.execute(INSERT_CRON_JOBS, workload.count, workload.window_s, *retry)
            t0 = t0.replace(second=0, microsecond=0) + timedelta(minutes=1)
            t_end = t0 + timedelta(seconds=workload.duration_s)
            expected = workload.count * round(workload.duration_s / 60)
        elif workload.scenario == "steady":
            # Written as a live system writes them: each second's executions `lead` seconds
            # before they fall due, queued at once as the API does within the dispatch horizon.
            if client is not None:
                feeder = asyncio.create_task(_feed_client(client, t0, workload, args.lead))
            else:
                job_ids = [row["id"] for row in await db.fetch(INSERT_JOBS, t0, JOBS, *retry)]
                feeder = asyncio.create_task(_feed(database_url, queue, t0, workload, job_ids, args.lead))
            t_end, expected = t0 + timedelta(seconds=workload.duration_s + 1), workload.count
        else:
            if client is not None and args.feed == "client":
                keys, limit = getattr(args, "concurrency_keys", None), getattr(args, "concurrency_limit", None)
                keyed = {} if not keys else {"concurrency_limit": limit or workload.count}
                await _enqueue_all(client, [
                    {"task": "noop", "tenant": "bench", "at": t0, **keyed, **({"concurrency_key": f"k{i % keys}"} if keys else {})}
                    for i in range(workload.count)
                ])  # fmt: skip
            else:
                job_ids = [row["id"] for row in await db.fetch(INSERT_JOBS, t0, min(JOBS, workload.count), *retry)]
                await db.execute(INSERT_EXECUTIONS, t0, workload.count, workload.spacing_us, job_ids)
            t_end, expected = t0 + timedelta(seconds=workload.duration_s + 1), workload.count
        if workload.scenario == "steady":
            await feeder  # re-raises a failed insert
        probe = None
        if probing:
            assert client is not None
            probe = asyncio.create_task(_priority_probe(client, t0 + timedelta(seconds=args.priority_probe)))
        insert_s = time.monotonic() - insert_started
        while await db.fetchval("SELECT count(*) FROM executions WHERE lane = 'pending' AND status = 'pending' AND due_at <= $1", t_end):
            await asyncio.sleep(0.1)
        dispatched_s = time.monotonic() - insert_started
        if dispatched_s > args.lead and workload.scenario == "spike":
            print(f"bench: warning: inserting and dispatching took {dispatched_s:.1f} s, more than the "
                  f"{args.lead:g} s lead: early lag includes it (raise --lead)", file=sys.stderr)  # fmt: skip

        # Wait for every execution to be final, or for the last due time plus the drain timeout.
        deadline = time.monotonic() + (t_end - datetime.now(t_end.tzinfo)).total_seconds() + workload.window_s + args.drain_timeout
        while time.monotonic() < deadline:
            _check_alive(replicas)
            if datetime.now(t_end.tzinfo) > t_end + timedelta(seconds=workload.window_s) and not await db.fetchval(
                UNFINISHED, t_end + timedelta(seconds=workload.window_s)
            ):
                break
            await asyncio.sleep(0.5)
        crashed = [r.name for r in replicas if r.process.poll() is not None]
        probed = await _probe_result(db, await probe) if probe is not None else {}

        # Process metrics before anything is killed.
        alive = [r for r in replicas if r.process.poll() is None]
        rss_mb_max = max((_proc_status_kb(r.process.pid, "VmHWM") for r in alive), default=0) / 1024
        cpu_s = sum(_cpu_s(r.process.pid) for r in alive)
        cpu_workload_s = cpu_s - sum(r.cpu_at_ready_s for r in alive)
        pg_cpu_after, redis_cpu_after = await _server_cpu(db, nodes)
        pg_cpu_s = sum(cpu - pg_cpu_before.get(pid, 0.0) for pid, cpu in pg_cpu_after.items())

        stop_replicas(replicas)  # their shutdown (drain, hand-back) is part of what the logs must show clean
        alarming = alarming_lines(replicas)
        row = dict(await db.fetchrow(RESULTS, t0, t_end))
        row["lost"] += max(0, expected - row["executions"])  # occurrences never even written
        extra_attempts = await db.fetchval(EXTRA_ATTEMPTS)
        lease_reclaims = await db.fetchval(LEASE_RECLAIMS)
        span = row.pop("start_span_s")
        started = row.pop("started")
        result: dict[str, Any] = {
            "scenario": workload.scenario,
            "replicas": args.replicas,
            **({"rate": args.rate, "duration": args.duration} if workload.scenario == "steady" else {}),
            **({"count": args.count} if workload.scenario == "spike" else {}),
            **({"jobs": args.jobs, "window_s": workload.window_s, "minutes": args.minutes, "expected": expected}
               if workload.scenario == "cron" else {}),
            "settings": dict(args.settings),
            "feed": args.feed,
            **{k: (v if isinstance(v, int) or v is None else round(float(v), 1 if k.endswith("_ms") else 3))
               for k, v in row.items()},
            "extra_attempts": int(extra_attempts),
            "lease_reclaims": int(lease_reclaims),
            "alarming_log_lines": len(alarming),
            "alarming_log_sample": alarming[:5],
            "throughput_per_s": round(started / float(span), 1) if span else None,
            "rss_mb_max": round(rss_mb_max, 1),
            "rss_mb_idle": round(max((r.rss_kb_at_ready for r in replicas), default=0) / 1024, 1),
            "cpu_s": round(cpu_s, 2),
            "cpu_workload_s": round(cpu_workload_s, 2),
            "pg_cpu_s": round(pg_cpu_s, 2),
            "redis_cpu_s": round(sum(redis_cpu_after) - sum(redis_cpu_before), 2),
            "redis_cpu_s_by_node": [round(a - b, 2) for a, b in zip(redis_cpu_after, redis_cpu_before)],
            "shards": shards,
            "redis_cluster": cluster is not None,
            "postgres_formation": formation is not None,
            "insert_s": round(insert_s, 2),
            "dispatched_s": round(dispatched_s, 2),
            "crashed": crashed,
            **probed,
            "run_id": token,  # database schedulerd_bench_<run_id>, Redis prefix schedulerd-bench-<run_id>
            "logs": str(log_dir),
        }  # fmt: skip
        return result
    finally:
        if client is not None:
            await client.close()
        stop_replicas(replicas)
        if db is not None:
            await db.close()
        if created and args.keep_db:
            print(f"bench: kept database {database_url}", file=sys.stderr)
        elif created:
            await admin.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        await admin.close()
        if cluster is None:
            for pattern in (f"{{{prefix}}}*", f"{{{prefix}:*", f"{prefix}*"):
                keys = [key async for key in rds.scan_iter(match=pattern)]
                if keys:
                    await rds.delete(*keys)
        await rds.aclose()
        for node in nodes[1:] if cluster is None else nodes:
            await node.aclose()
        await queue.close()
        if cluster is not None:
            cluster.stop()
        if formation is not None:
            formation.stop()


def _setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", key):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (e.g. WORKER_CONCURRENCY=256), got {text!r}")
    return key.upper(), value


def _parser() -> argparse.ArgumentParser:
    def common(p: argparse.ArgumentParser, suppress: bool) -> None:
        # Defaults live on the top-level parser only, so options given before the scenario survive.
        d = (lambda v: argparse.SUPPRESS) if suppress else (lambda v: v)
        p.add_argument("--replicas", type=int, default=d(2), help="daemon processes to start (default 2)")
        p.add_argument("--set", dest="settings", type=_setting, action="append", default=d([]), metavar="KEY=VALUE",
                       help="daemon setting, passed as env SCHEDULERD_KEY=VALUE (repeatable)")  # fmt: skip
        p.add_argument("--lead", type=float, default=d(5.0),
                       help="seconds between writing executions and their due time (steady: per second of load)")
        p.add_argument("--drain-timeout", type=float, default=d(120.0),
                       help="seconds after the last due time to wait for every execution to finish")  # fmt: skip
        p.add_argument("--keep-db", action="store_true", default=d(False), help="keep the database for inspection")
        p.add_argument("--shards", type=int, default=d(None), help="delay-queue shards ([redis].shards; default: config's)")
        p.add_argument("--postgres-formation", action="store_true", default=d(False),
                       help="Postgres on a throwaway pg_auto_failover formation (primary + synchronous secondary)")
        p.add_argument("--redis-cluster", action="store_true", default=d(False),
                       help="run on a throwaway 3-master Redis Cluster started for the run (Redis CPU per node)")  # fmt: skip
        p.add_argument("--feed", choices=["client", "sql"], default=d("client"),
                       help="write the workload through the Python client, as users do (default), or straight "
                            "into Postgres with SQL, for comparison with the engine alone")  # fmt: skip

    parser = argparse.ArgumentParser(
        prog="scripts/bench", description="Benchmark schedulerd: K replicas, a bulk-inserted noop workload, metrics from Postgres."
    )
    common(parser, suppress=False)
    parser.add_argument(
        "--quick", action="store_true", help="CI smoke test: steady 500/s for 5 s; fails on lost or duplicates"
    )
    scenarios = parser.add_subparsers(dest="scenario", metavar="{steady,spike,cron,gate,ingest}")
    steady = scenarios.add_parser("steady", help="R*S one-off executions due uniformly at R per second")
    steady.add_argument("--rate", type=float, required=True, help="executions due per second")
    steady.add_argument("--duration", type=float, required=True, help="seconds over which they fall due")
    spike = scenarios.add_parser("spike", help="N executions due at the same instant")
    spike.add_argument("--count", type=int, required=True)
    spike.add_argument("--priority-probe", type=float, metavar="S", default=None,
                       help=f"S seconds after the spike falls due (at least {PROBE_MIN_S:g}), enqueue a priority-9 "
                       "one-off and a priority-5 one beside it; report each one's start lag and the backlog the 9 "
                       "passed (priority_probe_*)")
    spike.add_argument("--concurrency-keys", type=int, metavar="K", default=None,
                       help="give the jobs K concurrency keys (round robin): every execution takes the claim under "
                       "its key's lock (docs/tasks.md \"Concurrency limits\")")
    spike.add_argument("--concurrency-limit", type=int, metavar="L", default=None,
                       help="with --concurrency-keys: each key's limit (default: the count, so none waits)")
    cron = scenarios.add_parser("cron", help="J every-minute cron jobs, measured over whole minutes")
    cron.add_argument("--jobs", type=int, required=True)
    cron.add_argument("--window", default="0s", help="smearing window per job, e.g. 60s (default: exact time)")
    cron.add_argument("--minutes", type=int, default=3, help="minutes of occurrences to measure")
    gate = scenarios.add_parser(
        "gate", help=f"CI's correctness gate: spike {GATE_SPIKE:,} then steady {GATE_RATE:,.0f}/s for {GATE_SECONDS:g} s; "
        "fails on anything lost, any extra attempt or lease reclaim, any error line in the replicas' logs",
    )  # fmt: skip
    for p in (steady, spike, cron, gate):
        common(p, suppress=True)
    bench_ingest.add_parser(scenarios, common)
    return parser


GATE_SPIKE = 50_000
GATE_RATE, GATE_SECONDS = 5_000.0, 20.0


def gate_failures(result: dict[str, Any]) -> list[str]:
    """What makes a run fail the gate: correctness only, never an absolute speed."""
    checks = {
        "lost": result["lost"], "unfinished": result["unfinished"], "started more than once": result["duplicates"],
        "extra attempts": result["extra_attempts"], "lease reclaims": result["lease_reclaims"],
        "alarming log lines": result["alarming_log_lines"], "replicas crashed": len(result["crashed"]),
    }  # fmt: skip
    return [f"{name}: {value}" for name, value in checks.items() if value]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.quick and args.scenario is None:
        args.scenario, args.rate, args.duration = "steady", 500.0, 5.0
    if args.scenario is None:
        print("bench: give a scenario (steady, spike, cron, ingest) or --quick", file=sys.stderr)
        return 2
    if args.scenario == "ingest":
        return _main_ingest(args)
    if args.scenario == "steady":
        count = round(args.rate * args.duration)
        workload = Workload("steady", count, 1e6 / args.rate, (count - 1) / args.rate)
    elif args.scenario == "cron":
        workload = Workload("cron", args.jobs, 0.0, 60.0 * args.minutes, parse_duration_s(args.window))
        # A short horizon keeps the rows written ahead proportional to the run, and a frequent
        # materialiser picks the new jobs up quickly; --set overrides either.
        args.settings = [("MATERIALISER_HORIZON_S", "180"), ("MATERIALISER_INTERVAL_S", "5"), *args.settings]
    elif args.scenario == "gate":
        workload = Workload("gate", GATE_SPIKE, 0.0, 0.0)
    else:
        workload = Workload("spike", args.count, 0.0, 0.0)
        if args.priority_probe is not None and args.priority_probe < PROBE_MIN_S:
            print(f"bench: --priority-probe must be at least {PROBE_MIN_S:g} s (past the spike's measured second)",
                  file=sys.stderr)  # fmt: skip
            return 2
    if workload.count < 1 or args.replicas < 1:
        print("bench: the workload and --replicas must be at least 1", file=sys.stderr)
        return 2

    def on_sigterm(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # unwinds through run_bench's finally, like Ctrl-C

    signal.signal(signal.SIGTERM, on_sigterm)
    runs = [workload] if workload.scenario != "gate" else [
        Workload("spike", GATE_SPIKE, 0.0, 0.0),
        Workload("steady", round(GATE_RATE * GATE_SECONDS), 1e6 / GATE_RATE, GATE_SECONDS - 1 / GATE_RATE),
    ]  # fmt: skip
    failed = False
    with scratch_servers(EMBEDDED_DIR) as servers:
        print(f"bench: servers: {servers.describe()}", flush=True)
        print(calibration_line(servers.admin_url), flush=True)
        for run in runs:
            if workload.scenario == "gate" and run.scenario == "steady":
                args.rate, args.duration = GATE_RATE, GATE_SECONDS
            elif workload.scenario == "gate":
                args.count = run.count
            try:
                result = asyncio.run(run_bench(args, run, servers))
            except KeyboardInterrupt:
                print("bench: interrupted; replicas, database and Redis keys cleaned up", file=sys.stderr)
                return 130
            except RuntimeError as exc:  # a replica died or never came up; cleanup has run
                print(f"bench: error: {exc}", file=sys.stderr)
                return 1
            _report(result)
            failures = gate_failures(result)
            if failures and workload.scenario == "gate":
                print(f"gate: {run.scenario} FAILED: {'; '.join(failures)}")
                for line in result["alarming_log_sample"]:
                    print(f"  {line}")
            failed = failed or bool(failures)
    if workload.scenario == "gate" and not failed:
        print("gate: passed (spike and steady: nothing lost, no extra attempt, no lease reclaim, clean logs)")
    return 1 if failed else 0


def _report(r: dict[str, Any]) -> None:
    print(f"{r['scenario']}: {r['executions']} executions on {r['replicas']} replica(s): "
          f"{r['succeeded']} succeeded, {r['failed']} failed, {r['unfinished']} unfinished, "
          f"{r['lost']} lost, {r['duplicates']} started more than once")  # fmt: skip
    print(f"throughput {r['throughput_per_s']}/s; start lag p50 {r['lag_p50_ms']} ms, p99 {r['lag_p99_ms']} ms, "
          f"max {r['lag_max_ms']} ms; drained {r['drain_s']} s after the last due time")  # fmt: skip
    print(f"largest replica peak RSS {r['rss_mb_max']} MB ({r['rss_mb_idle']} MB idle when ready); "
          f"CPU {r['cpu_s']} s in all ({r['cpu_workload_s']} s after start-up); "
          f"Postgres backends {r['pg_cpu_s']} s, Redis {r['redis_cpu_s']} s "
          f"(by node {r['redis_cpu_s_by_node']}; {r['shards']} shard(s){', cluster' if r['redis_cluster'] else ''})"
          f"{'; Postgres: a pg_auto_failover formation' if r.get('postgres_formation') else ''}; "
          f"logs in {r['logs']}")  # fmt: skip
    if r["crashed"]:
        print(f"replicas that exited during the run: {', '.join(r['crashed'])}")
    if "priority_probe_urgent_lag_ms" in r:
        print(f"priority probe: the 9 started {r['priority_probe_urgent_lag_ms']} ms after its due time, past "
              f"{r.get('priority_probe_backlog_behind')} due executions; the 5 beside it "
              f"{r['priority_probe_control_lag_ms']} ms")  # fmt: skip
    print(f"extra attempts {r['extra_attempts']}, lease reclaims {r['lease_reclaims']}, "
          f"alarming log lines {r['alarming_log_lines']}")  # fmt: skip
    print(json.dumps(r), flush=True)


def _main_ingest(args: argparse.Namespace) -> int:
    if args.count < 1 or args.repeat < 1 or any(v is not None and v < 1 for v in (args.batch_size, args.concurrency)):
        print("bench: --count, --repeat, --batch-size and --concurrency must be at least 1", file=sys.stderr)
        return 2
    with scratch_servers(EMBEDDED_DIR) as servers:
        print(f"bench: servers: {servers.describe()}", flush=True)
        print(calibration_line(servers.admin_url), flush=True)
        try:
            result = asyncio.run(bench_ingest.run_ingest(args, servers.admin_url, servers.redis_url, REPO_ROOT))
        except KeyboardInterrupt:
            print("bench: interrupted; the database was dropped", file=sys.stderr)
            return 130
        except RuntimeError as exc:
            print(f"bench: error: {exc}", file=sys.stderr)
            return 1
    runs = ", ".join(f"{r['jobs_per_s']:,.0f}" for r in result["runs"])
    latency = result["runs"][-1]
    print(f"ingest via {result['via']}: {result['count']} jobs per run, median {result['jobs_per_s_median']:,.0f} jobs/s "
          f"accepted (committed and in Redis); runs: {runs} jobs/s"
          + (f"; last run's latency p50 {latency['p50_ms']} ms, p99 {latency['p99_ms']} ms" if latency["p50_ms"] else ""))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
