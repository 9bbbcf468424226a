"""The daemon: one asyncio process hosting the configured loops; supervises them as named tasks.

Transient Postgres/Redis errors are retried with capped exponential backoff inside each loop
(a restarting server must not crash-loop the fleet); anything else stops the process so systemd
restarts it (fail fast). A process refuses to start beside a live one holding its worker id.
"""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog

from schedulerd import __version__, clock, health, systemd, task_types, tracing, tzchange, tzdb
from schedulerd.config import Config
from schedulerd.dispatcher import Dispatcher
from schedulerd.errors import DuplicateWorkerError
from schedulerd.keyring import Keyring
from schedulerd.listeners import bind, check_free
from schedulerd.materialiser import Materialiser
from schedulerd.notifier import Notifier
from schedulerd.observer import Observer, replica_roles
from schedulerd.queue import DelayQueue
from schedulerd.retention import Retention
from schedulerd.servers import Servers, connect, resolve
from schedulerd.signing_keys import Signer
from schedulerd.store import Store, migrate
from schedulerd.sweeper import Sweeper
from schedulerd.tasks import http, loader
from schedulerd.tenant_quotas import QuotaRefresh
from schedulerd.tenant_secrets import TenantSecrets
from schedulerd.transient import TRANSIENT_ERRORS
from schedulerd.worker import Worker

log = structlog.get_logger("schedulerd.daemon")


async def serve(config: Config, servers: Servers, stop: asyncio.Event) -> None:
    """Run the configured loops until `stop` is set or one of them fails."""
    loader.load_modules(config.daemon.task_modules)
    if config.daemon.migrate_on_start:
        applied = await migrate(servers.database_url)
        if applied:
            log.info("daemon.migrated", applied=applied)
    store, queue = await connect(
        config, servers, pool_min=config.database.pool_min, pool_max=config.database.pool_max,
        read_url=config.database.read_url, worker_pool="worker" in config.daemon.roles,
    )  # fmt: skip
    try:
        configure_http(config, store)
        worker_id = config.daemon.resolved_worker_id()
        # Before anything runs: a second live process with this id would adopt this one's rows.
        await claim_worker_id(
            store, worker_id, replica_roles(config), __version__, datetime.now(UTC), down_after_s=config.late.down_after_s
        )
        await clock.report_skew(store)  # a host clock far from Postgres's is worth a warning (nothing depends on it)
        if "worker" in config.daemon.roles:  # before anything runs: producers check task names against these
            await task_types.report(store, worker_id)
        services = build_loops(config, store, queue, worker_id)
        if "quotas" in services:  # the worker's first claim already judges by the quotas set at runtime
            await services["quotas"].run_once()
        if "materialiser" in services:
            await catch_up(config, store, queue, worker_id, services["materialiser"])
        services.update(open_listeners(config, store, queue))
        services["observer"] = Observer(store, queue, config, worker_id)
        await supervise(config, services, worker_id, stop)
    finally:
        await http.close()
        await queue.close()
        await store.close()


def configure_http(config: Config, store: Store) -> None:
    """The http task's settings, and what it opens tenant secrets and signs requests with."""
    keyring = Keyring.from_settings(config.secrets.key, config.secrets.previous_keys)
    http.configure(config.http, TenantSecrets(store, keyring, config.secrets), Signer.from_config(store, config.secrets))


def build_loops(config: Config, store: Store, queue: DelayQueue, worker_id: str) -> dict[str, Any]:
    """The loops of the configured roles, by role, built but not started."""
    services: dict[str, Any] = {}
    if "materialiser" in config.daemon.roles:
        services["materialiser"] = Materialiser(
            store, queue, config.materialiser, dispatch_horizon_s=config.dispatcher.horizon_s, late_config=config.late
        )
    # Built whatever the roles: the worker asks it to reconcile when it loses its epoch.
    sweeper = Sweeper(
        store, queue, config.sweeper, down_after_s=config.late.down_after_s, concurrency=config.concurrency,
        late_grace_s=config.materialiser.misfire_grace_s,
    )  # fmt: skip
    if "sweeper" in config.daemon.roles:
        services["sweeper"] = sweeper
    if "retention" in config.daemon.roles:
        services["retention"] = Retention(store, config.retention, idempotency_ttl_s=config.api.idempotency_ttl_s)
    if "notifier" in config.daemon.roles:
        services["notifier"] = Notifier(store, config.notify, config.http, Signer.from_config(store, config.secrets))
    if "dispatcher" in config.daemon.roles:
        services["dispatcher"] = Dispatcher(store, queue, config.dispatcher)
    if "worker" in config.daemon.roles:
        services["worker"] = Worker(
            store, queue, config.worker, worker_id,
            horizon_s=config.dispatcher.horizon_s, on_epoch_lost=sweeper.request_reconcile,
            breaker_config=config.breaker, late_grace_s=config.materialiser.misfire_grace_s, late_config=config.late,
            jobs_config=config.jobs, caps=config.concurrency.caps, rate_config=config.rate_limits,
        )  # fmt: skip
    holders = [s for s in (services.get("worker"), services.get("sweeper")) if s is not None]
    if holders:  # the tenant quotas an operator sets at runtime reach the claims and the releases
        services["quotas"] = QuotaRefresh(store, config.concurrency, holders)
    return services


async def catch_up(config: Config, store: Store, queue: DelayQueue, worker_id: str, materialiser: Materialiser) -> None:
    """Rewrite occurrences resolved with another tz database, then judge missed occurrences,
    both before this process's worker can start any of them. A transient error is logged: the
    materialiser's loop (and, for the tz database, the next start) tries again."""
    try:
        await tzchange.recompute(store, queue, config, worker_id, tzdb.installed())
    except TRANSIENT_ERRORS as exc:  # the jobs keep their old version: the next start retries
        log.warning("tz.recompute_error", error=f"{type(exc).__name__}: {exc}")
    try:
        await materialiser.run_once()
    except TRANSIENT_ERRORS as exc:
        log.warning("materialiser.error", error=f"{type(exc).__name__}: {exc}")


def open_listeners(config: Config, store: Store, queue: DelayQueue) -> dict[str, Any]:
    """The enabled HTTP listeners, bound (a taken port raises ConfigError), as loops by name."""
    services: dict[str, Any] = {}
    if config.api.enabled:  # the HTTP API and dashboard, on this same event loop
        from schedulerd.api import create_app
        from schedulerd.jobs import Jobs

        app = create_app(Jobs(store, queue, config), store, queue, config)
        services["api"] = _Api(app, config, bind(config.api.host, config.api.port))
        log.info("api.listening", url=f"http://{config.api.host}:{config.api.port}/")
    if config.ops.enabled:  # operator endpoints on their own listener, never the tenants'
        from schedulerd.api import create_ops_app

        services["ops"] = _Api(create_ops_app(store, queue, config), config, bind(config.ops.host, config.ops.port, "ops"))
        log.info("ops.listening", url=f"http://{config.ops.host}:{config.ops.port}/metrics")
    return services


async def supervise(config: Config, services: dict[str, Any], worker_id: str, stop: asyncio.Event) -> None:
    """Run every service as a named task until `stop` is set or one ends; then stop them all and
    re-raise the first failure (fail fast: systemd restarts the process)."""
    loop_health = health.expect(loop_budgets(config, services))
    # Everything made while starting (modules, the app, pools) lives as long as the process:
    # moved out of the collector's reach, a full collection walks only what the loops make.
    gc.freeze()
    tasks = [asyncio.create_task(service.run(stop), name=role) for role, service in services.items()]
    if systemd.watchdog_interval_s() is not None:
        tasks.append(asyncio.create_task(systemd.watchdog(lambda: not loop_health.stale(), stop), name="watchdog"))
    systemd.notify("READY=1")
    log.info("daemon.started", worker_id=worker_id, roles=list(services), pid=os.getpid())
    try:
        await asyncio.wait([*tasks, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
        stop.set()
        systemd.notify("STOPPING=1")
        await asyncio.gather(*tasks)  # re-raises the first loop that died
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        log.info("daemon.stopped", worker_id=worker_id)


WORKER_ID_TRIES = 3  # another process reporting between the read and the upsert makes us judge again


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def judge_worker_id(
    row: dict[str, Any] | None, hostname: str, pid: int, down_after_s: float, alive: Callable[[int], bool] = pid_alive
) -> str | None:
    """Why `row` (the replica registered under our id) forbids starting, or None. It does not when
    there is none, when it has been silent for down_after_s (as the sweeper judges replicas), or
    when it is this host's and its process is gone (a restart: systemd's, or a container's pid 1).

    >>> judge_worker_id({"hostname": "a", "pid": 7, "seen_ago_s": 0.4}, "b", 9, 15.0)
    'a pid 7, seen 0.4 s ago'
    """
    if row is None or row["seen_ago_s"] >= down_after_s:
        return None
    if row["hostname"] == hostname and (row["pid"] == pid or not alive(row["pid"])):
        return None
    return f"{row['hostname']} pid {row['pid']}, seen {row['seen_ago_s']:.1f} s ago"


async def claim_worker_id(
    store: Store, worker_id: str, roles: Sequence[str], version: str, started_at: datetime, *, down_after_s: float,
    hostname: str | None = None, pid: int | None = None,
) -> None:  # fmt: skip
    """Register this process (on `hostname`, as `pid`: this host's and this process's unless
    given) under worker_id, or raise DuplicateWorkerError naming the live one: two processes
    with one id would adopt each other's rows at the same fence (Worker._claim)."""
    hostname, pid = hostname or socket.gethostname(), pid or os.getpid()
    for _ in range(WORKER_ID_TRIES):
        row = await store.replica_get(worker_id)
        holder = judge_worker_id(row, hostname, pid, down_after_s)
        if holder is not None:
            raise DuplicateWorkerError(
                f"[daemon].worker_id {worker_id!r} is in use by a live replica ({holder}); two processes with one "
                f"worker id would take over each other's executions. Give each process its own worker_id (empty: "
                f"<hostname>:<pid>), or start this one at least {down_after_s:g} s after the other stopped"
            )
        seen_at = row["last_seen_at"] if row is not None else None
        if await store.replica_claim(worker_id, hostname, pid, roles, version, started_at, seen_at=seen_at):
            return
    raise DuplicateWorkerError(f"[daemon].worker_id {worker_id!r} is being taken by another process starting now")


def loop_budgets(config: Config, services: dict[str, Any]) -> dict[str, float]:
    """Longest acceptable gap between two ticks of each running loop (seconds): three missed
    intervals, and never under 10 s, so a slow pass under load is not mistaken for a wedge."""
    intervals = {
        "materialiser": config.materialiser.interval_s, "dispatcher": config.dispatcher.interval_s,
        "sweeper": config.sweeper.interval_s, "worker": config.worker.poll_max_s,
        # The worker's writers tick after each write that succeeded (or every heartbeat when idle):
        # a replica that cannot record outcomes or extend leases is not ready.
        "worker.heartbeat": config.worker.heartbeat_s, "worker.finish": config.worker.heartbeat_s,
        "retention": config.retention.interval_s, "notifier": config.notify.interval_s,
        "observer": config.daemon.observe_interval_s, "quotas": config.concurrency.refresh_s,
    }  # fmt: skip
    return {
        name: max(10.0, 3 * interval_s) for name, interval_s in intervals.items() if name.split(".")[0] in services
    }


@dataclass(frozen=True)
class _Api:
    """An HTTP server (the API's or the operator endpoints') in the shape of a loop: run(stop)."""

    app: Any
    config: Config
    sock: Any

    async def run(self, stop: asyncio.Event) -> None:
        from schedulerd.api import serve_api

        await serve_api(self.app, self.config.api, stop, self.sock)


def run(config: Config) -> None:
    """`schedulerd run`: start (embedded servers if needed), serve until SIGTERM/SIGINT."""
    # Before the minute a first start can take (initdb, migrations): a taken port is said at once.
    check_free(config)
    servers = resolve(config, start=True)
    if not (config.database.url and config.redis.url):
        print(
            f"schedulerd: using embedded servers (data in {config.embedded.data_dir}; the CLI run from this folder finds "
            "them itself). Elsewhere, point schedulerd at them with these lines, which stay valid across restarts "
            "(each server keeps its port while it is free):\n"
            f"  export SCHEDULERD_DATABASE_URL='{servers.database_url}'\n"
            f"  export SCHEDULERD_REDIS_URL='{servers.redis_url}'",
            flush=True,
        )

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal(signum: int) -> None:
            if stop.is_set():
                log.warning("daemon.second_signal_exit", signal=signal.Signals(signum).name)
                os._exit(1)  # a second signal means "now", not "gracefully"
            log.info("daemon.stopping", signal=signal.Signals(signum).name)
            stop.set()

        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, on_signal, signum)
        await serve(config, servers, stop)

    # Before the worker is built: it asks for the tracer provider once (tracing.attempt_tracer).
    flush_spans = tracing.configure(os.environ)
    try:
        try:
            import uvloop

            uvloop.run(main())
        except ImportError:
            asyncio.run(main())
    finally:
        if flush_spans is not None:
            flush_spans()
        servers.stop()
