"""Retention by daily partition, on a real Postgres: days are created ahead, expired days are
exported and dropped whole, and nothing unfinished is ever dropped."""

from __future__ import annotations

import asyncio
import csv
import gzip
import uuid
from datetime import UTC, date, datetime, timedelta
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from schedulerd.config import Config, RetentionConfig
from schedulerd.core.ids import execution_id, scheduled_ms
from schedulerd.dead_letters import DeadLetters, Redriven
from schedulerd.errors import NotFoundError
from schedulerd.jobs import Jobs, JobSpec
from schedulerd.queue import DelayQueue
from schedulerd.retention import Retention
from schedulerd.store import Store
from schedulerd.tasks.registry import TaskContext, task
from schedulerd.worker import Worker
from tests.conftest import MakeJob, _with_database, create_job, wait_for
from tests.integration.conftest import settle

pytestmark = pytest.mark.asyncio


async def today(store: Store) -> date:
    return (await store.clock_now()).astimezone(UTC).date()


async def partition_of(store: Store, execution: uuid.UUID) -> str:
    return await store.db.fetchval("SELECT tableoid::regclass::text FROM executions WHERE id = $1", execution)


async def write_day(store: Store, job_id: uuid.UUID, day: date, count: int, *, status: str = "succeeded") -> list[uuid.UUID]:
    """`count` executions of `job_id` on `day`, each with one attempt, in the given status (a
    succeeded attempt lives on its execution row; any other gets an attempts row)."""
    times = [datetime(day.year, day.month, day.day, 10, tzinfo=UTC) + timedelta(minutes=i) for i in range(count)]
    rows = [(execution_id(t), job_id, "default", t, t) for t in times]
    await store.execution_insert_many(rows, horizon_s=0)
    ids = [r[0] for r in rows]
    await store.db.execute(
        "UPDATE executions SET status = $2, attempt = 1, fence = 1, worker = 'w', started_at = scheduled_for,"
        " finished_at = CASE WHEN $2 = 'succeeded' THEN scheduled_for END WHERE id = ANY($1)", ids, status,
    )  # fmt: skip
    if status != "succeeded":
        await store.db.execute(
            "INSERT INTO attempts (execution_id, attempt, fence, started_at, finished_at, outcome, scheduled_for)"
            " SELECT id, 1, 1, scheduled_for, scheduled_for, 'failed', scheduled_for FROM executions WHERE id = ANY($1)",
            ids,
        )
    return ids


async def test_partitions_exist_from_yesterday_to_the_days_ahead(store: Store) -> None:
    result = await Retention(store, RetentionConfig(premake_days=5)).run_once()

    now = await today(store)
    assert {now + timedelta(days=n) for n in range(-1, 6)} <= set(await store.partition_days())
    assert not result.busy and not result.dropped
    assert (await Retention(store, RetentionConfig(premake_days=5)).run_once()).created == []  # idempotent


async def test_an_expired_day_is_exported_then_dropped_whole(store: Store, make_job: MakeJob, tmp_path: Path) -> None:
    job, current = await make_job()
    expired = await today(store) - timedelta(days=91)
    assert await store.partition_ensure(expired)
    old_ids = await write_day(store, job.id, expired, 3)
    export_dir = tmp_path / "export"

    result = await Retention(store, RetentionConfig(days=90, export_dir=str(export_dir))).run_once()

    assert result.dropped == [expired] and result.kept == []
    suffix = expired.strftime("%Y%m%d")
    for table in ("executions", "attempts"):
        assert await store.db.fetchval("SELECT to_regclass($1)", f"{table}_p{suffix}") is None
    assert await store.db.fetchval("SELECT count(*) FROM executions WHERE id = ANY($1)", old_ids) == 0
    assert await store.execution_get(current.id) is not None  # today's history is untouched
    for table, key in (("executions", "id"), ("attempts", "execution_id")):
        with gzip.open(export_dir / f"{table}-{expired.isoformat()}.csv.gz", "rt") as exported:
            rows = list(csv.DictReader(exported))
        assert sorted(uuid.UUID(r[key]) for r in rows) == sorted(old_ids)
    assert not list(export_dir.glob("*.partial"))
    # Every column but the claim's bookkeeping, in table order: an archive made from an earlier
    # export takes this one, and a column added later is exported unless it is left out here.
    with gzip.open(export_dir / f"executions-{expired.isoformat()}.csv.gz", "rt") as exported:
        header = next(csv.reader(exported))
    columns = await store.db.fetch(
        "SELECT attname FROM pg_attribute WHERE attrelid = 'executions'::regclass AND attnum > 0 AND NOT attisdropped"
        " ORDER BY attnum"
    )
    assert header == [c["attname"] for c in columns if c["attname"] not in ("limited", "lane")]


async def test_a_day_holding_an_unfinished_execution_is_kept_until_it_finishes(store: Store, make_job: MakeJob) -> None:
    job, _ = await make_job()
    expired = await today(store) - timedelta(days=120)
    await store.partition_ensure(expired)
    (pending,) = await write_day(store, job.id, expired, 1, status="pending")
    retention = Retention(store, RetentionConfig(days=90))

    assert (await retention.run_once()).kept == [expired]
    assert await store.execution_get(pending) is not None

    await store.db.execute("UPDATE executions SET status = 'failed' WHERE id = $1", pending)
    assert (await retention.run_once()).dropped == [expired]


async def test_a_far_future_execution_waits_in_the_default_partition_then_moves_into_its_day(
    store: Store, make_job: MakeJob
) -> None:
    due = datetime.combine(await today(store) + timedelta(days=20), datetime.min.time(), UTC) + timedelta(hours=9)
    _, execution = await make_job(run_at=due)
    assert await partition_of(store, execution.id) == "executions_default"

    result = await Retention(store, RetentionConfig(premake_days=21)).run_once()

    assert due.date() in result.created
    assert await partition_of(store, execution.id) == f"executions_p{due:%Y%m%d}"
    moved = await store.execution_get(execution.id)
    assert moved is not None and moved.scheduled_for == due


async def test_two_replicas_maintaining_at_once_do_not_collide(store: Store) -> None:
    config = RetentionConfig(premake_days=30)
    first, second = await asyncio.gather(Retention(store, config).run_once(), Retention(store, config).run_once())
    created = first.created + second.created
    assert len(created) == len(set(created))  # each day created once; a busy replica just skips


async def test_ids_made_by_postgres_carry_the_same_time_as_ids_made_by_python(store: Store) -> None:
    at = datetime(2026, 11, 29, 13, 5, 7, 654_321, tzinfo=UTC)
    from_postgres = await store.db.fetchval("SELECT schedulerd_execution_id($1)", at)
    assert from_postgres.version == 8
    assert scheduled_ms(from_postgres) == scheduled_ms(execution_id(at)) == int(at.timestamp() * 1000)


async def test_an_execution_whose_id_carries_no_time_is_still_claimed_and_heartbeated(store: Store, make_job: MakeJob) -> None:
    job, _ = await make_job()
    legacy = uuid.uuid4()  # as written before partitioning
    now = await store.clock_now()
    await store.execution_insert_many([(legacy, job.id, "default", now - timedelta(seconds=1), now - timedelta(seconds=1))], 300)

    (claim,) = await store.execution_claim_many([str(legacy)], 5.0, "worker-a")
    assert claim.id == legacy
    assert await store.execution_heartbeat_many([(legacy, claim.fence)], 5.0) == {legacy: False}  # alive, no cancel asked


async def test_the_migration_moves_existing_history_into_daily_partitions(servers: tuple[str, str]) -> None:
    """Upgrading an installation that ran before partitioning keeps every execution and attempt."""
    from yoyo import get_backend, read_migrations

    from schedulerd.store.store import MIGRATIONS_DIR, _yoyo_url

    name = f"schedulerd_test_upgrade_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(servers[0])
    await admin.execute(f'CREATE DATABASE "{name}"')
    url = _with_database(servers[0], name)
    try:
        backend = get_backend(_yoyo_url(url))
        migrations = read_migrations(str(MIGRATIONS_DIR))
        with backend.lock():
            backend.apply_migrations(backend.to_apply(migrations.filter(lambda m: m.id < "0007")))
        old = await asyncpg.connect(url)
        await old.execute(
            "INSERT INTO jobs (id, tenant, task, schedule_kind, run_at, max_attempts, backoff_base_s, backoff_factor,"
            " backoff_max_s, timeout_s) VALUES ('00000000-0000-0000-0000-00000000000a', 't', 'noop', 'at', now(), 3, 1, 2, 9, 9)"
        )
        await old.execute(
            "INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status)"
            " SELECT gen_random_uuid(), '00000000-0000-0000-0000-00000000000a', 't', now() - make_interval(days => d), now(),"
            " 'succeeded' FROM generate_series(0, 9) d"
        )
        await old.execute(
            "INSERT INTO attempts (execution_id, attempt, fence, started_at, finished_at, outcome)"
            " SELECT id, 1, 1, now(), now(), 'succeeded' FROM executions"
        )
        with backend.lock():
            backend.apply_migrations(backend.to_apply(migrations))
        counts = await old.fetchrow(
            "SELECT (SELECT count(*) FROM executions) AS executions, (SELECT count(*) FROM attempts) AS attempts,"
            " (SELECT count(*) FROM executions_default) AS waiting,"
            " (SELECT count(*) FROM attempts a JOIN executions e ON e.id = a.execution_id"
            "  AND e.scheduled_for = a.scheduled_for) AS matched"
        )
        assert dict(counts) == {"executions": 10, "attempts": 10, "waiting": 0, "matched": 10}
        await old.close()
        backend.connection.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


# --- maintenance beside the hot path ---------------------------------------------------------


@task("test.retention_sleeps")
async def retention_sleeps(ctx: TaskContext, params: dict[str, Any]) -> None:
    await asyncio.sleep(params["s"])


async def test_a_redrive_committing_between_the_count_and_the_drop_is_never_lost(
    store: Store, queue: DelayQueue, config: Config, make_job: MakeJob, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The redrive is started after retention judged the day and before its DROP: it either lands
    before the judgement (the day is kept) or waits and is refused; it is never accepted and lost."""
    job, _ = await make_job()
    expired = await today(store) - timedelta(days=100)
    assert await store.partition_ensure(expired)
    (failed,) = await write_day(store, job.id, expired, 1, status="failed")
    dead_letters = DeadLetters(store, queue, config)
    redrives: list[asyncio.Task[Redriven]] = []
    drop = Store.partition_drop

    async def redrive_then_drop(self: Store, day: date) -> None:
        redrive = asyncio.create_task(dead_letters.redrive([failed], None, by="test"))
        redrives.append(redrive)
        await asyncio.wait({redrive}, timeout=1.0)  # committed at once, unless the judged day is locked
        await drop(self, day)

    monkeypatch.setattr(Store, "partition_drop", redrive_then_drop)
    result = await Retention(store, RetentionConfig(days=90)).run_once()

    (redrive,) = redrives
    try:
        accepted = (await redrive).execution_ids
    except NotFoundError:  # it waited for the drop, then found no execution: refused, so nothing accepted is lost
        accepted = []
    if accepted:
        assert await store.execution_get(failed) is not None, "redriven, then dropped with its partition"
        assert result.kept == [expired]
    else:
        assert result.dropped == [expired]


async def test_retention_never_moves_a_backfilled_execution_while_it_runs(
    store: Store, queue: DelayQueue, config: Config, make_worker: Callable[..., Worker], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backfill of a day with no partition writes into the default partition; a retention pass
    while its handler runs, with a heartbeat sent while the pass's transaction is open, leaves the
    row where it is (no lease lost, one attempt) and moves it into its day once it is final."""
    retention = Retention(store, RetentionConfig(days=7))
    await retention.run_once()  # yesterday and the days ahead exist: the pass below has only the backfilled day to judge
    jobs = Jobs(store, queue, config)
    job, _ = await create_job(jobs, JobSpec(task="test.retention_sleeps", cron="0 * * * *", params={"s": 2.0}))
    day = await today(store) - timedelta(days=10)
    start = datetime.combine(day, datetime.min.time(), UTC) + timedelta(hours=10)
    (backfilled,) = (await jobs.backfill(job.id, start, start + timedelta(hours=1))).created
    assert await partition_of(store, backfilled.id) == "executions_default"
    worker = make_worker(lease_s=3.0)  # heartbeats time out after 1 s
    heartbeats: list[asyncio.Task[int]] = []
    partition_days = Store.partition_days

    async def heartbeat_inside_the_pass(self: Store) -> list[date]:
        if not heartbeats:  # the partitions are ensured, the pass's transaction not yet committed
            heartbeats.append(asyncio.create_task(worker.heartbeat_once()))
            await asyncio.wait(heartbeats, timeout=0.5)
        return await partition_days(self)

    monkeypatch.setattr(Store, "partition_days", heartbeat_inside_the_pass)
    await wait_for(lambda: _started(worker, store, backfilled.id))
    during = await retention.run_once()
    await heartbeats[0]
    await settle(worker)

    assert worker.stats.lease_lost == 0
    finished = await store.execution_get(backfilled.id)
    assert finished is not None and (finished.status, finished.attempt) == ("succeeded", 1)
    assert await store.db.fetchval("SELECT count(*) FROM attempts WHERE execution_id = $1 AND outcome <> 'succeeded'",
                                   backfilled.id) == 0  # fmt: skip
    assert during.deferred == [day]
    after = await retention.run_once()  # final now: moved into its day, and that day, past the retention, dropped
    assert day in after.created and day in after.dropped


async def _started(worker: Worker, store: Store, execution_id: uuid.UUID) -> bool:
    await worker.run_once()
    execution = await store.execution_get(execution_id)
    return execution is not None and execution.status == "running"
