"""Late runs, "why didn't it run?" and the due forecast over real HTTP: tenant-scoped, precise
refusals, and the operator's fleet-wide /forecast."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from schedulerd.config import Config
from schedulerd.materialiser import Materialiser
from schedulerd.queue import DelayQueue
from schedulerd.store import Store


async def missed_cron_job(client: httpx.AsyncClient, store: Store, queue: DelayQueue, config: Config) -> dict:
    """A tenant's */10 cron job whose last hour of occurrences nobody ran, judged (policy skip)."""
    job = (await client.post("/v1/jobs", json={"task": "noop", "cron": "*/10 * * * *", "misfire": {"policy": "skip"}})).json()["job"]
    await store.db.execute("DELETE FROM replicas")
    await store.db.execute("UPDATE executions SET id = schedulerd_execution_id(scheduled_for - interval '1 hour'), "
                           "scheduled_for = scheduled_for - interval '1 hour', "
                           "due_at = due_at - interval '1 hour' WHERE job_id = $1", uuid.UUID(job["id"]))  # fmt: skip
    await Materialiser(store, queue, config.materialiser, dispatch_horizon_s=config.dispatcher.horizon_s).run_once()
    return job


async def test_late_runs_are_listed_for_their_tenant_only(api, client: httpx.AsyncClient, make_tenant, store: Store,
                                                          queue: DelayQueue, config: Config) -> None:  # type: ignore[no-untyped-def]
    job = await missed_cron_job(client, store, queue, config)

    listed = await client.get("/v1/executions/late", params={"job": job["id"]})
    by_reason = await client.get("/v1/executions/late", params={"reason": "paused"})
    recent = await client.get("/v1/executions/late", params={"since": (datetime.now(UTC) - timedelta(minutes=1)).isoformat()})

    assert listed.status_code == 200, listed.text
    items = listed.json()["items"]
    assert len(items) >= 5 and {i["late_reason"] for i in items} == {"scheduler_down"}
    assert {(i["status"], i["reason"]) for i in items} == {("skipped", "misfire_skip")}
    assert [i["scheduled_for"] for i in items] == sorted((i["scheduled_for"] for i in items), reverse=True)
    assert by_reason.json()["items"] == [] and recent.json()["items"] == []
    shown = (await client.get(f"/v1/executions/{items[0]['id']}")).json()
    assert shown["late_reason"] == "scheduler_down"

    _, token_b = await make_tenant("intruder")
    async with httpx.AsyncClient(base_url=api.url, headers={"Authorization": f"Bearer {token_b}"}) as b:
        assert (await b.get("/v1/executions/late")).json()["items"] == []
        theirs = await b.get("/v1/executions/late", params={"job": job["id"]})
        assert theirs.status_code == 404 and theirs.json()["error"]["code"] == "not_found"
        why = await b.get(f"/v1/jobs/{job['id']}/why", params={"at": "02:00"})
        assert why.status_code == 404 and why.json()["error"]["code"] == "not_found"


async def test_why_answers_with_the_nearest_occurrence_and_its_attempts(client: httpx.AsyncClient, store: Store,
                                                                        queue: DelayQueue, config: Config) -> None:
    job = await missed_cron_job(client, store, queue, config)
    skipped = await store.db.fetchrow("SELECT id, scheduled_for FROM executions WHERE job_id = $1 AND status = 'skipped' "
                                      "ORDER BY scheduled_for LIMIT 1", uuid.UUID(job["id"]))  # fmt: skip
    asked = skipped["scheduled_for"] + timedelta(minutes=2)

    answered = await client.get(f"/v1/jobs/{job['id']}/why", params={"at": asked.isoformat()})

    assert answered.status_code == 200, answered.text
    body = answered.json()
    assert body["scheduled_for"] == skipped["scheduled_for"].isoformat().replace("+00:00", "Z")
    assert body["execution"]["id"] == str(skipped["id"]) and body["execution"]["attempts"] == []
    assert body["late_reason"] == "scheduler_down" and "did not run" in body["answer"]
    wall_clock = await client.get(f"/v1/jobs/{job['id']}/why", params={"at": "00:05"})
    assert wall_clock.status_code == 200 and wall_clock.json()["scheduled_for"] is not None


@pytest.mark.parametrize("at, message", [("25:00", "not a wall-clock time"), ("2026-05-01T02:00:00", "no UTC offset"),
                                         ("soon", "not an ISO 8601 timestamp")])  # fmt: skip
async def test_a_bad_instant_is_refused_naming_at(client: httpx.AsyncClient, at: str, message: str) -> None:
    job = (await client.post("/v1/jobs", json={"task": "noop", "cron": "0 2 * * *"})).json()["job"]
    refused = await client.get(f"/v1/jobs/{job['id']}/why", params={"at": at})
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "at"
    assert message in refused.json()["error"]["message"]


async def test_bad_late_queries_name_the_parameter(client: httpx.AsyncClient) -> None:
    unknown = await client.get("/v1/executions/late", params={"reason": "gremlins"})
    naive = await client.get("/v1/executions/late", params={"since": "2026-01-01T00:00:00"})
    assert unknown.status_code == 422 and unknown.json()["error"]["field"] == "reason"
    assert naive.status_code == 422 and naive.json()["error"]["field"] == "since"


async def test_the_forecast_is_tenant_scoped_and_the_operator_sees_the_total(api, client: httpx.AsyncClient,
                                                                            make_tenant) -> None:  # type: ignore[no-untyped-def]
    soon = (datetime.now(UTC) + timedelta(seconds=30)).isoformat()
    later = (datetime.now(UTC) + timedelta(minutes=10)).isoformat()
    for run_at in (soon, soon, later):
        assert (await client.post("/v1/jobs", json={"task": "noop", "run_at": run_at})).status_code == 201
    _, token_b = await make_tenant("other")
    async with httpx.AsyncClient(base_url=api.url, headers={"Authorization": f"Bearer {token_b}"}) as b:
        assert (await b.post("/v1/jobs", json={"task": "noop", "run_at": soon})).status_code == 201
        theirs = (await b.get("/v1/forecast")).json()

    ours = (await client.get("/v1/forecast")).json()
    async with httpx.AsyncClient(base_url=api.ops_url) as operator:
        fleet = (await operator.get("/forecast")).json()

    assert ours["tenant"] == client.tenant  # type: ignore[attr-defined]
    assert [(w["window"], w["seconds"], w["due"]) for w in ours["windows"]] == [("1m", 60, 2), ("5m", 300, 2),
                                                                                  ("15m", 900, 3), ("60m", 3600, 3)]  # fmt: skip
    assert [w["due"] for w in theirs["windows"]] == [1, 1, 1, 1]
    assert fleet["total"]["1m"] >= 3 and fleet["total"]["15m"] >= 4
    assert fleet["by_tenant"][client.tenant] == {"1m": 2, "5m": 2, "15m": 3, "60m": 3}  # type: ignore[attr-defined]


async def test_the_new_endpoints_are_documented(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    operations = {(method.upper(), path) for path, item in document["paths"].items() for method in item}
    assert operations >= {("GET", "/v1/executions/late"), ("GET", "/v1/jobs/{job_id}/why"), ("GET", "/v1/forecast")}
