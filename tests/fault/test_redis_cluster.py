"""The sharded delay queue on a real Redis Cluster (three masters, three replicas): the shards'
slots spread over the masters, a daemon configured for the cluster runs its work there, a slot
migrated mid-run (ASK, TRYAGAIN, then MOVED) is followed, and killing a master (its replica
promoted) loses no execution. Single-node mode is the rest of the suite, unchanged."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from schedulerd.config import Config
from schedulerd.jobs import Jobs, JobSpec
from schedulerd.models import ExecutionStatus
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from schedulerd.sweeper import Sweeper
from schedulerd.worker import Worker
from tests.conftest import create_job, wait_for
from tests.fault.cluster import RedisClusterServers, tools_present

pytestmark = pytest.mark.skipif(not tools_present(), reason="redis-server and redis-cli (Debian's redis) are needed")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServers]:
    servers = RedisClusterServers(tmp_path_factory.mktemp("redis-cluster"), masters=3, replicas_per_master=1)
    try:
        servers.start()
        yield servers
    finally:
        servers.stop()


@pytest.fixture
async def cluster_queue(cluster: RedisClusterServers, redis_prefix: str) -> AsyncIterator[Callable[[int], DelayQueue]]:
    made: list[DelayQueue] = []

    def make(shards: int) -> DelayQueue:
        queue = DelayQueue.connect(cluster.url, redis_prefix, timeout_s=2.0, shards=shards, cluster=True)
        made.append(queue)
        return queue

    yield make
    for queue in made:
        with contextlib.suppress(Exception):
            await queue.delete_all()
        await queue.close()


async def _create(jobs: Jobs, count: int, spread_s: float, tenants: int = 3) -> None:
    start = datetime.now(UTC) + timedelta(milliseconds=200)
    for i in range(count):
        await create_job(jobs, JobSpec(task="noop", tenant=f"t{i % tenants}", run_at=start + timedelta(seconds=spread_s * i / count)))


async def _all_succeeded(store: Store, count: int, timeout_s: float = 30.0) -> None:
    async def done() -> bool:
        return await store.db.fetchval("SELECT count(*) FROM executions WHERE status = 'succeeded'") == count

    await wait_for(done, timeout_s=timeout_s, interval_s=0.1)
    rows = await store.db.fetch("SELECT status, attempt FROM executions")
    assert Counter((r["status"], r["attempt"]) for r in rows) == {(ExecutionStatus.SUCCEEDED, 1): count}
    assert await store.db.fetchval("SELECT count(*) FROM attempt_history") == count  # each started once


@contextlib.asynccontextmanager
async def _fleet(store: Store, queue: DelayQueue, config: Config, replicas: int = 2) -> AsyncIterator[None]:
    """Worker and sweeper loops of `replicas` replicas in this process, on the cluster queue."""
    stop = asyncio.Event()
    tasks = []
    for n in range(replicas):
        sweeper = Sweeper(store, queue, config.sweeper)
        worker = Worker(store, queue, replace(config.worker, redis_probe_s=0.3), f"cluster-{n}",
                        horizon_s=config.dispatcher.horizon_s, on_epoch_lost=sweeper.request_reconcile)  # fmt: skip
        tasks += [asyncio.create_task(worker.run(stop)), asyncio.create_task(sweeper.run(stop))]
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 15)


def _evalsha_calls(cluster: RedisClusterServers) -> dict[int, int]:
    calls = {}
    for node in cluster.masters():
        with node.client() as client:
            calls[node.port] = int(client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))
    return calls


async def test_a_daemon_on_the_cluster_pops_every_master_and_runs_everything(
    cluster: RedisClusterServers, cluster_queue, store: Store, config: Config, redis_prefix: str,
    start_daemon: Callable[..., Awaitable[None]],
) -> None:  # fmt: skip
    queue = cluster_queue(32)
    owners = {cluster.slot_owner(cluster.keyslot(f"{shard.tag}:tenants")).port for shard in queue.shards}
    assert owners == {n.port for n in cluster.masters()} and len(owners) == 3  # 32 shards over the 3 masters
    before = _evalsha_calls(cluster)
    start_daemon("cluster-daemon", SCHEDULERD_REDIS_URL=cluster.url, SCHEDULERD_REDIS_CLUSTER="true",
                 SCHEDULERD_REDIS_SHARDS="32")  # fmt: skip

    await _create(Jobs(store, queue, config), 300, spread_s=2.0)

    await _all_succeeded(store, 300)
    after = _evalsha_calls(cluster)
    assert all(after[port] > before.get(port, 0) for port in after)  # the daemon's pops reached every master
    keys_per_master = {}
    for node in cluster.masters():
        with node.client() as client:
            keys_per_master[node.port] = sum(1 for _ in client.scan_iter(match=f"{{{redis_prefix}:*"))
    assert all(keys_per_master.values()), keys_per_master  # the shards' markers live on every master


async def test_a_slot_migrated_during_a_run_is_followed(cluster: RedisClusterServers, cluster_queue, store: Store, config: Config) -> None:
    queue = cluster_queue(4)
    async with _fleet(store, queue, config):
        # Spread over 6 s: on a loaded machine creating them takes a while, and entries must still
        # sit in the slot when it moves.
        await _create(Jobs(store, queue, config), 200, spread_s=6.0)
        shard = queue.shards[0]
        slot = cluster.keyslot(f"{shard.tag}:tenants")
        source = cluster.slot_owner(slot)
        target = next(n for n in cluster.masters() if n is not source)
        await asyncio.sleep(0.5)  # mid-run: entries due over the next seconds sit in the slot
        with source.client() as client:
            assert client.zcard(shard.tenants_key) > 0
        moved = await asyncio.to_thread(cluster.migrate_slot, slot, target, pause_s=0.2, batch=1)
        assert moved >= 3  # the shard's tenants set, epoch marker and at least one tenant queue
        assert cluster.slot_owner(slot) is target
        await _create(Jobs(store, queue, config), 50, spread_s=0.5)  # after it: MOVED for every client
        await _all_succeeded(store, 250)


async def test_priority_bands_pop_on_the_cluster(cluster_queue) -> None:
    """A band's key carries its shard's hash tag: the pop reads a tenant's bands in one slot
    (no CROSSSLOT), and each shard gives its 9s before its 5s."""
    import uuid

    from schedulerd.models import Enqueue
    from tests.integration.test_queue_priority import check_each_shard_pops_its_9s_first

    due_at = datetime.now(UTC) - timedelta(seconds=2)
    fives = [Enqueue(uuid.uuid4(), due_at, "t0") for _ in range(90)]
    nines = [Enqueue(uuid.uuid4(), due_at + timedelta(seconds=1), "t0", 9) for _ in range(6)]
    await check_each_shard_pops_its_9s_first(cluster_queue(3), fives, nines, 40)


async def test_killing_a_master_loses_no_execution(cluster: RedisClusterServers, cluster_queue, store: Store, config: Config) -> None:
    queue = cluster_queue(4)
    slot = cluster.keyslot(f"{queue.shards[0].tag}:tenants")
    async with _fleet(store, queue, config):
        await _create(Jobs(store, queue, config), 300, spread_s=4.0)
        await asyncio.sleep(1.0)
        victim = cluster.slot_owner(slot)
        with victim.client() as client:  # entries due over the next seconds wait on the master we kill
            assert client.zcard(queue.shards[0].tenants_key) > 0
        cluster.kill(victim)
        promoted = await asyncio.to_thread(cluster.wait_failed_over, slot, victim)
        assert promoted is not victim
        await _all_succeeded(store, 300, timeout_s=60)
