"""The HTTP API's application: create_app() wires services, auth, limits and error handling
into FastAPI; routes/ holds the endpoints, errors.py the refusals. Every refusal is JSON: {"error": {code, message,
field, limit}}. The tenant always comes from the bearer token, never from the request."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI, Request, Security
from fastapi.responses import FileResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles

from schedulerd.tasks import loader
from schedulerd.api import ops, routes
from schedulerd.api.errors import ERRORS, ApiError, error_response, install_error_handlers
from schedulerd.api.services import Services
from schedulerd.config import Config
from schedulerd.intake import Intake, SharedBatches
from schedulerd.jobs import Jobs
from schedulerd.keyring import Keyring
from schedulerd.queue import DelayQueue, RequestCounter
from schedulerd.signing_keys import SigningKeys
from schedulerd.store import Store
from schedulerd.task_types import TaskTypes
from schedulerd.tenant_secrets import TenantSecrets
from schedulerd.tenants import Principal, Tenants

BATCH_PATH = "/v1/jobs/batch"  # its body may be up to api.max_batch_body_bytes
DASHBOARD_DIR = Path(__file__).with_name("dashboard")


class BodyLimit:
    """ASGI middleware: read the body up to api.max_body_bytes (+1; api.max_batch_body_bytes for
    POST /v1/jobs/batch) before the app sees it, so an oversized request gets a 413 naming the
    limit whatever its Content-Length claims. A query parameter with a NUL is refused here too
    (422 naming it), before any handler sees it."""

    def __init__(self, app: Any, max_bytes: int, batch_max_bytes: int | None = None) -> None:
        self.app, self.max_bytes, self.batch_max_bytes = app, max_bytes, batch_max_bytes or max_bytes

    async def __call__(self, scope: MutableMapping[str, Any], receive: Callable[[], Awaitable[Any]], send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        bad_query = _unstorable_query_parameter(scope.get("query_string", b""))
        if bad_query is not None:
            return await error_response(ApiError(422, "validation", "contains a NUL character, which cannot be stored",
                                                 field=bad_query))(scope, receive, send)  # fmt: skip
        batch = scope["path"] == BATCH_PATH
        max_bytes, setting = (self.batch_max_bytes, "api.max_batch_body_bytes") if batch else (self.max_bytes, "api.max_body_bytes")
        refused = ApiError(413, "limit_exceeded", f"request body is larger than {max_bytes} bytes",
                           field="body", limit=setting)  # fmt: skip
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > max_bytes:
            return await error_response(refused)(scope, receive, send)
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > max_bytes:
                return await error_response(refused)(scope, receive, send)
        body, replayed = b"".join(chunks), False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()  # after the body: wait for the disconnect, as the server would
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


class SecurityHeaders:
    """ASGI middleware: every response says what a browser may do with it. The dashboard and /docs
    load only this origin's files (no inline script or handler, no third-party CDN), no page of
    ours may be framed (clickjacking), no type is sniffed, and no URL leaks in a Referer."""

    HEADERS = [
        (b"content-security-policy", b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                                     b"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
                                     b"frame-ancestors 'none'"),
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"DENY"),
        (b"referrer-policy", b"no-referrer"),
    ]  # fmt: skip

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: MutableMapping[str, Any], receive: Callable[[], Awaitable[Any]], send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                message["headers"] = [*message.get("headers", []), *((n, v) for n, v in self.HEADERS if n not in names)]
            await send(message)

        await self.app(scope, receive, with_headers)


def _unstorable_query_parameter(query_string: bytes) -> str | None:
    """The first query parameter (name or value) holding a NUL, which no text filter may carry
    to Postgres; checked here once for every endpoint rather than in each handler."""
    for name, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        if "\x00" in name or "\x00" in value:
            return name.replace("\x00", "\\0") or "query"
    return None


def create_app(jobs: Jobs, store: Store, queue: DelayQueue, config: Config) -> FastAPI:
    """The API and dashboard over these services (the daemon's own, or a test's)."""
    loader.load_modules(config.daemon.task_modules)
    intake = Intake(store, queue, config, TaskTypes(store, config.jobs.task_types_seen_within_s))
    keyring = Keyring.from_settings(config.secrets.key, config.secrets.previous_keys)
    services = Services(jobs, store, queue, config, Tenants(store, config.api.token_cache_s),
                        RequestCounter(queue.client, config.redis.prefix),
                        intake, SharedBatches(intake), store.reads,
                        TenantSecrets(store, keyring, config.secrets), SigningKeys(store, keyring, config.secrets))  # fmt: skip
    bearer = HTTPBearer(auto_error=False, description="a tenant's API token: `schedulerd token create TENANT`")

    async def caller(request: Request, credentials: HTTPAuthorizationCredentials | None = Security(bearer)) -> Principal:
        """Authenticate the token, then count the request against its rate limit. Requests without
        a valid token count against their address's limit, checked before any lookup."""
        api = config.api
        if len(request.headers.getlist("authorization")) > 1:  # which one would act? Neither.
            raise ApiError(400, "bad_request", "give one Authorization header, not several", field="Authorization")
        address = "addr:" + (request.client.host if request.client else "unknown")
        failures = await services.counter.count_seen(address)
        if failures is not None and failures >= api.auth_failure_limit:
            raise ApiError(429, "limit_exceeded", f"more than {api.auth_failure_limit} requests without a valid token "
                           f"from this address in {api.rate_window_s:g} s", limit="api.auth_failure_limit",
                           headers={"Retry-After": str(max(1, math.ceil(api.rate_window_s)))})  # fmt: skip
        principal = await services.tenants.authenticate(credentials.credentials) if credentials else None
        if principal is None:
            await services.counter.count_request(address, api.rate_window_s)
            raise ApiError(401, "unauthorized", "a valid bearer token is required (Authorization: Bearer sdk_...)",
                           headers={"WWW-Authenticate": "Bearer"})  # fmt: skip
        counted = await services.counter.count_request(str(principal.token_id), api.rate_window_s)
        if counted is not None and counted[0] > api.rate_limit:
            raise ApiError(
                429, "limit_exceeded", f"more than {api.rate_limit} requests in {api.rate_window_s:g} s with this token",
                limit="api.rate_limit", headers={"Retry-After": str(max(1, math.ceil(counted[1])))},
            )
        return principal

    app = FastAPI(
        title="schedulerd", version="1", description="Register jobs (now, at an instant, or on a cron schedule in "
        "an IANA zone) and see what happened. Every request needs `Authorization: Bearer <token>`.",
        docs_url=None, redoc_url=None, responses=ERRORS,  # /docs below: FastAPI's loads Swagger UI from a CDN
    )  # fmt: skip
    install_error_handlers(app)
    for router in routes.routers(services, caller):
        app.include_router(router)
    app.mount("/dashboard", StaticFiles(directory=DASHBOARD_DIR), name="dashboard")

    @app.get("/", include_in_schema=False)
    async def dashboard() -> FileResponse:
        return FileResponse(DASHBOARD_DIR / "index.html")

    @app.get("/docs", include_in_schema=False)
    async def docs() -> FileResponse:
        return FileResponse(DASHBOARD_DIR / "docs.html")

    app.add_middleware(BodyLimit, max_bytes=config.api.max_body_bytes, batch_max_bytes=config.api.max_batch_body_bytes)
    app.add_middleware(SecurityHeaders)
    return app


def create_ops_app(store: Store, queue: DelayQueue, config: Config) -> FastAPI:
    """The operator endpoints (/metrics, /fleet, /forecast, /stats/minutes, /healthz, /readyz, and
    the page at / showing them), for the [ops] listener only: the tenant app above serves none of them."""
    app = FastAPI(title="schedulerd operator endpoints", docs_url=None, redoc_url=None, openapi_url=None)
    install_error_handlers(app)
    app.include_router(ops.router(store, queue, config))
    app.mount("/dashboard", StaticFiles(directory=DASHBOARD_DIR), name="dashboard")  # the page's script and style
    app.add_middleware(SecurityHeaders)
    return app
