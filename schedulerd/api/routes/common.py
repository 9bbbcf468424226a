"""What the /v1 routers share: who acted, page cursors, and the tenant-scoped job lookups."""

import base64
import json
from datetime import datetime
from typing import Annotated
from uuid import UUID

from fastapi import Query

from schedulerd.api.errors import ApiError
from schedulerd.api.services import Services
from schedulerd.core.durations import parse_instant
from schedulerd.models import Job
from schedulerd.tenants import Principal

Cursor = Annotated[str | None, Query(max_length=400, description="next_cursor of the previous page")]
PAGE_SIZE_DOC = "items per page (api.page_size_max)"


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


async def read_job(services: Services, job_id: UUID, tenant: str) -> Job:
    """The tenant's job, read from [database].read_url when set (a replica that may lag the
    primary). One the replica does not know yet is asked of the primary before a 404, so a job
    read back right after its create is found."""
    reads = services.reads
    job = await reads.job_get(job_id) if reads is not services.store else None
    return job if job is not None and job.tenant == tenant else await services.jobs.get(job_id, tenant)


async def own_live_job(services: Services, job_id: UUID, tenant: str) -> Job:
    """The tenant's job, refused as a conflict when deleted (it can no longer be steered)."""
    job = await services.jobs.get(job_id, tenant)
    if job.deleted_at is not None:
        raise ApiError(409, "conflict", f"job {job_id} is deleted", field="job_id")
    return job
