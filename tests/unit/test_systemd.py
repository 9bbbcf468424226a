"""The unit file verifies, and the sd_notify datagrams are what systemd expects."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from schedulerd import health, systemd

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_unit_file_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    # The unit names /opt/schedulerd/bin/schedulerd; verify checks the binary exists, so point it
    # at this checkout's.
    unit = (REPO_ROOT / "scripts" / "schedulerd.service").read_text()
    binary = Path(sys.executable).with_name("schedulerd")
    (tmp_path / "schedulerd@.service").write_text(unit.replace("/opt/schedulerd/bin/schedulerd", str(binary)))
    verified = subprocess.run(["systemd-analyze", "verify", str(tmp_path / "schedulerd@.service")], capture_output=True, text=True)
    assert verified.returncode == 0 and verified.stderr == "", verified.stderr


def test_notify_sends_one_datagram(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as receiver:
        receiver.bind(path)
        monkeypatch.setenv("NOTIFY_SOCKET", path)
        assert systemd.notify("READY=1")
        assert receiver.recv(64) == b"READY=1"
    monkeypatch.delenv("NOTIFY_SOCKET")
    assert not systemd.notify("READY=1")


async def test_watchdog_pings_only_while_healthy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = str(tmp_path / "notify.sock")
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(path)
    receiver.setblocking(False)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    monkeypatch.setenv("WATCHDOG_USEC", "100000")  # ping every 50 ms
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    healthy = [True]
    stop = asyncio.Event()
    task = asyncio.create_task(systemd.watchdog(lambda: healthy[0], stop))
    await asyncio.sleep(0.12)
    healthy[0] = False
    pings = _drain(receiver)
    await asyncio.sleep(0.12)
    stop.set()
    await task
    assert pings >= 2 and _drain(receiver) == 0
    receiver.close()


def _drain(receiver: socket.socket) -> int:
    count = 0
    while True:
        try:
            assert receiver.recv(64) == b"WATCHDOG=1"
        except BlockingIOError:
            return count
        count += 1


def test_loop_health_reports_stale_and_silent_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    health.forget()
    health.tick("worker")
    loops = health.LoopHealth({"worker": 5.0, "sweeper": 5.0})
    assert loops.stale() == {"sweeper": None}
    later = time.monotonic() + 6
    assert list(loops.stale(later)) == ["worker", "sweeper"] and loops.stale(later)["worker"] >= 6
