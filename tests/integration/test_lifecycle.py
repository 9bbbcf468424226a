"""The stateful lifecycle test: random interleavings of creating, claiming, heartbeating and
finishing executions with pause, resume, delete, trigger, backfill, redrive, retention, the tz
recompute, shard-count changes, Redis data loss, clock skew between the servers and latency held
at the hot path's await points, invariants checked against Postgres after every step
(tests/integration/lifecycle_machine.py).

SCHEDULERD_FAULT_SEED=<n> replays one run's sequence of steps; a failing run prints that seed and
the steps it took (the violation's message). Steps race the wall clock, so a replay may diverge in
timing: shrinking is off for that reason (hypothesis would report it as flaky), the trace is the
shortened reproduction.
The default budget takes well under a minute; `-m slow` runs the long one.
"""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as use_seed
from hypothesis.stateful import run_state_machine_as_test

from tests.integration.lifecycle_machine import machine_factory

SEED_ENV = "SCHEDULERD_FAULT_SEED"


def _explore(database_url: str, redis_url: str, *, examples: int, steps: int) -> None:
    seed = int(os.environ[SEED_ENV]) if os.environ.get(SEED_ENV) else random.randrange(2**32)
    factory = use_seed(seed)(machine_factory(database_url, redis_url))
    budget = settings(
        max_examples=examples, stateful_step_count=steps, deadline=None, database=None,
        suppress_health_check=list(HealthCheck), phases=[Phase.generate], print_blob=False,
    )  # fmt: skip
    try:
        run_state_machine_as_test(factory, settings=budget)
    except BaseException:
        print(f"\nlifecycle machine failed: reproduce with {SEED_ENV}={seed}")
        raise


@pytest.mark.timeout(240)
def test_lifecycle_interleavings_keep_the_guarantees(database_url: str, redis_url: str) -> None:
    _explore(database_url, redis_url, examples=12, steps=30)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_lifecycle_interleavings_keep_the_guarantees_long(database_url: str, redis_url: str) -> None:
    _explore(database_url, redis_url, examples=300, steps=60)
