"""Command line: `schedulerd run | migrate | job ... | executions ...`.

Tables for people, --json for scripts. Bad input exits 2 with a message naming the field and
writes nothing; a missing object exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from schedulerd import config as config_module
from schedulerd.config import Config
from schedulerd.core.durations import parse_duration_s, parse_instant
from schedulerd.errors import ConfigError, NotFoundError, SchedulerdError, ValidationError
from schedulerd.models import ExecutionStatus


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="schedulerd", description="Distributed job scheduler.")
    parser.add_argument("--config", help="config file (default: $SCHEDULERD_CONFIG or ./config.toml)")
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser("run", help="run the daemon (starts embedded servers when no URLs are set)")
    commands.add_parser("migrate", help="apply pending database migrations")

    job = commands.add_parser("job", help="create and inspect jobs").add_subparsers(dest="job_command", required=True)
    create = job.add_parser("create", help="create a one-off job")
    create.add_argument("--task", required=True, help="registered task type")
    create.add_argument("--params", default="{}", help="JSON object passed to the handler")
    when = create.add_mutually_exclusive_group()
    when.add_argument("--at", help="ISO 8601 instant with offset, e.g. 2026-12-01T09:00:00Z")
    when.add_argument("--in", dest="in_", metavar="DURATION", help="delay from now, e.g. 30s, 5m, 1h30m")
    create.add_argument("--tenant", default="default")
    create.add_argument("--name")
    create.add_argument("--max-attempts", type=int)
    create.add_argument("--timeout", help="handler timeout, e.g. 30s (default from [jobs].timeout_s)")
    create.add_argument("--json", action="store_true")
    show_job = job.add_parser("show", help="one job")
    show_job.add_argument("id")
    show_job.add_argument("--json", action="store_true")

    executions = commands.add_parser("executions", help="inspect executions").add_subparsers(
        dest="executions_command", required=True
    )
    listing = executions.add_parser("list", help="executions, newest first")
    listing.add_argument("--job")
    listing.add_argument("--status", choices=[s.value for s in ExecutionStatus])
    listing.add_argument("--tenant")
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--json", action="store_true")
    show = executions.add_parser("show", help="one execution with every attempt")
    show.add_argument("id")
    show.add_argument("--json", action="store_true")
    return parser


def _uuid(text: str, field: str) -> UUID:
    try:
        return UUID(text)
    except ValueError:
        raise ValidationError(field, f"{text!r} is not a valid id (a UUID)") from None


def _time(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z" if value else "-"


def _jsonable(record: Any) -> Any:
    return json.loads(json.dumps(asdict(record), default=str))


def _table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]]
    return "\n".join(lines)


async def _connect(config: Config) -> tuple[Any, Any]:
    from schedulerd.daemon import resolve_servers
    from schedulerd.queue import DelayQueue
    from schedulerd.store import Store

    servers = resolve_servers(config, start=False)
    store = await Store.connect(servers.database_url, min_size=1, max_size=2)
    return store, DelayQueue.connect(servers.redis_url, config.redis.prefix)


def _job_spec(args: argparse.Namespace, config: Config) -> Any:
    from schedulerd.jobs import JobSpec

    try:
        params = json.loads(args.params)
    except json.JSONDecodeError as exc:
        raise ValidationError("--params", f"is not valid JSON: {exc}") from None
    if not isinstance(params, dict):
        raise ValidationError("--params", f"must be a JSON object, got {type(params).__name__}")
    try:
        run_at = None
        if args.at:
            run_at = parse_instant(args.at)
        elif args.in_:
            run_at = datetime.now(UTC) + timedelta(seconds=parse_duration_s(args.in_))
        timeout_s = parse_duration_s(args.timeout) if args.timeout else None
    except ValueError as exc:
        raise ValidationError("--at" if args.at else "--in" if args.in_ else "--timeout", str(exc)) from None
    return JobSpec(
        task=args.task, tenant=args.tenant, params=params, run_at=run_at, name=args.name,
        max_attempts=args.max_attempts, timeout_s=timeout_s,
    )  # fmt: skip


async def _job_create(args: argparse.Namespace, config: Config) -> None:
    from schedulerd import registry
    from schedulerd.jobs import create_job, validate

    registry.load_modules(config.daemon.task_modules)
    spec = _job_spec(args, config)
    validate(spec, config.jobs, datetime.now(UTC))  # refuse bad input before connecting anywhere
    store, queue = await _connect(config)
    try:
        job, execution = await create_job(store, queue, spec, config.jobs, horizon_s=config.dispatcher.horizon_s)
    finally:
        await queue.close()
        await store.close()
    if args.json:
        print(json.dumps({"job": _jsonable(job), "execution": _jsonable(execution)}))
    else:
        print(f"job {job.id} ({job.task}, tenant {job.tenant})")
        print(f"execution {execution.id} due {_time(execution.due_at)} status {execution.status}")


async def _job_show(args: argparse.Namespace, config: Config) -> None:
    job_id = _uuid(args.id, "id")
    store, queue = await _connect(config)
    try:
        job = await store.job_get(job_id)
    finally:
        await queue.close()
        await store.close()
    if job is None:
        raise NotFoundError(f"job {job_id} not found")
    if args.json:
        print(json.dumps(_jsonable(job)))
        return
    for key, value in asdict(job).items():
        print(f"{key:16} {_time(value) if isinstance(value, datetime) else value}")


async def _executions_list(args: argparse.Namespace, config: Config) -> None:
    job_id = _uuid(args.job, "--job") if args.job else None
    if not 1 <= args.limit <= 1000:
        raise ValidationError("--limit", f"must be between 1 and 1000, got {args.limit}")
    store, queue = await _connect(config)
    try:
        executions = await store.execution_list(tenant=args.tenant, job_id=job_id, status=args.status, limit=args.limit)
    finally:
        await queue.close()
        await store.close()
    if args.json:
        print(json.dumps([_jsonable(e) for e in executions]))
        return
    header = ("ID", "JOB", "STATUS", "ATTEMPT", "SCHEDULED_FOR", "STARTED", "FINISHED", "LAST_ERROR")
    rows = [
        (str(e.id), str(e.job_id)[:8], e.status, str(e.attempt), _time(e.scheduled_for), _time(e.first_started_at),
         _time(e.finished_at), (e.last_error or "").splitlines()[-1][:60] if e.last_error else "")
        for e in executions
    ]  # fmt: skip
    print(_table(rows, header))


async def _executions_show(args: argparse.Namespace, config: Config) -> None:
    execution_id = _uuid(args.id, "id")
    store, queue = await _connect(config)
    try:
        execution = await store.execution_get(execution_id)
        attempts = await store.attempt_list(execution_id) if execution else []
    finally:
        await queue.close()
        await store.close()
    if execution is None:
        raise NotFoundError(f"execution {execution_id} not found")
    if args.json:
        print(json.dumps({**_jsonable(execution), "attempts": [{**_jsonable(a), "duration_s": a.duration_s} for a in attempts]}))
        return
    for key, value in asdict(execution).items():
        print(f"{key:17} {_time(value) if isinstance(value, datetime) else value}")
    print()
    header = ("ATTEMPT", "FENCE", "WORKER", "STARTED", "FINISHED", "DURATION", "OUTCOME", "ERROR")
    rows = [
        (str(a.attempt), str(a.fence), a.worker or "-", _time(a.started_at), _time(a.finished_at),
         f"{a.duration_s:.3f}s", a.outcome, (a.error or "").splitlines()[-1][:80] if a.error else "")
        for a in attempts
    ]  # fmt: skip
    print(_table(rows, header) if rows else "no finished attempts yet")


async def _migrate(args: argparse.Namespace, config: Config) -> None:
    from schedulerd.daemon import resolve_servers
    from schedulerd.store import migrate

    applied = await migrate(resolve_servers(config, start=False).database_url)
    print(f"applied {applied} migration(s)" if applied else "database schema is current")


COMMANDS = {
    ("job", "create"): _job_create,
    ("job", "show"): _job_show,
    ("executions", "list"): _executions_list,
    ("executions", "show"): _executions_show,
    ("migrate", None): _migrate,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        config = config_module.load(args.config)
        from schedulerd.log import configure

        configure(config.log.level if args.command == "run" else "warning", config.log.format)
        if args.command == "run":
            from schedulerd.daemon import run

            run(config)
            return 0
        sub = getattr(args, f"{args.command}_command", None)
        asyncio.run(COMMANDS[(args.command, sub)](args, config))
        return 0
    except (ValidationError, ConfigError) as exc:
        print(f"schedulerd: error: {exc}", file=sys.stderr)
        return 2
    except NotFoundError as exc:
        print(f"schedulerd: {exc}", file=sys.stderr)
        return 1
    except (SchedulerdError, OSError) as exc:
        print(f"schedulerd: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
