"""POST/GET /v1/jobs and the job actions over real HTTP: responses, every validation error, limits."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import httpx
import pytest

from schedulerd.store import Store


async def jobs_of(store: Store, tenant: str) -> int:
    return await store.db.fetchval("SELECT count(*) FROM jobs WHERE tenant = $1", tenant)


async def test_create_now_at_and_cron_jobs_with_resolved_next_runs(client: httpx.AsyncClient, store: Store) -> None:
    now = await client.post("/v1/jobs", json={"task": "log", "params": {"hello": "world"}, "name": "hi"})
    assert now.status_code == 201, now.text
    body = now.json()
    assert body["job"]["tenant"] == client.tenant and body["job"]["schedule_kind"] == "now"  # type: ignore[attr-defined]
    assert body["job"]["params"] == {"hello": "world"} and body["job"]["state"] == "enabled"

    at = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    later = await client.post("/v1/jobs", json={"task": "noop", "run_at": at.isoformat().replace("+00:00", "+02:00")[:-6] + "+00:00"})
    assert later.status_code == 201 and later.json()["next_runs"] == [at.strftime("%Y-%m-%dT%H:%M:%SZ")]

    cron = await client.post("/v1/jobs", json={
        "task": "noop", "cron": "30 9 * * MON-FRI", "timezone": "Europe/London", "window_s": 0,
        "misfire": {"policy": "catch_up", "catch_up_limit": 3},
        "retry": {"max_attempts": 5, "backoff_base_s": 1, "backoff_factor": 2, "backoff_max_s": 60}, "timeout_s": 30,
    })  # fmt: skip
    assert cron.status_code == 201, cron.text
    job = cron.json()["job"]
    assert job["misfire"] == {"policy": "catch_up", "catch_up_limit": 3}
    assert job["retry"] == {"max_attempts": 5, "backoff_base_s": 1.0, "backoff_factor": 2.0, "backoff_max_s": 60.0}
    runs = [datetime.fromisoformat(r) for r in cron.json()["next_runs"]]
    assert len(runs) == 5 and runs == sorted(runs) and all(r.tzinfo is not None and r.utcoffset() == timedelta(0) for r in runs)
    local = [r.astimezone(ZoneInfo("Europe/London")) for r in runs]
    assert all((t.hour, t.minute, t.weekday() < 5) == (9, 30, True) for t in local)
    assert await jobs_of(store, client.tenant) == 3  # type: ignore[attr-defined]


async def test_get_and_list_jobs_show_next_runs_and_last_outcome(client: httpx.AsyncClient) -> None:
    created = [(await client.post("/v1/jobs", json={"task": "noop", "cron": "@hourly", "name": f"j{i}"})).json()["job"]
               for i in range(3)]  # fmt: skip
    one = await client.get(f"/v1/jobs/{created[0]['id']}")
    assert one.status_code == 200 and one.json()["name"] == "j0" and len(one.json()["next_runs"]) == 5
    assert one.json()["last_execution"] is None
    first = await client.get("/v1/jobs", params={"limit": 2})
    assert [j["name"] for j in first.json()["items"]] == ["j2", "j1"]  # newest first
    rest = await client.get("/v1/jobs", params={"limit": 2, "cursor": first.json()["next_cursor"]})
    assert [j["name"] for j in rest.json()["items"]] == ["j0"] and rest.json()["next_cursor"] is None


async def test_pause_resume_trigger_delete(client: httpx.AsyncClient) -> None:
    job_id = (await client.post("/v1/jobs", json={"task": "noop", "cron": "* * * * *"})).json()["job"]["id"]
    paused = await client.post(f"/v1/jobs/{job_id}/pause")
    assert paused.status_code == 200 and paused.json()["job"]["state"] == "paused"
    assert paused.json()["cancelled_executions"] >= 5 and paused.json()["job"]["next_runs"] == []
    resumed = await client.post(f"/v1/jobs/{job_id}/resume")
    assert resumed.status_code == 200 and resumed.json()["job"]["state"] == "enabled"
    triggered = await client.post(f"/v1/jobs/{job_id}/trigger")
    assert triggered.status_code == 201 and triggered.json()["job_id"] == job_id
    assert triggered.json()["status"] == "queued"
    deleted = await client.delete(f"/v1/jobs/{job_id}")
    assert deleted.status_code == 200 and deleted.json()["job"]["state"] == "deleted"
    again = await client.delete(f"/v1/jobs/{job_id}")
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
    assert (await client.post(f"/v1/jobs/{job_id}/trigger")).status_code == 409
    assert (await client.get(f"/v1/jobs/{job_id}")).json()["state"] == "deleted"  # history stays visible
    listed = await client.get("/v1/jobs")
    assert listed.json()["items"] == []
    assert len((await client.get("/v1/jobs", params={"include_deleted": "true"})).json()["items"]) == 1


async def test_resuming_a_one_off_job_is_refused(client: httpx.AsyncClient) -> None:
    job_id = (await client.post("/v1/jobs", json={"task": "noop", "run_at": "2030-01-01T00:00:00Z"})).json()["job"]["id"]
    refused = await client.post(f"/v1/jobs/{job_id}/resume")
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "job_id"


DEEP: dict = {}
_level = DEEP
for _ in range(40):
    _level["x"] = {}
    _level = _level["x"]


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"task": "log", "cron": "*/0 * * * *"}, "cron", "bad cron expression"),
        ({"task": "log", "cron": "61 * * * *"}, "cron", ""),
        ({"task": "log", "cron": "0 0 30 2 *"}, "cron", "never"),
        ({"task": "log", "cron": "@daily", "timezone": "Nowhere/Land"}, "timezone", "unknown time zone 'Nowhere/Land'"),
        ({"task": "log", "cron": "@daily", "timezone": "+02:00"}, "timezone", ""),
        ({"task": "nope"}, "task", "unknown task type 'nope'"),
        ({"task": "log", "run_at": "1999-01-01T00:00:00Z"}, "run_at", "out of range"),
        ({"task": "log", "run_at": "2999-01-01T00:00:00Z"}, "run_at", "out of range"),
        ({"task": "log", "run_at": "2026-12-01T09:00:00"}, "run_at", "has no UTC offset"),
        ({"task": "log", "run_at": "tomorrow"}, "run_at", "is not an ISO 8601 timestamp"),
        ({"task": "log", "run_at": 1767225600}, "run_at", "must be an ISO 8601 string"),
        ({"task": "log", "run_at": "2030-01-01T00:00:00Z", "cron": "@daily"}, "run_at", "not both"),
        ({"task": 5}, "task", "valid string"),
        ({}, "task", "Field required"),
        ({"task": "log", "params": [1]}, "params", "valid dictionary"),
        ({"task": "log", "params": {"x": "nul\u0000"}}, "params.x", "NUL"),
        ({"task": "log", "params": {"k\u0000": 1}}, "params key", "NUL"),
        ({"task": "log", "params": DEEP}, "params", "nested deeper than 32 levels"),
        ({"task": "log", "name": "a\u0000b"}, "name", "NUL"),
        ({"task": "log", "retry": {"max_attempts": "3"}}, "retry.max_attempts", "valid integer"),
        ({"task": "log", "retry": {"max_attempts": 0}}, "retry.max_attempts", "greater than or equal to 1"),
        ({"task": "log", "retry": {"max_attempts": 10**30}}, "retry.max_attempts", "less than or equal to 100"),
        ({"task": "log", "retry": {"backoff_factor": 0.5}}, "retry.backoff_factor", "greater than or equal to 1"),
        ({"task": "log", "window_s": "5m"}, "window_s", "valid number"),
        ({"task": "log", "cron": "@daily", "window_s": 90000}, "window_s", "less than or equal to 86400"),
        ({"task": "log", "timeout_s": 0}, "timeout_s", "greater than 0"),
        ({"task": "log", "misfire": {"policy": "sometimes"}}, "misfire.policy", "'skip', 'run_once' or 'catch_up'"),
        ({"task": "log", "tenant": "someone-else"}, "tenant", "the tenant comes from the token"),
        ({"task": "log", "schedule": "now"}, "schedule", "is not a field of this request"),
    ],
)
async def test_bad_job_definitions_name_the_field_and_write_nothing(
    client: httpx.AsyncClient, store: Store, body: dict, field: str, message: str
) -> None:
    refused = await client.post("/v1/jobs", json=body)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "validation" and error["field"] == field and message in error["message"], error
    assert await jobs_of(store, client.tenant) == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("content", "status", "field", "message"),
    [
        (b'{"task": "log"', 422, "body", "is not valid JSON"),
        (b'{"task": "log", "params": {"x": NaN}}', 422, "params", "not valid JSON"),
        (b'{"task": "log", "timeout_s": Infinity}', 422, "timeout_s", "finite number"),
        (b'{"task": "log", "params": {"x": 1e999}}', 422, "params", "not valid JSON"),
        (b"\xff\xfe\x00{", 422, "body", "is not valid JSON"),
        (b'{"task": "\xc3\x28"}', 422, "body", "is not valid JSON (UTF-8"),
        (b"[" * 5000 + b"]" * 5000, 422, "body", "is not valid JSON (UTF-8"),
        (b"", 422, "body", "Field required"),
    ],
)
async def test_malformed_bodies_are_refused_without_a_500(
    client: httpx.AsyncClient, store: Store, content: bytes, status: int, field: str, message: str
) -> None:
    refused = await client.post("/v1/jobs", content=content, headers={"Content-Type": "application/json"})
    assert refused.status_code == status, refused.text
    assert refused.json()["error"]["field"] == field and message in refused.json()["error"]["message"]
    assert await jobs_of(store, client.tenant) == 0  # type: ignore[attr-defined]


async def test_size_limits_name_the_limit(client: httpx.AsyncClient, store: Store) -> None:
    big_params = await client.post("/v1/jobs", json={"task": "log", "params": {"x": "a" * 70000}})
    assert big_params.status_code == 422
    assert big_params.json()["error"] == {"code": "limit_exceeded", "field": "params", "limit": "jobs.max_params_bytes",
                                          "message": "is 70009 bytes; the limit is 65536"}  # fmt: skip
    huge_body = await client.post("/v1/jobs", json={"task": "log", "params": {"x": "a" * 300_000}})
    assert huge_body.status_code == 413 and huge_body.json()["error"]["limit"] == "api.max_body_bytes"

    async def chunks():  # no Content-Length: the limit is enforced on what arrives
        for _ in range(40):
            yield b" " * 10_000

    streamed = await client.post("/v1/jobs", content=chunks(), headers={"Content-Type": "application/json"})
    assert streamed.status_code == 413 and streamed.json()["error"]["code"] == "limit_exceeded"
    page = await client.get("/v1/jobs", params={"limit": 501})
    assert page.status_code == 422 and page.json()["error"]["limit"] == "api.page_size_max"
    assert page.json()["error"]["field"] == "limit"
    assert await jobs_of(store, client.tenant) == 0  # type: ignore[attr-defined]


async def test_idempotency_key_returns_the_first_result(client: httpx.AsyncClient, store: Store, api, make_tenant) -> None:  # type: ignore[no-untyped-def]
    body = {"task": "noop", "cron": "@daily", "timezone": "Asia/Tokyo"}
    first = await client.post("/v1/jobs", json=body, headers={"Idempotency-Key": "create-1"})
    again = await client.post("/v1/jobs", json=body, headers={"Idempotency-Key": "create-1"})
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    other_body = await client.post("/v1/jobs", json={**body, "name": "x"}, headers={"Idempotency-Key": "create-1"})
    assert other_body.status_code == 409 and other_body.json()["error"]["field"] == "Idempotency-Key"
    # Concurrent retries of one create still make one job.
    racing = await asyncio.gather(*[client.post("/v1/jobs", json=body, headers={"Idempotency-Key": "create-2"}) for _ in range(6)])
    assert {r.status_code for r in racing} == {201} and len({r.json()["job"]["id"] for r in racing}) == 1
    assert await jobs_of(store, client.tenant) == 2  # type: ignore[attr-defined]
    # Keys belong to the tenant: another tenant's same key is a new job.
    tenant, token = await make_tenant()
    async with httpx.AsyncClient(base_url=api.url, headers={"Authorization": f"Bearer {token}"}) as other:
        theirs = await other.post("/v1/jobs", json=body, headers={"Idempotency-Key": "create-1"})
    assert theirs.status_code == 201 and theirs.json()["job"]["id"] != first.json()["job"]["id"]
    bad_key = await client.post("/v1/jobs", json=body, headers={"Idempotency-Key": "has space"})
    assert bad_key.status_code == 422 and bad_key.json()["error"]["field"] == "Idempotency-Key"
    assert json.loads(first.text)["job"]["timezone"] == "Asia/Tokyo"


@pytest.mark.parametrize("key", [None, "lost-reply-1"], ids=["without-key", "with-key"])
async def test_a_create_whose_commit_reply_was_lost_answers_201_once(
    client: httpx.AsyncClient, store: Store, monkeypatch: pytest.MonkeyPatch, key: str | None
) -> None:
    """The primary died with the COMMIT's reply in flight: the API reads back what committed
    (tests/integration/test_intake.py has every shape) instead of a 5xx or a second job."""
    from tests.integration.test_intake import _Lost

    tenant = client.tenant  # type: ignore[attr-defined]
    lost = _Lost(store, monkeypatch, committed=True, any_store=True)
    headers = {"Idempotency-Key": key} if key else {}
    created = await client.post("/v1/jobs", json={"task": "noop", "name": "lost-reply"}, headers=headers)
    assert lost.left == 0 and created.status_code == 201, created.text
    assert await jobs_of(store, tenant) == 1
    assert created.json()["job"]["id"] == str(await store.db.fetchval("SELECT id FROM jobs WHERE tenant = $1", tenant))


async def test_a_database_that_does_not_answer_is_a_503_with_retry_after(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mid-failover (no primary yet) a request gets a JSON 503 saying so, not a 500 and a traceback."""

    async def failing_over(*args: object, **kwargs: object) -> None:
        raise ConnectionRefusedError("connection refused: no primary yet")

    monkeypatch.setattr(Store, "job_page", failing_over)
    answer = await client.get("/v1/jobs")
    assert answer.status_code == 503 and answer.headers["Retry-After"] == "2"
    assert answer.json()["error"]["code"] == "unavailable"
