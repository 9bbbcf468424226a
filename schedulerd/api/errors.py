"""The API's refusals: ApiError, its JSON body ({"error": {code, message, field, limit}}), the
responses every route documents, and the handlers that turn any exception into such a body."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from schedulerd.api.schemas import BODY_FIELDS, ErrorBody
from schedulerd.errors import ConflictError, NotConfiguredError, NotFoundError, ValidationError
from schedulerd.transient import TRANSIENT_ERRORS

log = structlog.get_logger("schedulerd.api")
UNAVAILABLE_RETRY_AFTER_S = 2  # about how long a pg_auto_failover failover or a restart takes to answer again
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": text}
    for status, text in [(400, "more than one Authorization header"), (401, "no valid bearer token"), (404, "no such object for this tenant"),
                         (413, "request body over api.max_body_bytes"), (422, "invalid input: `field` says which"),
                         (429, "over api.rate_limit requests in api.rate_window_s, or api.auth_failure_limit "
                               "requests without a valid token from this address (see Retry-After)"),
                         (503, "Postgres or Redis did not answer (a failover, a restart): nothing was changed "
                               "unless the body says so; retry after Retry-After")]
}  # fmt: skip
NOT_CONFIGURED: dict[int | str, dict[str, Any]] = {
    409: {"model": ErrorBody, "description": "`not_configured`: the deployment has no [secrets].key; or `conflict` "
                                             "(a rotation past the live keys allowed)"}
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


def install_error_handlers(app: FastAPI) -> None:
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

    @app.exception_handler(ConflictError)
    async def conflict(request: Request, exc: ConflictError) -> JSONResponse:
        return error_response(ApiError(409, "conflict", exc.message, field=BODY_FIELDS.get(exc.field, exc.field)))

    @app.exception_handler(NotConfiguredError)
    async def not_configured(request: Request, exc: NotConfiguredError) -> JSONResponse:
        return error_response(ApiError(409, "not_configured", str(exc), limit="secrets.key"))

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

    async def unavailable(request: Request, exc: Exception) -> JSONResponse:
        # A create met it only after [database].commit_retry_s of retries (its outcome read back
        # first); any other write was rolled back with its connection, or committed: it is safe to
        # send again (an edit with its Idempotency-Key or If-Match).
        log.warning("api.unavailable", path=request.url.path, error=f"{type(exc).__name__}: {exc}")
        return error_response(ApiError(503, "unavailable", "the database or the queue did not answer (a failover or a "
                                       "restart); retry", headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER_S)}))  # fmt: skip

    for error_class in TRANSIENT_ERRORS:
        app.add_exception_handler(error_class, unavailable)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("api.error", path=request.url.path)
        return error_response(ApiError(500, "internal", "internal error; the server log has the details"))


