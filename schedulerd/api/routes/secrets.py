"""/v1/secrets: the caller's tenant secrets. Names and times are listed; a value goes in once and
never comes back out of the API (the http task opens it at call time)."""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path

from schedulerd.api import schemas
from schedulerd.api.errors import ERRORS, NOT_CONFIGURED
from schedulerd.api.services import Services
from schedulerd.core.secret_refs import NAME_PATTERN
from schedulerd.models import SecretEntry
from schedulerd.tenants import Principal

SecretName = Annotated[str, Path(pattern=NAME_PATTERN.pattern, description="1-64 of letters, digits, '_', '.', '-'")]


def view(entry: SecretEntry) -> dict[str, Any]:
    return {"name": entry.name, "created_at": entry.created_at, "updated_at": entry.updated_at}


def router(services: Services, caller: Callable[..., Awaitable[Principal]]) -> APIRouter:
    api = APIRouter(prefix="/v1", responses=ERRORS)
    Caller = Annotated[Principal, Depends(caller)]

    @api.get("/secrets", response_model=schemas.Secrets, tags=["secrets"], summary="this tenant's secrets: names and times")
    async def list_secrets(who: Caller) -> Any:
        return {"items": [view(e) for e in await services.secrets.entries(who.tenant)]}

    @api.put("/secrets/{name}", response_model=schemas.Secret, tags=["secrets"], responses=NOT_CONFIGURED,
             summary="set or replace a secret (the value is stored sealed and never shown again)")  # fmt: skip
    async def put_secret(name: SecretName, body: schemas.SecretInput, who: Caller) -> Any:
        return view(await services.secrets.put(who.tenant, name, body.value))

    @api.delete("/secrets/{name}", response_model=schemas.Secret, tags=["secrets"],
                summary="delete a secret (an attempt that references it then fails as permanent)")  # fmt: skip
    async def delete_secret(name: SecretName, who: Caller) -> Any:
        return view(await services.secrets.delete(who.tenant, name))

    return api
