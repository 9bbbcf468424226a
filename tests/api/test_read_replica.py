"""[database].read_url: the API's read-only views go to a read replica, lookups by id fall back to
the primary (a job read back right after its create is found), lists may lag. The "replica" here
is a second database that replicates nothing, so which one answered is plain from the data."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from schedulerd.jobs import Jobs, JobSpec
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from schedulerd.tenants import Tenants
from tests.conftest import create_job, fresh_database

READER_APP = "schedulerd-read-replica-test"


@pytest.fixture
async def replica_url(servers: tuple[str, str]) -> AsyncIterator[str]:
    async with fresh_database(servers[0], "replica") as url:
        yield url


async def test_reads_go_to_the_replica_and_lookups_fall_back_to_the_primary(
    start_api, replica_url: str, store: Store, queue: DelayQueue, config, make_tenant
) -> None:
    api = start_api(read_url=f"{replica_url}?application_name={READER_APP}")
    tenant, token = await make_tenant()
    replica = await Store.connect(replica_url, min_size=1, max_size=2)
    try:
        await Tenants(replica).create(tenant)  # the replica has caught up with the tenant, not its jobs
        later = datetime.now(UTC) + timedelta(days=1)  # beyond the dispatch horizon: nothing in Redis
        only_there, _ = await create_job(Jobs(replica, queue, config),
            JobSpec(task="noop", tenant=tenant, name="only-on-replica", run_at=later)
        )
        async with httpx.AsyncClient(base_url=api.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            created = await http.post("/v1/jobs", json={"task": "noop", "name": "just-created", "run_at": later.isoformat()})
            assert created.status_code == 201, created.text
            job_id = created.json()["job"]["id"]

            # Read after write: the replica does not have it yet, the primary answers.
            got = await http.get(f"/v1/jobs/{job_id}")
            assert got.status_code == 200 and got.json()["name"] == "just-created"
            executions = await store.db.fetch("SELECT id FROM executions WHERE job_id = $1", uuid.UUID(job_id))
            assert len(executions) == 1
            assert (await http.get(f"/v1/executions/{executions[0]['id']}")).status_code == 200

            # Lists are the replica's: its job, not yet the primary's new one.
            listed = (await http.get("/v1/jobs")).json()["items"]
            assert [j["name"] for j in listed] == ["only-on-replica"]
            assert (await http.get("/v1/executions")).json()["items"][0]["job_id"] == str(only_there.id)
            assert (await http.get(f"/v1/jobs/{only_there.id}")).status_code == 200
            assert (await http.get(f"/v1/jobs/{uuid.uuid4()}")).status_code == 404  # on neither: still a 404

        admin = await asyncpg.connect(replica_url)
        try:
            readers = await admin.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1", READER_APP
            )  # fmt: skip
        finally:
            await admin.close()
        assert readers >= 1  # the API's second pool, observable by its application_name
    finally:
        await replica.close()
