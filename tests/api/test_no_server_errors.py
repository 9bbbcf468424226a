"""A property over the whole tenant API: whatever value goes into any path parameter, query
parameter, body field or header of any endpoint (read from /openapi.json, so a new endpoint is
covered without touching this file), the answer is never a 5xx; a refusal is a 4xx naming the
field, and writes nothing. The values are the kinds audits found: instants whose offset leaves
the calendar, execution ids whose embedded time is past year 9999, NUL and lone surrogates in
text, deep nesting, huge numbers, path-like and SQL-looking strings."""

from __future__ import annotations

import asyncio
import json
import os
import re
import uuid
from collections import Counter
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from schedulerd.api import create_app
from schedulerd.jobs import Jobs, JobSpec
from schedulerd.tenants import Tenants
from tests.conftest import create_job

SEED = int(os.environ.get("SCHEDULERD_FAULT_SEED", "8"))
INSTANTS = ["0001-01-01T00:00:00+01:00", "0001-01-01T00:30:00+14:00", "9999-12-31T23:00:00-05:00",
            "9999-12-31T23:59:59-00:01", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z",
            "2026-12-01T09:00:00Z\x00", "2026-12-01T09:00:00Z\x00junk", "2026-12-01T09:00", "+275760-09-13T00:00:00Z",
            "2026-02-30T00:00:00Z", "1e9", "02:00", "25:00", "23:59"]  # fmt: skip
IDS = ["ffffffff-ffff-8fff-bfff-ffffffffffff", "e8d4a510-0000-8000-8000-000000000000", "00000000-0000-0000-0000-000000000000",
       "not-a-uuid", "../../etc/passwd"]  # fmt: skip
TEXT = ["a\x00b", "\x00", "\udcff", "caf\udce9", "'; DROP TABLE jobs; --", "x" * 600, "", " ", "%00", "Nowhere/Land",
        "+02:00", "\U0001f600"]  # fmt: skip
NUMBERS: list[Any] = [0, -1, 10**30, -(10**30), 1e308, float("nan"), float("inf"), True, None, 1.5]
DEEP: Any = "bottom"
for level in range(3000):
    DEEP = [DEEP] if level % 2 else {"k": DEEP}
NESTED_40: Any = 1
for _ in range(40):
    NESTED_40 = [NESTED_40]
values = st.one_of(st.sampled_from(INSTANTS), st.sampled_from(IDS), st.sampled_from(TEXT), st.sampled_from(NUMBERS),
                   st.just(DEEP), st.just({"params": {"a": "\udcff"}}), st.text(max_size=8))  # fmt: skip


def _query_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value) if not isinstance(value, dict | list) else "x"


def _operations(openapi: dict[str, Any]) -> list[tuple[str, str, list[str], list[str], list[str]]]:
    """(method, path, path parameters, query parameters, body fields) of every documented operation."""
    schemas = openapi.get("components", {}).get("schemas", {})
    out = []
    for path, methods in openapi["paths"].items():
        for method, operation in methods.items():
            params = operation.get("parameters", [])
            body_fields: list[str] = []
            content = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
            ref = content.get("schema", {}).get("$ref") or next(
                (s.get("$ref") for s in content.get("schema", {}).get("anyOf", []) if "$ref" in s), None)
            if ref:
                body_fields = sorted(schemas[ref.rsplit("/", 1)[1]].get("properties", {}))
            out.append((method.upper(), path, [p["name"] for p in params if p["in"] == "path"],
                        [p["name"] for p in params if p["in"] == "query"], body_fields or (["task"] if content else [])))  # fmt: skip
    return out


@st.composite
def requests(draw: st.DrawFn, operations: list[Any], ids: dict[str, list[str]]) -> tuple[str, str, dict[str, str], Any, dict[str, str]]:
    method, path, path_params, query_params, body_fields = draw(st.sampled_from(operations))
    url = path
    for name in path_params:  # a real id of this tenant most of the time, so the handler runs on
        real = ids.get(name, [])
        value = draw(st.one_of(st.sampled_from(real), st.sampled_from(real), st.sampled_from(IDS)) if real else st.sampled_from(IDS))
        url = url.replace("{" + name + "}", value)
    chosen = draw(st.sets(st.sampled_from(query_params), max_size=3)) if query_params else set()
    query = {name: _query_text(draw(values)) for name in sorted(chosen)}
    body: Any = None
    if body_fields:
        fields = draw(st.sets(st.sampled_from(body_fields), min_size=1, max_size=3))
        body = {"task": "noop"} | {name: draw(values) for name in sorted(fields)}
        if draw(st.booleans()):
            body = {k: v for k, v in body.items() if k != "task"} if "task" not in body_fields else body
    headers = {}
    if method == "POST" and path == "/v1/jobs" and draw(st.booleans()):
        headers["Idempotency-Key"] = draw(st.sampled_from(["key-1", "key-2"]))
    return method, url, query, body, headers


async def _rows(store) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    row = await store.db.fetchrow("SELECT (SELECT count(*) FROM jobs) AS j, (SELECT count(*) FROM executions) AS e")
    return row["j"], row["e"]


@pytest.mark.timeout(300)
async def test_no_endpoint_answers_5xx_to_any_parameter(store, queue, config) -> None:  # type: ignore[no-untyped-def]
    tenant = await Tenants(store).create(f"prop-{uuid.uuid4().hex[:12]}")
    jobs = Jobs(store, queue, config)
    cron_job, _ = await create_job(jobs, JobSpec(task="noop", tenant=tenant.tenant, cron="0 2 * * *"))
    one_off, executions = await create_job(jobs, JobSpec(task="noop", tenant=tenant.tenant))
    app = create_app(jobs, store, queue, config)
    operations = [op for op in _operations(app.openapi()) if op[1].startswith("/v1/")]
    assert len(operations) >= 15, operations  # every tenant endpoint, read from the document
    ids = {"job_id": [str(cron_job.id), str(one_off.id)], "execution_id": [str(executions[0].id)]}
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    loop = asyncio.get_running_loop()
    seen: Counter[str] = Counter()
    async with httpx.AsyncClient(transport=transport, base_url="http://prop",
                                 headers={"Authorization": f"Bearer {tenant.token}"}) as http:  # fmt: skip

        async def call(method: str, url: str, query: dict[str, str], body: Any, headers: dict[str, str]) -> str:
            before = await _rows(store)
            content = None
            if body is not None:
                try:
                    content = json.dumps(body, allow_nan=True).encode("utf-8", "surrogatepass")
                except RecursionError:
                    content = b"[" * 5000 + b"]" * 5000
            # Encoded by hand: a lone surrogate becomes the bytes that are not UTF-8 it stands for.
            raw = "&".join(f"{quote(k)}={quote(v.encode('utf-8', 'surrogatepass'))}" for k, v in query.items())
            response = await http.request(method, url + ("?" + raw if raw else ""), content=content,
                                          headers={"Content-Type": "application/json", **headers})  # fmt: skip
            assert response.status_code < 500, (method, url, query, content and content[:200], response.text)
            if response.status_code >= 400:
                error = response.json()["error"]
                assert error["code"] and error["message"], error
                if response.status_code == 422:
                    assert error["field"], error
                if method != "GET":
                    assert await _rows(store) == before, (method, url, response.text)
            return f"{method} {re.sub(r'[0-9a-f-]{36}', '{id}', url.split('?')[0])} {response.status_code}"

        @seed(SEED)
        @settings(max_examples=int(os.environ.get("SCHEDULERD_PROPERTY_EXAMPLES", "600")), deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(request=requests(operations, ids))
        def judge(request: tuple[str, str, dict[str, str], Any, dict[str, str]]) -> None:
            seen[asyncio.run_coroutine_threadsafe(call(*request), loop).result(60)] += 1

        await asyncio.to_thread(judge)
    statuses: Counter[str] = Counter()
    for key, n in seen.items():
        statuses[key.rsplit(" ", 1)[1]] += n
    print(f"\n[api] {sum(seen.values())} requests over {len(operations)} operations (seed {SEED}): statuses {dict(statuses)}")
    assert "422" in statuses and any(s.startswith("2") for s in statuses)


@pytest.mark.parametrize(("path", "field"), [
    ("/v1/executions?since=0001-01-01T00:00:00%2B01:00", "since"),
    ("/v1/executions?until=9999-12-31T23:00:00-05:00", "until"),
    ("/v1/executions/failed?task=a%00b", "task"),
    ("/v1/executions/failed?error=a%00b", "error"),
    ("/v1/executions/failed?since=2026-12-01T09:00:00Z%00", "since"),
    ("/v1/executions/late?since=9999-12-31T23:00:00-05:00", "since"),
    ("/v1/executions?cursor=WyIwMDAxLTAxLTAxVDAwOjAwOjAwKzAxOjAwIiwgIjAwMDAwMDAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMCJd", "cursor"),
])  # fmt: skip
async def test_quoted_examples_are_422_naming_the_field(store, queue, config, path, field) -> None:  # type: ignore[no-untyped-def]
    tenant = await Tenants(store).create(f"quoted-{uuid.uuid4().hex[:12]}")
    app = create_app(Jobs(store, queue, config), store, queue, config)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://q",
                                 headers={"Authorization": f"Bearer {tenant.token}"}) as http:  # fmt: skip
        response = await http.get(path)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field, response.text


async def test_bodies_past_the_calendar_or_with_bad_text_are_422_and_write_nothing(store, queue, config) -> None:  # type: ignore[no-untyped-def]
    tenant = await Tenants(store).create(f"bodies-{uuid.uuid4().hex[:12]}")
    jobs = Jobs(store, queue, config)
    job, _ = await create_job(jobs, JobSpec(task="noop", tenant=tenant.tenant, cron="0 2 * * *"))
    app = create_app(jobs, store, queue, config)
    cases = [
        ("/v1/jobs", {"task": "noop", "run_at": "0001-01-01T00:00:00+01:00"}, {}, "run_at"),
        ("/v1/jobs", {"task": "noop", "run_at": "2026-12-01T09:00:00Z\x00"}, {}, "run_at"),
        ("/v1/jobs", {"task": "noop", "timezone": "Nowhere/Land"}, {}, "timezone"),
        ("/v1/jobs", {"task": "noop", "params": {"a": "\udcff"}}, {"Idempotency-Key": "k"}, "params.a"),
        ("/v1/jobs", {"task": "noop", "params": {"d": NESTED_40}}, {"Idempotency-Key": "k"}, "params"),
        (f"/v1/jobs/{job.id}/backfill", {"from": "0001-01-01T00:00:00+01:00", "to": "2026-01-01T00:00:00Z"}, {}, "from"),
        (f"/v1/jobs/{job.id}/backfill", {"from": "2026-01-01T00:00:00Z", "to": "9999-12-31T23:00:00-05:00"}, {}, "to"),
        ("/v1/executions/redrive", {"since": "9999-12-31T23:00:00-05:00"}, {}, "since"),
        ("/v1/executions/redrive", {"task": "a\x00b"}, {}, "task"),
        (f"/v1/jobs/{job.id}/pause", {"note": "a\x00b"}, {}, "note"),
    ]  # fmt: skip
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://q",
                                 headers={"Authorization": f"Bearer {tenant.token}"}) as http:  # fmt: skip
        for path, body, headers, field in cases:
            before = await _rows(store)
            content = json.dumps(body).encode()
            response = await http.post(path, content=content, headers={"Content-Type": "application/json", **headers})
            assert response.status_code == 422, (path, body, response.text)
            assert response.json()["error"]["field"].startswith(field.split(".")[0]), (path, body, response.text)
            assert await _rows(store) == before
        why = await http.get(f"/v1/jobs/{job.id}/why", params={"at": "9999-12-31T23:00:00-05:00"})
        assert why.status_code == 422 and why.json()["error"]["field"] == "at", why.text
        for at in ("0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"):  # inside, at the very ends: answered
            edge = await http.get(f"/v1/jobs/{job.id}/why", params={"at": at})
            assert edge.status_code == 200, edge.text
        for execution_id in ("ffffffff-ffff-8fff-bfff-ffffffffffff", "e8d4a510-0000-8000-8000-000000000000"):
            assert (await http.get(f"/v1/executions/{execution_id}")).status_code == 404
            assert (await http.post(f"/v1/executions/{execution_id}/redrive")).status_code == 404
