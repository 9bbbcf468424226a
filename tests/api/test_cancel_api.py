"""Cancels and bulk job actions over HTTP: one execution (unstarted, running, already cancelled,
settled first, another tenant's), bulk cancel by filter with its dry run, bulk job actions by
label selector with their record (GET /v1/actions), and the refusals naming the field."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from schedulerd.config import Config
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from tests.api.test_executions_and_tenants_api import run_until_finished


def _later(minutes: int) -> str:
    return (datetime.now(UTC) + timedelta(minutes=minutes)).isoformat()


async def _one_off(client: httpx.AsyncClient, minutes: int = 30, task: str = "noop") -> tuple[str, str]:
    """A one-off job due later: (job id, its pending execution's id)."""
    created = (await client.post("/v1/jobs", json={"task": task, "run_at": _later(minutes)})).json()
    job_id = created["job"]["id"]
    (execution,) = (await client.get("/v1/executions", params={"job": job_id})).json()["items"]
    return job_id, execution["id"]


async def test_cancel_one_unstarted_execution_then_again(client: httpx.AsyncClient) -> None:
    _, execution_id = await _one_off(client)
    first = await client.post(f"/v1/executions/{execution_id}/cancel")
    assert first.status_code == 200, first.text
    body = first.json()
    assert (body["status"], body["reason"], body["cancel_requested"]) == ("cancelled", "cancelled", True)
    again = await client.post(f"/v1/executions/{execution_id}/cancel")
    assert again.status_code == 200 and again.json() == body  # idempotent: the same answer
    assert (await client.get(f"/v1/executions/{execution_id}")).json()["status"] == "cancelled"


async def test_cancel_of_a_running_one_asks_it_to_stop(client: httpx.AsyncClient, store: Store) -> None:
    _, execution_id = await _one_off(client, task="sleep")
    await store.db.execute("UPDATE executions SET due_at = clock_timestamp(), status = 'queued' WHERE id = $1", uuid.UUID(execution_id))
    (claim,) = await store.execution_claim_many([execution_id], 30.0, "api-test-worker")
    answer = await client.post(f"/v1/executions/{execution_id}/cancel")
    assert answer.status_code == 200
    assert (answer.json()["status"], answer.json()["cancel_requested"]) == ("running", True)
    assert (await store.execution_heartbeat_many([(claim.id, claim.fence)], 30.0)) == {claim.id: True}


async def test_cancel_after_the_outcome_is_too_late(client: httpx.AsyncClient, store: Store, queue: DelayQueue, config: Config) -> None:
    job_id = (await client.post("/v1/jobs", json={"task": "noop"})).json()["job"]["id"]
    (run,) = (await client.get("/v1/executions", params={"job": job_id})).json()["items"]
    await run_until_finished(store, queue, config, run["id"])
    refused = await client.post(f"/v1/executions/{run['id']}/cancel")
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["code"] == "conflict" and error["field"] == "status" and "already succeeded" in error["message"]


async def test_another_tenants_execution_and_job_are_not_found(api, client: httpx.AsyncClient, make_tenant) -> None:  # type: ignore[no-untyped-def]
    job_id, execution_id = await _one_off(client)
    _, token_b = await make_tenant("intruder")
    async with httpx.AsyncClient(base_url=api.url, headers={"Authorization": f"Bearer {token_b}"}) as b:
        theirs = await b.post(f"/v1/executions/{execution_id}/cancel")
        missing = await b.post(f"/v1/executions/{uuid.uuid4()}/cancel")
        assert theirs.status_code == missing.status_code == 404
        assert (await b.post("/v1/executions/cancel", json={"job": job_id, "dry_run": False})).status_code == 404
        await_all = await b.post("/v1/executions/cancel", json={"status": ["pending"], "dry_run": False})
        assert await_all.status_code == 200 and await_all.json()["matched"] == 0
    assert (await client.get(f"/v1/executions/{execution_id}")).json()["status"] == "pending"


async def test_bulk_cancel_by_label_counts_first(client: httpx.AsyncClient, store: Store) -> None:
    billing = [await _one_off(client, m) for m in (10, 20, 30)]
    other = await _one_off(client, 10)
    for job_id, _ in billing:
        await store.db.execute("UPDATE jobs SET labels = $2 WHERE id = $1", uuid.UUID(job_id), {"team": "billing", "env": "prod"})
    plan = await client.post("/v1/executions/cancel", json={"label": "team=billing"})
    assert plan.status_code == 200, plan.text
    assert (plan.json()["dry_run"], plan.json()["matched"], plan.json()["action"]) == (True, 3, None)
    assert sorted(s["id"] for s in plan.json()["sample"]) == sorted(e for _, e in billing)
    done = (await client.post("/v1/executions/cancel", json={"label": "team=billing,env=prod", "dry_run": False})).json()
    assert (done["dry_run"], done["matched"]) == (False, plan.json()["matched"])
    assert done["action"]["action"] == "cancel" and done["action"]["actor"].startswith(f"api:{client.tenant}")  # type: ignore[attr-defined]
    assert (await client.get(f"/v1/executions/{other[1]}")).json()["status"] == "pending"
    actions = (await client.get("/v1/actions")).json()["items"]
    assert [a["id"] for a in actions] == [done["action"]["id"]]


@pytest.mark.parametrize(("body", "field"), [
    ({}, "body"),
    ({"label": "team"}, "label"),
    ({"status": ["succeeded"]}, "status.0"),
    ({"due_from": "2026-01-01T00:00:00"}, "due_from"),
    ({"due_from": _later(10), "due_to": _later(5)}, "due_to"),
    ({"job": "nope"}, "job"),
    ({"dry_run": "yes"}, "dry_run"),
    ({"label": "team=a", "tenant": "other"}, "tenant"),
])  # fmt: skip
async def test_bad_bulk_cancels_name_the_field(client: httpx.AsyncClient, body: dict, field: str) -> None:
    refused = await client.post("/v1/executions/cancel", json=body)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["field"] == field


async def test_bulk_pause_by_selector_with_a_dry_run_and_a_record(client: httpx.AsyncClient, store: Store) -> None:
    billing = [await _one_off(client, m) for m in (10, 20)]
    ops = await _one_off(client, 10)
    for job_id, _ in billing:
        await store.db.execute("UPDATE jobs SET labels = $2 WHERE id = $1", uuid.UUID(job_id), {"team": "billing"})
    plan = await client.post("/v1/jobs/actions/pause", json={"selector": "team=billing"})
    assert plan.status_code == 200, plan.text
    assert (plan.json()["dry_run"], plan.json()["jobs"], plan.json()["executions"], plan.json()["record"]) == (True, 2, 2, None)
    assert (await client.get("/v1/actions")).json()["items"] == []
    done = (await client.post("/v1/jobs/actions/pause", json={"selector": "team=billing", "dry_run": False})).json()
    assert (done["jobs"], done["executions"]) == (2, 2)
    for job_id, execution_id in billing:
        assert (await client.get(f"/v1/jobs/{job_id}")).json()["state"] == "paused"
        assert (await client.get(f"/v1/executions/{execution_id}")).json()["reason"] == "paused"
    assert (await client.get(f"/v1/jobs/{ops[0]}")).json()["state"] == "enabled"
    (record,) = (await client.get("/v1/actions")).json()["items"]
    assert (record["action"], record["selector"], record["jobs_count"], record["executions_count"]) == ("pause", {"team": "billing"}, 2, 2)
    assert record["actor"].startswith(f"api:{client.tenant}") and record["at"]  # type: ignore[attr-defined]
    # Single-job steering still answers at its own path.
    assert (await client.post(f"/v1/jobs/{ops[0]}/pause")).status_code == 200


@pytest.mark.parametrize(("path", "body", "status", "field"), [
    ("/v1/jobs/actions/pause", {"selector": ""}, 422, "selector"),
    ("/v1/jobs/actions/pause", {"selector": "team"}, 422, "selector"),
    ("/v1/jobs/actions/pause", {}, 422, "selector"),
    ("/v1/jobs/actions/explode", {"selector": "team=a"}, 422, "action"),
])  # fmt: skip
async def test_bad_job_actions_name_the_field(client: httpx.AsyncClient, path: str, body: dict, status: int, field: str) -> None:
    refused = await client.post(path, json=body)
    assert refused.status_code == status, refused.text
    assert refused.json()["error"]["field"] == field


async def test_the_new_endpoints_are_in_the_openapi_document(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    operations = {(method.upper(), path) for path, item in document["paths"].items() for method in item}
    assert operations >= {("POST", "/v1/executions/{execution_id}/cancel"), ("POST", "/v1/executions/cancel"),
                          ("POST", "/v1/jobs/actions/{action}"), ("GET", "/v1/actions")}  # fmt: skip
