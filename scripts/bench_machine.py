"""The machine's calibration line, printed by every benchmark run so that a figure can be set
beside a reader's own machine: the CPU model, how long a fixed CPython loop takes here, and how
many rows a second Postgres updates here in the statement shape the claim and the finish use
(`UPDATE ... WHERE id = ANY($1)`, 1,000 ids a statement, one connection, committed each time).
An execution costs two such row updates, so half the last figure is this box's Postgres ceiling
in executions per second."""

from __future__ import annotations

import asyncio
import os
import platform
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import asyncpg

LOOP_ITERATIONS = 10_000_000
UPDATE_ROWS = 100_000
UPDATE_BATCH = 1_000
UPDATE_SECONDS = 2.0


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def loop_seconds() -> float:
    """The best of three runs of a bare 10M-iteration `for` loop: CPython's speed on this core."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(LOOP_ITERATIONS):
            pass
        best = min(best, time.perf_counter() - t0)
    return best


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


async def postgres_update_rows_per_s(admin_url: str) -> float:
    """Rows a second updated by batched `UPDATE ... WHERE id = ANY($1)` on a throwaway database."""
    name = f"schedulerd_calibrate_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(admin_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            conn = await asyncpg.connect(_with_database(admin_url, name))
            try:
                await conn.execute("CREATE TABLE rows (id bigint PRIMARY KEY, status text NOT NULL, n int NOT NULL)")
                await conn.execute("INSERT INTO rows SELECT g, 'queued', 0 FROM generate_series(1, $1) g", UPDATE_ROWS)
                await conn.execute("VACUUM ANALYZE rows")
                update = await conn.prepare("UPDATE rows SET status = 'running', n = n + 1 WHERE id = ANY($1::bigint[])")
                batches = [list(range(start, start + UPDATE_BATCH)) for start in range(1, UPDATE_ROWS, UPDATE_BATCH)]
                done, t0 = 0, time.perf_counter()
                while time.perf_counter() - t0 < UPDATE_SECONDS:
                    await update.fetch(batches[(done // UPDATE_BATCH) % len(batches)])
                    done += UPDATE_BATCH
                return done / (time.perf_counter() - t0)
            finally:
                await conn.close()
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


def calibration_line(admin_url: str) -> str:
    rows_per_s = asyncio.run(postgres_update_rows_per_s(admin_url))
    return (f"calibration: {cpu_model()}, {os.cpu_count()} cores; a {LOOP_ITERATIONS // 1_000_000}M-iteration "
            f"Python loop {loop_seconds():.2f} s; Postgres batched UPDATE {rows_per_s:,.0f} rows/s on one "
            f"connection (ceiling ~{rows_per_s / 2:,.0f} executions/s)")  # fmt: skip
