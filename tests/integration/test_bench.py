"""`scripts/bench --quick` end to end: replicas start, every execution runs once, everything is cleaned up."""

from __future__ import annotations

import json
import os
import subprocess

import asyncpg
import pytest
import redis.asyncio as aioredis

from tests.conftest import REPO_ROOT


@pytest.mark.timeout(90)
async def test_quick_bench_runs_everything_once(servers: tuple[str, str]) -> None:
    env = {**os.environ, "SCHEDULERD_TEST_DATABASE_URL": servers[0], "SCHEDULERD_TEST_REDIS_URL": servers[1]}
    result = subprocess.run(  # the script, as a fresh clone runs it: it installs first, as scripts/run does
        ["scripts/bench", "--quick"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=80,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("bench: servers: Postgres ") and "(SCHEDULERD_TEST_DATABASE_URL)" in lines[0], lines[0]
    assert "(SCHEDULERD_TEST_REDIS_URL)" in lines[0]
    assert lines[1].startswith("calibration: ") and "Python loop" in lines[1] and "rows/s" in lines[1], lines[1]
    report = json.loads(lines[-1])
    assert report["scenario"] == "steady" and report["executions"] == 2500
    assert report["lost"] == 0 and report["duplicates"] == 0
    assert report["succeeded"] == 2500 and report["crashed"] == []
    # It cleaned up after itself: no bench database is left behind.
    admin = await asyncpg.connect(servers[0])
    try:
        name = f"schedulerd_bench_{report['run_id']}"
        assert await admin.fetchval("SELECT count(*) FROM pg_database WHERE datname = $1", name) == 0
        assert await admin.fetchval("SELECT count(*) FROM pg_database WHERE datname LIKE 'schedulerd_calibrate_%'") == 0
    finally:
        await admin.close()
    client = aioredis.from_url(servers[1])
    try:
        assert [k async for k in client.scan_iter(match=f"*schedulerd-bench-{report['run_id']}*")] == []
    finally:
        await client.aclose()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("via", ["http-batch", "client-batch"])
async def test_ingest_counts_what_each_door_committed_and_queued(servers: tuple[str, str], via: str) -> None:
    """The HTTP doors start an API replica and wait for its health on the [ops] listener."""
    env = {**os.environ, "SCHEDULERD_TEST_DATABASE_URL": servers[0], "SCHEDULERD_TEST_REDIS_URL": servers[1]}
    result = subprocess.run(
        ["scripts/bench", "ingest", "--via", via, "--count", "3000", "--repeat", "1"], cwd=REPO_ROOT, env=env,
        capture_output=True, text=True, timeout=110,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["via"] == via and report["count"] == 3000 and report["jobs_per_s_median"] > 0
    assert report["batch_size"] == (1000 if via == "http-batch" else 2000)  # each door's own default


@pytest.mark.timeout(90)
async def test_statements_bench_costs_each_phase_on_its_own_database(servers: tuple[str, str]) -> None:
    env = {**os.environ, "SCHEDULERD_TEST_DATABASE_URL": servers[0], "SCHEDULERD_TEST_REDIS_URL": servers[1]}
    result = subprocess.run(
        ["scripts/bench", "statements", "--count", "3000"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
        timeout=80,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("calibration: "), lines[0]
    report = json.loads(lines[-1])
    phases = {p["name"]: p for p in report["phases"]}
    assert list(phases) == ["dispatch", "claim", "finish"] and report["count"] == 3000
    assert all(p["cpu_us"] > 0 and p["wal_bytes"] > 0 for p in phases.values()), phases
    # The claim of a queued execution changes no indexed column (migration 0030): mostly heap-only.
    assert phases["claim"]["hot_share"] > 0.5, phases["claim"]
    admin = await asyncpg.connect(servers[0])
    try:
        left = "SELECT count(*) FROM pg_database WHERE datname LIKE 'schedulerd_bench_statements_%'"
        assert await admin.fetchval(left) == 0
    finally:
        await admin.close()
