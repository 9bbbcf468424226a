"""The HTTP API door of tracing: a create's traceparent header is stored on each one-off execution
it makes (the first attempt's span is its child); a malformed one is ignored, as W3C Trace Context
says, and the create succeeds all the same."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from schedulerd.store import Store

GOOD = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def stored(store: Store, execution_ids: list[Any]) -> list[str | None]:
    rows = await store.db.fetch("SELECT id, traceparent FROM executions WHERE id = ANY($1::uuid[])", execution_ids)
    by_id = {str(r["id"]): r["traceparent"] for r in rows}
    return [by_id[str(i)] for i in execution_ids]


async def test_a_create_stores_the_request_traceparent(client: httpx.AsyncClient, store: Store) -> None:
    made = await client.post("/v1/jobs", json={"task": "noop"}, headers={"traceparent": GOOD})
    assert made.status_code == 201, made.text
    job_id = made.json()["job"]["id"]
    [execution_id] = [r["id"] for r in await store.db.fetch("SELECT id FROM executions WHERE job_id = $1::uuid", job_id)]
    assert await stored(store, [execution_id]) == [GOOD]


@pytest.mark.parametrize("header", [
    GOOD.upper(), "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "ff-" + GOOD[3:], GOOD + "-x", "garbage", "",
])  # fmt: skip
async def test_a_malformed_traceparent_is_ignored(client: httpx.AsyncClient, store: Store, header: str) -> None:
    made = await client.post("/v1/jobs", json={"task": "noop"}, headers={"traceparent": header})
    assert made.status_code == 201, made.text
    assert await store.db.fetchval("SELECT count(traceparent) FROM executions WHERE job_id = $1::uuid",
                                   made.json()["job"]["id"]) == 0  # fmt: skip


async def test_a_batch_stores_the_header_on_each_one_off_and_none_on_a_cron_jobs_occurrences(
    client: httpx.AsyncClient, store: Store
) -> None:
    later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-a-later-version"
    answer = await client.post("/v1/jobs/batch", headers={"traceparent": later}, json={"items": [
        {"task": "noop"}, {"task": "noop", "idempotency_key": "k1"}, {"task": "noop", "cron": "*/5 * * * *"},
    ]})  # fmt: skip
    assert answer.status_code == 200, answer.text
    one_offs, cron = answer.json()["items"][:2], answer.json()["items"][2]
    ids = [e["id"] for item in one_offs for e in item["executions"]]
    assert await stored(store, ids) == [GOOD, GOOD]  # a later version's text is stored as version 00
    assert cron["executions"] and await store.db.fetchval(
        "SELECT count(traceparent) FROM executions WHERE job_id = $1::uuid", cron["job_id"]) == 0  # fmt: skip


async def test_without_the_header_nothing_is_stored(client: httpx.AsyncClient, store: Store) -> None:
    made = await client.post("/v1/jobs", json={"task": "noop"})
    assert made.status_code == 201
    assert await store.db.fetchval("SELECT count(traceparent) FROM executions WHERE job_id = $1::uuid",
                                   made.json()["job"]["id"]) == 0  # fmt: skip
