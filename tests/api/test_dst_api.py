"""DST overrides, labelled next runs and the tz report over the HTTP API."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import httpx

from schedulerd import tzchange, tzdb
from schedulerd.core.schedule import zone_rules
from schedulerd.jobs import Jobs, JobSpec
from schedulerd.store import Store
from schedulerd.tzdb import TzDatabase
from tests.conftest import create_job

NY = "America/New_York"


async def test_create_with_overrides_and_read_them_back(client: httpx.AsyncClient) -> None:
    created = await client.post("/v1/jobs", json={"task": "noop", "cron": "30 1 * * *", "timezone": NY,
                                                  "dst_repeated": "both", "dst_missing": "skip"})  # fmt: skip
    assert created.status_code == 201, created.text
    job = created.json()["job"]
    assert (job["dst_repeated"], job["dst_missing"]) == ("both", "skip")
    assert job["tzdata_version"] == tzdb.installed_version()
    # Without overrides the job reports the rule in force: fixed times first/shift, a cadence both/skip.
    fixed = (await client.post("/v1/jobs", json={"task": "noop", "cron": "0 9 * * *", "timezone": NY})).json()["job"]
    cadence = (await client.post("/v1/jobs", json={"task": "noop", "cron": "*/5 * * * *", "timezone": NY})).json()["job"]
    once = (await client.post("/v1/jobs", json={"task": "noop"})).json()["job"]
    assert (fixed["dst_repeated"], fixed["dst_missing"]) == ("first", "shift")
    assert (cadence["dst_repeated"], cadence["dst_missing"]) == ("both", "skip")
    assert (once["dst_repeated"], once["dst_missing"], once["tzdata_version"]) == (None, None, None)


async def test_bad_overrides_are_422_naming_the_field(client: httpx.AsyncClient, store: Store) -> None:
    for body, field in [
        ({"task": "noop", "cron": "@daily", "dst_repeated": "twice"}, "dst_repeated"),
        ({"task": "noop", "cron": "@daily", "dst_missing": 1}, "dst_missing"),
        ({"task": "noop", "dst_missing": "skip"}, "dst_missing"),  # a one-off job has no DST to handle
    ]:
        refused = await client.post("/v1/jobs", json=body)
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["field"] == field
    assert await store.db.fetchval("SELECT count(*) FROM jobs WHERE tenant = $1", client.tenant) == 0  # type: ignore[attr-defined]


async def test_next_runs_are_labelled_and_tenant_scoped(client: httpx.AsyncClient, make_tenant) -> None:  # type: ignore[no-untyped-def]
    job = (await client.post("/v1/jobs", json={"task": "noop", "cron": "30 2 * * *", "timezone": NY})).json()["job"]
    listed = await client.get(f"/v1/jobs/{job['id']}/next-runs", params={"count": 366})
    assert listed.status_code == 200, listed.text
    items = listed.json()["items"]
    assert len(items) == 366 and [datetime.fromisoformat(i["at"]) for i in items[:5]] == [
        datetime.fromisoformat(t) for t in job["next_runs"]]
    # A year of daily runs has a spring-forward night, when 02:30 does not exist.
    shifted = [i for i in items if i["labels"] == ["dst_shifted"]]
    assert shifted and all("did not exist" in i["note"] for i in shifted)
    assert {datetime.fromisoformat(i["local"]).strftime("%H:%M") for i in shifted} == {"03:00"}
    assert all(i["labels"] == [] and i["note"] is None for i in items if i not in shifted)
    assert (await client.get(f"/v1/jobs/{job['id']}/next-runs", params={"count": 0})).status_code == 422
    _, other_token = await make_tenant("other")
    other = await client.get(f"/v1/jobs/{job['id']}/next-runs", headers={"Authorization": f"Bearer {other_token}"})
    assert other.status_code == 404


async def test_tz_report_shows_only_this_tenants_moved_jobs(  # type: ignore[no-untyped-def]
    client: httpx.AsyncClient, store, queue, config, monkeypatch
) -> None:
    await store.db.execute("TRUNCATE tz_recomputes CASCADE")
    real = datetime.now(ZoneInfo(NY)).utcoffset()
    assert real is not None
    monkeypatch.setattr(tzdb, "installed_version", lambda: "2000a")
    with zone_rules(lambda name: timezone(real + timedelta(minutes=30)) if name == NY else ZoneInfo(name)):
        jobs = Jobs(store, queue, config)
        mine, _ = await create_job(jobs, JobSpec(task="noop", cron="0 * * * *", timezone=NY, tenant=client.tenant))  # type: ignore[attr-defined]
        await create_job(jobs, JobSpec(task="noop", cron="0 * * * *", timezone=NY, tenant="someone-else"))
    await tzchange.recompute(store, queue, config, "replica-1", TzDatabase("2099b", "simulated"))

    report = (await client.get("/v1/tz/report")).json()
    assert report["last_recompute"]["tzdata_version"] == "2099b"
    (moved,) = report["moved_jobs"]
    assert moved["job_id"] == str(mine.id) and moved["old_version"] == "2000a" and moved["removed"] >= 1
    old_at, new_at = (datetime.fromisoformat(t) for t in moved["moves"][0])
    assert abs(new_at - old_at) == timedelta(minutes=30)  # which pair comes first depends on the minute of the hour
