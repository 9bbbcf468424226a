"""The /v1 endpoints about the caller's tenant: its API tokens (list, issue, revoke), who it is,
and the task types it may enqueue."""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends

from schedulerd.api import schemas
from schedulerd.api.errors import ERRORS
from schedulerd.api.services import Services
from schedulerd.models import ApiToken
from schedulerd.tasks import registry
from schedulerd.tenants import Principal


def router(services: Services, caller: Callable[..., Awaitable[Principal]]) -> APIRouter:
    api = APIRouter(prefix="/v1", responses=ERRORS)
    Caller = Annotated[Principal, Depends(caller)]

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
