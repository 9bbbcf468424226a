"""The /v1 endpoints: thin handlers that call the Jobs service and the Store, scoped to the
caller's tenant. Another tenant's job or execution is "not found", exactly like a missing one."""


import base64
import hashlib
import json
import math
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID
from zoneinfo import ZoneInfo

import structlog
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError as PydanticValidationError

from schedulerd.api import schemas
from schedulerd.api.errors import ERRORS, ApiError, pydantic_error
from schedulerd.api.services import Services
from schedulerd.api.views import MINUTES_MAX, attempt_view, execution_view, job_view, minute_view, redrive_view
from schedulerd.core.durations import parse_instant
from schedulerd.dead_letters import DeadLetters, FailedFilter
from schedulerd.errors import ValidationError
from schedulerd.intake import Enqueued, EnqueuedExecution, Item, Refused
from schedulerd.jobs import labelled_next_runs, validate
from schedulerd.models import ApiToken, Execution, Job
from schedulerd.overrun_watch import overruns
from schedulerd.store import Store
from schedulerd.tasks import registry
from schedulerd.tenants import Principal

log = structlog.get_logger("schedulerd.api")
FAILED_FILTERS = {"job", "task", "error", "since", "until", "limit", "cursor"}  # GET /v1/executions/failed
IDEMPOTENCY_KEY = Header(None, alias="Idempotency-Key", min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$",
                         description="repeat a create safely: the same key returns the first result")  # fmt: skip


def actor(who: Principal) -> str:
    """Who acted, as recorded on a pause or redrive: the token's tenant and id prefix."""
    return f"api:{who.tenant} (token {str(who.token_id)[:8]})"


def encode_cursor(at: datetime, row_id: UUID) -> str:
    return base64.urlsafe_b64encode(json.dumps([at.isoformat(), str(row_id)]).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> tuple[datetime, UUID] | None:
    if cursor is None:
        return None
    try:
        at, row_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        return parse_instant(at), UUID(row_id)  # a forged cursor is input like any other
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError):
        raise ApiError(422, "validation", "is not a cursor this API returned", field="cursor") from None


def _refused_view(index: int, code: str, field: str | None, message: str, limit: str | None) -> dict[str, Any]:
    return {"index": index, "result": "refused", "job_id": None, "executions": [],
            "error": {"code": code, "message": message, "field": field, "limit": limit}}  # fmt: skip


def router(services: Services, caller: Callable[..., Awaitable[Principal]]) -> APIRouter:
    api = APIRouter(prefix="/v1", responses=ERRORS)
    jobs, store, config = services.jobs, services.store, services.config
    # Read-only views go to [database].read_url when set (a replica that may lag the primary). A
    # lookup by id that the replica does not know yet is asked of the primary before a 404, so a
    # job or execution read back right after its create is found; lists may lag by the replica's delay.
    reads = services.reads

    async def read_job(job_id: UUID, tenant: str) -> Job:
        job = await reads.job_get(job_id) if reads is not store else None
        return job if job is not None and job.tenant == tenant else await jobs.get(job_id, tenant)

    dead_letters = DeadLetters(store, services.queue, config)
    Caller = Annotated[Principal, Depends(caller)]
    PageSize = Annotated[int, Query(ge=1, le=config.api.page_size_max, description="items per page (api.page_size_max)")]
    Cursor = Annotated[str | None, Query(max_length=400, description="next_cursor of the previous page")]

    async def own_live_job(job_id: UUID, tenant: str) -> Job:
        job = await jobs.get(job_id, tenant)
        if job.deleted_at is not None:
            raise ApiError(409, "conflict", f"job {job_id} is deleted", field="job_id")
        return job

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
        job = await read_job(job_id, who.tenant)
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
        await own_live_job(job_id, who.tenant)
        job, cancelled = await jobs.pause(job_id, who.tenant, note=body.note if body else None, by=actor(who))
        return {"job": job_view(job, datetime.now(UTC)), "cancelled_executions": cancelled}

    @api.post("/jobs/{job_id}/resume", response_model=schemas.JobChanged, tags=["jobs"],
              summary="start a paused cron job again from now")  # fmt: skip
    async def resume_job(job_id: UUID, who: Caller) -> Any:
        await own_live_job(job_id, who.tenant)
        return {"job": job_view(await jobs.resume(job_id, who.tenant), datetime.now(UTC)), "cancelled_executions": 0}

    @api.post("/jobs/{job_id}/trigger", status_code=201, response_model=schemas.Execution, tags=["jobs"],
              summary="run a job once now, besides its schedule")  # fmt: skip
    async def trigger_job(job_id: UUID, who: Caller) -> Any:
        await own_live_job(job_id, who.tenant)
        return execution_view(await jobs.trigger(job_id, who.tenant))

    @api.post("/jobs/{job_id}/backfill", status_code=201, response_model=schemas.Backfilled, tags=["jobs"],
              summary="create a cron job's occurrences in a past range [from, to) as executions")  # fmt: skip
    async def backfill_job(job_id: UUID, body: schemas.BackfillRequest, who: Caller) -> Any:
        await own_live_job(job_id, who.tenant)
        done = await jobs.backfill(job_id, body.from_, body.to, who.tenant)
        return {"created": [execution_view(e) for e in done.created], "already_backfilled": done.already_backfilled}

    @api.delete("/jobs/{job_id}", response_model=schemas.JobChanged, tags=["jobs"],
                summary="stop a job for good; its history stays")  # fmt: skip
    async def delete_job(job_id: UUID, who: Caller) -> Any:
        await own_live_job(job_id, who.tenant)
        job, cancelled = await jobs.delete(job_id, who.tenant)
        return {"job": job_view(job, datetime.now(UTC)), "cancelled_executions": cancelled}

    @api.get("/executions", response_model=schemas.ExecutionPage, tags=["executions"],
             summary="this tenant's executions, newest scheduled first (when=upcoming: soonest first)")  # fmt: skip
    async def list_executions(
        who: Caller, job: UUID | None = None, status: schemas.Status | None = None,
        since: Annotated[schemas.Instant | None, Query(description="scheduled at or after (ISO 8601)")] = None,
        until: Annotated[schemas.Instant | None, Query(description="scheduled before (ISO 8601)")] = None,
        when: Annotated[schemas.Phase | None, Query(
            description="past: started or settled (not pending or queued) and scheduled by now, newest first; "
                        "upcoming: not yet started (pending or queued), soonest first, read forward from `since` (give one "
                        "to skip the history); unset: all, newest first")] = None,
        limit: PageSize = 50, cursor: Cursor = None,
    ) -> Any:  # fmt: skip
        if job is not None:
            await read_job(job, who.tenant)  # another tenant's job: 404, like a missing one
        listed = await reads.execution_page(who.tenant, job_id=job, status=status, since=since, until=until,
                                            after=decode_cursor(cursor), limit=limit + 1, phase=when)  # fmt: skip
        page, more = listed[:limit], len(listed) > limit
        return {"items": [execution_view(e) for e in page],
                "next_cursor": encode_cursor(page[-1].scheduled_for, page[-1].id) if more else None}  # fmt: skip

    # Declared before /executions/{execution_id}, which would otherwise take "failed" for an id.
    @api.get("/executions/failed", response_model=schemas.FailedExecutionPage, tags=["dead letters"],
             summary="this tenant's failed executions, most recently failed first")  # fmt: skip
    async def list_failed(
        request: Request, who: Caller, job: UUID | None = None,
        task: Annotated[str | None, Query(max_length=200, description="of this task type")] = None,
        error: Annotated[str | None, Query(min_length=1, max_length=500, description="last error contains (any case)")] = None,
        since: Annotated[schemas.Instant | None, Query(description="failed at or after (ISO 8601)")] = None,
        until: Annotated[schemas.Instant | None, Query(description="failed before (ISO 8601)")] = None,
        limit: PageSize = 50, cursor: Cursor = None,
    ) -> Any:  # fmt: skip
        # A misspelt filter (?erorr=) must not silently list every failure: what you redrive next.
        unknown = sorted(set(request.query_params) - FAILED_FILTERS)
        if unknown:
            raise ApiError(422, "validation", "is not a parameter of this request", field=unknown[0])
        if job is not None:
            await jobs.get(job, who.tenant)  # another tenant's job: 404, like a missing one
        which = FailedFilter(job_id=job, task=task, error=error, since=since, until=until)
        listed = await dead_letters.list(who.tenant, which, after=decode_cursor(cursor), limit=limit + 1)
        page, more = listed[:limit], len(listed) > limit
        last = page[-1].execution if page else None
        return {"items": [{**execution_view(f.execution), "task": f.task} for f in page],
                "next_cursor": encode_cursor(last.finished_at, last.id) if more and last and last.finished_at else None}  # fmt: skip

    async def redriving(run: Callable[[], Awaitable[Any]]) -> Any:
        """A redrive refused for an execution's state (not failed, job paused) is a conflict."""
        try:
            done = await run()
        except ValidationError as exc:
            if exc.field == "id":
                raise ApiError(409, "conflict", exc.message, field="id") from None
            raise
        return {"redriven": done.execution_ids, "not_redriven": done.not_redriven, "more": done.more}

    @api.post("/executions/redrive", response_model=schemas.Redriven, tags=["dead letters"],
              summary="give failed executions a new attempt budget: by ids, or every one matching filters")  # fmt: skip
    async def redrive_many(body: schemas.RedriveRequest, who: Caller) -> Any:
        which = FailedFilter(job_id=body.job, task=body.task, error=body.error, since=body.since, until=body.until)
        if body.ids is not None:
            if not which.empty:
                raise ApiError(422, "validation", "give ids or filters (job, task, error, since, until), not both", field="ids")
            return await redriving(lambda: dead_letters.redrive(body.ids or [], who.tenant, by=actor(who)))
        if body.job is not None:
            await jobs.get(body.job, who.tenant)
        return await redriving(lambda: dead_letters.redrive_matching(who.tenant, which, by=actor(who)))

    @api.post("/executions/{execution_id}/redrive", response_model=schemas.Redriven, tags=["dead letters"],
              summary="give one failed execution a new attempt budget (same id)")  # fmt: skip
    async def redrive_one(execution_id: UUID, who: Caller) -> Any:
        return await redriving(lambda: dead_letters.redrive([execution_id], who.tenant, by=actor(who)))

    @api.get("/executions/{execution_id}", response_model=schemas.ExecutionDetail, tags=["executions"],
             summary="one execution with every attempt")  # fmt: skip
    async def get_execution(execution_id: UUID, who: Caller) -> Any:
        source = reads
        execution = await reads.execution_get(execution_id)
        if (execution is None or execution.tenant != who.tenant) and reads is not store:
            source, execution = store, await store.execution_get(execution_id)  # not replicated yet?
        if execution is None or execution.tenant != who.tenant:
            raise ApiError(404, "not_found", f"execution {execution_id} not found")
        attempts = await source.attempt_list(execution_id)
        redrives = await source.redrive_list(execution_id) if execution.redrives else []
        return {**execution_view(execution), "attempts": [attempt_view(a) for a in attempts],
                "redrive_history": [redrive_view(r) for r in redrives]}  # fmt: skip

    @api.get("/stats/minutes", response_model=schemas.MinuteStats, tags=["operator"],
             summary="this tenant's last minutes: executions scheduled, started and by outcome, start-lag p50/p99")  # fmt: skip
    async def minute_stats(
        who: Caller, minutes: Annotated[int, Query(ge=1, le=MINUTES_MAX, description="how many minutes back")] = 60,
    ) -> Any:  # fmt: skip
        stats, now = await store.execution_minutes_tenant(who.tenant, minutes)
        return {"tenant": who.tenant, "now": now, "minutes": [minute_view(m) for m in stats]}

    @api.get("/overview", response_model=schemas.Overview, tags=["operator"],
             summary="this tenant's queue, materialiser horizon and recent runs")  # fmt: skip
    async def overview(who: Caller) -> Any:
        from schedulerd import overview as overviews

        return await overviews.tenant(reads, services.queue, who.tenant, config.api.overview_window_s)

    @api.get("/tz/report", response_model=schemas.TzReport, tags=["jobs"],
             summary="the last recompute after a tz database change: this tenant's jobs whose instants moved")  # fmt: skip
    async def tz_report(who: Caller) -> Any:
        last = await store.tz_recompute_last()
        moved = await store.tz_moved_job_list(last.id, tenant=who.tenant, limit=config.api.page_size_max) if last else []
        return {
            "last_recompute": {"id": last.id, "tzdata_version": last.tzdata_version, "started_at": last.started_at,
                               "finished_at": last.finished_at} if last else None,
            "moved_jobs": [{"job_id": m.job_id, "old_version": m.old_version, "removed": m.removed, "added": m.added,
                            "moves": m.moves} for m in moved],
        }  # fmt: skip

    def token_view(token: ApiToken, who: Principal) -> dict[str, Any]:
        return {"id": token.id, "created_at": token.created_at, "last_used_at": token.last_used_at,
                "revoked_at": token.revoked_at, "current": token.id == who.token_id}  # fmt: skip

    @api.get("/tokens", response_model=schemas.Tokens, tags=["tenant"], summary="this tenant's API tokens")
    async def list_tokens(who: Caller) -> Any:
        return {"items": [token_view(t, who) for t in await services.tenants.tokens(who.tenant)]}

    @api.post("/tokens", status_code=201, response_model=schemas.IssuedToken, tags=["tenant"],
              summary="issue another token for this tenant (rotation): the secret is shown once")  # fmt: skip
    async def issue_token(who: Caller) -> Any:
        issued = await services.tenants.issue_token(who.tenant)
        return {"id": issued.token_id, "token": issued.token}

    @api.delete("/tokens/{token_id}", response_model=schemas.Token, tags=["tenant"],
                summary="revoke one of this tenant's tokens (this one too: the next request with it gets 401)")  # fmt: skip
    async def revoke_token(token_id: UUID, who: Caller) -> Any:
        return token_view(await services.tenants.revoke(token_id, who.tenant), who)

    @api.get("/me", response_model=schemas.Me, tags=["tenant"], summary="the tenant this token belongs to")
    async def me(who: Caller) -> Any:
        return {"tenant": who.tenant}

    @api.get("/tasks", response_model=schemas.Tasks, tags=["tenant"],
             summary="task types that may be enqueued: those live workers reported, and this replica's")  # fmt: skip
    async def tasks(who: Caller) -> Any:
        known = await services.intake.task_types.known() if services.intake.task_types else registry.names()
        return {"tasks": sorted(known)}

    return api
