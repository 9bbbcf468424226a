"""The built-in `http` task: call a tenant's webhook with the execution id as Idempotency-Key and
the fence as X-Fence-Token (and, while tracing is on, the attempt's span as traceparent). Decides
only retry vs. permanent; the worker records the outcome.

Only the target's own failures (no answer, a 5xx, a 429, a timeout) are retried and count against
its circuit breaker. Anything that fails before a byte is sent (a bad header, a bad URL, a secret
the tenant has not set) is a permanent error of the job's params: it never counts against a
breaker shared by every tenant calling that host. Credentials in a URL never appear in an error.

Header values and values anywhere in params.json may be {"$secret": "NAME"}: the tenant's secret
is opened for this attempt only, and its value is taken back out of every error and response
excerpt the attempt records. Every request of a tenant holding a signing key is signed
(X-Schedulerd-Signature, docs/webhooks.md)."""

from __future__ import annotations

import asyncio
import email.utils
import json
import socket
import time
from dataclasses import dataclass, replace
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from schedulerd.config import HttpConfig
from schedulerd.core import secret_refs
from schedulerd.core.targets import redact, refusal
from schedulerd.errors import NotConfiguredError, UnsealError
from schedulerd.signing_keys import Signer
from schedulerd.tasks.registry import PermanentError, RetryAfter, TaskContext, task
from schedulerd.tenant_secrets import MissingSecretError, TenantSecrets

if TYPE_CHECKING:
    import httpx

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
# Set by schedulerd (or derived from the body), never by params, in any letter case: the target
# relies on the first two, and a tenant's Host / framing headers could smuggle a second request.
RESERVED_HEADERS = frozenset({"idempotency-key", "x-fence-token", "x-schedulerd-signature", "host", "content-length",
                              "transfer-encoding"})  # fmt: skip
# While tracing is on, the attempt's span calls the target: its traceparent replaces these if params set them.
TRACE_HEADERS = frozenset({"traceparent", "tracestate"})
_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_settings = HttpConfig()
_secrets: TenantSecrets | None = None  # opens {"$secret": NAME} references; None: a reference fails the attempt
_signer: Signer | None = None  # None: no [secrets].key, so no tenant holds a signing key
_client: httpx.AsyncClient | None = None


def configure(settings: HttpConfig, secrets: TenantSecrets | None = None, signer: Signer | None = None) -> None:
    """Called by the daemon with the [http] section and the store's secrets and signer (tests call it too)."""
    global _settings, _secrets, _signer
    _settings, _secrets, _signer = settings, secrets, signer


class TargetError(Exception):
    """The target failed in a way worth retrying (5xx, 429, timeout, connection error)."""

    def __init__(self, message: str, *, detail: Any = None) -> None:
        super().__init__(message)
        self.detail = detail


@dataclass(frozen=True)
class Request:
    method: str
    url: str
    host: str
    port: int
    headers: dict[str, Any]  # values: strings, or secret references until with_secrets()
    body: bytes | None
    json: Any
    timeout_s: float
    secret_names: tuple[str, ...] = ()  # referenced by headers and json, first seen first


def parse_params(params: dict[str, Any], settings: HttpConfig) -> Request:
    """Validate params; a bad one is a permanent error naming the field (retrying cannot fix it)."""
    url = params.get("url")
    if not isinstance(url, str) or not url:
        raise PermanentError("http: params.url is required (a string, http:// or https://)")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PermanentError(f"http: params.url must be an absolute http:// or https:// URL, got {url!r}")
    method = str(params.get("method", "POST")).upper()
    if method not in METHODS:
        raise PermanentError(f"http: params.method must be one of {', '.join(METHODS)}, got {params.get('method')!r}")
    headers = params.get("headers", {})
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and (isinstance(v, str) or secret_refs.is_reference(v)) for k, v in headers.items()
    ):
        raise PermanentError('http: params.headers must be an object of string values (or {"$secret": "NAME"})')
    for name, value in headers.items():
        if not name or not set(name) <= _TOKEN_CHARS:
            raise PermanentError(f"http: params.headers has an invalid header name {name[:100]!r}")
        if name.lower() in RESERVED_HEADERS:
            raise PermanentError(f"http: params.headers may not set {name!r} (schedulerd sets it, or it frames the body)")
        if isinstance(value, str) and not _header_value_ok(value):
            raise PermanentError(f"http: params.headers[{name!r}] has a character a header value cannot carry")
    body, json_body = params.get("body"), params.get("json")
    if body is not None and not isinstance(body, str):
        raise PermanentError("http: params.body must be a string (use params.json for a JSON document)")
    if body is not None and json_body is not None:
        raise PermanentError("http: give params.body or params.json, not both")
    timeout_s = params.get("timeout_s", settings.timeout_s)
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or not timeout_s > 0:
        raise PermanentError(f"http: params.timeout_s must be a number above 0, got {timeout_s!r}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise PermanentError(f"http: params.url has a bad port: {exc}") from None
    import httpx  # here, not at the top: a replica that never calls out never holds it (3 MB)

    try:
        httpx.URL(url)  # what the client will parse: refuse here, before anything counts as the target's fault
    except (ValueError, httpx.InvalidURL) as exc:
        raise PermanentError(f"http: params.url is not a valid URL ({redact(url)}): {exc}") from None
    try:
        secret_names = secret_refs.names(headers, "params.headers") + secret_refs.names(json_body, "params.json")
    except secret_refs.SecretReferenceError as exc:
        raise PermanentError(f"http: {exc}") from None
    return Request(
        method, url, parts.hostname.lower(), port, headers, body.encode() if body is not None else None, json_body,
        min(float(timeout_s), settings.timeout_s), tuple(dict.fromkeys(secret_names)),
    )  # fmt: skip


def _header_value_ok(value: str) -> bool:
    return not any(ord(c) < 0x20 and c != "\t" or ord(c) == 0x7F or ord(c) > 0xFF for c in value)


def with_secrets(request: Request, values: dict[str, str]) -> Request:
    """The request with every reference replaced by its value. A value a header cannot carry is a
    permanent error naming the header and the secret, never the value."""
    headers = secret_refs.substitute(request.headers, values)
    for name, value in request.headers.items():
        if secret_refs.is_reference(value) and not _header_value_ok(headers[name]):
            raise PermanentError(f"http: params.headers[{name!r}]: secret {value[secret_refs.REFERENCE_KEY]!r} has a "
                                 "character a header value cannot carry (a newline?)")  # fmt: skip
    return replace(request, headers=headers, json=secret_refs.substitute(request.json, values))


async def open_secrets(tenant: str, names: tuple[str, ...]) -> dict[str, str]:
    """The values of the secrets an attempt references; a missing one (or one this worker cannot
    open) fails the attempt as permanent, naming it: retrying cannot set it."""
    if _secrets is None:
        raise PermanentError(f"http: params reference secret {names[0]!r}, but this worker has no secret store")
    try:
        return await _secrets.resolve(tenant, names)
    except MissingSecretError as exc:
        raise PermanentError(f"http: params reference {'secrets' if len(exc.names) > 1 else 'secret'} "
                             f"{', '.join(map(repr, exc.names))}, which this tenant has not set "
                             "(PUT /v1/secrets/NAME, `schedulerd secret set NAME`)") from None  # fmt: skip
    except (NotConfiguredError, UnsealError) as exc:
        raise PermanentError(f"http: cannot open secret {', '.join(map(repr, names))}: {exc}") from None


def encode_body(request: Request) -> tuple[bytes | None, dict[str, str]]:
    """The bytes to send (and sign) and the Content-Type they need: params.json encoded as httpx
    encodes json= (compact, UTF-8), unless params.headers names a Content-Type itself."""
    if request.json is None:
        return request.body, {}
    body = json.dumps(request.json, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    has_type = any(name.lower() == "content-type" for name in request.headers)
    return body, {} if has_type else {"Content-Type": "application/json"}


def target_host(params: dict[str, Any]) -> str | None:
    """The host params.url names, lower case, without a trailing dot (None: no usable URL)."""
    url = params.get("url")
    try:
        host = urlsplit(url).hostname if isinstance(url, str) else None
    except ValueError:  # a malformed URL fails in the handler, as permanent
        return None
    return host.rstrip(".") if host else None


def breaker_key(params: dict[str, Any]) -> str:
    """The http task's circuit breaker is per target host: one dead webhook must not park the rest."""
    return f"http:{target_host(params) or '?'}"


def parse_retry_after(value: str | None, now_s: float) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date (RFC 9110 10.2.3).

    >>> parse_retry_after("120", 0.0), parse_retry_after("soon", 0.0)
    (120.0, None)
    """
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - now_s)


async def _resolve(host: str, port: int) -> list[str]:
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise TargetError(f"http: cannot resolve {host!r}: {exc}") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _client_for_process() -> httpx.AsyncClient:
    """One client (and its connection pool) for every call this process makes, made at first use."""
    global _client
    import httpx

    if _client is None or _client.is_closed:
        # No redirects: a redirect could lead past the target check. No proxies from the environment.
        _client = httpx.AsyncClient(follow_redirects=False, trust_env=False)
    return _client


async def close() -> None:
    """Close the shared client's connections (the daemon, at shutdown); the next call makes a new one."""
    global _client
    client, _client = _client, None
    if client is not None:
        await client.aclose()


async def prepare(ctx: TaskContext, request: Request) -> tuple[Request, dict[str, str]]:
    """The request as it will be sent (secrets put in, the body encoded, the ids, the attempt's
    traceparent and the signature added), and the secret values it carries, to keep out of what the attempt records."""
    values = await open_secrets(ctx.tenant, request.secret_names) if request.secret_names else {}
    if values:
        request = with_secrets(request, values)
    body, content_headers = encode_body(request)
    headers = {**request.headers, **content_headers, "Idempotency-Key": str(ctx.execution_id), "X-Fence-Token": str(ctx.fence)}
    if ctx.traceparent is not None:
        headers = {name: value for name, value in headers.items() if name.lower() not in TRACE_HEADERS}
        headers["traceparent"] = ctx.traceparent
    if _signer is not None:
        try:
            headers.update(await _signer.sign_request(ctx.tenant, request.method, request.url, body or b"",
                                                      idempotency_key=headers["Idempotency-Key"], fence=headers["X-Fence-Token"]))  # fmt: skip
        except UnsealError as exc:
            raise PermanentError(f"http: cannot open this tenant's signing key: {exc}") from None
    return replace(request, headers=headers, body=body, json=None), values


@task("http", breaker_key=breaker_key, target_host=target_host)
async def http(ctx: TaskContext, params: dict[str, Any]) -> dict[str, Any]:
    """Call params.url (method, headers, body or json, timeout_s). 2xx succeeds; 429, 5xx, timeouts
    and connection errors retry (honouring Retry-After); other statuses fail without retries."""
    settings = _settings
    request, values = await prepare(ctx, parse_params(params, settings))
    status, excerpt, retry_after = await call(request, settings, secret_values=values)
    where = f"{request.method} {redact(request.url)}"
    # A target may echo what it was sent: no secret value is kept on the attempt.
    text = excerpt[: settings.excerpt_bytes].decode("utf-8", "replace")
    detail = {"status": status, "body": secret_refs.scrub(text, values) if values else text}
    if 200 <= status < 300:
        return detail
    summary = f"http: {where} answered {status}"
    if status == 429 or status >= 500:
        delay_s = parse_retry_after(retry_after, time.time())
        if delay_s is not None:
            raise RetryAfter(f"{summary} (Retry-After {delay_s:g} s)", delay_s, detail=detail)
        raise TargetError(summary, detail=detail)
    raise PermanentError(f"{summary}; a {status} is not retried", detail=detail)


class RefusedError(PermanentError):
    """The target check (core/targets.py) refused the URL's host; `reason` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"http: params.url refused: {reason}")
        self.reason = reason


async def call(
    request: Request, settings: HttpConfig, headers: Mapping[str, str] | None = None, *,
    secret_values: Mapping[str, str] | None = None,
) -> tuple[int, bytes, str | None]:  # fmt: skip
    """Send one request the only way schedulerd calls a URL someone else named (the http task,
    notifications): resolve, refuse a host the target check refuses (RefusedError), connect to
    the address judged, under one deadline for the whole call. `headers` are schedulerd's own,
    set over the request's; `secret_values` are kept out of every error. Returns (status, body
    excerpt, Retry-After). A timeout or connection failure is a TargetError (worth retrying); a
    request that could not be sent is a PermanentError."""
    import httpx

    where = f"{request.method} {redact(request.url)}"
    values = secret_values or {}
    # One deadline for the whole call (lookup, connect, send, every read): httpx's timeout is per
    # operation, so a target trickling a byte a second would otherwise hold it many times over.
    try:
        async with asyncio.timeout(request.timeout_s):
            return await _call(request, settings, headers or {})
    except TimeoutError:
        raise TargetError(f"http: {where} timed out after {request.timeout_s:g} s") from None
    except httpx.TimeoutException:
        raise TargetError(f"http: {where} timed out after {request.timeout_s:g} s") from None
    except (httpx.LocalProtocolError, httpx.UnsupportedProtocol, httpx.InvalidURL, httpx.DecodingError) as exc:
        # Failed on our side of the wire: the params are at fault, not the target.
        raise PermanentError(f"http: {where} could not be sent: {type(exc).__name__}: {_scrub(str(exc), request.url, values)}") from None
    except httpx.TransportError as exc:
        raise TargetError(f"http: {where} failed to connect: {type(exc).__name__}: {_scrub(str(exc), request.url, values)}") from None


def _scrub(text: str, url: str, values: Mapping[str, str]) -> str:
    """An exception's text with the URL's userinfo and the attempt's secret values taken out
    (some errors quote the URL or a header)."""
    parts = urlsplit(url)
    for secret in (parts.password, parts.username):
        if secret:
            text = text.replace(secret, "***")
    return secret_refs.scrub(text, values) if values else text


async def _call(request: Request, settings: HttpConfig, own_headers: Mapping[str, str]) -> tuple[int, bytes, str | None]:
    """Resolve, check the target, send; (status, body excerpt, Retry-After header)."""
    import httpx

    addresses = await _resolve(request.host, request.port)
    reason = refusal(request.host, addresses, settings.allow_hosts, settings.allow_private, request.port)
    if reason is not None:
        raise RefusedError(reason)
    # Connect to the address just checked, not a second lookup's answer (DNS rebinding); the Host
    # header and TLS server name stay the URL's.
    url = httpx.URL(request.url).copy_with(host=addresses[0])
    headers = {**request.headers, "Host": httpx.URL(request.url).netloc.decode(), **own_headers}
    extensions = {"sni_hostname": request.host} if url.scheme == "https" else {}
    async with _client_for_process().stream(
        request.method, url, headers=headers, content=request.body, timeout=request.timeout_s, extensions=extensions,
    ) as response:  # fmt: skip
        excerpt = b""
        async for chunk in response.aiter_bytes():
            excerpt += chunk
            if len(excerpt) >= settings.excerpt_bytes:
                break  # a bounded excerpt: never read a huge body into memory
    return response.status_code, excerpt, response.headers.get("retry-after")
