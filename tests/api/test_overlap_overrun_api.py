"""Overlap policy and overrun warning through the HTTP API: set at create, shown in the job view,
refused precisely when wrong, and another tenant's job stays invisible."""

from __future__ import annotations

from uuid import UUID

import httpx

from schedulerd.store import Store
from tests.integration.test_overrun import add_history


async def test_overlap_is_set_at_create_and_shown(client: httpx.AsyncClient, store: Store) -> None:
    created = await client.post("/v1/jobs", json={"task": "sleep", "cron": "*/5 * * * *", "overlap": "buffer_one",
                                                  "params": {"seconds": 1}})  # fmt: skip
    assert created.status_code == 201, created.text
    job = created.json()["job"]
    assert job["overlap"] == "buffer_one" and job["overrun"] is None  # no finished runs yet

    shown = (await client.get(f"/v1/jobs/{job['id']}")).json()
    assert shown["overlap"] == "buffer_one"
    listed = (await client.get("/v1/jobs")).json()["items"]
    assert [j["overlap"] for j in listed if j["id"] == job["id"]] == ["buffer_one"]

    default = (await client.post("/v1/jobs", json={"task": "noop"})).json()["job"]
    assert default["overlap"] == "allow"


async def test_unknown_overlap_policy_is_a_422_naming_the_field(client: httpx.AsyncClient, store: Store) -> None:
    before = await store.db.fetchval("SELECT count(*) FROM jobs")
    refused = await client.post("/v1/jobs", json={"task": "noop", "overlap": "queue_all"})
    assert refused.status_code == 422
    assert refused.json()["error"]["field"] == "overlap"
    assert await store.db.fetchval("SELECT count(*) FROM jobs") == before


async def test_job_view_carries_the_overrun_warning(client: httpx.AsyncClient, store: Store, make_tenant) -> None:  # type: ignore[no-untyped-def]
    created = (await client.post("/v1/jobs", json={"task": "sleep", "cron": "*/5 * * * *", "params": {"seconds": 1}})).json()
    job_id = created["job"]["id"]
    await add_history(store, UUID(job_id), client.tenant, [270.0] * 6)  # type: ignore[attr-defined]

    overrun = (await client.get(f"/v1/jobs/{job_id}")).json()["overrun"]
    assert overrun["warning"] is True and overrun["p95_s"] == 270.0 and overrun["interval_s"] == 300.0
    assert overrun["fraction"] == 0.8 and overrun["samples"] == 6 and abs(overrun["ratio"] - 0.9) < 1e-9
    listed = (await client.get("/v1/jobs")).json()["items"]
    assert [j["overrun"]["warning"] for j in listed if j["id"] == job_id] == [True]

    # Another tenant sees neither the job nor its figures.
    _, other_token = await make_tenant("other")
    other = await client.get(f"/v1/jobs/{job_id}", headers={"Authorization": f"Bearer {other_token}"})
    assert other.status_code == 404
