"""Backfill, dead letters (list and redrive) and pause notes over HTTP, tenant-scoped (issue 9)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx

from schedulerd.config import Config
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from tests.api.test_executions_and_tenants_api import run_until_finished


async def failed_execution(client: httpx.AsyncClient, store: Store, queue: DelayQueue, config: Config, message: str) -> str:
    """A one-off job of the `fail` task run by a real worker until its single attempt fails."""
    created = await client.post("/v1/jobs", json={"task": "fail", "params": {"message": message}, "retry": {"max_attempts": 1}})
    (listed,) = (await client.get("/v1/executions", params={"job": created.json()["job"]["id"]})).json()["items"]
    await run_until_finished(store, queue, config, listed["id"])
    return listed["id"]


async def test_backfill_over_http(client: httpx.AsyncClient, store: Store, queue: DelayQueue) -> None:
    job_id = (await client.post("/v1/jobs", json={"task": "noop", "cron": "0 0 * * *", "timezone": "Asia/Tokyo"})).json()["job"]["id"]
    end = datetime.now(UTC) - timedelta(days=1)
    body = {"from": (end - timedelta(days=3)).isoformat(), "to": end.isoformat()}

    done = await client.post(f"/v1/jobs/{job_id}/backfill", json=body)
    assert done.status_code == 201, done.text
    created = done.json()["created"]
    assert len(created) == 3 and {e["origin"] for e in created} == {"backfill"}
    assert all(datetime.fromisoformat(e["scheduled_for"]).hour == 15 for e in created)  # Tokyo midnight in UTC
    assert await queue.missing([e["id"] for e in created]) == []
    again = (await client.post(f"/v1/jobs/{job_id}/backfill", json=body)).json()
    assert again == {"created": [], "already_backfilled": 3}

    future = await client.post(f"/v1/jobs/{job_id}/backfill", json={**body, "to": (datetime.now(UTC) + timedelta(days=1)).isoformat()})
    assert future.status_code == 422 and future.json()["error"]["field"] == "to"
    assert "in the future" in future.json()["error"]["message"]
    huge = await client.post(f"/v1/jobs/{job_id}/backfill", json={"from": "2020-01-01T00:00:00Z", "to": end.isoformat()})
    assert huge.status_code == 422 and huge.json()["error"]["limit"] == "jobs.backfill_max_occurrences"
    naive = await client.post(f"/v1/jobs/{job_id}/backfill", json={"from": "2026-01-01T00:00:00", "to": end.isoformat()})
    assert naive.status_code == 422 and naive.json()["error"]["field"] == "from"
    one_off = (await client.post("/v1/jobs", json={"task": "noop", "run_at": "2031-01-01T00:00:00Z"})).json()["job"]["id"]
    refused = await client.post(f"/v1/jobs/{one_off}/backfill", json=body)
    assert refused.status_code == 422 and "only cron jobs" in refused.json()["error"]["message"]
    assert refused.json()["error"]["field"] == "job_id"


async def test_dead_letters_list_and_redrive(client: httpx.AsyncClient, store: Store, queue: DelayQueue, config: Config) -> None:
    card = await failed_execution(client, store, queue, config, "card declined: PSP timeout")
    other = await failed_execution(client, store, queue, config, "bad address")

    listed = await client.get("/v1/executions/failed", params={"error": "psp TIMEOUT", "task": "fail"})
    assert listed.status_code == 200, listed.text
    assert [(e["id"], e["task"], e["status"]) for e in listed.json()["items"]] == [(card, "fail", "failed")]
    misspelt = await client.get("/v1/executions/failed", params={"erorr": "timeout"})
    assert misspelt.status_code == 422 and misspelt.json()["error"]["field"] == "erorr"
    page = (await client.get("/v1/executions/failed", params={"limit": 1})).json()
    assert len(page["items"]) == 1 and page["next_cursor"]
    rest = (await client.get("/v1/executions/failed", params={"limit": 1, "cursor": page["next_cursor"]})).json()
    assert {page["items"][0]["id"], rest["items"][0]["id"]} == {card, other} and rest["next_cursor"] is None

    one = await client.post(f"/v1/executions/{card}/redrive")
    assert one.status_code == 200 and one.json() == {"redriven": [card], "not_redriven": [], "more": False}
    shown = (await client.get(f"/v1/executions/{card}")).json()
    assert (shown["id"], shown["status"], shown["attempt"], shown["redrives"]) == (card, "queued", 0, 1)
    (entry,) = shown["redrive_history"]
    assert entry["redriven_by"].startswith(f"api:{client.tenant} (token ") and entry["attempts_before"] == 1  # type: ignore[attr-defined]
    assert "PSP timeout" in entry["error_before"] and entry["fence"] == 2
    conflict = await client.post(f"/v1/executions/{card}/redrive")
    assert conflict.status_code == 409 and "only failed executions" in conflict.json()["error"]["message"]

    bulk = await client.post("/v1/executions/redrive", json={"error": "bad address"})
    assert bulk.status_code == 200 and bulk.json()["redriven"] == [other]
    nothing = await client.post("/v1/executions/redrive", json={})
    assert nothing.status_code == 422 and nothing.json()["error"]["field"] == "filter"
    both = await client.post("/v1/executions/redrive", json={"ids": [card], "error": "x"})
    assert both.status_code == 422 and both.json()["error"]["field"] == "ids"


async def test_dead_letters_are_tenant_scoped(client: httpx.AsyncClient, api, make_tenant, store: Store,
                                              queue: DelayQueue, config: Config) -> None:  # fmt: skip
    mine = await failed_execution(client, store, queue, config, "mine failed")
    _, token = await make_tenant("intruder")
    async with httpx.AsyncClient(base_url=api.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as intruder:
        assert (await intruder.get("/v1/executions/failed")).json()["items"] == []
        assert (await intruder.post(f"/v1/executions/{mine}/redrive")).status_code == 404
        assert (await intruder.post("/v1/executions/redrive", json={"ids": [mine]})).status_code == 404
        assert (await intruder.post("/v1/executions/redrive", json={"error": "mine"})).json()["redriven"] == []
    assert (await client.get(f"/v1/executions/{mine}")).json()["status"] == "failed"


async def test_pause_with_a_note_shows_who_and_why(client: httpx.AsyncClient) -> None:
    job_id = (await client.post("/v1/jobs", json={"task": "noop", "cron": "@hourly"})).json()["job"]["id"]
    paused = await client.post(f"/v1/jobs/{job_id}/pause", json={"note": "waiting on vendor fix"})
    assert paused.status_code == 200, paused.text
    pause = paused.json()["job"]["pause"]
    assert pause["note"] == "waiting on vendor fix" and pause["by"].startswith(f"api:{client.tenant}")  # type: ignore[attr-defined]
    assert (await client.get(f"/v1/jobs/{job_id}")).json()["pause"]["note"] == "waiting on vendor fix"
    assert (await client.post(f"/v1/jobs/{job_id}/resume")).json()["job"]["pause"] is None
    bare = await client.post(f"/v1/jobs/{job_id}/pause")  # no body: a pause without a note, as before
    assert bare.status_code == 200 and bare.json()["job"]["pause"]["note"] is None
    long = await client.post(f"/v1/jobs/{job_id}/pause", json={"note": "x" * 501})
    assert long.status_code == 422 and long.json()["error"]["field"] == "note"
