"""Command line: `schedulerd run | migrate | job ... | executions ... | cron next | tz report`.

Tables for people, --json for scripts. Bad input exits 2 with a message naming the field and
writes nothing; a missing object exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any, TypeAlias, TypeVar
from uuid import UUID
from zoneinfo import ZoneInfo

from schedulerd import config as config_module
from schedulerd import job_fields
from schedulerd.config import Config
from schedulerd.core.durations import parse_duration_s, parse_instant
from schedulerd.core.flow import MAX_LIMIT
from schedulerd.core.late import LateReason, resolve_at
from schedulerd.errors import ConfigError, NotFoundError, SchedulerdError, SchemaError, StaleVersionError, ValidationError
from schedulerd.models import ExecutionStatus

T = TypeVar("T")


Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"  # what add_subparsers returns


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="schedulerd", description="Distributed job scheduler.")
    parser.add_argument("--config", help="config file (default: $SCHEDULERD_CONFIG or ./config.toml)")
    commands = parser.add_subparsers(dest="command", required=True)
    _ops_commands(commands)
    _job_commands(commands)
    _schedule_commands(commands)
    _tenant_commands(commands)
    _secret_commands(commands)
    _execution_commands(commands)
    _apply_commands(commands)
    return parser


def _apply_commands(commands: Commands) -> None:
    """apply: schedules as code (schedulerd/apply.py)."""
    apply = commands.add_parser("apply", help="make a tenant's declared jobs what a schedules file (TOML) says")
    apply.add_argument("file", help="a TOML file of [[job]] tables (the API body's fields, each with a name)")
    apply.add_argument("--plan", action="store_true", help="show what would be added, changed and removed; write nothing")
    apply.add_argument("--prune", action="store_true", help="delete the jobs of this source that the file no longer declares")
    apply.add_argument("--force", action="store_true", help="overwrite jobs edited elsewhere since the last apply (drift)")
    apply.add_argument("--tenant", default="default", help="the tenant the jobs belong to (default: default)")
    apply.add_argument("--source", help="the name this set of jobs is kept under (default: the file's source key, else its stem)")
    apply.add_argument("--json", action="store_true")


def _ops_commands(commands: Commands) -> None:
    """run, migrate, status, breakers: the daemon and an operator's view of it."""
    commands.add_parser("run", help="run the daemon (starts embedded servers when no URLs are set)")
    commands.add_parser("migrate", help="apply pending database migrations")
    status = commands.add_parser("status", help="one screen for an operator: queue, horizon, recent outcomes")
    status.add_argument("--json", action="store_true")
    breakers = commands.add_parser("breakers", help="circuit breakers that are open, half open or counting failures")
    breakers.add_argument("--json", action="store_true")
    breakers.add_argument("--reset", metavar="KEY", help="close this breaker by hand (e.g. http:api.example.com)")


def _job_commands(commands: Commands) -> None:
    """job create | list | show | update | pause | resume | delete | trigger | cancel | backfill | why | next."""
    job = commands.add_parser("job", help="create and inspect jobs").add_subparsers(dest="job_command", required=True)
    create = job.add_parser("create", help="create a job: now, --at/--in a time, or on a --cron schedule; or many "
                            "with --from-file")
    _job_create_flags(create)
    listing_jobs = job.add_parser("list", help="jobs, newest first; done ones (finished one-offs) only when asked (--state)")
    listing_jobs.add_argument("--tenant")
    listing_jobs.add_argument("--deleted", action="store_true", help="include deleted jobs")
    listing_jobs.add_argument("--name", help="jobs whose name starts with this")
    listing_jobs.add_argument("--task", help="jobs of this task type")
    listing_jobs.add_argument("--kind", choices=("cron", "one-off"), help="recurring (cron) or one-off jobs")
    listing_jobs.add_argument("--state", help="a comma-separated list of enabled, paused, done, deleted, or all "
                              "(default enabled,paused)")
    listing_jobs.add_argument("--label", metavar="SELECTOR", help="jobs carrying every pair: team=billing,env=prod")
    listing_jobs.add_argument("--cursor", help="the next page: the cursor the previous page printed")
    listing_jobs.add_argument("--limit", type=int, default=100)
    listing_jobs.add_argument("--json", action="store_true")
    _job_update_flags(job.add_parser("update", help="edit a job in place: its next runs follow the new spec "
                                     "(prints which runs are removed, kept and added)"))
    for name, text in [("show", "one job"), ("pause", "stop a job; cancels its unstarted executions"),
                       ("resume", "start a paused cron job again from now"),
                       ("delete", "stop a job for good (its history stays)"), ("trigger", "run a job once now")]:
        steering = name != "show"
        sub = job.add_parser(name, help=text + (" (or every job matching --label)" if steering else ""))
        sub.add_argument("id", nargs="?" if steering else None)
        sub.add_argument("--json", action="store_true")
        if name == "pause":
            sub.add_argument("--note", help="why it is paused (shown with the job until it is resumed)")
        if steering:
            sub.add_argument("--by", help=f"who {name}s (default: cli:$USER)")
            sub.add_argument("--label", metavar="SELECTOR",
                             help="instead of an id: every job of --tenant whose labels match (team=billing,env=prod); "
                                  "recorded with who and when")
            sub.add_argument("--tenant", default="default", help="with --label: whose jobs (default: default)")
            sub.add_argument("--plan", action="store_true", help="with --label: count what would change, change nothing")
    cancel = job.add_parser("cancel", help="cancel the unstarted runs of every job matching --label")
    cancel.add_argument("--label", metavar="SELECTOR", required=True, help="the jobs whose labels match (team=billing)")
    cancel.add_argument("--tenant", default="default", help="whose jobs (default: default)")
    cancel.add_argument("--plan", action="store_true", help="count what would be cancelled, cancel nothing")
    cancel.add_argument("--by", help="who cancels (default: cli:$USER)")
    cancel.add_argument("--json", action="store_true")
    backfill = job.add_parser("backfill", help="create a cron job's occurrences in a past range [from, to) as executions")
    backfill.add_argument("id")
    backfill.add_argument("--from", dest="from_", required=True, help="ISO 8601 instant with offset (inclusive)")
    backfill.add_argument("--to", required=True, help="ISO 8601 instant with offset (exclusive), not in the future")
    backfill.add_argument("--json", action="store_true")
    why = job.add_parser("why", help="why didn't the job run at a time? (the occurrence nearest to it, and its fate)")
    why.add_argument("id")
    why.add_argument("--at", required=True, help="ISO 8601 instant with offset, or HH:MM (the latest, in the job's zone)")
    why.add_argument("--json", action="store_true")
    upcoming = job.add_parser("next", help="a job's next runs")
    upcoming.add_argument("id")
    upcoming.add_argument("--count", type=int, default=5)
    upcoming.add_argument("--json", action="store_true")


# argparse's settings for `job create` flags beyond name, help and choices (job_fields.FIELDS).
# The others default to None, so a flag left out is told from one given.
_CREATE_FLAG_OPTIONS: dict[str, dict[str, Any]] = {
    "--params": {"default": "{}"},
    "--in": {"dest": "in_", "metavar": "DURATION"},
    "--tz": {"default": "UTC"},
    "--misfire": {"default": "run_once"},
    "--catch-up-limit": {"type": int, "default": 10},
    "--overlap": {"default": "allow"},
    "--tenant": {"default": "default"},
    "--max-attempts": {"type": int},
    "--max-runs": {"type": int},
    "--labels": {"metavar": "SELECTOR"},
    "--start-at": {"metavar": "INSTANT"},
    "--end-at": {"metavar": "INSTANT"},
    "--debounce-key": {"metavar": "KEY"},
    "--debounce-window": {"metavar": "DURATION"},
    "--priority": {"metavar": "0-9"},
    "--concurrency-key": {"metavar": "KEY"},
    "--concurrency-limit": {"metavar": "N"},
    "--rate-key": {"metavar": "KEY"},
    "--rate-limit": {"metavar": "N"},
    "--rate-window": {"metavar": "DURATION"},
    "--notify-url": {"metavar": "URL"},
    "--notify-on": {"metavar": "EVENTS"},
    "--pause-after-failures": {"metavar": "N"},
}  # fmt: skip
_WHEN_FLAGS = frozenset({"--at", "--in", "--cron"})  # when the job runs: one of them at most
# A refusal names a field (job_fields: JobSpec's name); the user of `job create` typed flags.
_CREATE_FLAGS = job_fields.renamed("flag")


def _job_create_flags(create: argparse.ArgumentParser) -> None:
    """A flag for each job field that has one, in job_fields.FIELDS order, with its doc line as help."""
    create.add_argument("--from-file", metavar="FILE", help="create many: NDJSON, one job per line with the API's fields "
                        "(task, params, run_at, cron, timezone, retry, ..., idempotency_key, tenant); - reads standard "
                        "input. Refused lines are reported by number and write nothing; the others are created")
    when = create.add_mutually_exclusive_group()
    for field in job_fields.FIELDS:
        if field.flag is not None:
            (when if field.flag in _WHEN_FLAGS else create).add_argument(
                field.flag, help=field.doc + field.flag_note, choices=field.choices or None,
                **_CREATE_FLAG_OPTIONS.get(field.flag, {}),
            )  # fmt: skip
    # Not a job field: the trace context the created one-off executions carry (docs/tracing.md).
    create.add_argument("--traceparent", metavar="TRACEPARENT", help="W3C trace context of the caller's span "
                        "(00-<trace id>-<parent id>-<flags>): the first attempt's span is its child; default: "
                        "$TRACEPARENT (ignored when malformed; this flag is refused when malformed)")
    create.add_argument("--json", action="store_true")


# `job update` flags that take a number; the others are text, read as `job create` reads them.
_UPDATE_FLAG_TYPES: dict[str, Any] = {"--catch-up-limit": int, "--max-attempts": int}


def _job_update_flags(update: argparse.ArgumentParser) -> None:
    """A flag for each editable job field that has one (job_fields.EDITABLE), as `job create`'s;
    a flag left out keeps the job's value."""
    update.add_argument("id")
    for field in job_fields.EDITABLE:
        if field.flag is not None:
            update.add_argument(field.flag, help=field.doc + field.flag_note, choices=field.choices or None,
                                type=_UPDATE_FLAG_TYPES.get(field.flag, str))  # fmt: skip
    update.add_argument("--plan", action="store_true", help="show what the edit would do; write nothing")
    update.add_argument("--if-version", type=int, metavar="N", help="refuse unless the job is at version N")
    update.add_argument("--tenant", help="only this tenant's job")
    update.add_argument("--json", action="store_true")


def _schedule_commands(commands: Commands) -> None:
    """cron next, tz report: schedules apart from any job."""
    cron = commands.add_parser("cron", help="preview cron expressions").add_subparsers(dest="cron_command", required=True)
    preview = cron.add_parser("next", help="the next runs of an expression, in its zone and in UTC")
    preview.add_argument("expression")
    preview.add_argument("--tz", default="UTC")
    preview.add_argument("--from", dest="from_", help="ISO 8601 instant to start after (default now)")
    preview.add_argument("--count", type=int, default=5)
    for field in job_fields.FIELDS:
        if field.spec in ("dst_repeated", "dst_missing") and field.flag is not None:  # as `job create` takes them
            preview.add_argument(field.flag, choices=field.choices, help=field.doc)
        if field.spec in ("start_at", "end_at", "max_runs") and field.flag is not None:
            preview.add_argument(field.flag, help=field.doc, **_CREATE_FLAG_OPTIONS.get(field.flag, {}))
    preview.add_argument("--json", action="store_true")

    tz = commands.add_parser("tz", help="the tz database and its changes").add_subparsers(dest="tz_command", required=True)
    tz_report = tz.add_parser("report", help="the last recompute after a tz database change: the jobs whose instants moved")
    tz_report.add_argument("--tenant", help="only this tenant's jobs")
    tz_report.add_argument("--limit", type=int, default=100, help="most moved jobs listed")
    tz_report.add_argument("--json", action="store_true")


def _tenant_commands(commands: Commands) -> None:
    """tenant create, token create | list | revoke: who may use the API."""
    tenant = commands.add_parser("tenant", help="API tenants").add_subparsers(dest="tenant_command", required=True)
    tenant_create = tenant.add_parser("create", help="register a tenant; prints its first API token (once)")
    tenant_create.add_argument("name")
    quota = tenant.add_parser("quota", help="set or clear a tenant's in-flight quota at runtime (over [concurrency]); "
                              "every replica applies it within [concurrency].refresh_s")
    quota.add_argument("name")
    quota_change = quota.add_mutually_exclusive_group()
    quota_change.add_argument("--in-flight", metavar="N", help=f"most executions of the tenant running at once, "
                              f"fleet-wide (1-{MAX_LIMIT})")
    quota_change.add_argument("--clear", action="store_true", help="remove the runtime quota: [concurrency] applies again")
    quotas = tenant.add_parser("quotas", help="every tenant quota in force: set at runtime, and from [concurrency]")
    quotas.add_argument("--json", action="store_true")
    token = commands.add_parser("token", help="API tokens").add_subparsers(dest="token_command", required=True)
    token_create = token.add_parser("create", help="issue another token for a tenant; prints it (once)")
    token_create.add_argument("tenant")
    token_list = token.add_parser("list", help="a tenant's tokens: ids, when made, last used, revoked")
    token_list.add_argument("tenant")
    token_list.add_argument("--json", action="store_true")
    token_revoke = token.add_parser("revoke", help="revoke a token by id (the next request with it gets 401)")
    token_revoke.add_argument("id")
    token_revoke.add_argument("--json", action="store_true")


def _secret_commands(commands: Commands) -> None:
    """secret set | list | delete | reseal, signing-key rotate | list | retire (docs/webhooks.md)."""
    secret = commands.add_parser("secret", help="tenant secrets, referenced from http params as {\"$secret\": NAME}")
    secrets = secret.add_subparsers(dest="secret_command", required=True)
    secret_set = secrets.add_parser("set", help="set or replace a secret: the value is read from standard input (or "
                                    "asked for on a terminal), never from the arguments")  # fmt: skip
    secret_set.add_argument("name")
    secret_set.add_argument("value", nargs="?", help=argparse.SUPPRESS)  # only to refuse it without echoing it
    secret_list = secrets.add_parser("list", help="a tenant's secrets: names and times, never values")
    secret_delete = secrets.add_parser("delete", help="delete a secret (attempts that reference it then fail as permanent)")
    secret_delete.add_argument("name")
    for sub in (secret_set, secret_list, secret_delete):
        sub.add_argument("--tenant", default="default", help="whose secret (default: default)")
        sub.add_argument("--json", action="store_true")
    secrets.add_parser("reseal", help="seal every secret and signing key with [secrets].key (after a change of key, "
                       "with the old one in previous_keys)")  # fmt: skip
    signing = commands.add_parser("signing-key", help="webhook signing keys (X-Schedulerd-Signature)")
    keys = signing.add_subparsers(dest="signing_key_command", required=True)
    rotate = keys.add_parser("rotate", help="a new signing key, printed once; older keys keep signing for --grace")
    rotate.add_argument("--grace", help="how long older keys keep signing, e.g. 1h, 7d, 0s (default [secrets].signing_grace_s)")
    key_list = keys.add_parser("list", help="a tenant's live signing keys: ids and times, never secrets")
    retire = keys.add_parser("retire", help="stop signing with a key at once and delete its secret")
    retire.add_argument("id")
    for sub in (rotate, key_list, retire):
        sub.add_argument("--tenant", default="default", help="whose keys (default: default)")
        sub.add_argument("--json", action="store_true")


def _execution_commands(commands: Commands) -> None:
    """executions list | show | cancel | redrive: what ran, stopping runs, and failed ones given another budget."""
    executions = commands.add_parser("executions", help="inspect executions").add_subparsers(
        dest="executions_command", required=True
    )
    listing = executions.add_parser("list", help="executions, newest first")
    listing.add_argument("--job")
    listing.add_argument("--status", choices=[s.value for s in ExecutionStatus])
    listing.add_argument("--tenant")
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--late", action="store_true",
                         help="only occurrences that did not start within their grace, each with its late reason")
    listing.add_argument("--since", help="with --late: scheduled at or after (ISO 8601, or a duration ago: 6h; default "
                         "24h); with --status failed: failed at or after (ISO 8601)")
    listing.add_argument("--reason", choices=[r.value for r in LateReason], help="with --late: only this late reason")
    listing.add_argument("--json", action="store_true")
    _failed_filters(listing, "with --status failed: ", since=False)
    redrive = executions.add_parser(
        "redrive", help="give failed executions a new attempt budget: by id, or every one matching filters"
    )
    redrive.add_argument("ids", nargs="*", metavar="ID")
    redrive.add_argument("--tenant", help="only this tenant's executions")
    redrive.add_argument("--job", help="every failed execution of this job")
    _failed_filters(redrive, "")
    redrive.add_argument("--by", help="who redrives (default: cli:$USER)")
    redrive.add_argument("--json", action="store_true")
    cancel = executions.add_parser(
        "cancel", help="cancel executions by id, or every one matching filters: unstarted ones at once, running ones "
        "at their next heartbeat"
    )  # fmt: skip
    cancel.add_argument("ids", nargs="*", metavar="ID")
    cancel.add_argument("--tenant", help="only this tenant's executions (with filters: default default)")
    cancel.add_argument("--job", help="every unsettled execution of this job")
    cancel.add_argument("--status", action="append", choices=["pending", "queued", "running"],
                        help="only these statuses (repeat it; default pending and queued)")
    cancel.add_argument("--label", metavar="SELECTOR", help="only those whose job's labels match (team=billing,env=prod)")
    cancel.add_argument("--due-from", help="only those due at or after this ISO 8601 instant")
    cancel.add_argument("--due-to", help="only those due before this ISO 8601 instant")
    cancel.add_argument("--plan", action="store_true", help="with filters: count and list what would be cancelled, cancel nothing")
    cancel.add_argument("--by", help="who cancels (default: cli:$USER)")
    cancel.add_argument("--json", action="store_true")
    show = executions.add_parser("show", help="one execution with every attempt")
    show.add_argument("id")
    show.add_argument("--json", action="store_true")


def _failed_filters(parser: argparse.ArgumentParser, prefix: str, *, since: bool = True) -> None:
    parser.add_argument("--task", help=f"{prefix}only executions of this task type")
    parser.add_argument("--error", help=f"{prefix}only those whose last error contains this text (any case)")
    if since:
        parser.add_argument("--since", help=f"{prefix}only those that failed at or after this ISO 8601 instant")
    parser.add_argument("--until", help=f"{prefix}only those that failed before this ISO 8601 instant")


def _uuid(text: str, field: str) -> UUID:
    try:
        return UUID(text)
    except ValueError:
        raise ValidationError(field, f"{text!r} is not a valid id (a UUID)") from None


def _time(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z" if value else "-"


def _shown(value: Any) -> str:
    """A record's field for people: times as UTC instants, nothing as '-' (as the tables print it)."""
    if isinstance(value, datetime):
        return _time(value)
    return "-" if value is None else str(value)


def _jsonable(record: Any) -> Any:
    return json.loads(json.dumps(asdict(record), default=str))


def _table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]]
    return "\n".join(lines)


def _parse(field: str, parse: Callable[[str], T], text: str) -> T:
    """Every flag's value goes through here: whatever a parser chokes on (a bad value, an instant
    past the calendar, a document nested past the recursion limit) is exit 2 naming the flag."""
    try:
        return parse(text)
    except (ValueError, OverflowError, RecursionError) as exc:
        raise ValidationError(field, str(exc) or type(exc).__name__) from None


def _priority_flag(text: str) -> int:
    """--priority's text: digits only (jobs.validate judges the range), so "high" or "true" is
    refused by name instead of by argparse's "invalid int value"."""
    if not text.strip().isdigit():
        raise ValueError(f"must be an integer from 0 to 9 (higher runs first), got {text!r}")
    return int(text)


def _count_flag(text: str) -> int:
    """--concurrency-limit's and --rate-limit's text: digits only (jobs.validate judges the range)."""
    if not text.strip().isdigit():
        raise ValueError(f"must be a whole number, got {text!r}")
    return int(text)


def _events_flag(text: str) -> tuple[str, ...] | None:
    """--notify-on's text: comma-separated events (jobs.validate judges them); "none": this job
    sends no notice; empty (job update): back to the tenant's setting."""
    if text.strip().lower() == "none":
        return ()
    events = tuple(e.strip() for e in text.split(",") if e.strip())
    return events or None


def _job_spec(args: argparse.Namespace) -> Any:
    from schedulerd.core.labels import parse_selector
    from schedulerd.jobs import JobSpec

    params = _parse("--params", json.loads, args.params)
    if not isinstance(params, dict):
        raise ValidationError("--params", f"must be a JSON object, got {type(params).__name__}")
    run_at = _parse("--at", parse_instant, args.at) if args.at else None
    # --in counts from Postgres's now (intake.Intake), not this host's: a skewed clock cannot move it.
    run_in_s = _parse("--in", parse_duration_s, args.in_) if args.in_ else None
    return JobSpec(
        task=args.task, tenant=args.tenant, params=params, run_at=run_at, delay_s=run_in_s, cron=args.cron, timezone=args.tz,
        misfire_policy=args.misfire, catch_up_limit=args.catch_up_limit,
        window_s=_parse("--window", parse_duration_s, args.window) if args.window else 0.0,
        name=args.name, max_attempts=args.max_attempts, overlap=args.overlap,
        timeout_s=_parse("--timeout", parse_duration_s, args.timeout) if args.timeout else None,
        dst_repeated=args.dst_repeated, dst_missing=args.dst_missing,
        labels=parse_selector(args.labels, "--labels") if args.labels else {},
        start_at=_parse("--start-at", parse_instant, args.start_at) if args.start_at else None,
        end_at=_parse("--end-at", parse_instant, args.end_at) if args.end_at else None, max_runs=args.max_runs,
        priority=_parse("--priority", _priority_flag, args.priority) if args.priority is not None else 5,
        concurrency_key=args.concurrency_key or None,
        concurrency_limit=_parse("--concurrency-limit", _count_flag, args.concurrency_limit) if args.concurrency_limit else None,
        rate_key=args.rate_key or None,
        rate_limit=_parse("--rate-limit", _count_flag, args.rate_limit) if args.rate_limit else None,
        rate_window_s=_parse("--rate-window", parse_duration_s, args.rate_window) if args.rate_window else None,
        notify_url=args.notify_url or None,
        notify_on=_events_flag(args.notify_on) if args.notify_on is not None else None,
        pause_after_failures=_parse("--pause-after-failures", _count_flag, args.pause_after_failures)
        if args.pause_after_failures else None,
    )  # fmt: skip


def _traceparent(args: argparse.Namespace) -> str | None:
    """The trace context `job create` stores: --traceparent, refused when malformed (it was typed
    for this command), else $TRACEPARENT, ignored when malformed, as W3C Trace Context says of a
    carrier (said on standard error)."""
    from schedulerd.core import traceparent

    if args.traceparent is not None:
        given = traceparent.normalised(args.traceparent)
        if given is None:
            raise ValidationError("--traceparent", "must be a W3C traceparent: 00-<32 hex trace id>-<16 hex parent id>-"
                                  f"<2 hex flags>, lower case, ids not all zeros; got {args.traceparent[:100]!r}")  # fmt: skip
        return given
    inherited = os.environ.get("TRACEPARENT")
    found = traceparent.normalised(inherited)
    if inherited is not None and found is None:
        print("schedulerd: warning: TRACEPARENT is not a W3C traceparent; ignored", file=sys.stderr)
    return found


def _create_flag_error(exc: ValidationError) -> ValidationError:
    """Jobs name fields; the user of `job create` typed flags."""
    field = exc.field.split(".")[0].split("[")[0].split(" ")[0]
    return ValidationError(_CREATE_FLAGS.get(field, exc.field), exc.message, exc.limit)


def _print_runs(runs: Sequence[Any], zone: str) -> None:
    """Runs (schedule.Run) in the zone and in UTC, with what DST did to each."""
    local = ZoneInfo(zone)
    for run in runs:
        dst = f"  [{', '.join(run.labels)}] {run.note}" if run.labels else ""
        print(f"  {run.at.astimezone(local).strftime('%Y-%m-%d %H:%M:%S %Z (%z)'):36} {_time(run.at)}{dst}")


class _Session:
    """Connections for one command, closed on the way out."""

    def __init__(self, config: Config) -> None:
        self.config = config

    async def __aenter__(self) -> Any:
        from schedulerd import servers
        from schedulerd.jobs import Jobs

        self.store, self.queue = await servers.connect(self.config, pool_max=2, check_schema=True)
        return Jobs(self.store, self.queue, self.config)

    async def __aexit__(self, *exc: object) -> None:
        await self.queue.close()
        await self.store.close()


async def _apply(args: argparse.Namespace, config: Config) -> None:
    from schedulerd import apply
    from schedulerd.client import Client
    from schedulerd.tasks import loader

    loader.load_modules(config.daemon.task_modules)  # as `job create`: this deployment's types are known
    source, documents = apply.load(args.file)
    declared = apply.declarations(documents, args.tenant, args.file)
    async with await Client.connect(config) as client:
        applier = apply.Apply(client.store, client.intake, client.jobs)
        try:
            plan = await applier.apply(declared, tenant=args.tenant, source=args.source or source, plan_only=args.plan,
                                       prune=args.prune, force=args.force)  # fmt: skip
        except apply.DriftError as exc:
            _print_plan(exc.plan, args.json)
            raise
    _print_plan(plan, args.json)


def _print_plan(plan: Any, as_json: bool) -> None:
    """An apply's plan: added / changed (with the next-runs diff) / removed, then what stays."""
    from schedulerd import apply

    if as_json:
        print(json.dumps(apply.summary(plan)))
        return
    verb = "applied" if plan.applied else "plan only: nothing written"
    print(f"source {plan.source!r} of tenant {plan.tenant}: {len(plan.added)} added, {len(plan.changed)} changed, "
          f"{len(plan.removed)} removed, {len(plan.unchanged)} unchanged ({verb})")  # fmt: skip
    for a in plan.added:
        schedule = a.job.cron or _time(a.job.run_at)
        print(f"+ {a.name}  {a.job.task}  {schedule} ({a.job.timezone})")
        _print_runs(a.next_runs, a.job.timezone)
    for c in plan.changed:
        forced = "  (drifted: overwritten)" if c.drifted else ""
        print(f"~ {c.name}  {c.edit.job.id}  {', '.join(c.fields)}{forced}")
        for title, runs in (("removed", c.edit.removed), ("kept", c.edit.kept), ("added", c.edit.added)):
            if runs:
                print(f"  {title} ({len(runs)}):")
                _print_runs(runs, c.edit.job.timezone)
    for r in plan.removed:
        print(f"- {r.name}  {r.job.id}")
    for r in plan.undeclared:
        print(f"  {r.name}  {r.job.id}: no longer declared, kept (--prune deletes it)")
    for d in plan.drifted:
        what = ", ".join(d.fields) if d.fields else "removal"
        print(f"! {d.name}  {d.job.id}: drift: edited since the last apply (version {d.job.version}, "
              f"applied {d.applied_version}); differs in {what}; --force overwrites")  # fmt: skip


async def _job_create_from_file(args: argparse.Namespace, config: Config, context: str | None) -> None:
    """--from-file: the per-job flags do not apply (each line says what it wants), --tenant is
    the default tenant of lines that name none; every line's execution carries trace `context`."""
    from schedulerd import bulk_create
    from schedulerd.client import Client

    given = [flag for flag, value in (("--task", args.task), ("--at", args.at), ("--in", args.in_), ("--cron", args.cron),
                                      ("--name", args.name), ("--max-attempts", args.max_attempts),
                                      ("--timeout", args.timeout), ("--window", args.window),
                                      ("--debounce-key", args.debounce_key), ("--debounce-window", args.debounce_window))
             if value is not None]
    if given or args.params != "{}":
        raise ValidationError(given[0] if given else "--params", "does not apply with --from-file (each line gives its own)")
    try:
        stream = sys.stdin if args.from_file == "-" else open(args.from_file, encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise ValidationError("--from-file", f"cannot read {args.from_file}: {exc.strerror}") from None
    try:
        async with await Client.connect(config) as client:
            report = await bulk_create.create_from_lines(client, bulk_create.numbered_lines(stream), args.tenant,
                                                         traceparent=context)  # fmt: skip
    except UnicodeDecodeError as exc:
        raise ValidationError("--from-file", f"is not UTF-8 text ({exc.reason}); lines before it were created") from None
    finally:
        if stream is not sys.stdin:
            stream.close()
    if args.json:
        print(json.dumps(bulk_create.summary(report)))
    else:
        print(f"{_plural(report.created, 'job')} created, {report.replayed} replayed (idempotency key seen before), "
              f"{_plural(len(report.errors), 'line')} refused, of {_plural(report.lines, 'line')}")  # fmt: skip
    if report.errors:
        raise ValidationError("--from-file", f"{len(report.errors)} of {_plural(report.lines, 'line')} refused (listed above, "
                              "each by line number); nothing of them was written, the other lines were")  # fmt: skip


async def _job_create(args: argparse.Namespace, config: Config) -> None:
    from schedulerd.tasks import loader

    # The types of this deployment's task modules are accepted before any worker reported them
    # (a fresh install's first job), as the API replica accepts its own.
    loader.load_modules(config.daemon.task_modules)
    context = _traceparent(args)
    if args.from_file is not None:
        return await _job_create_from_file(args, config, context)
    if args.task is None:
        raise ValidationError("--task", "is required (or --from-file to create many)")
    from schedulerd.core.schedule import Run
    from schedulerd.intake import Debounce, Intake, Item, Refused
    from schedulerd.jobs import labelled_next_runs
    from schedulerd.task_types import TaskTypes

    spec = _job_spec(args)
    window_s = _parse("--debounce-window", parse_duration_s, args.debounce_window) if args.debounce_window else None
    try:
        debounce = Debounce.given(args.debounce_key, window_s)
    except ValidationError as exc:
        raise _create_flag_error(exc) from None
    async with _Session(config) as jobs:
        intake = Intake(jobs.store, jobs.queue, config, TaskTypes(jobs.store, config.jobs.task_types_seen_within_s))
        (result,), _ = await intake.create_many([Item(spec, debounce=debounce, traceparent=context)], with_jobs=True)
        if isinstance(result, Refused):
            raise _create_flag_error(ValidationError(result.field, result.message, result.limit))
        job = result.job
        assert job is not None
        # As they are now (a worker may have started one): the rows, for --json to show in full.
        shown = [await jobs.store.execution_get(e.id) for e in result.executions[:5]] if args.json else []
    runs = labelled_next_runs(job, job.created_at, 5) if job.cron else [Run(e.due_at, (), None) for e in result.executions]
    if args.json:
        print(json.dumps({"job": _jsonable(job), "next_runs": [r.at.isoformat() for r in runs],
                          "next_runs_dst": [_run_view(r, job.timezone) for r in runs],
                          "executions": [_jsonable(e) for e in shown]}))
        return
    print(f"job {job.id} ({job.task}, tenant {job.tenant})")
    if job.cron:
        print(f"schedule {job.cron!r} in {job.timezone}; {_plural(len(result.executions), 'execution')} written ahead; "
              f"next runs{_smear_note(job)}:")  # fmt: skip
        _print_runs(runs, job.timezone)
    else:
        (execution,) = result.executions
        print(f"execution {execution.id} due {_time(execution.due_at)} status {execution.status}")


async def _job_list(args: argparse.Namespace, config: Config) -> None:
    from schedulerd.api.errors import ApiError
    from schedulerd.api.routes.common import decode_cursor, encode_cursor
    from schedulerd.jobs import job_filter, job_state

    if not 1 <= args.limit <= 1000:
        raise ValidationError("--limit", f"must be between 1 and 1000, got {args.limit}")
    find = job_filter(name=args.name, task=args.task, kind=args.kind, state=args.state, label=args.label,
                      include_deleted=args.deleted, flags=_LIST_FLAGS)  # fmt: skip
    try:
        after = decode_cursor(args.cursor)
    except ApiError:
        raise ValidationError("--cursor", "is not a cursor `job list` printed") from None
    deleted = find.states is None or "deleted" in find.states
    async with _Session(config) as jobs:
        store = jobs.store
        page = await (store.job_page(args.tenant, deleted=deleted, after=after, limit=args.limit + 1, find=find)
                      if args.tenant else
                      store.job_page_any_tenant(deleted=deleted, after=after, limit=args.limit + 1, find=find))  # fmt: skip
        listed = page[: args.limit]
        last = await store.job_last_executions([j.id for j in listed]) if listed else {}
        settled = await store.job_settled_many([j.id for j in listed if j.cron is None]) if listed else set()
    states = {j.id: job_state(j, j.id in settled) for j in listed}
    next_cursor = encode_cursor(listed[-1].created_at, listed[-1].id) if len(page) > args.limit else None
    if args.json:
        print(json.dumps([{**_jsonable(j), "state": states[j.id], "last_status": last[j.id].status if j.id in last else None}
                          for j in listed]))  # fmt: skip
        if next_cursor:  # stdout stays the list it always was
            print(f"next page: --cursor {next_cursor}", file=sys.stderr)
        return
    header = ("ID", "NAME", "TENANT", "TASK", "SCHEDULE", "ZONE", "OVERLAP", "STATE", "LAST", "CREATED")
    rows = [
        (str(j.id), j.name or "-", j.tenant, j.task, j.cron or (_time(j.run_at) if j.run_at else "-"), j.timezone,
         j.overlap, states[j.id], last[j.id].status if j.id in last else "-", _time(j.created_at))
        for j in listed
    ]  # fmt: skip
    print(_table(rows, header) if rows else "no jobs")
    if next_cursor:
        print(f"next page: --cursor {next_cursor}")


_LIST_FLAGS = {"name": "--name", "task": "--task", "kind": "--kind", "state": "--state", "label": "--label"}


def _print_job(job: Any, as_json: bool, **extra: Any) -> None:
    if as_json:
        print(json.dumps({**_jsonable(job), **extra}))
        return
    for key, value in asdict(job).items():
        print(f"{key:16} {_shown(value)}")
    for key, value in extra.items():
        if key == "overrun" and value:
            verdict = "WARNING: runs near their interval, they will soon overlap" if value["warning"] else "ok"
            value = (f"{verdict} (p95 {value['p95_s']:g} s of {value['interval_s']:g} s interval = "
                     f"{value['ratio']:.0%}, warn at {value['fraction']:.0%}; {value['samples']} recent attempts)")
        print(f"{key:16} {value if value is not None else '-'}")


def _overrun_view(judged: Any, config: Config) -> dict[str, Any] | None:
    """The overrun figures of `job show` (None: no finished runs to judge yet)."""
    if judged is None:
        return None
    return {"warning": judged.warning, "p95_s": round(judged.p95_s, 3), "interval_s": judged.interval_s,
            "ratio": round(judged.ratio, 3), "fraction": config.jobs.overrun_fraction, "samples": judged.samples}  # fmt: skip


async def _job_action(args: argparse.Namespace, config: Config) -> None:
    if args.job_command != "show" and (args.label is not None or args.id is None):
        await _job_bulk_action(args, config)
        return
    if args.job_command != "show" and args.plan:
        raise ValidationError("--plan", "goes with --label (a single job's steering shows its result)")
    job_id = _uuid(args.id, "id")
    async with _Session(config) as jobs:
        if args.job_command == "show":
            from schedulerd.overrun_watch import overruns

            from schedulerd.jobs import job_state

            job = await jobs.get(job_id)
            judged = (await overruns(jobs.store, [job], config.jobs, await jobs.store.clock_now())).get(job.id)
            settled = job.cron is None and job.id in await jobs.store.job_settled_many([job.id])
            _print_job(job, args.json, state=job_state(job, settled),
                       overrun=_overrun_view(judged, config) if job.cron else None)  # fmt: skip
        elif args.job_command == "pause":
            job, cancelled = await jobs.pause(job_id, note=args.note, by=args.by or _cli_actor())
            _print_job(job, args.json, cancelled_executions=cancelled)
        elif args.job_command == "delete":
            job, cancelled = await jobs.delete(job_id)
            _print_job(job, args.json, cancelled_executions=cancelled)
        elif args.job_command == "resume":
            _print_job(await jobs.resume(job_id), args.json)
        else:
            execution = await jobs.trigger(job_id)
            print(json.dumps(_jsonable(execution)) if args.json else f"execution {execution.id} queued, due {_time(execution.due_at)}")


# How `job update` reads a flag's text into the field's value (the others are taken as typed).
_UPDATE_READERS: dict[str, Callable[[str], Any]] = {
    "--params": json.loads, "--at": parse_instant, "--window": parse_duration_s, "--timeout": parse_duration_s,
    "--priority": _priority_flag, "--concurrency-limit": _count_flag, "--rate-limit": _count_flag,
    "--rate-window": parse_duration_s, "--concurrency-key": lambda text: text or None, "--rate-key": lambda text: text or None,
    "--notify-url": lambda text: text or None, "--notify-on": _events_flag,
    "--pause-after-failures": lambda text: _count_flag(text) if text else None,
}


def _update_changes(args: argparse.Namespace) -> dict[str, Any]:
    from schedulerd.core.labels import parse_selector

    readers = {**_UPDATE_READERS, "--labels": lambda text: parse_selector(text, "--labels")}
    changes: dict[str, Any] = {}
    for field in job_fields.EDITABLE:
        if field.flag is None:
            continue
        text = getattr(args, field.flag.removeprefix("--").replace("-", "_"))
        if text is not None:
            reader = readers.get(field.flag)
            changes[field.spec] = _parse(field.flag, reader, text) if reader else text
    if not changes:
        raise ValidationError("id", "name at least one field to change (see `schedulerd job update --help`)")
    return changes


async def _job_update(args: argparse.Namespace, config: Config) -> None:
    job_id = _uuid(args.id, "id")
    changes = _update_changes(args)
    async with _Session(config) as jobs:
        try:
            edit = await jobs.update(job_id, changes, args.tenant, dry_run=args.plan, if_version=args.if_version)
        except StaleVersionError as exc:
            raise ValidationError("--if-version", exc.message) from None
        except ValidationError as exc:
            raise _create_flag_error(exc) from None
    job = edit.job
    runs = {"removed": edit.removed, "kept": edit.kept, "added": edit.added}
    if args.json:
        print(json.dumps({"job": _jsonable(job), "dry_run": edit.dry_run,
                          **{k: [_run_view(r, job.timezone) for r in v] for k, v in runs.items()},
                          "cancelled_executions": edit.cancelled, "written_executions": edit.written}))  # fmt: skip
        return
    verb = "would become" if edit.dry_run else "is now"
    print(f"job {job.id} {verb} version {job.version}"
          f"{' (plan only: nothing written)' if edit.dry_run else ''}; "
          f"{_plural(edit.cancelled, 'unstarted execution')} {'would be ' if edit.dry_run else ''}cancelled, "
          f"{_plural(edit.written, 'execution')} {'would be ' if edit.dry_run else ''}written")  # fmt: skip
    for name, listed in runs.items():
        print(f"{name} ({len(listed)}):")
        _print_runs(listed, job.timezone)


async def _job_bulk_action(args: argparse.Namespace, config: Config) -> None:
    """job pause|resume|trigger|delete|cancel --label SELECTOR [--plan]: every matching job."""
    from schedulerd.cancels import Cancels
    from schedulerd.job_actions import Action, JobActions, selector_of

    if getattr(args, "id", None) is not None:
        raise ValidationError("--label", "give a job id or --label, not both")
    if args.label is None:
        raise ValidationError("id", "give a job id, or --label SELECTOR for every matching job")
    selector = selector_of(args.label, "--label")
    async with _Session(config) as jobs:
        done = await JobActions(jobs, Cancels(jobs.store)).run(
            args.tenant, Action(args.job_command), selector, dry_run=args.plan, by=args.by or _cli_actor()
        )  # fmt: skip
    if args.json:
        print(json.dumps({"action": done.action, "selector": done.selector, "dry_run": done.dry_run, "jobs": done.jobs,
                          "executions": done.executions, "skipped": [str(i) for i in done.skipped],
                          "record": _jsonable(done.record) if done.record else None}))  # fmt: skip
        return
    matching = f"{_plural(done.jobs, 'job')} matching {args.label}"
    effect = "" if done.action == "resume" else f"; executions {'created' if done.action == 'trigger' else 'cancelled'}: "
    effect += str(done.executions) if effect else ""
    if done.dry_run:
        print(f"plan: {done.action} {matching}{effect} (nothing changed; run again without --plan)")
        return
    skipped = f"; {len(done.skipped)} skipped (refused on the way)" if done.skipped else ""
    print(f"{done.action}: {matching}{effect}{skipped}")
    if done.record is not None:
        print(f"recorded as action {done.record.id} by {done.record.actor} at {_time(done.record.at)}")


def _cli_actor() -> str:
    import getpass

    try:
        return f"cli:{getpass.getuser()}"[:100]
    except (KeyError, OSError):  # no login name (a container with an unnamed uid)
        return "cli"


async def _job_backfill(args: argparse.Namespace, config: Config) -> None:
    job_id = _uuid(args.id, "id")
    start, end = _parse("--from", parse_instant, args.from_), _parse("--to", parse_instant, args.to)
    async with _Session(config) as jobs:
        try:
            done = await jobs.backfill(job_id, start, end)
        except ValidationError as exc:  # name the flag the user typed
            raise ValidationError({"from": "--from", "to": "--to"}.get(exc.field, exc.field), exc.message, exc.limit) from None
    if args.json:
        print(json.dumps({"created": [_jsonable(e) for e in done.created], "already_backfilled": done.already_backfilled}))
        return
    print(f"job {job_id}: {_plural(len(done.created), 'execution')} created, "
          f"{_plural(done.already_backfilled, 'occurrence')} already backfilled")
    if done.created:
        first, last = done.created[0], done.created[-1]
        print(f"scheduled for {_time(first.scheduled_for)} .. {_time(last.scheduled_for)}; "
              f"due {_time(first.due_at)} .. {_time(last.due_at)}")  # fmt: skip


async def _job_next(args: argparse.Namespace, config: Config) -> None:
    from schedulerd.jobs import labelled_next_runs

    job_id = _uuid(args.id, "id")
    if not 1 <= args.count <= 1000:
        raise ValidationError("--count", f"must be between 1 and 1000, got {args.count}")
    async with _Session(config) as jobs:
        job = await jobs.get(job_id)
    now = datetime.now(UTC)
    runs = labelled_next_runs(job, now, args.count)
    if runs and not args.json and _smear_note(job):
        print(f"next runs{_smear_note(job)}:")
    _print_preview(runs, job.timezone, args.json)
    if not runs and not args.json:
        state = "deleted" if job.deleted_at else "paused" if not job.enabled else "enabled"
        print(f"no runs after {_time(now)} (job {state}, {job.cron or job.schedule_kind})")


def _smear_note(job: Any) -> str:
    """Previews show due times, which carry the job's smearing offset (--window)."""
    if not job.window_s:
        return ""
    from schedulerd.core.schedule import smear_offset_s

    offset = smear_offset_s(str(job.id), job.window_s)
    return f" (each {offset:.1f} s after its scheduled time: this job's offset inside its {_span(job.window_s)} --window)"


def _run_view(run: Any, zone: str) -> dict[str, Any]:
    return {"utc": run.at.isoformat(), "local": run.at.astimezone(ZoneInfo(zone)).isoformat(),
            "labels": list(run.labels), "note": run.note}  # fmt: skip


def _print_preview(runs: Sequence[Any], zone: str, as_json: bool) -> None:
    if as_json:
        print(json.dumps([_run_view(r, zone) for r in runs]))
    else:
        _print_runs(runs, zone)


async def _cron_next(args: argparse.Namespace, config: Config) -> None:
    from schedulerd.core.schedule import CronSchedule, ScheduleError

    if not 1 <= args.count <= 1000:
        raise ValidationError("--count", f"must be between 1 and 1000, got {args.count}")
    start = _parse("--from", parse_instant, args.from_) if args.from_ else datetime.now(UTC)
    try:
        # An @every interval counts from the job's creation; previewed, from --from (or now).
        schedule = CronSchedule.parse(args.expression, args.tz, args.dst_repeated, args.dst_missing, anchor=start)
    except ScheduleError as exc:
        field = "--tz" if "time zone" in str(exc) else "expression"
        if str(exc).startswith("dst_"):
            field = "--dst-repeated" if args.dst_repeated else "--dst-missing"
        raise ValidationError(field, str(exc)) from None
    from schedulerd.core import bounds

    start_at = _parse("--start-at", parse_instant, args.start_at) if args.start_at else None
    end_at = _parse("--end-at", parse_instant, args.end_at) if args.end_at else None
    try:
        bounds.check_bounds(start_at, end_at, args.max_runs, recurring=True)
    except ValidationError as exc:
        raise _create_flag_error(exc) from None
    # As a job created at --from with these bounds would run.
    runs = bounds.next_runs(schedule.labelled_runs, start, args.count, bounds.Bounds(start_at, end_at, args.max_runs),
                            at=lambda r: r.at)  # fmt: skip
    if schedule.interval_s is not None and not args.json:
        print(f"{args.expression.strip()}: elapsed time counted from {_time(start)} (a job counts from its "
              "creation); DST does not move it")  # fmt: skip
    _print_preview(runs, args.tz, args.json)
    if not runs and not args.json:
        print(f"no runs after {_time(start)}" + (" inside the bounds" if start_at or end_at or args.max_runs else
              ": the calendar ends at 9999-12-31 (UTC and local)"))  # fmt: skip


async def _tz_report(args: argparse.Namespace, config: Config) -> None:
    from schedulerd import tzdb

    if not 1 <= args.limit <= 10000:
        raise ValidationError("--limit", f"must be between 1 and 10000, got {args.limit}")
    async with _Session(config) as jobs:
        last = await jobs.store.tz_recompute_last()
        moved = await jobs.store.tz_moved_job_list(last.id, tenant=args.tenant, limit=args.limit) if last else []
        versions = await jobs.store.job_tzdata_versions()
    here = tzdb.installed()
    report = {
        "this_host": {"tzdata_version": here.version, "source": here.source},
        "jobs_by_tzdata_version": {v or "unrecorded": n for v, n in versions.items()},
        "last_recompute": _jsonable(last) if last else None,
        "moved_jobs": [_jsonable(m) for m in moved],
    }
    if args.json:
        print(json.dumps(report))
        return
    print(f"tz database on this host: {here.version} ({here.source})")
    print("live cron jobs by recorded version: " + (", ".join(f"{v or 'unrecorded'} {n}" for v, n in versions.items()) or "none"))
    if last is None:
        print("no recompute recorded yet")
        return
    print(f"last recompute #{last.id} to {last.tzdata_version} ({last.tzdata_source}) by {last.worker}, "
          f"{_time(last.started_at)} - {_time(last.finished_at)}: "
          f"{last.jobs_checked} jobs checked, {last.jobs_moved} moved")  # fmt: skip
    rows = [(str(m.job_id), m.tenant, m.old_version or "-", str(m.removed), str(m.added),
             f"{m.moves[0][0] or '-'} -> {m.moves[0][1] or '-'}" if m.moves else "-") for m in moved]  # fmt: skip
    if rows:
        print(_table(rows, ("JOB", "TENANT", "FROM", "REMOVED", "ADDED", "FIRST MOVE (UTC)")))


def _failed_filter(args: argparse.Namespace) -> Any:
    from schedulerd.dead_letters import FailedFilter

    return FailedFilter(
        job_id=_uuid(args.job, "--job") if args.job else None, task=args.task, error=args.error,
        since=_parse("--since", parse_instant, args.since) if args.since else None,
        until=_parse("--until", parse_instant, args.until) if args.until else None,
    )  # fmt: skip


def _flag_error(exc: ValidationError) -> ValidationError:
    """The dead-letter service names fields; the CLI user typed flags."""
    flags = {"error": "--error", "since": "--since", "until": "--until", "filter": "--job/--task/--error/--since/--until"}
    return ValidationError(flags.get(exc.field, exc.field), exc.message, exc.limit)


async def _executions_failed(args: argparse.Namespace, config: Config) -> None:
    from schedulerd.dead_letters import DeadLetters

    which = _failed_filter(args)
    async with _Session(config) as jobs:
        try:
            failed = await DeadLetters(jobs.store, jobs.queue, config).list(args.tenant, which, limit=args.limit)
        except ValidationError as exc:
            raise _flag_error(exc) from None
    if args.json:
        print(json.dumps([{**_jsonable(f.execution), "task": f.task} for f in failed]))
        return
    header = ("ID", "JOB", "TASK", "TENANT", "ATTEMPT", "REDRIVES", "SCHEDULED_FOR", "FAILED_AT", "LAST_ERROR")
    rows = [
        (str(e.id), str(e.job_id)[:8], f.task, e.tenant, str(e.attempt), str(e.redrives), _time(e.scheduled_for),
         _time(e.finished_at), e.last_error.splitlines()[-1][:60] if e.last_error else "")
        for f in failed for e in [f.execution]
    ]  # fmt: skip
    print(_table(rows, header))


async def _executions_cancel(args: argparse.Namespace, config: Config) -> None:
    """executions cancel ID... | --job/--status/--label/--due-from/--due-to [--plan]."""
    from schedulerd.cancels import UNSTARTED, CancelFilter, Cancels
    from schedulerd.core.labels import parse_selector

    filters = [f for f, v in (("--job", args.job), ("--status", args.status), ("--label", args.label),
                              ("--due-from", args.due_from), ("--due-to", args.due_to)) if v is not None]  # fmt: skip
    ids = [_uuid(text, "id") for text in args.ids]
    if ids and filters:
        raise ValidationError("id", f"give execution ids or filters ({', '.join(filters)}), not both")
    if not ids and not filters:
        raise ValidationError("id", "give execution ids, or filters: --job, --status, --label, --due-from, --due-to")
    if ids and args.plan:
        raise ValidationError("--plan", "goes with filters (cancelling by id shows each result)")
    by = args.by or _cli_actor()
    async with _Session(config) as jobs:
        cancels = Cancels(jobs.store)
        if ids:
            await _cancel_each(cancels, ids, args, by)
            return
        which = CancelFilter(
            statuses=tuple(args.status) if args.status else UNSTARTED,
            job_id=_uuid(args.job, "--job") if args.job else None,
            selector=parse_selector(args.label, "--label") if args.label is not None else None,
            due_from=_flag_instant(args.due_from, "--due-from"), due_to=_flag_instant(args.due_to, "--due-to"),
        )  # fmt: skip
        done = await cancels.cancel_matching(args.tenant or "default", which, dry_run=args.plan, by=by)
    if args.json:
        print(json.dumps({"dry_run": done.dry_run, "matched": done.matched, "stop_requested": done.stop_requested,
                          "sample": done.sample, "action": _jsonable(done.action) if done.action else None}))  # fmt: skip
        return
    running = f" ({done.stop_requested} running: asked to stop)" if done.stop_requested else ""
    if done.dry_run:
        for row in done.sample:
            print(f"{row['id']}  {row['status']:8} due {row['due_at']}")
        print(f"plan: {_plural(done.matched, 'execution')} would be cancelled{running} (nothing changed; run again "
              "without --plan)")
        return
    print(f"{_plural(done.matched, 'execution')} cancelled{running}")


async def _cancel_each(cancels: Any, ids: list[UUID], args: argparse.Namespace, by: str) -> None:
    """Cancel executions one by one; one settled first is reported (exit 1 at the end), not fatal."""
    from schedulerd.errors import TooLateError

    too_late: list[str] = []
    for execution_id in ids:
        try:
            done = await cancels.cancel(execution_id, args.tenant, by=by)
        except TooLateError as exc:
            too_late.append(str(exc))
            continue
        e = done.execution
        if args.json:
            print(json.dumps(_jsonable(e)))
        elif done.stop_requested or e.status == "running":
            print(f"execution {e.id} running: asked to stop (its handler is cancelled at the next heartbeat)")
        else:
            print(f"execution {e.id} cancelled")
    if too_late:
        raise TooLateError("; ".join(too_late), "settled")


def _flag_instant(text: str | None, flag: str) -> datetime | None:
    if text is None:
        return None
    try:
        return parse_instant(text)
    except ValueError as exc:
        raise ValidationError(flag, str(exc)) from None


async def _executions_redrive(args: argparse.Namespace, config: Config) -> None:
    from schedulerd.dead_letters import DeadLetters

    which = _failed_filter(args)
    ids = [_uuid(text, "id") for text in args.ids]
    if ids and not which.empty:
        raise ValidationError("id", "give execution ids or filters (--job, --task, --error, --since, --until), not both")
    async with _Session(config) as jobs:
        dead_letters = DeadLetters(jobs.store, jobs.queue, config)
        by = args.by or _cli_actor()
        try:
            done = await (dead_letters.redrive(ids, args.tenant, by=by) if ids
                          else dead_letters.redrive_matching(args.tenant, which, by=by))  # fmt: skip
        except ValidationError as exc:
            raise _flag_error(exc) from None
    if args.json:
        print(json.dumps({"redriven": [str(i) for i in done.execution_ids],
                          "not_redriven": [str(i) for i in done.not_redriven], "more": done.more}))  # fmt: skip
        return
    for execution_id in done.execution_ids:
        print(f"execution {execution_id} redriven")
    print(f"{_plural(len(done.execution_ids), 'execution')} redriven" + (f", {len(done.not_redriven)} not (job paused or deleted, or "
          "redriven meanwhile)" if done.not_redriven else "") + ("; more match: run it again" if done.more else ""))
def _since(text: str | None) -> datetime:
    """--since: an ISO 8601 instant, or a duration meaning that long ago; default 24 h ago."""
    if text is None:
        return datetime.now(UTC) - timedelta(days=1)
    try:
        return parse_instant(text)
    except ValueError as exc:
        as_instant = str(exc)
    try:
        return datetime.now(UTC) - timedelta(seconds=parse_duration_s(text))
    except ValueError:
        if "outside" in as_instant or "too long" in as_instant:  # an instant, but not one we can hold
            raise ValidationError("--since", as_instant) from None
        raise ValidationError("--since", f"{text!r} is neither an ISO 8601 instant with offset nor a duration (6h)") from None


async def _executions_late(args: argparse.Namespace, config: Config, job_id: UUID | None) -> None:
    from schedulerd.late_runs import LateRuns

    if args.status:
        raise ValidationError("--status", "cannot be combined with --late (use --reason)")
    since = _since(args.since)
    async with _Session(config) as jobs:
        listed = await LateRuns(jobs.store, config).list(
            since=since, tenant=args.tenant, job_id=job_id, reason=args.reason, limit=args.limit
        )
    if args.json:
        print(json.dumps([{**_jsonable(x.execution), "late_reason": x.why} for x in listed]))
        return
    header = ("ID", "JOB", "SCHEDULED_FOR", "STATUS", "LATE_REASON", "STARTED", "LAG", "ATTEMPT", "REASON")
    rows = [
        (str(x.execution.id), str(x.execution.job_id)[:8], _time(x.execution.scheduled_for), x.execution.status, x.why,
         _time(x.execution.first_started_at),
         f"{(x.execution.first_started_at - x.execution.scheduled_for).total_seconds():.1f}s" if x.execution.first_started_at else "-",
         str(x.execution.attempt), x.execution.reason or "")
        for x in listed
    ]  # fmt: skip
    print(_table(rows, header) if rows else f"no late or missed occurrences scheduled since {_time(since)}")


async def _job_why(args: argparse.Namespace, config: Config) -> None:
    from schedulerd.late_runs import LateRuns

    job_id = _uuid(args.id, "id")
    async with _Session(config) as jobs:
        job = await jobs.get(job_id)
        at = _parse("--at", lambda text: resolve_at(text, job.timezone, datetime.now(UTC)), args.at)
        answer = await LateRuns(jobs.store, config).why(job, at)
        attempts = await jobs.store.attempt_list(answer.execution.id) if answer.execution else []
    if args.json:
        print(json.dumps({
            "job_id": str(job_id), "asked_at": at.isoformat(),
            "scheduled_for": answer.scheduled_for.isoformat() if answer.scheduled_for else None,
            "execution": _jsonable(answer.execution) if answer.execution else None,
            "late_reason": answer.late_reason, "answer": answer.answer,
            "attempts": [{**_jsonable(a), "duration_s": a.duration_s} for a in attempts],
        }))  # fmt: skip
        return
    local = ZoneInfo(job.timezone)
    print(f"job {job.id} ({job.cron or job.schedule_kind}, {job.timezone}), asked about {_time(at)}")
    if answer.scheduled_for is not None:
        print(f"nearest occurrence   {answer.scheduled_for.astimezone(local).strftime('%Y-%m-%d %H:%M:%S %Z')}  "
              f"{_time(answer.scheduled_for)}")  # fmt: skip
    execution = answer.execution
    if execution is not None:
        print(f"execution            {execution.id}")
        print(f"status               {execution.status}" + (f" (reason {execution.reason})" if execution.reason else ""))
        print(f"attempts             {execution.attempt}; first started {_time(execution.first_started_at)}")
    print(f"late reason          {answer.late_reason or '-'}")
    print(f"answer               {answer.answer}")
    for a in attempts:
        print(f"  attempt {a.attempt}: {a.outcome} at {_time(a.started_at)} on {a.worker or '-'}"
              + (f": {(a.error or '').splitlines()[-1][:80]}" if a.error else ""))  # fmt: skip


async def _executions_list(args: argparse.Namespace, config: Config) -> None:
    job_id = _uuid(args.job, "--job") if args.job else None
    if not 1 <= args.limit <= 1000:
        raise ValidationError("--limit", f"must be between 1 and 1000, got {args.limit}")
    if args.late:
        return await _executions_late(args, config, job_id)
    if args.status == ExecutionStatus.FAILED:
        return await _executions_failed(args, config)
    for flag in ("task", "error", "until"):
        if getattr(args, flag) is not None:
            raise ValidationError(f"--{flag}", "filters failed executions only: add --status failed")
    if args.since or args.reason:
        raise ValidationError("--since" if args.since else "--reason", "applies only with --late or --status failed")
    async with _Session(config) as jobs:
        executions = await jobs.store.execution_list(tenant=args.tenant, job_id=job_id, status=args.status, limit=args.limit)
    if args.json:
        print(json.dumps([_jsonable(e) for e in executions]))
        return
    header = ("ID", "JOB", "STATUS", "ATTEMPT", "SCHEDULED_FOR", "STARTED", "FINISHED", "LAST_ERROR / REASON")
    rows = [
        (str(e.id), str(e.job_id)[:8], e.status, str(e.attempt), _time(e.scheduled_for), _time(e.first_started_at),
         _time(e.finished_at), e.last_error.splitlines()[-1][:60] if e.last_error and e.status != ExecutionStatus.SUCCEEDED
         else e.reason or "-")
        for e in executions
    ]  # fmt: skip
    print(_table(rows, header))


async def _executions_show(args: argparse.Namespace, config: Config) -> None:
    execution_id = _uuid(args.id, "id")
    async with _Session(config) as jobs:
        execution = await jobs.store.execution_get(execution_id)
        attempts = await jobs.store.attempt_list(execution_id) if execution else []
        redrives = await jobs.store.redrive_list(execution_id) if execution else []
    if execution is None:
        raise NotFoundError(f"execution {execution_id} not found")
    if args.json:
        print(json.dumps({**_jsonable(execution), "job_version": execution.job_version or 1, "attempts": [{**_jsonable(a), "duration_s": a.duration_s} for a in attempts],
                          "redrives": [_jsonable(r) for r in redrives]}))  # fmt: skip
        return
    for key, value in asdict(execution).items():
        if key == "last_error" and execution.status == ExecutionStatus.SUCCEEDED:
            value = None  # an earlier attempt's error is not this success's: it stays in the attempts below
        if key == "job_version":
            value = value or 1  # rows written before versions existed
        print(f"{key:17} {_shown(value)}")
    print()
    header = ("ATTEMPT", "FENCE", "WORKER", "STARTED", "FINISHED", "DURATION", "OUTCOME", "ERROR")
    rows = [
        (a.fence, (str(a.attempt), str(a.fence), a.worker or "-", _time(a.started_at), _time(a.finished_at),
         f"{a.duration_s:.3f}s", a.outcome, (a.error or "").splitlines()[-1][:80] if a.error else ""))
        for a in attempts
    ] + [
        (r.fence, ("-", str(r.fence), r.redriven_by, _time(r.redriven_at), "-", "-", "redriven",
         f"new attempt budget after {r.attempts_before} attempts"))
        for r in redrives
    ]  # fmt: skip
    # Attempts and redrives interleave by fence: each redrive raised it, between two budgets.
    print(_table([row for _, row in sorted(rows, key=lambda r: r[0])], header) if rows else "no finished attempts yet")


def _span(seconds: float) -> str:
    """A length of time for people: '0.4 s', '12 s', '4 min 5 s', '5 h 59 min', '2 d 3 h'."""
    seconds = abs(seconds)
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def _plural(count: int, word: str, plural: str | None = None) -> str:
    """'1 execution', '2 executions', '0 lines'."""
    return f"{count} {word if count == 1 else plural or word + 's'}"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{key} {value:,}" for key, value in counts.items()) or "none"


async def _status(args: argparse.Namespace, config: Config) -> None:
    from schedulerd import overview

    async with _Session(config) as jobs:
        fleet = await overview.fleet(jobs.store, jobs.queue, config)
    now, report = fleet.now, fleet.report
    oldest_queued, oldest_pending, depth = fleet.oldest_queued_due_at, fleet.oldest_pending_due_at, report["queue_depth"]
    if args.json:
        print(json.dumps(report))
        return
    print(f"schedulerd status at {_time(now)} (Postgres's clock)")
    print()
    print(f"replicas seen in the last minute: {len(report['replicas'])}")
    rows = [(r["worker_id"], ", ".join(r["roles"]), r["version"], _span(r["up_s"]), f"{_span(r['seen_s_ago'])} ago")
            for r in report["replicas"]]  # fmt: skip
    if rows:
        print(_indent(_table(rows, ("WORKER", "ROLES", "VERSION", "UP", "LAST SEEN"))))
    else:
        print("  none: no daemon has reported in the last minute (is `schedulerd run` running?)")

    def due(at: datetime | None, none: str) -> str:
        if at is None:
            return none
        ahead = (at - now).total_seconds()
        return f"due {_span(ahead)} from now" if ahead > 0 else f"due {_span(ahead)} ago"

    horizon_s = report["materialiser_horizon_s"]
    lines = [
        ("queue", [
            ("depth (Redis)", f"{depth:,}" if depth is not None else "unknown: Redis did not answer"),
            ("oldest queued", due(oldest_queued, "none queued")
             + (" (queued ahead of time; the dispatcher queues what falls due within "
                f"{_span(config.dispatcher.horizon_s)})" if oldest_queued and oldest_queued > now else "")),
            ("oldest pending", due(oldest_pending, "none pending")),
            ("materialiser horizon", "no enabled cron jobs" if horizon_s is None
             else f"{_span(horizon_s)} ahead" if horizon_s >= 0 else f"BEHIND by {_span(horizon_s)}"),
        ]),
        ("last 5 minutes", [
            ("started", f"{report['started_last_5m']:,}"),
            ("start lag", "-" if report["start_lag_last_5m_s"]["p50"] is None else "  ".join(
                f"{k} {v:.3f} s" for k, v in report["start_lag_last_5m_s"].items() if v is not None)),
        ]),
        ("last hour", [
            ("failed", f"{report['failed_last_hour']:,}"),
            ("by status", _counts(report["last_hour_by_status"])),
            ("late, by reason", _counts(report["late_last_hour_by_reason"])),
        ]),
        ("now", [("parked, by reason", _counts({k: v for k, v in report["parked_by_reason"].items() if v}))]),
        ("due next", [(f"within {window}", f"{count:,}") for window, count in report["due_next"].items()]),
    ]  # fmt: skip
    for title, pairs in lines:
        print()
        print(title)
        for label, text in pairs:
            print(f"  {label:22} {text}")


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


async def _breakers(args: argparse.Namespace, config: Config) -> None:
    from schedulerd.core.breaker import parse
    from schedulerd.queue import Breakers

    async with _Session(config) as jobs:
        shared = Breakers(jobs.queue.client, config.redis.prefix)
        if args.reset:
            if not await shared.reset(args.reset):
                raise NotFoundError(f"no breaker {args.reset!r} is open or counting failures")
            print(f"breaker {args.reset} closed")
            return
        states = sorted((parse(k, v) for k, v in (await shared.states()).items()), key=lambda b: b.key)

    def at(ms: int) -> str | None:
        return _time(datetime.fromtimestamp(ms / 1000, UTC)) if ms else None

    if args.json:
        print(json.dumps([{"key": b.key, "task": b.labels[0], "host": b.labels[1] or None, "state": b.state,
                           "consecutive_failures": b.failures, "opened_at": at(b.opened_ms),
                           "next_probe_at": at(b.probe_at_ms) if b.tripped else None} for b in states]))  # fmt: skip
        return
    rows = [(b.key, b.state, str(b.failures), at(b.opened_ms) or "-", (at(b.probe_at_ms) if b.tripped else None) or "-")
            for b in states]  # fmt: skip
    print(_table(rows, ("BREAKER", "STATE", "FAILURES", "OPENED", "NEXT PROBE")) if rows else "every breaker is closed")


async def _tenant_token(args: argparse.Namespace, config: Config) -> None:
    """`tenant create NAME` / `token create TENANT`: the token alone on the last line, shown once."""
    from schedulerd.tenants import Tenants

    async with _Session(config) as jobs:
        tenants = Tenants(jobs.store)
        issued = await (tenants.create(args.name) if args.command == "tenant" else tenants.issue_token(args.tenant))
    if args.command == "tenant":
        print(f"tenant {issued.tenant} created")
    print(f"token {issued.token_id} for tenant {issued.tenant} (shown once; only its hash is stored):")
    print(issued.token)


async def _tenant_quota(args: argparse.Namespace, config: Config) -> None:
    """`tenant quota NAME --in-flight N | --clear`."""
    from schedulerd.jobs import TENANT_PATTERN

    if not TENANT_PATTERN.match(args.name):
        raise ValidationError("name", f"{args.name!r} is not a tenant name (letters, digits, '_', '.', '-'; at most 64)")
    if not args.clear and args.in_flight is None:
        raise ValidationError("--in-flight", "is required (or --clear)")
    in_flight = None if args.clear else _parse("--in-flight", int, args.in_flight)
    if in_flight is not None and not 1 <= in_flight <= MAX_LIMIT:
        raise ValidationError("--in-flight", f"must be from 1 to {MAX_LIMIT}, got {in_flight}")
    async with _Session(config) as jobs:
        if args.clear:
            cleared = await jobs.store.tenant_quota_clear(args.name)
            if cleared is None:
                raise NotFoundError(f"tenant {args.name!r} has no quota set at runtime")
        else:
            await jobs.store.tenant_quota_set(args.name, in_flight)
    fallback = config.concurrency.caps.tenant_limit(args.name)
    if args.clear:
        print(f"tenant {args.name}: runtime quota removed; in force now: "
              + (f"{fallback} from [concurrency]" if fallback else "no quota"))
    else:
        print(f"tenant {args.name}: at most {in_flight} in flight, fleet-wide "
              f"(every replica within {config.concurrency.refresh_s:g} s)")


async def _tenant_quotas(args: argparse.Namespace, config: Config) -> None:
    """`tenant quotas`: the runtime quotas, then config's for the tenants without one."""
    async with _Session(config) as jobs:
        runtime = await jobs.store.tenant_quota_list()
    rows = [{"tenant": q.tenant, "in_flight": q.in_flight, "source": "runtime", "updated_at": _time(q.updated_at)} for q in runtime]
    named = {q.tenant for q in runtime}
    rows += [{"tenant": t, "in_flight": n, "source": "config", "updated_at": None}
             for t, n in sorted(config.concurrency.tenants.items()) if t not in named]  # fmt: skip
    default = config.concurrency.tenant_default
    if args.json:
        print(json.dumps({"quotas": rows, "tenant_default": default}))
        return
    table = [(r["tenant"], str(r["in_flight"]), r["source"], r["updated_at"] or "-") for r in rows]
    print(_table(table, ("TENANT", "IN FLIGHT", "SOURCE", "UPDATED")) if table else "no tenant quota is set")
    print(f"every other tenant: {default if default else 'no quota'} ([concurrency].tenant_default)")


async def _token_list_revoke(args: argparse.Namespace, config: Config) -> None:
    from schedulerd.tenants import Tenants

    token_id = _uuid(args.id, "id") if args.token_command == "revoke" else None
    async with _Session(config) as jobs:
        tenants = Tenants(jobs.store)
        listed = [await tenants.revoke(token_id)] if token_id is not None else await tenants.tokens(args.tenant)
    if args.json:
        print(json.dumps([_jsonable(t) for t in listed] if token_id is None else _jsonable(listed[0])))
        return
    if token_id is not None:
        print(f"token {token_id} of tenant {listed[0].tenant} revoked at {_time(listed[0].revoked_at)}")
        return
    rows = [(str(t.id), _time(t.created_at), _time(t.last_used_at), _time(t.revoked_at)) for t in listed]
    print(_table(rows, ("ID", "CREATED", "LAST USED", "REVOKED")) if rows else f"no tokens for tenant {args.tenant!r}")


def _tenant_flag(tenant: str) -> str:
    from schedulerd.jobs import TENANT_PATTERN

    if not TENANT_PATTERN.match(tenant):
        raise ValidationError("--tenant", "must be 1-64 characters of letters, digits, '_', '.', '-', starting with a letter or digit")
    return tenant


def _read_secret_value(name: str) -> str:
    """The value from standard input (one trailing newline dropped, as `echo` adds one), or asked
    for without echo on a terminal: never an argument, which `ps` and shell history would show."""
    if sys.stdin is None:
        raise ValidationError("value", "give the value on standard input")
    if sys.stdin.isatty():
        import getpass

        return getpass.getpass(f"value of secret {name}: ")
    value = sys.stdin.read()
    return value[:-2] if value.endswith("\r\n") else value.removesuffix("\n")


async def _secret(args: argparse.Namespace, config: Config) -> None:
    """secret set | list | delete | reseal."""
    from schedulerd.keyring import Keyring, require
    from schedulerd.signing_keys import SigningKeys
    from schedulerd.tenant_secrets import TenantSecrets, check_name

    keyring = Keyring.from_settings(config.secrets.key, config.secrets.previous_keys)
    command = args.secret_command
    if command == "set" and args.value is not None:
        raise ValidationError("value", "is read from standard input, never from the arguments (ps and shell history "
                              "show those): printf %s \"$VALUE\" | schedulerd secret set NAME")  # fmt: skip
    if command in ("set", "reseal"):
        require(keyring)  # before asking for a value that could not be stored
    tenant = _tenant_flag(args.tenant) if command != "reseal" else ""
    value = _read_secret_value(check_name(args.name)) if command == "set" else ""
    async with _Session(config) as jobs:
        secrets = TenantSecrets(jobs.store, keyring, config.secrets)
        if command == "reseal":
            moved = await secrets.reseal(), await SigningKeys(jobs.store, keyring, config.secrets).reseal()
            print(f"resealed {moved[0]} secret(s) and {moved[1]} signing key(s) with key {keyring.current_id if keyring else '-'}")
            return
        if command == "list":
            entries = await secrets.entries(tenant)
        else:
            entries = [await (secrets.put(tenant, args.name, value) if command == "set" else secrets.delete(tenant, args.name))]
    if args.json:
        print(json.dumps([_jsonable(e) for e in entries] if command == "list" else _jsonable(entries[0])))
    elif command == "list":
        rows = [(e.name, _time(e.created_at), _time(e.updated_at)) for e in entries]
        print(_table(rows, ("NAME", "CREATED", "UPDATED")) if rows else f"no secrets for tenant {tenant!r}")
    else:
        print(f"secret {entries[0].name} of tenant {tenant} {'set' if command == 'set' else 'deleted'}")


async def _signing_key(args: argparse.Namespace, config: Config) -> None:
    """signing-key rotate | list | retire: the new key's secret alone on the last line, shown once."""
    from schedulerd.keyring import Keyring
    from schedulerd.signing_keys import SigningKeys

    command, tenant = args.signing_key_command, _tenant_flag(args.tenant)
    grace_s = None
    if command == "rotate" and args.grace is not None:
        try:
            grace_s = parse_duration_s(args.grace)
        except ValueError as exc:
            raise ValidationError("--grace", str(exc)) from None
    async with _Session(config) as jobs:
        keys = SigningKeys(jobs.store, Keyring.from_settings(config.secrets.key, config.secrets.previous_keys), config.secrets)
        if command == "rotate":
            try:
                issued = await keys.rotate(tenant, grace_s)
            except ValidationError as exc:
                raise ValidationError("--grace", exc.message) from None
        else:
            entries = await keys.entries(tenant) if command == "list" else [await keys.retire(tenant, args.id)]
    if command == "rotate":
        if args.json:
            print(json.dumps(_jsonable(issued)))
            return
        print(f"signing key {issued.id} for tenant {tenant} (the secret is shown once; give it to the receiver):")
        print(issued.secret)
    elif args.json:
        print(json.dumps([_jsonable(e) for e in entries] if command == "list" else _jsonable(entries[0])))
    elif command == "list":
        rows = [(e.id, _time(e.created_at), _time(e.retires_at)) for e in entries]
        print(_table(rows, ("ID", "CREATED", "RETIRES")) if rows else f"no signing keys for tenant {tenant!r}")
    else:
        print(f"signing key {entries[0].id} of tenant {tenant} retired")


async def _migrate(args: argparse.Namespace, config: Config) -> None:
    from schedulerd import servers
    from schedulerd.store import migrate

    # Migrating needs only Postgres: a configured database URL is enough without a Redis one.
    applied = await migrate(config.database.url or servers.resolve(config).database_url)
    print(f"applied {applied} migration(s)" if applied else "database schema is current")


COMMANDS = {
    ("job", "create"): _job_create,
    ("job", "list"): _job_list,
    ("job", "show"): _job_action,
    ("job", "update"): _job_update,
    ("job", "pause"): _job_action,
    ("job", "resume"): _job_action,
    ("job", "delete"): _job_action,
    ("job", "trigger"): _job_action,
    ("job", "cancel"): _job_bulk_action,
    ("job", "next"): _job_next,
    ("job", "backfill"): _job_backfill,
    ("job", "why"): _job_why,
    ("cron", "next"): _cron_next,
    ("tz", "report"): _tz_report,
    ("executions", "list"): _executions_list,
    ("executions", "show"): _executions_show,
    ("executions", "redrive"): _executions_redrive,
    ("executions", "cancel"): _executions_cancel,
    ("migrate", None): _migrate,
    ("tenant", "create"): _tenant_token,
    ("tenant", "quota"): _tenant_quota,
    ("tenant", "quotas"): _tenant_quotas,
    ("token", "create"): _tenant_token,
    ("token", "list"): _token_list_revoke,
    ("token", "revoke"): _token_list_revoke,
    ("secret", "set"): _secret,
    ("secret", "list"): _secret,
    ("secret", "delete"): _secret,
    ("secret", "reseal"): _secret,
    ("signing-key", "rotate"): _signing_key,
    ("signing-key", "list"): _signing_key,
    ("signing-key", "retire"): _signing_key,
    ("status", None): _status,
    ("apply", None): _apply,
    ("breakers", None): _breakers,
}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # a reader that went away shows here, not as "Exception ignored" at exit
        return code
    except BrokenPipeError:
        # `schedulerd status | head`: the reader closed the pipe. Stop quietly with the status of a
        # command ended by SIGPIPE (SIGPIPE itself stays ignored: the sockets to Postgres and
        # Redis must raise, not kill). Standard output goes to /dev/null so the interpreter's
        # final flush finds nothing to complain about.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    try:
        config = config_module.load(args.config)
        from schedulerd.log import configure

        configure(config.log.level if args.command == "run" else "warning", config.log.format)
        if args.command == "run":
            from schedulerd.daemon import run

            run(config)
            return 0
        sub = getattr(args, f"{args.command.replace('-', '_')}_command", None)
        asyncio.run(COMMANDS[(args.command, sub)](args, config))
        return 0
    except (ValidationError, ConfigError, SchemaError) as exc:
        print(f"schedulerd: error: {exc}", file=sys.stderr)
        return 2
    except NotFoundError as exc:
        print(f"schedulerd: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        raise
    except (SchedulerdError, OSError) as exc:
        print(f"schedulerd: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
