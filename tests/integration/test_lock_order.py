"""Every statement that writes several executions locks its rows in id order, so two of them can
never deadlock: here two replicas claim, heartbeat, park and finish (retries and successes) the
same executions at once, each handing its ids over in a different order, round after round."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest

from schedulerd.models import AttemptOutcome, Claim, ExecutionStatus, Outcome
from schedulerd.store import Store
from tests.conftest import MakeJob

EXECUTIONS = 300
ROUNDS = 12

INSERT_QUEUED = """
INSERT INTO executions (id, job_id, tenant, scheduled_for, due_at, status, enqueued_at)
SELECT schedulerd_execution_id(t), $1, 'default', t, t, 'queued', clock_timestamp()
FROM generate_series(1, $2) g, LATERAL (SELECT clock_timestamp() - make_interval(secs => g) AS t) s
RETURNING id
"""


@pytest.fixture
async def other_replica(database_url: str) -> AsyncIterator[Store]:
    """A second replica's pool: its statements run on connections of their own."""
    store = await Store.connect(database_url, min_size=2, max_size=4)
    yield store
    await store.close()


def _retry_now(claims: list[Claim]) -> list[Outcome]:
    """Failed attempts queued again at once, so the next round claims them again."""
    return [
        Outcome(c.id, c.fence, c.task, ExecutionStatus.QUEUED, AttemptOutcome.FAILED, "again", 0.0) for c in claims
    ]  # fmt: skip


def _succeeded(claims: list[Claim]) -> list[Outcome]:
    """Successes only: the batch execution_succeed_many writes."""
    return [Outcome(c.id, c.fence, c.task, ExecutionStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED) for c in claims]


async def test_replicas_writing_the_same_executions_in_any_order_never_deadlock(
    store: Store, other_replica: Store, make_job: MakeJob
) -> None:
    job, _ = await make_job("noop", run_at=None)
    ids = [str(r["id"]) for r in await store.db.fetch(INSERT_QUEUED, job.id, EXECUTIONS)]
    rng = random.Random(7)
    errors: list[BaseException] = []
    for _ in range(ROUNDS):
        rng.shuffle(ids)
        claims = await store.execution_claim_many(ids, 30.0, "replica-a")
        assert len(claims) == len(ids)
        shuffled, backwards = rng.sample(claims, len(claims)), claims[::-1]
        half = len(claims) // 2
        results = await asyncio.gather(
            store.execution_heartbeat_many([(c.id, c.fence) for c in shuffled], 30.0),
            other_replica.execution_heartbeat_many([(c.id, c.fence) for c in backwards], 30.0),
            other_replica.execution_park_many(
                [(c.id, c.fence) for c in backwards[:half]], [0.0] * half, "task_limit", late_grace_s=60.0
            ),
            store.execution_finish_many(_retry_now(rng.sample(claims, len(claims)))),
            other_replica.execution_finish_many(_succeeded(rng.sample(claims, half))),
            other_replica.execution_claim_many([str(c.id) for c in backwards], 30.0, "replica-b"),
            return_exceptions=True,
        )
        errors += [r for r in results if isinstance(r, BaseException)]
        # Whatever won each row, put every execution back to queued, due now, for the next round.
        await store.db.execute(
            "UPDATE executions SET status = 'queued', due_at = clock_timestamp(), lease_until = NULL WHERE job_id = $1",
            job.id,
        )
    assert errors == []
