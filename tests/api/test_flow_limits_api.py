"""Concurrency keys and rate limits over real HTTP: created, batched, edited (replaced, removed)
and shown on the job; every bad value is a 422 naming the field, with nothing written."""

from __future__ import annotations

import httpx
import pytest

from schedulerd.store import Store


async def test_limits_are_created_shown_edited_and_removed(client: httpx.AsyncClient, store: Store) -> None:
    body = {"task": "noop", "cron": "* * * * *", "concurrency": {"key": "customer:42", "limit": 2},
            "rate_limit": {"key": "vendor", "limit": 10, "window_s": 1}}  # fmt: skip
    made = await client.post("/v1/jobs", json=body)
    assert made.status_code == 201, made.text
    job = made.json()["job"]
    assert job["concurrency"] == {"key": "customer:42", "limit": 2}
    assert job["rate_limit"] == {"key": "vendor", "limit": 10, "window_s": 1.0}
    assert (await client.get(f"/v1/jobs/{job['id']}")).json()["concurrency"]["limit"] == 2

    edited = await client.patch(f"/v1/jobs/{job['id']}", json={"concurrency": {"key": "customer:43", "limit": 5}})
    assert edited.status_code == 200, edited.text
    assert edited.json()["job"]["concurrency"] == {"key": "customer:43", "limit": 5}
    assert edited.json()["job"]["rate_limit"]["key"] == "vendor"  # untouched
    removed = await client.patch(f"/v1/jobs/{job['id']}", json={"concurrency": None, "rate_limit": None})
    assert removed.status_code == 200, removed.text
    assert removed.json()["job"]["concurrency"] is None and removed.json()["job"]["rate_limit"] is None
    row = await store.db.fetchrow("SELECT concurrency_key, concurrency_limit, rate_key FROM jobs WHERE id = $1", job["id"])
    assert tuple(row) == (None, None, None)

    plain = (await client.post("/v1/jobs", json={"task": "noop"})).json()["job"]
    assert plain["concurrency"] is None and plain["rate_limit"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [({"concurrency": {"key": "k"}}, "concurrency.limit"), ({"concurrency": {"limit": 2}}, "concurrency.key"),
     ({"concurrency": {"key": "", "limit": 2}}, "concurrency.key"), ({"concurrency": {"key": "k", "limit": 0}}, "concurrency.limit"),
     ({"concurrency": {"key": "k", "limit": "2"}}, "concurrency.limit"), ({"concurrency": {"key": "a\nb", "limit": 2}}, "concurrency.key"),
     ({"concurrency": {"key": "k", "limit": 2, "extra": 1}}, "concurrency.extra"), ({"concurrency": "k"}, "concurrency"),
     ({"rate_limit": {"key": "v", "limit": 10}}, "rate_limit.window_s"), ({"rate_limit": {"key": "v", "limit": 10, "window_s": 0}}, "rate_limit.window_s"),
     ({"rate_limit": {"key": "v", "limit": -1, "window_s": 1}}, "rate_limit.limit")],
)  # fmt: skip
async def test_a_bad_limit_is_refused_naming_the_field(client: httpx.AsyncClient, store: Store, body: dict, field: str) -> None:
    refused = await client.post("/v1/jobs", json={"task": "noop", **body})
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["field"] == field, refused.json()
    batch = await client.post("/v1/jobs/batch", json={"items": [{"task": "noop"}, {"task": "noop", **body}]})
    items = batch.json()["items"]
    assert items[0]["result"] == "created" and items[1]["result"] == "refused"
    assert items[1]["error"]["field"] == field
    patched = await client.patch(f"/v1/jobs/{items[0]['job_id']}", json=body)
    assert patched.status_code == 422 and patched.json()["error"]["field"] == field, patched.text
    assert await store.db.fetchval("SELECT count(*) FROM jobs WHERE concurrency_key IS NOT NULL OR rate_key IS NOT NULL") == 0
