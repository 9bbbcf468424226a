"""The /v1 job endpoints: create (one, or a batch), list, read, edit (PATCH), and steer (pause,
resume, trigger, backfill, delete). Thin handlers over the Jobs and Intake services, scoped to the caller's tenant."""

import hashlib
import math
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from uuid import UUID
from zoneinfo import ZoneInfo

import structlog
from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import JSONResponse
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import PydanticSerializationError

from schedulerd import tracing
from schedulerd.api import schemas
from schedulerd.api.errors import ERRORS, ApiError, pydantic_error
from schedulerd.api.routes.common import PAGE_SIZE_DOC, Cursor, actor, decode_cursor, encode_cursor, own_live_job, read_job
from schedulerd.api.services import Services
from schedulerd.api.views import execution_view, job_view
from schedulerd.core.schedule import Run
from schedulerd.errors import ConflictError, StaleVersionError, ValidationError
from schedulerd.intake import KEY_IN_FLIGHT, EditKey, Enqueued, Item, Refused
from schedulerd.jobs import JOB_STATES, LISTED_BY_DEFAULT, Edit, job_filter, labelled_next_runs
from schedulerd.models import Job
from schedulerd.overrun_watch import overruns
from schedulerd.tenants import Principal

log = structlog.get_logger("schedulerd.api")
STATE_DOC = (f"a comma-separated list of {', '.join(JOB_STATES)}, or all; default {','.join(LISTED_BY_DEFAULT)} "
             "(done jobs, finished one-offs among them, are hidden), with deleted when include_deleted")  # fmt: skip
IDEMPOTENCY_KEY = Header(None, alias="Idempotency-Key", min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$",
                         description="repeat a create safely: the same key returns the first result")  # fmt: skip
# Not constrained here: W3C Trace Context says a malformed one is ignored, not refused (tracing.of_request).
TRACEPARENT = Header(None, alias="traceparent", description=(
    "W3C Trace Context of the caller's span: stored with each one-off execution created, whose first attempt's span "
    "is its child (docs/tracing.md); ignored when malformed"))  # fmt: skip


def _refused_view(index: int, code: str, field: str | None, message: str, limit: str | None) -> dict[str, Any]:
    return {"index": index, "result": "refused", "job_id": None, "executions": [],
            "error": {"code": code, "message": message, "field": field, "limit": limit}}  # fmt: skip


def _created(job: Job) -> dict[str, Any]:
    """POST /v1/jobs's answer: the job, and its next runs from the instant it was created (a
    one-off's: the instant it was queued for)."""
    view = job_view(job, job.created_at)
    return schemas.JobCreated(job=view, next_runs=view.next_runs if job.cron else [job.run_at]).model_dump(mode="json")


def _body_hash(body: schemas.JobCreate) -> bytes | None:
    """The digest that tells a replay from another request with the same key. None when the body
    cannot be serialised (a lone surrogate, deep nesting): validation refuses it, naming the field,
    before any hash is needed."""
    try:
        # Defaults are left out: a key taken before priorities or limits existed still matches its retry.
        unset = {name for name, default in (("priority", 5), ("concurrency", None), ("rate_limit", None))
                 if getattr(body, name) == default}  # fmt: skip
        return hashlib.sha256(body.model_dump_json(exclude=unset or None).encode()).digest()
    except (ValueError, RecursionError, PydanticSerializationError):
        return None


def _run_view(run: Run, zone: ZoneInfo) -> dict[str, Any]:
    return {"at": run.at.isoformat(), "local": run.at.astimezone(zone).isoformat(), "labels": list(run.labels), "note": run.note}


def edited_view(edit: Edit) -> dict[str, Any]:
    """PATCH /v1/jobs/{id}'s answer (schemas.JobEdited), as JSON values."""
    job, zone = edit.job, ZoneInfo(edit.job.timezone)
    return {
        "job": job_view(job, job.updated_at).model_dump(mode="json"), "dry_run": edit.dry_run,
        "removed": [_run_view(r, zone) for r in edit.removed], "kept": [_run_view(r, zone) for r in edit.kept],
        "added": [_run_view(r, zone) for r in edit.added],
        "cancelled_executions": edit.cancelled, "written_executions": edit.written,
    }  # fmt: skip


def _if_match(value: str | None) -> int | None:
    """If-Match: the job version the edit expects, bare or as an entity tag ("3", W/"3")."""
    if value is None:
        return None
    text = value.strip().removeprefix("W/").strip('"')
    if not text.isdigit() or not 1 <= len(text) <= 9:
        raise ApiError(422, "validation", "must be the job's version (a positive integer)", field="If-Match")
    return int(text)


def router(services: Services, caller: Callable[..., Awaitable[Principal]]) -> APIRouter:
    api = APIRouter(prefix="/v1", responses=ERRORS)
    jobs, config, reads = services.jobs, services.config, services.reads
    Caller = Annotated[Principal, Depends(caller)]
    PageSize = Annotated[int, Query(ge=1, le=config.api.page_size_max, description=PAGE_SIZE_DOC)]

    @api.post("/jobs", status_code=201, response_model=schemas.JobCreated, tags=["jobs"], summary="create a job",
              responses={409: {"model": schemas.ErrorBody, "description": "Idempotency-Key reused with another body"}})
    async def create_job(
        body: schemas.JobCreate, who: Caller, idempotency_key: str | None = IDEMPOTENCY_KEY,
        traceparent: str | None = TRACEPARENT,
    ) -> Any:  # fmt: skip
        spec = body.spec(who.tenant)
        context = tracing.of_request(traceparent)
        # Shares a transaction with the creates of concurrent requests (intake.SharedBatches). A
        # key is claimed before the job is written, recorded with the response a replay answers.
        item = Item(spec, debounce=body.debounced(), traceparent=context) if idempotency_key is None \
            else Item(spec, idempotency_key, _body_hash(body), _created, body.debounced(), context)  # fmt: skip
        result = await services.shared.create(item)
        if isinstance(result, Refused):
            if result.code == "conflict":
                message = "a request with this Idempotency-Key is in flight; retry" if result.message == KEY_IN_FLIGHT \
                    else "this Idempotency-Key was used with a different request body"  # fmt: skip
                raise ApiError(409, "conflict", message, field="Idempotency-Key")
            raise ValidationError(result.field, result.message, result.limit)
        # Sent as built: FastAPI would validate and serialise the response model a second time.
        if result.replayed:
            return JSONResponse(result.response, status_code=201, headers={"Idempotent-Replayed": "true"})
        assert result.job is not None
        return JSONResponse(result.response if result.response is not None else _created(result.job), status_code=201)

    @api.post("/jobs/batch", response_model=schemas.JobBatchResult, tags=["jobs"],
              summary="create up to api.batch_max jobs: each item is validated and answered on its own",
              responses={413: {"model": schemas.ErrorBody, "description": "body over api.max_batch_body_bytes"}})  # fmt: skip
    async def create_batch(body: schemas.JobBatch, who: Caller, traceparent: str | None = TRACEPARENT) -> Any:
        items = body.items
        context = tracing.of_request(traceparent)
        if len(items) > config.api.batch_max:
            raise ApiError(422, "limit_exceeded", f"a batch holds at most {config.api.batch_max} items, got {len(items)}",
                           field="items", limit="api.batch_max")  # fmt: skip
        await count_items(who, len(items) - 1)  # the request itself was counted by `caller`
        results: list[dict[str, Any] | None] = [None] * len(items)
        accepted: list[Item] = []
        numbers: list[int] = []
        for index, raw in enumerate(items):
            try:
                item = schemas.JobBatchItem.model_validate(raw)
            except PydanticValidationError as exc:
                refused = pydantic_error([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()])
                results[index] = _refused_view(index, refused.code, refused.field, refused.message, refused.limit)
                continue
            # Hashed apart from POST /v1/jobs: a key is one create's, by one endpoint.
            request_hash = hashlib.sha256(b"batch:" + item.model_dump_json(exclude={"idempotency_key"}).encode()).digest()
            accepted.append(Item(item.spec(who.tenant), item.idempotency_key, request_hash, debounce=item.debounced(),
                                 traceparent=context))  # fmt: skip
            numbers.append(index)
        done, _ = await services.intake.create_many(accepted, numbers=numbers) if accepted else ([], [])
        for result in done:
            if isinstance(result, Enqueued):
                results[result.index] = {
                    "index": result.index, "result": "replayed" if result.replayed else "created", "job_id": str(result.job_id),
                    "executions": [{"id": str(e.id), "due_at": e.due_at.isoformat(), "status": e.status} for e in result.executions],
                    "error": None,
                }  # fmt: skip
            else:
                field = schemas.BODY_FIELDS.get(result.field, result.field)
                results[result.index] = _refused_view(result.index, result.code, field, result.message, result.limit)
        counts = {"created": 0, "replayed": 0, "refused": 0}
        for view in results:
            counts[view["result"]] += 1  # type: ignore[index]
        log.info("api.batch", tenant=who.tenant, **counts)
        # Built by hand and sent as is: validating a thousand response models cost more than the inserts.
        return JSONResponse({**counts, "items": results})

    async def count_items(who: Principal, more: int) -> None:
        """Count a batch's items against the token's rate limit (api.rate_limit counts jobs)."""
        if more <= 0:
            return
        api_config = config.api
        counted = await services.counter.count_items(str(who.token_id), api_config.rate_window_s, more)
        if counted is not None and counted[0] > api_config.rate_limit:
            raise ApiError(
                429, "limit_exceeded", f"more than {api_config.rate_limit} requests (batch items count one each) in "
                f"{api_config.rate_window_s:g} s with this token", limit="api.rate_limit",
                headers={"Retry-After": str(max(1, math.ceil(counted[1])))},
            )  # fmt: skip

    @api.get("/jobs", response_model=schemas.JobPage, tags=["jobs"], summary="this tenant's jobs, newest first")
    async def list_jobs(
        who: Caller, limit: PageSize = 50, cursor: Cursor = None, include_deleted: bool = False,
        name: Annotated[str | None, Query(max_length=200, description="jobs whose name starts with this")] = None,
        task: Annotated[str | None, Query(max_length=200, description="jobs of this task type")] = None,
        kind: Annotated[Literal["cron", "one-off"] | None, Query(description="cron (recurring) or one-off")] = None,
        state: Annotated[str | None, Query(max_length=100, description=STATE_DOC)] = None,
        label: Annotated[str | None, Query(max_length=2000, description="a label selector: team=billing,env=prod")] = None,
    ) -> Any:  # fmt: skip
        find = job_filter(name=name, task=task, kind=kind, state=state, label=label, include_deleted=include_deleted)
        deleted = find.states is None or "deleted" in find.states
        listed = await reads.job_page(who.tenant, deleted=deleted, after=decode_cursor(cursor), limit=limit + 1, find=find)
        page, more = listed[:limit], len(listed) > limit
        last = await reads.job_last_executions([j.id for j in page])
        settled = await reads.job_settled_many([j.id for j in page if j.cron is None])
        now = datetime.now(UTC)
        judged = await overruns(reads, page, config.jobs, now)
        fraction = config.jobs.overrun_fraction
        return {"items": [job_view(j, now, last.get(j.id), judged.get(j.id), fraction, j.id in settled) for j in page],
                "next_cursor": encode_cursor(page[-1].created_at, page[-1].id) if more else None}  # fmt: skip

    @api.get("/jobs/{job_id}", response_model=schemas.Job, tags=["jobs"], summary="one job, with its next runs")
    async def get_job(job_id: UUID, who: Caller) -> Any:
        job = await read_job(services, job_id, who.tenant)
        now = datetime.now(UTC)
        judged = (await overruns(reads, [job], config.jobs, now)).get(job.id)
        last = (await reads.job_last_executions([job.id])).get(job.id)
        settled = job.cron is None and job.id in await reads.job_settled_many([job.id])
        return job_view(job, now, last, judged, config.jobs.overrun_fraction, settled)

    @api.get("/jobs/{job_id}/next-runs", response_model=schemas.NextRuns, tags=["jobs"],
             summary="a job's next runs, each labelled with what DST did to it")  # fmt: skip
    async def job_next_runs(job_id: UUID, who: Caller, count: Annotated[int, Query(ge=1, le=1000)] = 10) -> Any:
        job = await jobs.get(job_id, who.tenant)
        if job.deleted_at is not None or not job.enabled:
            return {"items": []}
        zone = ZoneInfo(job.timezone)
        return {"items": [{"at": r.at, "local": r.at.astimezone(zone).isoformat(), "labels": list(r.labels), "note": r.note}
                          for r in labelled_next_runs(job, datetime.now(UTC), count)]}  # fmt: skip

    @api.patch("/jobs/{job_id}", response_model=schemas.JobEdited, tags=["jobs"],
               summary="edit a job in place: its next runs follow the new spec (removed / kept / added)",
               responses={409: {"model": schemas.ErrorBody, "description": "the job is deleted, or Idempotency-Key reused"},
                          412: {"model": schemas.ErrorBody, "description": "If-Match names another version"}})  # fmt: skip
    async def update_job(
        job_id: UUID, body: schemas.JobUpdate, who: Caller,
        dry_run: Annotated[bool, Query(description="answer what the edit would do; write nothing")] = False,
        if_match: Annotated[str | None, Header(alias="If-Match", max_length=20,
                                               description="the job version this edit expects (412 otherwise)")] = None,
        idempotency_key: str | None = IDEMPOTENCY_KEY,
    ) -> Any:  # fmt: skip
        version = _if_match(if_match)
        key = None
        if idempotency_key is not None:
            digest = hashlib.sha256(f"patch:{job_id}:".encode() + body.model_dump_json(exclude_unset=True).encode()).digest()
            key = EditKey(who.tenant, idempotency_key, digest, edited_view, config.api.idempotency_ttl_s)
        try:
            edit = await jobs.update(job_id, body.changes(), who.tenant, dry_run=dry_run, if_version=version, claim=key)
        except StaleVersionError as exc:
            raise ApiError(412, "precondition_failed", exc.message, field="If-Match") from None
        except ConflictError as exc:
            if exc.field != "idempotency_key":
                raise
            message = "a request with this Idempotency-Key is in flight; retry" if exc.message == KEY_IN_FLIGHT \
                else "this Idempotency-Key was used with a different request body"  # fmt: skip
            raise ApiError(409, "conflict", message, field="Idempotency-Key") from None
        if edit.replayed is not None:
            return JSONResponse(edit.replayed, headers={"Idempotent-Replayed": "true"})
        return JSONResponse(edited_view(edit))

    @api.post("/jobs/{job_id}/pause", response_model=schemas.JobChanged, tags=["jobs"],
              summary="stop a job; its unstarted executions are cancelled")  # fmt: skip
    async def pause_job(job_id: UUID, who: Caller, body: schemas.PauseRequest | None = None) -> Any:
        await own_live_job(services, job_id, who.tenant)
        job, cancelled = await jobs.pause(job_id, who.tenant, note=body.note if body else None, by=actor(who))
        return {"job": job_view(job, datetime.now(UTC)), "cancelled_executions": cancelled}

    @api.post("/jobs/{job_id}/resume", response_model=schemas.JobChanged, tags=["jobs"],
              summary="start a paused cron job again from now")  # fmt: skip
    async def resume_job(job_id: UUID, who: Caller) -> Any:
        await own_live_job(services, job_id, who.tenant)
        return {"job": job_view(await jobs.resume(job_id, who.tenant), datetime.now(UTC)), "cancelled_executions": 0}

    @api.post("/jobs/{job_id}/trigger", status_code=201, response_model=schemas.Execution, tags=["jobs"],
              summary="run a job once now, besides its schedule")  # fmt: skip
    async def trigger_job(job_id: UUID, who: Caller) -> Any:
        await own_live_job(services, job_id, who.tenant)
        return execution_view(await jobs.trigger(job_id, who.tenant))

    @api.post("/jobs/{job_id}/backfill", status_code=201, response_model=schemas.Backfilled, tags=["jobs"],
              summary="create a cron job's occurrences in a past range [from, to) as executions")  # fmt: skip
    async def backfill_job(job_id: UUID, body: schemas.BackfillRequest, who: Caller) -> Any:
        await own_live_job(services, job_id, who.tenant)
        done = await jobs.backfill(job_id, body.from_, body.to, who.tenant)
        return {"created": [execution_view(e) for e in done.created], "already_backfilled": done.already_backfilled}

    @api.delete("/jobs/{job_id}", response_model=schemas.JobChanged, tags=["jobs"],
                summary="stop a job for good; its history stays")  # fmt: skip
    async def delete_job(job_id: UUID, who: Caller) -> Any:
        await own_live_job(services, job_id, who.tenant)
        job, cancelled = await jobs.delete(job_id, who.tenant)
        return {"job": job_view(job, datetime.now(UTC)), "cancelled_executions": cancelled}

    return api
