"""Executions over HTTP (cursor pages, filters, attempts), auth, rate limits, the operator view,
and tenant isolation: another tenant's job or execution is a 404, exactly like a missing one."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from schedulerd.config import Config
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from schedulerd.worker import Worker
from tests.conftest import wait_for


async def run_until_finished(store: Store, queue: DelayQueue, config: Config, execution_id: str) -> None:
    """Drive a worker in this test until the execution reaches a final status."""
    worker = Worker(store, queue, config.worker, "api-test-worker", horizon_s=config.dispatcher.horizon_s)
    try:

        async def finished() -> bool:
            await worker.run_once()
            await asyncio.gather(*[r.task for r in worker.running.values() if r.task is not None], return_exceptions=True)
            await worker.flush_outcomes()
            execution = await store.execution_get(uuid.UUID(execution_id))
            return execution is not None and execution.status in ("succeeded", "failed")

        await wait_for(finished, timeout_s=20)
    finally:
        worker._threads.shutdown(wait=False, cancel_futures=True)


async def test_an_execution_shows_every_attempt(client: httpx.AsyncClient, store: Store, queue: DelayQueue, config: Config) -> None:
    created = await client.post("/v1/jobs", json={"task": "fail", "params": {"message": "boom"},
                                                  "retry": {"max_attempts": 2, "backoff_base_s": 0}})  # fmt: skip
    job_id = created.json()["job"]["id"]
    (listed,) = (await client.get("/v1/executions", params={"job": job_id})).json()["items"]
    await run_until_finished(store, queue, config, listed["id"])
    shown = await client.get(f"/v1/executions/{listed['id']}")
    assert shown.status_code == 200
    execution = shown.json()
    assert execution["status"] == "failed" and execution["attempt"] == 2 and execution["start_lag_s"] >= 0
    assert [a["attempt"] for a in execution["attempts"]] == [1, 2]
    for attempt in execution["attempts"]:
        assert attempt["outcome"] == "failed" and "boom" in attempt["error"] and attempt["worker"] == "api-test-worker"
        started, ended = datetime.fromisoformat(attempt["started_at"]), datetime.fromisoformat(attempt["finished_at"])
        assert abs((ended - started).total_seconds() - attempt["duration_s"]) < 1e-3
    job = (await client.get(f"/v1/jobs/{job_id}")).json()
    assert job["last_execution"]["status"] == "failed" and job["last_execution"]["id"] == listed["id"]
    overview = (await client.get("/v1/overview")).json()
    assert overview["runs_by_status"] == {"failed": 1} and overview["start_lag"]["started"] == 1
    assert overview["start_lag"]["p50_s"] is not None and overview["tenant"] == client.tenant  # type: ignore[attr-defined]
    assert overview["queue_depth"] >= 0 and overview["window_s"] == 900


async def insert_executions(store: Store, tenant: str, job_id: str, count: int, start: datetime) -> None:
    rows = [(uuid.uuid4(), uuid.UUID(job_id), tenant, start + timedelta(minutes=i), start + timedelta(minutes=i))
            for i in range(count)]  # fmt: skip
    await store.execution_insert_many(rows, horizon_s=0)


async def test_cursor_pages_are_stable_under_inserts(client: httpx.AsyncClient, store: Store) -> None:
    job_id = (await client.post("/v1/jobs", json={"task": "noop", "run_at": "2031-01-01T00:00:00Z"})).json()["job"]["id"]
    base = datetime(2020, 1, 1, tzinfo=UTC)
    await insert_executions(store, client.tenant, job_id, 29, base)  # type: ignore[attr-defined]
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = (await client.get("/v1/executions", params={"limit": 7, **({"cursor": cursor} if cursor else {})})).json()
        seen += page["items"]
        # Rows inserted between pages (newer, and older than the page end) never shift the next page.
        await insert_executions(store, client.tenant, job_id, 1, base + timedelta(days=400 + len(seen)))  # type: ignore[attr-defined]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    keys = [(e["scheduled_for"], e["id"]) for e in seen]
    assert len(keys) == len(set(keys)) == 30  # the 29 + the one-off's own, none twice, none skipped
    assert keys == sorted(keys, reverse=True)
    failed = await client.get("/v1/executions", params={"status": "failed"})
    assert failed.json() == {"items": [], "next_cursor": None}
    window = await client.get("/v1/executions", params={"since": "2020-01-01T00:05:00Z", "until": "2020-01-01T00:10:00+00:00"})
    assert [e["scheduled_for"] for e in window.json()["items"]] == [f"2020-01-01T00:0{m}:00Z" for m in range(9, 4, -1)]


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"status": "done"}, "status", "'pending'"),
        ({"since": "yesterday"}, "since", "not an ISO 8601 timestamp"),
        ({"until": "2026-01-01T00:00:00"}, "until", "no UTC offset"),
        ({"job": "not-a-uuid"}, "job", "valid UUID"),
        ({"cursor": "bm90IGEgY3Vyc29y"}, "cursor", "not a cursor this API returned"),
        ({"cursor": "%%%"}, "cursor", "not a cursor"),
        ({"limit": 0}, "limit", "greater than or equal to 1"),
        ({"limit": "ten"}, "limit", "valid integer"),
    ],
)
async def test_bad_execution_queries_name_the_parameter(client: httpx.AsyncClient, params: dict, field: str, message: str) -> None:
    refused = await client.get("/v1/executions", params=params)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["field"] == field and message in refused.json()["error"]["message"]


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer sdk_not-a-real-token"}, {"Authorization": "Basic dXNlcjpwYXNz"},
                                     {"Authorization": "Bearer"}, {"Authorization": "Bearer " + "x" * 5000}])  # fmt: skip
async def test_requests_without_a_valid_token_are_refused(api, headers: dict) -> None:  # type: ignore[no-untyped-def]
    async with httpx.AsyncClient(base_url=api.url, headers=headers) as anonymous:
        for method, path in [("GET", "/v1/jobs"), ("POST", "/v1/jobs"), ("GET", f"/v1/executions/{uuid.uuid4()}"), ("GET", "/v1/overview")]:
            refused = await anonymous.request(method, path, json={"task": "log"} if method == "POST" else None)
            assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
            assert refused.headers["WWW-Authenticate"] == "Bearer"


async def test_unknown_routes_and_methods_answer_json(client: httpx.AsyncClient) -> None:
    missing = await client.get("/v1/nothing")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    wrong = await client.put("/v1/jobs")
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "method_not_allowed"


async def test_rate_limit_per_token(start_api, make_tenant) -> None:  # type: ignore[no-untyped-def]
    server = start_api(rate_limit=3, rate_window_s=60)
    (_, token_a), (_, token_b) = await make_tenant(), await make_tenant()
    async with httpx.AsyncClient(base_url=server.url) as http:
        statuses = [(await http.get("/v1/me", headers={"Authorization": f"Bearer {token_a}"})).status_code for _ in range(3)]
        refused = await http.get("/v1/me", headers={"Authorization": f"Bearer {token_a}"})
        other = await http.get("/v1/me", headers={"Authorization": f"Bearer {token_b}"})
    assert statuses == [200, 200, 200]
    assert refused.status_code == 429 and refused.json()["error"]["limit"] == "api.rate_limit"
    assert refused.json()["error"]["code"] == "limit_exceeded" and 1 <= int(refused.headers["Retry-After"]) <= 60
    assert other.status_code == 200  # the limit is per token


async def test_tenants_never_see_or_change_each_others_jobs(api, client: httpx.AsyncClient, make_tenant, store: Store,
                                                            queue: DelayQueue, config: Config) -> None:  # type: ignore[no-untyped-def]
    """Every way of reaching tenant A's job or execution from tenant B answers exactly like a missing one."""
    job = (await client.post("/v1/jobs", json={"task": "noop", "cron": "* * * * *"})).json()["job"]
    run = (await client.post(f"/v1/jobs/{job['id']}/trigger")).json()
    await run_until_finished(store, queue, config, run["id"])
    _, token_b = await make_tenant("intruder")
    missing_job, missing_execution = str(uuid.uuid4()), str(uuid.uuid4())

    def same_as_missing(theirs: httpx.Response, missing: httpx.Response, their_id: str, missing_id: str) -> None:
        assert theirs.status_code == missing.status_code == 404
        assert theirs.json() == {"error": {**missing.json()["error"], "message": missing.json()["error"]["message"].replace(missing_id, their_id)}}

    async with httpx.AsyncClient(base_url=api.url, headers={"Authorization": f"Bearer {token_b}"}) as b:
        for method, path in [("GET", "/v1/jobs/{}"), ("POST", "/v1/jobs/{}/pause"), ("POST", "/v1/jobs/{}/resume"),
                             ("POST", "/v1/jobs/{}/trigger"), ("DELETE", "/v1/jobs/{}")]:  # fmt: skip
            same_as_missing(await b.request(method, path.format(job["id"])), await b.request(method, path.format(missing_job)),
                            job["id"], missing_job)  # fmt: skip
        same_as_missing(await b.get(f"/v1/executions/{run['id']}"), await b.get(f"/v1/executions/{missing_execution}"),
                        run["id"], missing_execution)  # fmt: skip
        same_as_missing(await b.get("/v1/executions", params={"job": job["id"]}),
                        await b.get("/v1/executions", params={"job": missing_job}), job["id"], missing_job)  # fmt: skip
        assert (await b.get("/v1/jobs", params={"include_deleted": "true"})).json()["items"] == []
        assert (await b.get("/v1/executions")).json()["items"] == []
        assert (await b.get("/v1/overview")).json()["runs_by_status"] == {}
        # B's idempotency keys cannot replay A's results either.
        await client.post("/v1/jobs", json={"task": "noop"}, headers={"Idempotency-Key": "shared"})
        theirs = await b.post("/v1/jobs", json={"task": "noop"}, headers={"Idempotency-Key": "shared"})
        assert theirs.status_code == 201 and theirs.json()["job"]["tenant"].startswith("intruder-")
    # A's job is untouched by all of that.
    after = (await client.get(f"/v1/jobs/{job['id']}")).json()
    assert after["state"] == "enabled" and after["updated_at"] == job["updated_at"]
    # Scheduled slots fall on whole minutes; a trigger's slot is "now": only A's own trigger exists.
    off_schedule = await store.db.fetch(
        "SELECT id FROM executions WHERE job_id = $1 AND date_trunc('minute', scheduled_for) <> scheduled_for", uuid.UUID(job["id"])
    )
    assert [str(r["id"]) for r in off_schedule] == [run["id"]]
    assert await store.db.fetchval("SELECT count(*) FROM executions WHERE job_id = $1 AND status = 'cancelled'", uuid.UUID(job["id"])) == 0


async def test_openapi_document_lists_every_endpoint(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    operations = {(method.upper(), path) for path, item in document["paths"].items() for method in item}
    assert operations >= {
        ("POST", "/v1/jobs"), ("GET", "/v1/jobs"), ("GET", "/v1/jobs/{job_id}"), ("POST", "/v1/jobs/{job_id}/pause"),
        ("POST", "/v1/jobs/{job_id}/resume"), ("POST", "/v1/jobs/{job_id}/trigger"), ("DELETE", "/v1/jobs/{job_id}"),
        ("GET", "/v1/executions"), ("GET", "/v1/executions/{execution_id}"), ("GET", "/v1/overview"),
    }  # fmt: skip
    assert document["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert "ErrorBody" in document["components"]["schemas"]


async def test_tenants_see_an_errors_type_and_message_not_the_traceback(client, store) -> None:  # type: ignore[no-untyped-def]
    created = (await client.post("/v1/jobs", json={"task": "noop"})).json()
    execution_id = (await client.get("/v1/executions", params={"job": created["job"]["id"]})).json()["items"][0]["id"]
    traceback = ('Traceback (most recent call last):\n  File "/opt/schedulerd/lib/schedulerd/worker.py", line 352, in _run\n'
                 '    result = await handler(ctx, params)\n  File "/srv/app/tasks.py", line 9, in report\n'
                 '    raise RuntimeError("ledger locked")\nRuntimeError: ledger locked')  # fmt: skip
    await store.db.execute("UPDATE executions SET last_error = $2 WHERE id = $1", execution_id, traceback)
    await store.db.execute(
        "INSERT INTO attempts (execution_id, attempt, fence, worker, started_at, finished_at, outcome, error, scheduled_for) "
        "SELECT id, 1, 1, 'w', clock_timestamp(), clock_timestamp(), 'failed', $2, scheduled_for FROM executions WHERE id = $1",
        execution_id, traceback,
    )  # fmt: skip
    shown = (await client.get(f"/v1/executions/{execution_id}")).json()
    assert shown["last_error"] == "RuntimeError: ledger locked"
    assert [a["error"] for a in shown["attempts"]] == ["RuntimeError: ledger locked"]
    assert "worker.py" not in json.dumps(shown)
    # The operator keeps the traceback (the CLI reads the store; here, the store itself).
    assert (await store.execution_get(execution_id)).last_error == traceback


async def test_the_overview_shows_a_tenant_only_its_own_queue(api, client: httpx.AsyncClient, make_tenant,
                                                               store: Store) -> None:  # type: ignore[no-untyped-def]
    """Queue depth, oldest due wait and horizon are the caller's own: another tenant's backlog
    (or its existence) shows in none of them."""
    soon = (datetime.now(UTC) + timedelta(seconds=120)).isoformat()
    for _ in range(3):
        assert (await client.post("/v1/jobs", json={"task": "noop", "run_at": soon})).status_code == 201
    overdue = (await client.post("/v1/jobs", json={"task": "noop"})).json()["job"]["id"]  # due now; no worker runs here
    await store.db.execute("UPDATE executions SET due_at = now() - interval '90 seconds' WHERE job_id = $1", uuid.UUID(overdue))
    assert (await client.post("/v1/jobs", json={"task": "noop", "cron": "@hourly"})).status_code == 201
    _, token_b = await make_tenant("quiet")

    mine = (await client.get("/v1/overview")).json()
    assert mine["queue_depth"] >= 4 and mine["oldest_due_age_s"] >= 90 and mine["horizon_s"] is not None
    async with httpx.AsyncClient(base_url=api.url, headers={"Authorization": f"Bearer {token_b}"}) as b:
        theirs = (await b.get("/v1/overview")).json()
    assert (theirs["queue_depth"], theirs["oldest_due_age_s"], theirs["horizon_s"]) == (0, None, None)
    assert theirs["runs_by_status"] == {} and theirs["tenant"].startswith("quiet")
