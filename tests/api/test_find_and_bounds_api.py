"""GET /v1/jobs's filters and cursor, labels and bounds on create, the done state, over real HTTP."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import uuid

import httpx

from schedulerd.store import Store
from tests.api.conftest import ApiServer


async def _create(client: httpx.AsyncClient, **body: object) -> dict:  # type: ignore[type-arg]
    response = await client.post("/v1/jobs", json={"task": "noop", **body})
    assert response.status_code == 201, response.text
    return response.json()["job"]  # type: ignore[no-any-return]


async def test_labels_and_bounds_are_shown_and_a_bounded_job_reaches_done(client: httpx.AsyncClient) -> None:
    job = await _create(client, cron="* * * * *", labels={"team": "billing"}, max_runs=2)
    assert job["labels"] == {"team": "billing"} and job["max_runs"] == 2 and job["state"] == "done"
    shown = (await client.get(f"/v1/jobs/{job['id']}")).json()
    assert shown["state"] == "done" and shown["runs_written"] == 2 and shown["done_at"]

    start = (datetime.now(UTC) + timedelta(days=1)).replace(minute=0, second=0, microsecond=0)
    later = await _create(client, cron="0 * * * *", start_at=start.isoformat(), end_at=(start + timedelta(hours=3)).isoformat())
    runs = (await client.get(f"/v1/jobs/{later['id']}/next-runs", params={"count": 10})).json()["items"]
    assert [datetime.fromisoformat(r["at"]) for r in runs] == [start + timedelta(hours=h) for h in (0, 1, 2)]
    assert later["state"] == "enabled"


async def test_bad_bounds_and_labels_are_refused_naming_the_field(client: httpx.AsyncClient, store: Store) -> None:
    for body, field in [
        ({"max_runs": 3}, "max_runs"),
        ({"cron": "* * * * *", "max_runs": 0}, "max_runs"),
        ({"cron": "* * * * *", "start_at": "2030-01-02T00:00:00Z", "end_at": "2030-01-01T00:00:00Z"}, "end_at"),
        ({"cron": "* * * * *", "start_at": "2030-01-02T00:00:00"}, "start_at"),
        ({"labels": {"bad key": "x"}}, "labels"),
        ({"labels": {"team": 3}}, "labels.team"),
    ]:
        response = await client.post("/v1/jobs", json={"task": "noop", **body})
        assert response.status_code == 422, (body, response.text)
        assert response.json()["error"]["field"] == field, (body, response.json())
    batch = await client.post("/v1/jobs/batch", json={"items": [{"task": "noop", "max_runs": 2},
                                                               {"task": "noop", "labels": {"env": "prod"}}]})  # fmt: skip
    assert [i["result"] for i in batch.json()["items"]] == ["refused", "created"]
    assert batch.json()["items"][0]["error"]["field"] == "max_runs"
    assert await store.db.fetchval("SELECT count(*) FROM jobs WHERE labels @> '{\"env\": \"prod\"}'") == 1


async def test_list_filters_and_the_cursor(client: httpx.AsyncClient, api: ApiServer, make_tenant, store: Store) -> None:  # type: ignore[no-untyped-def]
    made = [await _create(client, name=f"nightly-{i}", labels={"team": "billing" if i % 2 else "ops"},
                          **({"cron": "0 3 * * *"} if i % 3 == 0 else {"run_at": "2030-01-01T00:00:00Z"}))
            for i in range(6)]  # fmt: skip
    finished = await _create(client, name="nightly-finished")
    await store.db.execute("UPDATE executions SET status = 'succeeded', finished_at = now() WHERE job_id = $1",
                           uuid.UUID(finished["id"]))  # fmt: skip
    other_tenant, token = await make_tenant()
    async with httpx.AsyncClient(base_url=api.url, headers={"Authorization": f"Bearer {token}"}) as rival:
        await _create(rival, name="nightly-rival", labels={"team": "billing"})

    async def names(**params: object) -> list[str]:
        response = await client.get("/v1/jobs", params=params)
        assert response.status_code == 200, response.text
        return [j["name"] for j in response.json()["items"]]

    assert await names(name="nightly-") == [f"nightly-{i}" for i in reversed(range(6))]
    assert await names(label="team=billing") == ["nightly-5", "nightly-3", "nightly-1"]
    assert await names(kind="cron") == ["nightly-3", "nightly-0"]
    assert await names(kind="one-off", label="team=ops") == ["nightly-4", "nightly-2"]
    assert await names(state="done") == ["nightly-finished"]
    assert (await client.get("/v1/jobs", params={"state": "done"})).json()["items"][0]["state"] == "done"
    assert "nightly-finished" in await names(state="all")
    assert await names(task="http") == []

    seen, cursor = [], None
    while True:
        page = (await client.get("/v1/jobs", params={"limit": 4, "state": "all", **({"cursor": cursor} if cursor else {})})).json()
        seen += [j["name"] for j in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ["nightly-finished", *[f"nightly-{i}" for i in reversed(range(6))]]

    for params, field in [({"state": "over"}, "state"), ({"label": "team"}, "label"), ({"kind": "weekly"}, "kind"),
                          ({"cursor": "nope"}, "cursor")]:  # fmt: skip
        response = await client.get("/v1/jobs", params=params)
        assert response.status_code == 422 and response.json()["error"]["field"] == field, response.text
    assert made
