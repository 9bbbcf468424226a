from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from schedulerd.config import Config
from schedulerd.core.flow import NO_CAPS, Caps
from schedulerd.models import Execution
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from schedulerd.sweeper import Sweeper
from schedulerd.worker import Worker

@pytest.fixture
async def make_worker(store: Store, queue: DelayQueue, config: Config) -> AsyncIterator[Callable[..., Worker]]:
    """Workers sharing this test's store and queue; their thread pools are shut down after."""
    built: list[Worker] = []

    def make(name: str = "worker-a", caps: Caps = NO_CAPS, **config_overrides: Any) -> Worker:
        from dataclasses import replace

        worker = Worker(
            store, queue, replace(config.worker, **config_overrides), name, horizon_s=config.dispatcher.horizon_s, caps=caps
        )  # fmt: skip
        built.append(worker)
        return worker

    yield make
    for worker in built:
        for running in list(worker.running.values()):
            if running.task is not None:
                running.task.cancel()
        worker._threads.shutdown(wait=False, cancel_futures=True)


@pytest.fixture
def sweeper(store: Store, queue: DelayQueue, config: Config) -> Sweeper:
    return Sweeper(store, queue, config.sweeper)


async def settle(worker: Worker) -> int:
    """Let the worker's running handlers finish, then write their outcomes."""
    tasks = [r.task for r in worker.running.values() if r.task is not None]
    await asyncio.gather(*tasks, return_exceptions=True)
    return await worker.flush_outcomes()


async def run_until_idle(worker: Worker, store: Store, execution_id: Any, timeout_s: float = 10.0) -> Execution:
    """Drive pop/claim/run/finish until the execution reaches a final status."""
    deadline = datetime.now(UTC).timestamp() + timeout_s
    while datetime.now(UTC).timestamp() < deadline:
        await worker.run_once()
        await settle(worker)
        execution = await store.execution_get(execution_id)
        assert execution is not None
        if execution.status in ("succeeded", "failed", "cancelled", "skipped"):
            return execution
        await asyncio.sleep(min(0.05, worker.sleep_s()))
    raise AssertionError(f"execution {execution_id} did not finish within {timeout_s} s")
