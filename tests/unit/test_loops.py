"""retrying(): transient errors restart the loop with backoff; a long healthy run resets it."""

from __future__ import annotations

import asyncio

import pytest

from schedulerd import loops


async def test_transient_errors_restart_the_loop_with_growing_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    delays: list[float] = []
    monkeypatch.setattr(loops.random, "uniform", lambda a, b: 1.0)
    real_wait_for = asyncio.wait_for

    async def record_wait(awaitable, timeout):  # type: ignore[no-untyped-def]
        delays.append(timeout)
        return await real_wait_for(awaitable, 0)

    monkeypatch.setattr(loops.asyncio, "wait_for", record_wait)
    calls = 0

    async def flaky(stop: asyncio.Event) -> None:
        nonlocal calls
        calls += 1
        if calls <= 3:
            raise ConnectionRefusedError("postgres restarting")

    await loops.retrying("test", flaky, asyncio.Event())
    assert calls == 4 and delays == [0.4, 0.8, 1.6]


async def test_a_long_healthy_run_resets_the_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 1.0, 1.0, 2.0, 2.0, 500.0, 500.0, 501.0])
    monkeypatch.setattr(loops, "monotonic", lambda: next(clock))
    monkeypatch.setattr(loops.random, "uniform", lambda a, b: 1.0)
    delays: list[float] = []
    real_wait_for = asyncio.wait_for

    async def record_wait(awaitable, timeout):  # type: ignore[no-untyped-def]
        delays.append(timeout)
        return await real_wait_for(awaitable, 0)

    monkeypatch.setattr(loops.asyncio, "wait_for", record_wait)
    calls = 0

    async def flaky(stop: asyncio.Event) -> None:
        nonlocal calls
        calls += 1
        if calls <= 3:
            raise OSError("blip")

    await loops.retrying("test", flaky, asyncio.Event())
    assert delays == [0.4, 0.8, 0.4]  # the third failure came after 498 s of health
