"""Notification settings over real HTTP: a job's notify and pause_after_failures created, batched,
edited and removed; bad URLs (the http task's refused address classes), bad events and bad counts
refused naming the field with nothing written; a tenant's setting, seen and changed only by it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID, uuid4

import httpx
import pytest

from schedulerd.store import Store

CRON = {"task": "noop", "cron": "0 3 * * *"}


async def test_a_jobs_notify_and_pause_after_failures_are_created_shown_edited_and_removed(
    client: httpx.AsyncClient, store: Store
) -> None:  # fmt: skip
    body = {**CRON, "notify": {"url": "https://bob:s3cret@hooks.example.com/x", "on": ["late", "failure"]},
            "pause_after_failures": 3}  # fmt: skip
    made = await client.post("/v1/jobs", json=body)
    assert made.status_code == 201, made.text
    job = made.json()["job"]
    assert job["notify"] == {"url": "https://***@hooks.example.com/x", "on": ["failure", "late"]}  # credentials masked
    assert job["pause_after_failures"] == 3

    url_only = await client.patch(f"/v1/jobs/{job['id']}", json={"notify": {"url": "https://hooks.example.com/y"}})
    assert url_only.status_code == 200, url_only.text
    assert url_only.json()["job"]["notify"] == {"url": "https://hooks.example.com/y", "on": ["failure", "recovery"]}
    removed = await client.patch(f"/v1/jobs/{job['id']}", json={"notify": None, "pause_after_failures": None})
    assert removed.status_code == 200, removed.text
    assert removed.json()["job"]["notify"] is None and removed.json()["job"]["pause_after_failures"] is None
    row = await store.db.fetchrow("SELECT notify_url, notify_on, pause_after_failures FROM jobs WHERE id = $1", job["id"])
    assert tuple(row) == (None, None, None)
    opted_out = await client.patch(f"/v1/jobs/{job['id']}", json={"notify": {"on": []}})
    assert opted_out.json()["job"]["notify"] == {"url": None, "on": []}

    plain = (await client.post("/v1/jobs", json={"task": "noop"})).json()["job"]
    assert plain["notify"] is None and plain["pause_after_failures"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [({"notify": {"url": "http://127.0.0.1:8080/hook"}}, "notify.url"), ({"notify": {"url": "http://localhost/"}}, "notify.url"),
     ({"notify": {"url": "http://10.0.0.5/"}}, "notify.url"), ({"notify": {"url": "http://169.254.169.254/"}}, "notify.url"),
     ({"notify": {"url": "http://[::1]/"}}, "notify.url"), ({"notify": {"url": "ftp://example.com/"}}, "notify.url"),
     ({"notify": {"url": "not a url"}}, "notify.url"), ({"notify": {"url": 5}}, "notify.url"),
     ({"notify": {"on": ["failure"]}}, "notify.url"), ({"notify": {"url": "https://h.example.com/", "on": ["failures"]}}, "notify.on.0"),
     ({"notify": {"url": "https://h.example.com/", "on": "failure"}}, "notify.on"),
     ({"notify": {"url": "https://h.example.com/", "extra": 1}}, "notify.extra"),
     ({"pause_after_failures": 0}, "pause_after_failures"), ({"pause_after_failures": 1001}, "pause_after_failures"),
     ({"pause_after_failures": "3"}, "pause_after_failures")],
)  # fmt: skip
async def test_bad_notification_fields_are_refused_naming_the_field(
    client: httpx.AsyncClient, store: Store, body: dict[str, Any], field: str
) -> None:  # fmt: skip
    refused = await client.post("/v1/jobs", json={**CRON, **body})
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["field"] == field, refused.json()
    batch = await client.post("/v1/jobs/batch", json={"items": [CRON, {**CRON, **body}]})
    items = batch.json()["items"]
    assert items[0]["result"] == "created" and items[1]["result"] == "refused"
    assert items[1]["error"]["field"] == field
    patched = await client.patch(f"/v1/jobs/{items[0]['job_id']}", json=body)
    assert patched.status_code == 422 and patched.json()["error"]["field"] == field, patched.text
    assert await store.db.fetchval("SELECT count(*) FROM jobs WHERE notify_on IS NOT NULL OR pause_after_failures IS NOT NULL") == 0


async def test_pause_after_failures_is_for_recurring_jobs(client: httpx.AsyncClient) -> None:
    refused = await client.post("/v1/jobs", json={"task": "noop", "pause_after_failures": 3})
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "pause_after_failures"
    assert "recurring" in refused.json()["error"]["message"]


async def test_a_tenants_setting_is_its_own(
    client: httpx.AsyncClient, api: Any, make_tenant: Callable[..., Any], store: Store
) -> None:  # fmt: skip
    job = (await client.post("/v1/jobs", json=CRON)).json()["job"]
    await store.notification_insert(uuid4(), client.tenant, UUID(job["id"]), uuid4(), 0, "failure", None,  # type: ignore[attr-defined]
                                    "https://hooks.example.com/team", "{}", "sent")  # fmt: skip
    assert len((await client.get("/v1/notifications/sent")).json()["items"]) == 1
    assert (await client.get("/v1/notifications")).json() == {"url": None, "on": [], "updated_at": None}
    put = await client.put("/v1/notifications", json={"url": "https://hooks.example.com/team", "on": ["recovery", "failure"]})
    assert put.status_code == 200, put.text
    assert put.json()["url"] == "https://hooks.example.com/team" and put.json()["on"] == ["failure", "recovery"]

    _, other_token = await make_tenant("other")
    async with httpx.AsyncClient(base_url=api.url, headers={"Authorization": f"Bearer {other_token}"}) as other:
        assert (await other.get("/v1/notifications")).json()["url"] is None  # not the first tenant's
        assert (await other.delete("/v1/notifications")).status_code == 200  # removes only its own (none)
        sent = await other.get("/v1/notifications/sent")
        assert sent.status_code == 200 and sent.json() == {"items": []}
    assert (await client.get("/v1/notifications")).json()["url"] == "https://hooks.example.com/team"
    assert (await client.delete("/v1/notifications")).json()["url"] is None
    assert (await client.get("/v1/notifications")).json()["url"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [({"url": "http://127.0.0.1/"}, "url"), ({"url": "http://192.168.1.1/"}, "url"), ({"url": "mailto:me@example.com"}, "url"),
     ({}, "url"), ({"url": "https://h.example.com/", "on": ["soon"]}, "on.0"), ({"url": "https://h.example.com/", "x": 1}, "x")],
)  # fmt: skip
async def test_a_bad_tenant_setting_is_refused_naming_the_field(client: httpx.AsyncClient, body: dict[str, Any], field: str) -> None:
    refused = await client.put("/v1/notifications", json=body)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["field"] == field
    assert (await client.get("/v1/notifications")).json()["url"] is None


async def test_a_test_notice_to_a_refused_address_reports_the_refusal_field(client: httpx.AsyncClient) -> None:
    missing = await client.post("/v1/notifications/test")
    assert missing.status_code == 422 and missing.json()["error"]["field"] == "url"
    refused = await client.post("/v1/notifications/test", json={"url": "http://169.254.169.254/latest"})
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "url"
    assert "private address" in refused.json()["error"]["message"]
