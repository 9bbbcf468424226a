"""The HTTP API's application: create_app() wires services, auth, limits and error handling
into FastAPI; routes.py holds the endpoints. Every refusal is JSON: {"error": {code, message,
field, limit}}. The tenant always comes from the bearer token, never from the request."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import structlog
from fastapi import FastAPI, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from schedulerd import registry
from schedulerd.api.schemas import BODY_FIELDS, ErrorBody
from schedulerd.config import Config
from schedulerd.errors import NotFoundError, ValidationError
from schedulerd.intake import Intake, SharedBatches
from schedulerd.jobs import Jobs
from schedulerd.queue import DelayQueue, RequestCounter
from schedulerd.store import Store
from schedulerd.task_types import TaskTypes
from schedulerd.tenants import Principal, Tenants

log = structlog.get_logger("schedulerd.api")
BATCH_PATH = "/v1/jobs/batch"  # its body may be up to api.max_batch_body_bytes
DASHBOARD_DIR = Path(__file__).with_name("dashboard")
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in [(400, "more than one Authorization header"), (401, "no valid bearer token"), (404, "no such object for this tenant"),
                         (413, "request body over api.max_body_bytes"), (422, "invalid input: `field` says which"),
                         (429, "over api.rate_limit requests in api.rate_window_s, or api.auth_failure_limit "
                               "requests without a valid token from this address (see Retry-After)")]
}  # fmt: skip


class ApiError(Exception):
    def __init__(
        self, status: int, code: str, message: str, *, field: str | None = None, limit: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.status, self.code, self.message, self.field, self.limit = status, code, message, field, limit
        self.headers = headers


def error_response(error: ApiError) -> JSONResponse:
    body = {"error": {"code": error.code, "message": error.message, "field": error.field, "limit": error.limit}}
    return JSONResponse(body, status_code=error.status, headers=error.headers)


@dataclass(frozen=True)
class Services:
    jobs: Jobs
    store: Store
    queue: DelayQueue
    config: Config
    tenants: Tenants
    counter: RequestCounter
    intake: Intake  # batched creates
    shared: SharedBatches  # single creates, written together with concurrent ones


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


def _pydantic_error(exc: RequestValidationError) -> ApiError:
    return pydantic_error(exc.errors())


def pydantic_error(errors: Sequence[Any]) -> ApiError:
    """The first error, with its location ("body", "query", "header", then the path) turned
    into the field a user wrote."""
    first = errors[0]
    loc = [str(part) for part in first.get("loc", ())]
    where, path = (loc[0], loc[1:]) if loc else ("body", [])
    if first.get("type") == "json_invalid":
        return ApiError(422, "validation", f"is not valid JSON: {first.get('ctx', {}).get('error', first['msg'])}", field="body")
    if where == "header":
        field = "-".join(p.title() for p in path[0].replace("_", "-").split("-")) if path else "header"
    else:
        field = ".".join(path) or "body"
    message = str(first.get("msg", "is invalid")).removeprefix("Value error, ")
    if first.get("type") == "extra_forbidden":
        message = "is not a field of this request" + (" (the tenant comes from the token)" if field == "tenant" else "")
    if field == "limit" and where == "query" and first.get("type") == "less_than_equal":
        return ApiError(422, "limit_exceeded", f"page size {message[0].lower()}{message[1:]}", field="limit",
                        limit="api.page_size_max")  # fmt: skip
    return ApiError(422, "validation", message, field=field)


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def request_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(_pydantic_error(exc))

    @app.exception_handler(ValidationError)
    async def spec_invalid(request: Request, exc: ValidationError) -> JSONResponse:
        field = BODY_FIELDS.get(exc.field, exc.field)
        if exc.limit:
            return error_response(ApiError(422, "limit_exceeded", exc.message, field=field, limit=exc.limit))
        return error_response(ApiError(422, "validation", exc.message, field=field))

    @app.exception_handler(NotFoundError)
    async def not_found(request: Request, exc: NotFoundError) -> JSONResponse:
        return error_response(ApiError(404, "not_found", str(exc)))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # FastAPI's "error parsing the body": not UTF-8, or nested past the parser
            return error_response(ApiError(422, "validation", "is not valid JSON (UTF-8, reasonably nested)", field="body"))
        codes = {404: "not_found", 405: "method_not_allowed"}
        return error_response(ApiError(exc.status_code, codes.get(exc.status_code, "http_error"), str(exc.detail),
                                       headers=exc.headers))  # fmt: skip

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("api.error", path=request.url.path)
        return error_response(ApiError(500, "internal", "internal error; the server log has the details"))


def create_app(jobs: Jobs, store: Store, queue: DelayQueue, config: Config) -> FastAPI:
    """The API and dashboard over these services (the daemon's own, or a test's)."""
    from schedulerd.api import late_routes, routes

    registry.load_modules(config.daemon.task_modules)
    intake = Intake(store, queue, config, TaskTypes(store, config.jobs.task_types_seen_within_s))
    services = Services(jobs, store, queue, config, Tenants(store, config.api.token_cache_s),
                        RequestCounter(queue.client, config.redis.prefix),
                        intake, SharedBatches(intake))  # fmt: skip
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
    _install_error_handlers(app)
    app.include_router(late_routes.router(services, caller))  # first: /v1/executions/late is not an execution id
    app.include_router(routes.router(services, caller))
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
    """The operator endpoints (/metrics, /forecast, /stats/minutes, /healthz, /readyz, and the
    page at / charting them), for the [ops] listener only: the tenant app above serves none of them."""
    from schedulerd.api import ops

    app = FastAPI(title="schedulerd operator endpoints", docs_url=None, redoc_url=None, openapi_url=None)
    _install_error_handlers(app)
    app.include_router(ops.router(store, queue, top_tenants=config.forecast.top_tenants))
    app.mount("/dashboard", StaticFiles(directory=DASHBOARD_DIR), name="dashboard")  # the page's script and style
    app.add_middleware(SecurityHeaders)
    return app
