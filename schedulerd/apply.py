"""Schedules as code: a declared set of jobs, each keyed by its name within a source (a file's
stem, or its `source = "..."`) per tenant, made true in ONE transaction (`schedulerd apply`,
Client.apply). The plan lists the jobs to add, to change (each with the next-runs diff of
Jobs.update's dry run), to remove (only with prune) and the drifted ones: edited elsewhere since
the last apply (their version is not the one that apply left), which an apply refuses to
overwrite unless forced.

Writes go through the doors every other write uses: creates through intake.Intake inside this
transaction (connection=), changes through Jobs.update(tx=), removals through Jobs.delete(tx=).
Redis follows after the commit: the executions due within the dispatcher's horizon are added
then (best effort: the dispatcher and the sweeper bring back any that a Redis failure drops).
A plan runs the same transaction and rolls it back, so it refuses exactly what the apply would.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import structlog
from pydantic import ValidationError as PydanticValidationError

from schedulerd.core.schedule import Run
from schedulerd.errors import ConflictError, ValidationError
from schedulerd.intake import Enqueued, Intake, Item, Refused
from schedulerd.job_fields import FIELDS
from schedulerd.jobs import TENANT_PATTERN, Edit, Jobs, JobSpec, labelled_next_runs, validate
from schedulerd.models import Enqueue, Job
from schedulerd.store import Store
from schedulerd.transient import enqueue_committed

log = structlog.get_logger("schedulerd.apply")

# The keys of a declared job: the API body's top-level names (retry and misfire are tables).
# An idempotency key has no meaning here: the name is what makes an apply repeatable.
JOB_KEYS = frozenset(f.body.split(".")[0] for f in FIELDS if f.body is not None) - {"idempotency_key"}
FILE_KEYS = frozenset({"source", "job"})
# What an apply compares between a declaration and its job (JobSpec / Job names), after the
# declaration took the [jobs] defaults (jobs.validate).
COMPARED = (
    "task", "name", "params", "cron", "run_at", "timezone", "misfire_policy", "catch_up_limit", "window_s",
    "max_attempts", "timeout_s", "backoff_base_s", "backoff_factor", "backoff_max_s", "dst_repeated", "dst_missing",
    "overlap", "labels", "start_at", "end_at", "max_runs", "priority", "concurrency_key", "concurrency_limit",
    "rate_key", "rate_limit", "rate_window_s", "notify_url", "notify_on", "pause_after_failures",
)  # fmt: skip
# Fields an edit cannot change: a job declared with another of these is a new job.
FIXED = ("task", "start_at", "end_at", "max_runs")
NEXT_RUNS = 5  # runs shown for an added job
MAX_SOURCE = 200


@dataclass(frozen=True)
class Declaration:
    """One declared job: its name (the key within the source) and the spec it asks for."""

    name: str
    spec: JobSpec


@dataclass(frozen=True)
class Added:
    name: str
    job: Job
    next_runs: list[Run]


@dataclass(frozen=True)
class Changed:
    name: str
    fields: tuple[str, ...]  # JobSpec names of what differs
    edit: Edit  # Jobs.update's answer: the job after it and its next runs removed / kept / added
    drifted: bool = False  # edited elsewhere since the last apply (written only when forced)


@dataclass(frozen=True)
class Removed:
    name: str
    job: Job


@dataclass(frozen=True)
class Drift:
    """A job edited elsewhere since the last apply whose declaration now differs from it."""

    name: str
    job: Job
    applied_version: int | None
    fields: tuple[str, ...]


@dataclass
class Plan:
    """What an apply did (applied) or would do. `undeclared`: jobs of the source the declarations
    no longer name, kept (prune removes them: then they are in `removed`). `drifted`: jobs edited
    elsewhere whose change (or removal) is refused unless forced."""

    tenant: str
    source: str
    added: list[Added] = field(default_factory=list)
    changed: list[Changed] = field(default_factory=list)
    removed: list[Removed] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    undeclared: list[Removed] = field(default_factory=list)
    drifted: list[Drift] = field(default_factory=list)
    applied: bool = False


class DriftError(ConflictError):
    """Jobs of the source were edited elsewhere since the last apply: nothing was written."""

    def __init__(self, plan: Plan) -> None:
        names = ", ".join(d.name for d in plan.drifted)
        super().__init__("drift", f"edited since the last apply of {plan.source!r}: {names}; nothing was written "
                         "(apply with force to overwrite, or change the declarations to match)")  # fmt: skip
        self.plan = plan


class _Rollback(Exception):
    """Ends a plan's transaction without committing."""


def load(path: str | Path) -> tuple[str, list[dict[str, Any]]]:
    """A schedules file: its source (the `source` key, else the file's stem) and its [[job]] tables."""
    path = Path(path)
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValidationError(str(path), f"cannot read it: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValidationError(str(path), f"is not valid TOML ({exc})") from None
    return parsed(document, str(path), path.stem)


def parsed(document: Mapping[str, Any], where: str, default_source: str | None) -> tuple[str, list[dict[str, Any]]]:
    """A parsed schedules file's source and [[job]] tables (`where` names it in a refusal)."""
    unknown = sorted(set(document) - FILE_KEYS)
    if unknown:
        raise ValidationError(f"{where}: {unknown[0]}", "is not a key of a schedules file (source, and [[job]] tables)")
    jobs = document.get("job", [])
    if not isinstance(jobs, list) or not all(isinstance(j, Mapping) for j in jobs):
        raise ValidationError(f"{where}: job", "must be [[job]] tables")
    source = document.get("source", default_source)
    if source is None:
        raise ValidationError(f"{where}: source", "is required (the name the jobs of this set are kept under)")
    return check_source(source), [dict(j) for j in jobs]


def declarations(documents: Sequence[Mapping[str, Any]], tenant: str, where: str = "declarations") -> list[Declaration]:
    """The declared jobs, each checked against the API body's fields; a refusal names `where`
    (the file), the job and the key, and nothing is written."""
    from schedulerd.api.schemas import JobCreate, pydantic_field

    if isinstance(documents, Mapping) or not isinstance(documents, Sequence):
        raise ValidationError(where, "must be a list of job declarations")
    seen: set[str] = set()
    declared: list[Declaration] = []
    for index, document in enumerate(documents):
        if not isinstance(document, Mapping):
            raise ValidationError(f"{where}: job {index + 1}", "must be a table of fields")
        name = document.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ValidationError(f"{where}: job {index + 1}: name", "is required: a job is keyed by its name")
        at = f"{where}: job {name!r}"
        unknown = sorted(set(document) - JOB_KEYS)
        if unknown:
            raise ValidationError(f"{at}: {unknown[0]}", "is not a field of a job")
        if name in seen:
            raise ValidationError(f"{at}: name", "is declared twice")
        seen.add(name)
        if document.get("cron") is None and document.get("run_at") is None:
            raise ValidationError(f"{at}: cron", "a declared job needs a cron or a run_at (a job to run now is not a schedule)")
        try:
            body = JobCreate.model_validate(dict(document))
        except PydanticValidationError as exc:
            key, message = pydantic_field(exc, "job")
            raise ValidationError(f"{at}: {key}", message) from None
        declared.append(Declaration(name, body.spec(tenant)))
    return declared


def check_source(source: Any) -> str:
    if not isinstance(source, str) or not 1 <= len(source) <= MAX_SOURCE or not source.isprintable():
        raise ValidationError("source", f"must be 1-{MAX_SOURCE} printable characters")
    return source


class Apply:
    def __init__(self, store: Store, intake: Intake, jobs: Jobs) -> None:
        self.store = store
        self.intake = intake
        self.jobs = jobs

    async def apply(
        self, declared: Sequence[Declaration], *, tenant: str, source: str, plan_only: bool = False,
        prune: bool = False, force: bool = False,
    ) -> Plan:  # fmt: skip
        """Make the source's jobs what `declared` says, in one transaction (plan_only: work it out
        the same way and roll it back). Raises DriftError (nothing written) when a job to change or
        remove was edited elsewhere since the last apply and not `force`; ValidationError naming
        the job and field for a declaration an edit or a create refuses."""
        if not TENANT_PATTERN.match(tenant):
            raise ValidationError("tenant", "must be 1-64 characters of letters, digits, '_', '.', '-'")
        check_source(source)
        plan = Plan(tenant, source)
        to_queue: list[Enqueue] = []
        try:
            async with self.store.transaction() as tx:
                await self._run(tx, plan, declared, to_queue, plan_only, prune, force)
                if plan_only or (plan.drifted and not force):
                    raise _Rollback
        except _Rollback:
            if not plan_only:
                raise DriftError(plan) from None
            return plan
        await enqueue_committed(self.intake.queue, to_queue, "apply.enqueue_failed", only_new=False)
        log.info("apply.applied", tenant=tenant, source=source, added=len(plan.added), changed=len(plan.changed),
                 removed=len(plan.removed), forced=len([c for c in plan.changed if c.drifted]))  # fmt: skip
        return _applied(plan)

    async def _run(
        self, tx: Store, plan: Plan, declared: Sequence[Declaration], to_queue: list[Enqueue], plan_only: bool,
        prune: bool, force: bool,
    ) -> None:  # fmt: skip
        locked = {job.name: (job, applied) for job, applied in await tx.job_lock_source(plan.tenant, plan.source)}
        now = await tx.clock_now()
        marks: list[UUID] = []
        new: list[Declaration] = []
        for d in sorted(declared, key=lambda d: d.name):
            if d.spec.tenant != plan.tenant:
                raise ValidationError(f"job {d.name!r}: tenant", f"must be the apply's tenant {plan.tenant!r}")
            if d.name not in locked:
                new.append(d)
                continue
            job, applied = locked.pop(d.name)
            differing = _differing(d, job, self.jobs, now)
            drifted = applied != job.version
            if not differing:
                plan.unchanged.append(d.name)
                if drifted:  # edited elsewhere, back to what is declared: in step again
                    marks.append(job.id)
                continue
            if drifted:
                plan.drifted.append(Drift(d.name, job, applied, differing))
                if not force:
                    continue
            fixed = [f for f in differing if f in FIXED]
            if fixed:
                raise ValidationError(f"job {d.name!r}: {fixed[0]}", "cannot be changed in place; rename the job to "
                                      "replace it (with prune the old one is removed)")  # fmt: skip
            changes = {f: getattr(d.spec, f) for f in differing}
            try:
                edit = await self.jobs.update(job.id, changes, plan.tenant, dry_run=plan_only, tx=tx)
            except ValidationError as exc:
                raise ValidationError(f"job {d.name!r}: {exc.field}", exc.message, exc.limit) from None
            plan.changed.append(Changed(d.name, differing, edit, drifted))
            to_queue.extend(edit.enqueue)
            marks.append(job.id)
        if new:
            results, queued = await self.intake.create_many([Item(d.spec) for d in new], connection=tx.db, with_jobs=True)
            for d, result in zip(new, results, strict=True):
                if isinstance(result, Refused):
                    raise ValidationError(f"job {d.name!r}: {result.field}", result.message, result.limit)
                assert isinstance(result, Enqueued) and result.job is not None
                plan.added.append(Added(d.name, result.job, labelled_next_runs(result.job, now, NEXT_RUNS)))
                marks.append(result.job_id)
            to_queue.extend(queued)
        for name, (job, applied) in sorted(locked.items(), key=lambda item: (item[0] or "", item[1][0].id)):
            if not prune:
                plan.undeclared.append(Removed(name, job))
                continue
            if applied != job.version:
                plan.drifted.append(Drift(name, job, applied, ()))
                if not force:
                    continue
            if plan_only:
                plan.removed.append(Removed(name, job))
            else:
                deleted, _ = await self.jobs.delete(job.id, plan.tenant, tx=tx)
                plan.removed.append(Removed(name, deleted))
        if marks and not plan_only:
            await tx.job_mark_applied_many(marks, plan.source)


def _differing(d: Declaration, job: Job, jobs: Jobs, now: datetime) -> tuple[str, ...]:
    """The fields where the job is not what the declaration asks (its defaults filled in)."""
    try:
        values = validate(d.spec, jobs.config, now, known_tasks={d.spec.task})
    except ValidationError as exc:
        raise ValidationError(f"job {d.name!r}: {exc.field}", exc.message, exc.limit) from None
    return tuple(f for f in COMPARED if values[f] != getattr(job, f))


def _applied(plan: Plan) -> Plan:
    plan.applied = True
    return plan


def summary(plan: Plan) -> dict[str, Any]:
    """The plan as JSON values (the CLI's --json)."""

    def runs(items: list[Run]) -> list[dict[str, Any]]:
        return [{"utc": r.at.isoformat(), "labels": list(r.labels)} for r in items]

    return {
        "tenant": plan.tenant, "source": plan.source, "applied": plan.applied,
        "added": [{"name": a.name, "job_id": str(a.job.id) if plan.applied else None, "next_runs": runs(a.next_runs)}
                  for a in plan.added],
        "changed": [{"name": c.name, "job_id": str(c.edit.job.id), "fields": list(c.fields), "drifted": c.drifted,
                     "removed": runs(c.edit.removed), "kept": runs(c.edit.kept), "added": runs(c.edit.added)}
                    for c in plan.changed],
        "removed": [{"name": r.name, "job_id": str(r.job.id)} for r in plan.removed],
        "unchanged": plan.unchanged,
        "undeclared": [{"name": r.name, "job_id": str(r.job.id)} for r in plan.undeclared],
        "drifted": [{"name": d.name, "job_id": str(d.job.id), "version": d.job.version,
                     "applied_version": d.applied_version, "fields": list(d.fields)} for d in plan.drifted],
    }  # fmt: skip
