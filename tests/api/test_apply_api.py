"""POST /v1/apply over real HTTP: the plan (dry_run) writing nothing, the apply, the same
declarations again changing nothing, drift as 409, bad input as 422 naming the job and key,
and the caller's tenant only."""

from __future__ import annotations

from typing import Any

import httpx

from schedulerd.store import Store

JOBS: list[dict[str, Any]] = [
    {"name": "nightly", "task": "noop", "cron": "30 1 * * *", "timezone": "Europe/London"},
    {"name": "sync", "task": "noop", "cron": "*/10 * * * *", "retry": {"max_attempts": 4}},
]


async def test_plan_apply_again_change_and_drift(client: httpx.AsyncClient, store: Store) -> None:
    planned = await client.post("/v1/apply", params={"dry_run": "true"}, json={"source": "ops", "jobs": JOBS})
    assert planned.status_code == 200, planned.text
    body = planned.json()
    assert body["applied"] is False and [a["name"] for a in body["added"]] == ["nightly", "sync"]
    assert await store.db.fetchval("SELECT count(*) FROM jobs") == 0
    applied = await client.post("/v1/apply", json={"source": "ops", "jobs": JOBS})
    assert applied.status_code == 200 and applied.json()["applied"] is True, applied.text
    again = (await client.post("/v1/apply", json={"source": "ops", "jobs": JOBS})).json()
    assert (again["added"], again["changed"], again["removed"]) == ([], [], [])
    moved = [JOBS[0], {**JOBS[1], "cron": "*/20 * * * *"}]
    change = (await client.post("/v1/apply", params={"dry_run": "true"}, json={"source": "ops", "jobs": moved})).json()
    (edit,) = change["changed"]
    assert edit["name"] == "sync" and edit["fields"] == ["cron"] and edit["edit"]["removed"] and edit["edit"]["dry_run"]
    job_id = edit["edit"]["job"]["id"]
    assert (await client.patch(f"/v1/jobs/{job_id}", json={"params": {"by": "hand"}})).status_code == 200
    refused = await client.post("/v1/apply", json={"source": "ops", "jobs": moved})
    assert refused.status_code == 409 and "sync" in refused.text
    forced = await client.post("/v1/apply", json={"source": "ops", "jobs": moved, "force": True})
    assert forced.status_code == 200 and forced.json()["changed"][0]["drifted"] is True


async def test_bad_input_is_422_naming_the_job_and_key(client: httpx.AsyncClient, store: Store) -> None:
    refused = await client.post("/v1/apply", json={"source": "ops", "jobs": [JOBS[0], {**JOBS[1], "colour": "red"}]})
    assert refused.status_code == 422 and "job 'sync': colour" in refused.text
    assert (await client.post("/v1/apply", json={"source": "ops", "jobs": [], "extra": 1})).status_code == 422
    assert await store.db.fetchval("SELECT count(*) FROM jobs") == 0
