"""priority over real HTTP: created, batched, edited and shown on jobs and executions; every
bad value is a 422 naming the field, with nothing written."""

from __future__ import annotations

import httpx
import pytest

from schedulerd.store import Store


async def test_priority_is_created_shown_and_edited(client: httpx.AsyncClient, store: Store) -> None:
    made = await client.post("/v1/jobs", json={"task": "noop", "cron": "* * * * *", "priority": 9})
    assert made.status_code == 201, made.text
    job = made.json()["job"]
    assert job["priority"] == 9
    assert (await client.get(f"/v1/jobs/{job['id']}")).json()["priority"] == 9
    runs = (await client.get("/v1/executions", params={"job": job["id"], "phase": "upcoming"})).json()["items"]
    assert runs and all(r["priority"] == 9 for r in runs)

    edited = await client.patch(f"/v1/jobs/{job['id']}", json={"priority": 1})
    assert edited.status_code == 200, edited.text
    assert edited.json()["job"]["priority"] == 1
    runs = (await client.get("/v1/executions", params={"job": job["id"], "phase": "upcoming"})).json()["items"]
    assert runs and all(r["priority"] == 1 for r in runs if r["status"] in ("pending", "queued"))

    plain = (await client.post("/v1/jobs", json={"task": "noop"})).json()["job"]
    assert plain["priority"] == 5


@pytest.mark.parametrize("value", [10, -1, "high", True, 5.5, None])
async def test_a_bad_priority_is_refused_naming_the_field(client: httpx.AsyncClient, store: Store, value: object) -> None:
    refused = await client.post("/v1/jobs", json={"task": "noop", "priority": value})
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["field"] == "priority", refused.json()
    batch = await client.post("/v1/jobs/batch", json={"items": [{"task": "noop"}, {"task": "noop", "priority": value}]})
    assert batch.status_code == 200, batch.text
    items = batch.json()["items"]
    assert items[0]["result"] == "created" and items[1]["result"] == "refused"
    assert items[1]["error"]["field"] == "priority"
    job_id = items[0]["job_id"]
    patched = await client.patch(f"/v1/jobs/{job_id}", json={"priority": value})
    assert patched.status_code == 422 and patched.json()["error"]["field"] == "priority", patched.text
    assert await store.db.fetchval("SELECT count(*) FROM jobs WHERE priority <> 5") == 0


async def test_priority_is_in_the_openapi_document(client: httpx.AsyncClient) -> None:
    schemas = (await client.get("/openapi.json")).json()["components"]["schemas"]
    assert schemas["JobCreate"]["properties"]["priority"]["maximum"] == 9
    assert "priority" in schemas["JobUpdate"]["properties"] and "priority" in schemas["Execution"]["properties"]
