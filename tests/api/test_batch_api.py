"""POST /v1/jobs/batch over real HTTP: each item validated like a single create and answered on
its own (created, replayed, or refused naming the field and the index, with nothing written for
it), per-item idempotency keys, the batch size limit, and the rate limit counting items."""

from __future__ import annotations

from typing import Any

import httpx

from schedulerd.queue import DelayQueue
from schedulerd.store import Store


async def _jobs_of(store: Store, tenant: str) -> int:
    return await store.db.fetchval("SELECT count(*) FROM jobs WHERE tenant = $1", tenant)


async def test_batch_creates_the_valid_items_and_refuses_each_bad_one_by_index(
    client: httpx.AsyncClient, store: Store, queue: DelayQueue, redis_prefix: str
) -> None:
    items: list[Any] = [{"task": "noop", "params": {"i": i}} for i in range(10)]
    items[2] = {"task": "noop", "retry": {"max_attempts": 0}}  # schema: out of range
    items[4] = {"task": "no_such_task"}  # meaning: unknown task type
    items[5] = {"task": "noop", "cron": "61 * * * *"}  # meaning: bad cron
    items[6] = {"task": "noop", "tenant": "someone-else"}  # the tenant comes from the token
    items[7] = {"task": "log", "cron": "*/5 9-17 * * *", "timezone": "Europe/Paris"}
    items[8] = {"task": "noop", "run_at": "2026-01-01T00:00:00"}  # no offset
    answer = await client.post("/v1/jobs/batch", json={"items": items})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["created"], body["replayed"], body["refused"]) == (5, 0, 5)
    assert [item["index"] for item in body["items"]] == list(range(10))
    refused = {item["index"]: item["error"] for item in body["items"] if item["result"] == "refused"}
    assert {i: e["field"] for i, e in refused.items()} == {
        2: "retry.max_attempts", 4: "task", 5: "cron", 6: "tenant", 8: "run_at"
    }
    assert all(e["code"] == "validation" for e in refused.values())
    created = [item for item in body["items"] if item["result"] == "created"]
    assert all(item["job_id"] and len(item["executions"]) == 1 for item in created if item["index"] != 7)
    assert await _jobs_of(store, client.tenant) == 5  # type: ignore[attr-defined]
    one_off = body["items"][0]["executions"][0]
    assert one_off["status"] == "queued"
    live = DelayQueue(queue.client, redis_prefix)
    assert await live.client.zscore(live.queue_key(client.tenant), one_off["id"]) is not None  # type: ignore[attr-defined]
    cron = body["items"][7]
    rows = await store.db.fetchval("SELECT count(*) FROM executions WHERE job_id = $1", cron["job_id"])
    assert len(cron["executions"]) == rows  # its first horizon (6 h), none when 09-17 Paris is not in it
    job = await client.get(f"/v1/jobs/{cron['job_id']}")
    assert job.json()["cron"] == "*/5 9-17 * * *" and job.json()["timezone"] == "Europe/Paris"


async def test_per_item_idempotency_keys(client: httpx.AsyncClient, store: Store) -> None:
    first = await client.post("/v1/jobs/batch", json={"items": [
        {"task": "noop", "params": {"n": 1}, "idempotency_key": "k-1"},
        {"task": "noop", "params": {"n": 2}, "idempotency_key": "k-2"},
    ]})  # fmt: skip
    again = await client.post("/v1/jobs/batch", json={"items": [
        {"task": "noop", "params": {"n": 1}, "idempotency_key": "k-1"},  # the same: replayed
        {"task": "noop", "params": {"n": 3}, "idempotency_key": "k-2"},  # another request: refused
        {"task": "noop", "params": {"n": 4}, "idempotency_key": "k-4"},
        {"task": "noop", "idempotency_key": "has space"},
    ]})  # fmt: skip
    one, two = first.json()["items"]
    replayed, conflict, fresh, bad_key = again.json()["items"]
    assert replayed["result"] == "replayed" and replayed["job_id"] == one["job_id"]
    assert replayed["executions"][0]["id"] == one["executions"][0]["id"]
    assert conflict["result"] == "refused" and conflict["error"] == {
        "code": "conflict", "field": "idempotency_key", "message": "was used with a different request", "limit": None
    }
    assert fresh["result"] == "created"
    assert bad_key["result"] == "refused" and bad_key["error"]["field"] == "idempotency_key"
    assert await _jobs_of(store, client.tenant) == 3  # type: ignore[attr-defined]
    assert two["result"] == "created"


async def test_whole_request_refusals_write_nothing(start_api, make_tenant, store: Store) -> None:  # type: ignore[no-untyped-def]
    server = start_api(batch_max=3, rate_limit=5, rate_window_s=60, max_batch_body_bytes=2000)
    tenant, token = await make_tenant()
    async with httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {token}"}) as http:
        too_many = await http.post("/v1/jobs/batch", json={"items": [{"task": "noop"}] * 4})
        empty = await http.post("/v1/jobs/batch", json={"items": []})
        not_objects = await http.post("/v1/jobs/batch", json={"items": [1, 2]})
        too_big = await http.post("/v1/jobs/batch", json={"items": [{"task": "noop", "params": {"x": "y" * 3000}}]})
        counted = await http.post("/v1/jobs/batch", json={"items": [{"task": "noop"}] * 3})
        # 4 requests and 3 items so far... the next batch of 3 goes over the 5 per window.
        over = await http.post("/v1/jobs/batch", json={"items": [{"task": "noop"}] * 3})
    assert too_many.status_code == 422 and too_many.json()["error"]["limit"] == "api.batch_max"
    assert empty.status_code == 422 and empty.json()["error"]["field"] == "items"
    assert not_objects.status_code == 422 and not_objects.json()["error"]["field"].startswith("items")
    assert too_big.status_code == 413 and too_big.json()["error"]["limit"] == "api.max_batch_body_bytes"
    assert counted.status_code == 429 and counted.json()["error"]["limit"] == "api.rate_limit"
    assert over.status_code == 429 and int(over.headers["Retry-After"]) >= 1
    assert await _jobs_of(store, tenant) == 0


async def test_rate_limit_counts_items(start_api, make_tenant, store: Store) -> None:  # type: ignore[no-untyped-def]
    server = start_api(rate_limit=10, rate_window_s=60)
    tenant, token = await make_tenant()
    async with httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {token}"}) as http:
        eight = await http.post("/v1/jobs/batch", json={"items": [{"task": "noop"}] * 8})
        two = await http.post("/v1/jobs/batch", json={"items": [{"task": "noop"}] * 2})
        one_more = await http.post("/v1/jobs", json={"task": "noop"})
    assert eight.status_code == 200 and two.status_code == 200
    assert one_more.status_code == 429
    assert await _jobs_of(store, tenant) == 10


async def test_task_types_reported_by_workers_elsewhere_are_listed_and_accepted(client: httpx.AsyncClient, store: Store) -> None:
    await store.task_type_report(["reports.render"], "replica-with-reports")
    answer = await client.post("/v1/jobs/batch", json={"items": [{"task": "reports.render"}]})
    assert answer.json()["items"][0]["result"] == "created"
    single = await client.post("/v1/jobs", json={"task": "reports.render"})
    assert single.status_code == 201
    listed = (await client.get("/v1/tasks")).json()["tasks"]
    assert "reports.render" in listed and "noop" in listed and listed == sorted(listed)
