"""The /v1 endpoints of the caller's tenant's notifications: its setting (read, set, remove), a
test notice sent at once, and the notices recently sent. A tenant only ever sees its own."""

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import uuid4

from fastapi import APIRouter, Body, Depends, Query

from schedulerd.api import schemas
from schedulerd.api.errors import ERRORS
from schedulerd.api.services import Services
from schedulerd.core import notify
from schedulerd.core.targets import redact
from schedulerd.errors import ValidationError
from schedulerd.notifier import send
from schedulerd.signing_keys import Signer
from schedulerd.tenants import Principal


def router(services: Services, caller: Callable[..., Awaitable[Principal]]) -> APIRouter:
    api = APIRouter(prefix="/v1", responses=ERRORS)
    Caller = Annotated[Principal, Depends(caller)]
    config = services.config
    signer = Signer.from_config(services.store, config.secrets)  # test notices are signed as queued ones are

    def checked(url: str) -> str:
        try:
            return notify.check_url(url, config.http.allow_hosts, config.http.allow_private, "url")
        except notify.NotifyError as exc:
            raise ValidationError(exc.field, exc.message) from None

    def events_of(on: list[str]) -> tuple[str, ...]:
        try:
            return notify.check_events(on, "on")
        except notify.NotifyError as exc:
            raise ValidationError(exc.field, exc.message) from None

    def view(setting: dict[str, Any] | None) -> dict[str, Any]:
        if setting is None:
            return {"url": None, "on": [], "updated_at": None}
        return {"url": redact(setting["url"]), "on": setting["events"], "updated_at": setting["updated_at"]}

    @api.get("/notifications", response_model=schemas.NotificationSetting, tags=["notifications"],
             summary="this tenant's notification setting (url null: none)")  # fmt: skip
    async def get_setting(who: Caller) -> Any:
        return view(await services.store.notify_setting_get(who.tenant))

    @api.put("/notifications", response_model=schemas.NotificationSetting, tags=["notifications"],
             summary="set this tenant's notification setting: its jobs without their own notify use it")  # fmt: skip
    async def put_setting(body: schemas.NotificationSettingIn, who: Caller) -> Any:
        events = events_of(body.on)
        return view(await services.store.notify_setting_put(who.tenant, checked(body.url), events))

    @api.delete("/notifications", response_model=schemas.NotificationSetting, tags=["notifications"],
                summary="remove this tenant's notification setting (jobs' own settings stay)")  # fmt: skip
    async def delete_setting(who: Caller) -> Any:
        await services.store.notify_setting_delete(who.tenant)
        return view(None)

    @api.post("/notifications/test", response_model=schemas.NotificationTestResult, tags=["notifications"],
              summary="send a test notice now (event test) to the given URL or the tenant's, and report the answer")  # fmt: skip
    async def test_notice(who: Caller, body: Annotated[schemas.NotificationTestIn | None, Body()] = None) -> Any:
        url = body.url if body is not None else None
        if url is None:
            setting = await services.store.notify_setting_get(who.tenant)
            if setting is None:
                raise ValidationError("url", "this tenant has no notification URL: give one, or PUT /v1/notifications first")
            url = setting["url"]
        checked(url)
        notice_id = str(uuid4())
        payload = {"id": notice_id, "event": notify.TEST, "at": datetime.now(UTC).isoformat(), "tenant": who.tenant,
                   "message": "a test notice from schedulerd"}  # fmt: skip
        answer = await send(url, json.dumps(payload), notice_id, notify.TEST, config.http, config.notify.timeout_s,
                            tenant=who.tenant, signer=signer)
        delivered = answer.status is not None and 200 <= answer.status < 300
        return {"url": redact(url), "delivered": delivered, "status": answer.status, "error": answer.error,
                "notification_id": notice_id}  # fmt: skip

    @api.get("/notifications/sent", response_model=schemas.Notices, tags=["notifications"],
             summary="this tenant's newest notices and how their delivery went")  # fmt: skip
    async def sent(who: Caller, limit: Annotated[int, Query(ge=1, le=200)] = 50) -> Any:
        return {"items": await services.store.notification_page(who.tenant, limit)}

    return api
