"""A replica's worker id is its own: a process refuses to start beside a live one registered
under the same [daemon].worker_id, and starts after one that stopped or went silent."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from schedulerd.daemon import claim_worker_id, judge_worker_id
from schedulerd.errors import DuplicateWorkerError
from schedulerd.store import Store


def _unique() -> str:
    return f"dup-{uuid.uuid4().hex[:8]}"  # the replicas table outlives each test


async def _claim(store: Store, worker_id: str, **where: Any) -> None:
    await claim_worker_id(store, worker_id, ["worker"], "test", datetime.now(UTC), down_after_s=15.0, **where)


async def test_a_live_replica_on_another_host_holds_its_id(store) -> None:
    worker_id = _unique()
    await store.replica_report(worker_id, "other-host", 4242, ["worker"], "test", datetime.now(UTC))
    with pytest.raises(DuplicateWorkerError, match=rf"worker_id '{worker_id}' is in use by a live replica \(other-host pid 4242"):
        await _claim(store, worker_id)
    assert (await store.replica_get(worker_id))["hostname"] == "other-host"  # left as it was


async def test_a_live_process_on_this_host_holds_its_id_and_frees_it_when_gone(store) -> None:
    worker_id = _unique()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        await store.replica_report(worker_id, socket.gethostname(), other.pid, ["worker"], "test", datetime.now(UTC))
        with pytest.raises(DuplicateWorkerError, match=worker_id):
            await _claim(store, worker_id)
    finally:
        other.kill()
        other.wait()
    # Its process is gone (a crash, then systemd's restart): the id is free at once.
    await _claim(store, worker_id)
    row = await store.replica_get(worker_id)
    assert (row["hostname"], row["pid"]) == (socket.gethostname(), os.getpid())


async def test_an_id_whose_replica_went_silent_or_never_existed_is_free(store) -> None:
    silent, new = _unique(), _unique()
    await store.replica_report(silent, "other-host", 4242, ["worker"], "test", datetime.now(UTC))
    await store.db.execute("UPDATE replicas SET last_seen_at = now() - interval '16 seconds' WHERE worker_id = $1", silent)
    await _claim(store, silent)
    await _claim(store, new)
    assert [(await store.replica_get(i))["pid"] for i in (silent, new)] == [os.getpid()] * 2
    await _claim(store, new)  # this same process again: its own row


async def test_of_two_processes_starting_at_once_with_one_id_one_starts(store, monkeypatch) -> None:
    """The read and the upsert are two statements: both processes read "no replica", then the
    upsert takes the row only as it was read, so exactly one registers and the other is refused."""
    worker_id = _unique()
    real_get, both_read, reads = store.replica_get, asyncio.Barrier(2), 0

    async def read_together(worker_id: str) -> dict[str, Any] | None:
        nonlocal reads
        row = await real_get(worker_id)
        reads += 1
        if reads <= 2:  # the first read of each: neither has registered yet
            await both_read.wait()
        return row

    monkeypatch.setattr(store, "replica_get", read_together)
    outcomes = await asyncio.gather(
        _claim(store, worker_id, hostname="host-a", pid=11), _claim(store, worker_id, hostname="host-b", pid=12),
        return_exceptions=True,
    )  # fmt: skip
    assert sorted(type(o).__name__ for o in outcomes) == ["DuplicateWorkerError", "NoneType"]
    winner = "host-a" if outcomes[0] is None else "host-b"
    assert (await real_get(worker_id))["hostname"] == winner


def test_judging_the_registered_replica() -> None:
    row = {"hostname": "h", "pid": 7, "seen_ago_s": 1.0}
    dead, alive = (lambda pid: False), (lambda pid: True)
    assert judge_worker_id(None, "h", 9, 15.0) is None
    assert judge_worker_id({**row, "seen_ago_s": 15.0}, "other", 9, 15.0, alive) is None  # silent: down
    assert judge_worker_id(row, "h", 7, 15.0, alive) is None  # this very process
    assert judge_worker_id(row, "h", 9, 15.0, dead) is None  # a restart on this host
    assert judge_worker_id(row, "h", 9, 15.0, alive) == "h pid 7, seen 1.0 s ago"
    assert judge_worker_id(row, "other", 7, 15.0, dead) == "h pid 7, seen 1.0 s ago"  # another host's pid says nothing here


async def test_the_daemon_refuses_to_start_beside_a_live_replica_of_its_id(start_daemon, store) -> None:
    """`schedulerd run` exits 1 with one line naming the id, and no traceback."""
    worker_id = _unique()
    await store.replica_report(worker_id, "other-host", 4242, ["worker"], "test", datetime.now(UTC))
    daemon = start_daemon(worker_id, SCHEDULERD_LATE_DOWN_AFTER_S="60")
    deadline = time.monotonic() + 30
    while daemon.process.poll() is None and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    log = daemon.log_text()
    assert daemon.process.returncode == 1, log
    assert f"schedulerd: error: [daemon].worker_id '{worker_id}' is in use by a live replica (other-host pid 4242" in log
    assert "Traceback" not in log
    assert (await store.replica_get(worker_id))["hostname"] == "other-host"
