"""A job's runs split into past and upcoming (GET /v1/executions?when=), and the per-minute
figures the dashboard's charts draw (GET /v1/stats/minutes, the [ops] /stats/minutes and its page):
tenant-scoped, paged by cursor, refusing bad input naming the parameter."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from schedulerd.core.ids import execution_id
from schedulerd.store import Store


async def add_run(store: Store, tenant: str, job_id: str, scheduled_for: datetime, status: str,
                  lag_s: float | None = None, duration_s: float | None = None) -> str:  # fmt: skip
    """One execution of this test's job, in the given state (started lag_s after its time)."""
    new = execution_id(scheduled_for)
    await store.execution_insert_many([(new, uuid.UUID(job_id), tenant, scheduled_for, scheduled_for)], horizon_s=0)
    started = scheduled_for + timedelta(seconds=lag_s) if lag_s is not None else None
    finished = started + timedelta(seconds=duration_s) if started and duration_s is not None else None
    await store.db.execute(
        "UPDATE executions SET status = $2, first_started_at = $3, started_at = $3, finished_at = $4,"
        " attempt = CASE WHEN $3::timestamptz IS NULL THEN 0 ELSE 1 END WHERE id = $1",
        new, status, started, finished,
    )
    return str(new)


async def future_job(client: httpx.AsyncClient) -> str:
    created = await client.post("/v1/jobs", json={"task": "noop", "name": "runs", "run_at": "2031-01-01T00:00:00Z"})
    assert created.status_code == 201, created.text
    return str(created.json()["job"]["id"])


async def test_past_runs_newest_first_and_upcoming_soonest_first(client: httpx.AsyncClient, store: Store) -> None:
    tenant = client.tenant  # type: ignore[attr-defined]
    job_id = await future_job(client)  # its own execution: pending, 2031
    now = datetime.now(UTC).replace(microsecond=0)
    ago = lambda minutes: now - timedelta(minutes=minutes)  # noqa: E731
    succeeded = await add_run(store, tenant, job_id, ago(5), "succeeded", lag_s=0.2, duration_s=1.5)
    failed = await add_run(store, tenant, job_id, ago(4), "failed", lag_s=0.1, duration_s=0.25)
    running = await add_run(store, tenant, job_id, ago(1), "running", lag_s=0.3)
    skipped = await add_run(store, tenant, job_id, ago(3), "skipped")
    overdue = await add_run(store, tenant, job_id, ago(2), "queued")  # due, not started: upcoming
    soon = [await add_run(store, tenant, job_id, now + timedelta(minutes=m), "pending") for m in (10, 20, 30)]
    await add_run(store, tenant, job_id, now + timedelta(minutes=40), "cancelled")  # a paused stretch: neither

    past = (await client.get("/v1/executions", params={"job": job_id, "when": "past"})).json()
    assert [e["id"] for e in past["items"]] == [running, skipped, failed, succeeded]
    by_id = {e["id"]: e for e in past["items"]}
    assert by_id[succeeded]["duration_s"] == pytest.approx(1.5) and by_id[running]["duration_s"] is None
    assert by_id[failed]["start_lag_s"] == pytest.approx(0.1)
    only_failed = (await client.get("/v1/executions", params={"job": job_id, "when": "past", "status": "failed"})).json()
    assert [e["id"] for e in only_failed["items"]] == [failed]

    # Upcoming, two at a time through the cursor: soonest first, the 2031 run last.
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"job": job_id, "when": "upcoming", "limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/v1/executions", params=params)).json()
        seen += page["items"]
        if (cursor := page["next_cursor"]) is None:
            break
    assert [e["id"] for e in seen[:4]] == [overdue, *soon] and len(seen) == 5
    assert seen[-1]["scheduled_for"].startswith("2031-01-01") and {e["status"] for e in seen} <= {"pending", "queued"}

    everything = (await client.get("/v1/executions", params={"job": job_id, "limit": 100})).json()["items"]
    assert len(everything) == 10  # without `when`, every row as before


async def test_runs_of_another_tenant_are_not_listed(client: httpx.AsyncClient, store: Store, api: Any, make_tenant: Any) -> None:
    job_id = await future_job(client)
    await add_run(store, client.tenant, job_id, datetime.now(UTC) - timedelta(minutes=1), "succeeded", 0.1, 0.1)  # type: ignore[attr-defined]
    _, token = await make_tenant("other")
    async with httpx.AsyncClient(base_url=api.url, headers={"Authorization": f"Bearer {token}"}) as other:
        for when in ("past", "upcoming"):
            assert (await other.get("/v1/executions", params={"when": when})).json()["items"] == []
            assert (await other.get("/v1/executions", params={"when": when, "job": job_id})).status_code == 404
        stats = (await other.get("/v1/stats/minutes", params={"minutes": 5})).json()
        assert sum(m["scheduled"] for m in stats["minutes"]) == 0


def bucket(stats: dict[str, Any], at: datetime) -> dict[str, Any]:
    minute = at.replace(second=0, microsecond=0)
    (found,) = [m for m in stats["minutes"] if datetime.fromisoformat(m["minute"]) == minute]
    return found


async def test_minute_stats_count_and_percentiles_per_minute(client: httpx.AsyncClient, store: Store, api: Any) -> None:
    tenant = client.tenant  # type: ignore[attr-defined]
    job_id = await future_job(client)
    now = datetime.now(UTC)
    three = now - timedelta(minutes=3)
    six = now - timedelta(minutes=6)
    for second, (lag, status) in enumerate(((0.1, "succeeded"), (0.3, "succeeded"), (0.5, "failed"), (None, "queued"))):
        # one slot per (job, scheduled_for): each in its own second of the same minute
        await add_run(store, tenant, job_id, three.replace(second=10 + second), status, lag, 0.2 if lag else None)
    await add_run(store, tenant, job_id, six.replace(second=30), "succeeded", 2.0, 1.0)

    stats = (await client.get("/v1/stats/minutes", params={"minutes": 10})).json()
    assert stats["tenant"] == tenant and len(stats["minutes"]) == 10
    minutes = [datetime.fromisoformat(m["minute"]) for m in stats["minutes"]]
    assert minutes == sorted(minutes) and minutes[-1] == datetime.fromisoformat(stats["now"]).replace(second=0, microsecond=0)
    at_three = bucket(stats, three)
    assert (at_three["scheduled"], at_three["started"], at_three["succeeded"], at_three["failed"]) == (4, 3, 2, 1)
    assert at_three["lag_p50_s"] == pytest.approx(0.3) and at_three["lag_p99_s"] == pytest.approx(0.496)
    at_six = bucket(stats, six)
    assert (at_six["scheduled"], at_six["lag_p50_s"], at_six["lag_p99_s"]) == (1, pytest.approx(2.0), pytest.approx(2.0))
    assert sum(m["scheduled"] for m in stats["minutes"]) == 5  # empty minutes are zeros, with no lag
    assert all(m["lag_p50_s"] is None for m in stats["minutes"] if m["started"] == 0)
    assert len((await client.get("/v1/stats/minutes")).json()["minutes"]) == 60

    # The [ops] listener's fleet-wide version counts every tenant, and serves the page charting it.
    async with httpx.AsyncClient(base_url=api.ops_url) as ops:
        fleet = (await ops.get("/stats/minutes", params={"minutes": 10})).json()
        assert bucket(fleet, three)["scheduled"] >= 4 and len(fleet["minutes"]) == 10
        assert (await ops.get("/stats/minutes", params={"minutes": 0})).status_code == 422
        page = await ops.get("/")
        assert page.status_code == 200 and "/dashboard/ops.js" in page.text
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert (await ops.get("/dashboard/charts.js")).status_code == 200


@pytest.mark.parametrize(
    ("path", "params", "field", "message"),
    [
        ("/v1/executions", {"when": "later"}, "when", "'past' or 'upcoming'"),
        ("/v1/executions", {"when": ""}, "when", "'past' or 'upcoming'"),
        ("/v1/stats/minutes", {"minutes": 0}, "minutes", "greater than or equal to 1"),
        ("/v1/stats/minutes", {"minutes": 181}, "minutes", "less than or equal to 180"),
        ("/v1/stats/minutes", {"minutes": "an hour"}, "minutes", "valid integer"),
    ],
)
async def test_bad_run_and_stats_queries_name_the_parameter(
    client: httpx.AsyncClient, path: str, params: dict[str, Any], field: str, message: str
) -> None:
    refused = await client.get(path, params=params)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["field"] == field and message in refused.json()["error"]["message"], refused.text
