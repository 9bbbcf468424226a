"""retrying(): transient errors restart the loop with backoff; a long healthy run resets it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from schedulerd import loops


@pytest.fixture
def delays(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The backoff delays retrying() waits, recorded instead of slept (jitter fixed at 1.0)."""
    waited: list[float] = []
    real_wait_for = asyncio.wait_for
    monkeypatch.setattr(loops.random, "uniform", lambda a, b: 1.0)

    async def record_wait(awaitable, timeout):  # type: ignore[no-untyped-def]
        waited.append(timeout)
        return await real_wait_for(awaitable, 0)

    monkeypatch.setattr(loops.asyncio, "wait_for", record_wait)
    return waited


def failing_times(count: int, error: Exception) -> Callable[[asyncio.Event], Awaitable[None]]:
    calls = 0

    async def loop(stop: asyncio.Event) -> None:
        nonlocal calls
        calls += 1
        if calls <= count:
            raise error

    return loop


async def test_transient_errors_restart_the_loop_with_growing_backoff(delays: list[float]) -> None:
    await loops.retrying("test", failing_times(3, ConnectionRefusedError("postgres restarting")), asyncio.Event())
    assert delays == [0.4, 0.8, 1.6]


async def test_a_long_healthy_run_resets_the_backoff(delays: list[float], monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 1.0, 1.0, 2.0, 2.0, 500.0, 500.0, 501.0])
    monkeypatch.setattr(loops, "monotonic", lambda: next(clock))
    await loops.retrying("test", failing_times(3, OSError("blip")), asyncio.Event())
    assert delays == [0.4, 0.8, 0.4]  # the third failure came after 498 s of health
