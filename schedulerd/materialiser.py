"""Materialiser: write the next occurrences of cron jobs as executions; apply misfire policies.

Replicas split jobs with FOR UPDATE SKIP LOCKED, and the unique (job, scheduled_for) slot makes
a second write of an occurrence a no-op, so no leader is needed. A recurring job never depends
on its previous run to get its next one. Occurrences that are already missed when written (the
materialiser was down past them) are judged by the job's misfire policy in the same
transaction, so no worker can start them before the policy has spoken.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import structlog

from schedulerd.config import LateConfig, MaterialiserConfig
from schedulerd.core.materialise import ALIGN_S
from schedulerd.loops import every
from schedulerd.materialising import judge_misfires, materialise_jobs
from schedulerd.models import Enqueue
from schedulerd.queue import DelayQueue
from schedulerd.store import Store

log = structlog.get_logger("schedulerd.materialiser")


@dataclass(frozen=True)
class MaterialiseResult:
    jobs: int = 0  # jobs whose cursor advanced
    written: int = 0  # executions inserted
    skipped: int = 0  # missed occurrences skipped by policy
    replayed: int = 0  # missed occurrences let run late


class Materialiser:
    def __init__(
        self, store: Store, queue: DelayQueue, config: MaterialiserConfig, *, dispatch_horizon_s: float,
        late_config: LateConfig | None = None,
    ) -> None:  # fmt: skip
        self.store = store
        self.late_config = late_config or LateConfig()
        self.queue = queue
        self.config = config
        self.dispatch_horizon_s = dispatch_horizon_s

    async def run_once(self) -> MaterialiseResult:
        """Fill every cron job's cursor up to the horizon, then judge what was missed."""
        jobs = written = skipped = replayed = 0
        while True:
            enqueue: list[Enqueue] = []
            async with self.store.transaction() as tx:
                # Cursors end aligned down to the minute: only a job a whole step behind is due.
                behind_s = self.config.horizon_s - ALIGN_S
                due, now = await tx.job_due_for_materialising(behind_s, self.config.batch_size)
                if due:
                    assert now is not None
                    done = await materialise_jobs(tx, due, now, self.config, self.dispatch_horizon_s, replayed, self.late_config)
                    written, skipped, replayed = written + len(done.executions), skipped + done.skipped, replayed + done.replayed
                    enqueue.extend(done.enqueue)
            if enqueue:
                await self.queue.add(enqueue, only_new=False)
            jobs += len(due)
            if len(due) < self.config.batch_size:
                break
        judgement = await judge_misfires(self.store, self.config, replay_slot=replayed, late_config=self.late_config)
        if judgement.replays:
            await self.queue.add(judgement.replays, only_new=False)
        result = MaterialiseResult(jobs, written, skipped + len(judgement.skipped), replayed + len(judgement.replays))
        if result != MaterialiseResult():
            log.info("materialiser.pass", **result.__dict__)
        return result

    async def run(self, stop: asyncio.Event) -> None:
        await every("materialiser", self.config.interval_s, self.run_once, stop)
