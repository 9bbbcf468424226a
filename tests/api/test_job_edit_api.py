"""PATCH /v1/jobs/{id} over real HTTP: the diff answer, dry runs, refusals naming the field,
If-Match, Idempotency-Key replays, tenancy, and job_version in the execution views."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from schedulerd.store import Store


async def _cron_job(client: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    created = await client.post("/v1/jobs", json={"task": "noop", "cron": "*/10 * * * *", **fields})
    assert created.status_code == 201, created.text
    return created.json()["job"]  # type: ignore[no-any-return]


async def test_patch_answers_the_diff_and_the_job_after_it(client: httpx.AsyncClient, store: Store) -> None:
    job = await _cron_job(client, params={"v": 1}, timezone="Europe/London")
    assert job["version"] == 1
    edited = await client.patch(f"/v1/jobs/{job['id']}", json={"cron": "*/20 * * * *", "params": {"v": 2},
                                                              "retry": {"max_attempts": 7}})  # fmt: skip
    assert edited.status_code == 200, edited.text
    body = edited.json()
    assert body["dry_run"] is False and body["job"]["version"] == 2 and body["job"]["params"] == {"v": 2}
    assert body["job"]["retry"]["max_attempts"] == 7 and body["job"]["cron"] == "*/20 * * * *"
    assert body["removed"] and body["kept"] and body["added"] == [] and body["cancelled_executions"] > 0
    assert {"at", "local", "labels", "note"} <= set(body["kept"][0])
    page = await client.get("/v1/executions", params={"job_id": job["id"], "limit": 100})
    versions = {e["status"]: e["job_version"] for e in page.json()["items"]}
    assert versions.get("cancelled") == 1 and (versions.get("pending") or versions.get("queued")) == 2


async def test_a_dry_run_writes_nothing(client: httpx.AsyncClient, store: Store) -> None:
    job = await _cron_job(client)
    before = await store.db.fetch("SELECT * FROM executions ORDER BY id")
    planned = await client.patch(f"/v1/jobs/{job['id']}", params={"dry_run": "true"}, json={"cron": "*/20 * * * *"})
    assert planned.status_code == 200 and planned.json()["dry_run"] is True and planned.json()["job"]["version"] == 2
    assert await store.db.fetch("SELECT * FROM executions ORDER BY id") == before
    assert (await client.get(f"/v1/jobs/{job['id']}")).json()["version"] == 1


async def test_refusals_name_the_field_and_write_nothing(client: httpx.AsyncClient) -> None:
    job = await _cron_job(client)
    for body, field in [({"task": "log"}, "task"), ({"run_at": "2030-01-01T00:00:00Z"}, "run_at"),
                        ({"cron": "bad"}, "cron"), ({"window_s": 5000, "cron": "bad"}, "cron"),
                        ({"misfire": {"policy": "never"}}, "misfire.policy"), ({"tenant": "x"}, "tenant"),
                        ({"timezone": "Nowhere/Land"}, "timezone"), ({}, "changes")]:  # fmt: skip
        refused = await client.patch(f"/v1/jobs/{job['id']}", json=body)
        assert refused.status_code == 422, (body, refused.text)
        assert refused.json()["error"]["field"] == field, (body, refused.json())
    assert (await client.get(f"/v1/jobs/{job['id']}")).json()["version"] == 1


async def test_if_match_idempotency_and_tenancy(client: httpx.AsyncClient, api: Any, make_tenant: Any) -> None:
    job = await _cron_job(client)
    url = f"/v1/jobs/{job['id']}"
    stale = await client.patch(url, json={"name": "a"}, headers={"If-Match": '"2"'})
    assert stale.status_code == 412 and stale.json()["error"]["field"] == "If-Match"
    bad = await client.patch(url, json={"name": "a"}, headers={"If-Match": "two"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "If-Match"
    headers = {"If-Match": "1", "Idempotency-Key": "edit-1"}
    first = await client.patch(url, json={"name": "a"}, headers=headers)
    again = await client.patch(url, json={"name": "a"}, headers=headers)
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    other = await client.patch(url, json={"name": "b"}, headers={"Idempotency-Key": "edit-1"})
    assert other.status_code == 409 and other.json()["error"]["field"] == "Idempotency-Key"
    racing = await asyncio.gather(*[client.patch(url, json={"name": "c"}, headers={"Idempotency-Key": "edit-2"})
                                    for _ in range(4)])  # fmt: skip
    assert {r.status_code for r in racing} == {200} and {r.json()["job"]["version"] for r in racing} == {3}
    tenant, token = await make_tenant()
    async with httpx.AsyncClient(base_url=api.url, headers={"Authorization": f"Bearer {token}"}) as theirs:
        hidden = await theirs.patch(url, json={"name": "x"})
    assert hidden.status_code == 404
    await client.delete(url)
    gone = await client.patch(url, json={"name": "x"})
    assert gone.status_code == 409 and "deleted" in gone.json()["error"]["message"]


async def test_patch_is_in_the_openapi_document(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    patch = document["paths"]["/v1/jobs/{job_id}"]["patch"]
    assert {"200", "409", "412", "422"} <= set(patch["responses"])
    assert "JobEdited" in document["components"]["schemas"] and "JobUpdate" in document["components"]["schemas"]
