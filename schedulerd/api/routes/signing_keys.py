"""/v1/signing-keys: the keys the http task signs the caller's webhooks with (docs/webhooks.md).
A key's secret is shown once, when the rotation that creates it answers."""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path

from schedulerd.api import schemas
from schedulerd.api.errors import ERRORS, NOT_CONFIGURED
from schedulerd.api.services import Services
from schedulerd.models import SigningKeyEntry
from schedulerd.tenants import Principal

KeyId = Annotated[str, Path(pattern=r"^k_[0-9a-f]{16}$", description="a key id as listed (k_ + 16 hex digits)")]


def view(entry: SigningKeyEntry) -> dict[str, Any]:
    return {"id": entry.id, "created_at": entry.created_at, "retires_at": entry.retires_at}


def router(services: Services, caller: Callable[..., Awaitable[Principal]]) -> APIRouter:
    api = APIRouter(prefix="/v1", responses=ERRORS)
    Caller = Annotated[Principal, Depends(caller)]

    @api.get("/signing-keys", response_model=schemas.SigningKeys, tags=["secrets"],
             summary="this tenant's live webhook signing keys: ids and times")  # fmt: skip
    async def list_keys(who: Caller) -> Any:
        return {"items": [view(e) for e in await services.signing_keys.entries(who.tenant)]}

    @api.post("/signing-keys", status_code=201, response_model=schemas.IssuedSigningKey, tags=["secrets"],
              responses=NOT_CONFIGURED,
              summary="rotate: a new signing key (its secret shown once); older keys keep signing for grace_s")  # fmt: skip
    async def rotate_key(who: Caller, body: schemas.SigningKeyRotation | None = None) -> Any:
        issued = await services.signing_keys.rotate(who.tenant, body.grace_s if body is not None else None)
        return {"id": issued.id, "secret": issued.secret, "created_at": issued.created_at}

    @api.delete("/signing-keys/{key_id}", response_model=schemas.SigningKey, tags=["secrets"],
                summary="retire a key at once: it signs nothing more and its secret is deleted")  # fmt: skip
    async def retire_key(key_id: KeyId, who: Caller) -> Any:
        return view(await services.signing_keys.retire(who.tenant, key_id))

    return api
