"""sd_notify for Type=notify units: READY=1 once serving, STOPPING=1 on shutdown, and WATCHDOG=1
pings only while every loop is ticking, so systemd restarts a wedged daemon.

The protocol is one datagram to $NOTIFY_SOCKET; ten lines here spare a dependency
(python-systemd needs libsystemd headers; sdnotify is unmaintained since 2017).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable

import structlog

log = structlog.get_logger("schedulerd.systemd")


def notify(state: str) -> bool:
    """Send one notification; False when not running under systemd (no $NOTIFY_SOCKET)."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):  # abstract namespace socket
        address = "\0" + address[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.connect(address)
        sock.sendall(state.encode())
    return True


def watchdog_interval_s() -> float | None:
    """Half of WatchdogSec (systemd sets $WATCHDOG_USEC for our pid), or None when off."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or (pid and int(pid) != os.getpid()):
        return None
    return int(usec) / 1e6 / 2


async def watchdog(healthy: Callable[[], bool], stop: asyncio.Event) -> None:
    """Ping the watchdog while `healthy()`; stay silent otherwise so systemd restarts us."""
    interval_s = watchdog_interval_s()
    if interval_s is None:
        return
    while not stop.is_set():
        if healthy():
            notify("WATCHDOG=1")
        else:
            log.warning("systemd.watchdog_withheld", reason="a loop stopped ticking")
        try:
            await asyncio.wait_for(stop.wait(), interval_s)
        except TimeoutError:
            pass
