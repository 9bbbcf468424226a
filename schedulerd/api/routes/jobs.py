"""The /v1 job endpoints: create (one, or a batch), list, read, and steer (pause, resume, trigger,
backfill, delete). Thin handlers over the Jobs and Intake services, scoped to the caller's tenant."""

import hashlib
import math
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID
from zoneinfo import ZoneInfo

import structlog
from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import JSONResponse
from pydantic import ValidationError as PydanticValidationError

from schedulerd.api import schemas
from schedulerd.api.errors import ERRORS, ApiError, pydantic_error
from schedulerd.api.routes.common import Cursor, actor, decode_cursor, encode_cursor, own_live_job, page_size, read_job
from schedulerd.api.services import Services
from schedulerd.api.views import execution_view, job_view
from schedulerd.errors import ValidationError
from schedulerd.intake import Enqueued, EnqueuedExecution, Item, Refused
from schedulerd.jobs import labelled_next_runs, validate
from schedulerd.models import Execution, Job
from schedulerd.overrun_watch import overruns
from schedulerd.store import Store
from schedulerd.tenants import Principal

log = structlog.get_logger("schedulerd.api")
IDEMPOTENCY_KEY = Header(None, alias="Idempotency-Key", min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$",
                         description="repeat a create safely: the same key returns the first result")  # fmt: skip


def _refused_view(index: int, code: str, field: str | None, message: str, limit: str | None) -> dict[str, Any]:
    return {"index": index, "result": "refused", "job_id": None, "executions": [],
            "error": {"code": code, "message": message, "field": field, "limit": limit}}  # fmt: skip


def router(services: Services, caller: Callable[..., Awaitable[Principal]]) -> APIRouter:
    api = APIRouter(prefix="/v1", responses=ERRORS)
    jobs, store, config, reads = services.jobs, services.store, services.config, services.reads
    Caller = Annotated[Principal, Depends(caller)]
    PageSize = page_size(config)

    @api.post("/jobs", status_code=201, response_model=schemas.JobCreated, tags=["jobs"], summary="create a job",
              responses={409: {"model": schemas.ErrorBody, "description": "Idempotency-Key reused with another body"}})
    async def create_job(body: schemas.JobCreate, who: Caller, idempotency_key: str | None = IDEMPOTENCY_KEY) -> Any:
        spec = body.spec(who.tenant)

        def created(job: Job, executions: Sequence[Execution | EnqueuedExecution]) -> dict[str, Any]:
            view = job_view(job, datetime.now(UTC))
            runs = view.next_runs if job.cron else [e.due_at for e in executions]  # "now": the instant it was queued for
            return schemas.JobCreated(job=view, next_runs=runs).model_dump(mode="json")

        # Sent as built: FastAPI would validate and serialise the response model a second time.
        if idempotency_key is None:
            # Shares a transaction with the creates of concurrent requests (intake.SharedBatches).
            result = await services.shared.create(Item(spec))
            if isinstance(result, Refused):
                raise ValidationError(result.field, result.message, result.limit)
            assert result.job is not None
            return JSONResponse(created(result.job, result.executions), status_code=201)
        # Validate before hashing: the hash serialises the body, which must not be the first
        # thing to meet lone surrogates or deep nesting (a 500 instead of a 422 naming the field).
        validate(spec, config, datetime.now(UTC), {spec.task})
        request_hash = hashlib.sha256(body.model_dump_json().encode()).digest()
        ttl_s = config.api.idempotency_ttl_s

        async def replay() -> JSONResponse | None:
            first = await store.idempotency_get(who.tenant, idempotency_key, ttl_s)
            if first is None:
                return None
            if first.request_hash != request_hash:
                raise ApiError(409, "conflict", "this Idempotency-Key was used with a different request body",
                               field="Idempotency-Key")  # fmt: skip
            return JSONResponse(first.response, status_code=201, headers={"Idempotent-Replayed": "true"})

        class Taken(Exception):
            """Another request recorded this key first: roll this create back."""

        recorded: list[dict[str, Any]] = []  # the response, exactly as stored for replays

        async def remember(tx: Store, job: Job, executions: list[Execution]) -> None:
            response = created(job, executions)
            recorded.append(response)
            if not await tx.idempotency_insert(who.tenant, idempotency_key, request_hash, job.id, response, ttl_s):
                raise Taken

        if (first := await replay()) is not None:
            return first
        try:
            await jobs.create(spec, also=remember)
            return JSONResponse(recorded[-1], status_code=201)
        except Taken:
            if (first := await replay()) is not None:
                return first
            raise ApiError(409, "conflict", "a request with this Idempotency-Key is in flight; retry", field="Idempotency-Key") from None

    @api.post("/jobs/batch", response_model=schemas.JobBatchResult, tags=["jobs"],
              summary="create up to api.batch_max jobs: each item is validated and answered on its own",
              responses={413: {"model": schemas.ErrorBody, "description": "body over api.max_batch_body_bytes"}})  # fmt: skip
    async def create_batch(body: schemas.JobBatch, who: Caller) -> Any:
        items = body.items
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
            accepted.append(Item(item.spec(who.tenant), item.idempotency_key, request_hash))
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
    async def list_jobs(who: Caller, limit: PageSize = 50, cursor: Cursor = None, include_deleted: bool = False) -> Any:
        listed = await reads.job_page(who.tenant, deleted=include_deleted, after=decode_cursor(cursor), limit=limit + 1)
        page, more = listed[:limit], len(listed) > limit
        last = await reads.job_last_executions([j.id for j in page])
        now = datetime.now(UTC)
        judged = await overruns(reads, page, config.jobs, now)
        fraction = config.jobs.overrun_fraction
        return {"items": [job_view(j, now, last.get(j.id), judged.get(j.id), fraction) for j in page],
                "next_cursor": encode_cursor(page[-1].created_at, page[-1].id) if more else None}  # fmt: skip

    @api.get("/jobs/{job_id}", response_model=schemas.Job, tags=["jobs"], summary="one job, with its next runs")
    async def get_job(job_id: UUID, who: Caller) -> Any:
        job = await read_job(services, job_id, who.tenant)
        now = datetime.now(UTC)
        judged = (await overruns(reads, [job], config.jobs, now)).get(job.id)
        last = (await reads.job_last_executions([job.id])).get(job.id)
        return job_view(job, now, last, judged, config.jobs.overrun_fraction)

    @api.get("/jobs/{job_id}/next-runs", response_model=schemas.NextRuns, tags=["jobs"],
             summary="a job's next runs, each labelled with what DST did to it")  # fmt: skip
    async def job_next_runs(job_id: UUID, who: Caller, count: Annotated[int, Query(ge=1, le=1000)] = 10) -> Any:
        job = await jobs.get(job_id, who.tenant)
        if job.deleted_at is not None or not job.enabled:
            return {"items": []}
        zone = ZoneInfo(job.timezone)
        return {"items": [{"at": r.at, "local": r.at.astimezone(zone).isoformat(), "labels": list(r.labels), "note": r.note}
                          for r in labelled_next_runs(job, datetime.now(UTC), count)]}  # fmt: skip

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
