"""A real pg_auto_failover formation of this test's own: a monitor and two data nodes (primary and
synchronous secondary) on free loopback ports in a temp dir, run as the `postgres` system user
(pg_autoctl refuses root), torn down afterwards. A node can be lost (its keeper and Postgres
SIGKILLed as one process group, optionally its data directory removed) or switched over."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from schedulerd import embedded

PG_BIN = Path("/usr/lib/postgresql/15/bin")
PACKAGES = "postgresql-15-auto-failover and pg-auto-failover-cli"
OS_USER = "postgres"
DATABASE = "app"
# The monitor's health checks, lowered so that a lost primary is failed over in seconds, not the
# ~30 s of the defaults (5 s period, 2 retries 2 s apart, unhealthy after 20 s of silence), and
# so that a demoted primary that never reports back (its host is gone) stops holding up the
# promotion after 3 s, not 30 s. Slow enough that a busy 2-core box does not fail over by itself.
MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": "1000",
    "pgautofailover.health_check_timeout": "1000",
    "pgautofailover.health_check_max_retries": "1",
    "pgautofailover.health_check_retry_delay": "500",
    "pgautofailover.node_considered_unhealthy_timeout": "3000",
    "pgautofailover.primary_demote_timeout": "3000",
}


def tools_present() -> bool:
    return bool(shutil.which("pg_autoctl") and (PG_BIN / "pg_ctl").exists() and _os_user() is not None)


def _os_user() -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(OS_USER)
    except KeyError:
        return None


@dataclass
class Node:
    name: str
    port: int
    pgdata: Path
    process: subprocess.Popen[bytes] | None = None
    killed_at: float | None = None  # epoch seconds: when kill() saw the last of it gone

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def connect(self, dbname: str = DATABASE) -> psycopg.Connection[Any]:
        return psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname=dbname, autocommit=True,
                               connect_timeout=2)  # fmt: skip

    def execute(self, sql: str, *args: Any, dbname: str = DATABASE) -> list[tuple[Any, ...]]:
        with self.connect(dbname) as connection:
            cursor = connection.execute(sql, args or None)
            return cursor.fetchall() if cursor.description else []


class Formation:
    """Monitor + n1 + n2 (`pg_autoctl create ... --run`, each its own process group). `url` is the
    multi-host URL a client is given: libpq and asyncpg try both hosts and keep the writable one."""

    def __init__(self, directory: Path, monitor_settings: dict[str, str] | None = None) -> None:
        self.directory = directory
        self.monitor_settings = MONITOR_SETTINGS if monitor_settings is None else monitor_settings
        ports = _free_ports(3)
        self.monitor = Node("monitor", ports[0], directory / "monitor")
        self.nodes = [Node(f"n{i}", ports[i], directory / f"n{i}") for i in (1, 2)]
        self.started_in_s = 0.0
        user = _os_user()
        assert user is not None
        self._uid, self._gid = user.pw_uid, user.pw_gid
        self.env = {
            "PATH": f"{PG_BIN}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(directory),
            "XDG_CONFIG_HOME": str(directory / "config"),  # else pg_autoctl writes under ~postgres
            "XDG_DATA_HOME": str(directory / "data"),
            "XDG_RUNTIME_DIR": str(directory / "run"),
            "LANG": "C.UTF-8",
            "PG_COLOR": "never",
        }

    @property
    def url(self) -> str:
        hosts = ",".join(n.address for n in self.nodes)
        return f"postgresql://postgres@{hosts}/{DATABASE}?target_session_attrs=read-write"

    @property
    def monitor_url(self) -> str:
        return f"postgres://autoctl_node@127.0.0.1:{self.monitor.port}/pg_auto_failover?sslmode=disable"

    # --- start and stop --------------------------------------------------------------------------

    def start(self) -> None:
        began = time.monotonic()
        for sub in ("config", "data", "run"):
            (self.directory / sub).mkdir(mode=0o700, exist_ok=True)
        os.chown(self.directory, self._uid, self._gid)
        for sub in ("config", "data", "run"):
            os.chown(self.directory / sub, self._uid, self._gid)
        self._run(self.monitor, ["create", "monitor"])
        self._wait(lambda: self.monitor.execute("SELECT 1", dbname="pg_auto_failover"), "the monitor answering")
        for name, value in self.monitor_settings.items():
            self.monitor.execute(f"ALTER SYSTEM SET {name} = {value}", dbname="pg_auto_failover")
        if self.monitor_settings:
            self.monitor.execute("SELECT pg_reload_conf()", dbname="pg_auto_failover")
        first, second = self.nodes
        self._run(first, ["create", "postgres", "--monitor", self.monitor_url, "--name", first.name, "--dbname", DATABASE])
        self._wait(lambda: self.states().get(first.name) == ("single", "single"), "n1 single")
        self._run(second, ["create", "postgres", "--monitor", self.monitor_url, "--name", second.name, "--dbname", DATABASE])
        # pg_basebackup waits for a spread checkpoint on the primary (minutes when idle): ask for one.
        self._wait(lambda: self._checkpoint(first) and self.settled(), "primary and secondary", timeout_s=60)
        self.started_in_s = time.monotonic() - began

    def _run(self, node: Node, command: list[str]) -> None:
        node.pgdata.parent.mkdir(parents=True, exist_ok=True)
        log = (self.directory / f"{node.name}.log").open("ab")
        node.process = subprocess.Popen(
            ["pg_autoctl", *command, "--pgdata", str(node.pgdata), "--pgport", str(node.port), "--hostname", "127.0.0.1",
             "--auth", "trust", "--no-ssl", "--run"],
            env=self.env, cwd=self.directory, user=self._uid, group=self._gid, extra_groups=[],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: killing it is losing the host
        )  # fmt: skip
        log.close()

    def _checkpoint(self, node: Node) -> bool:
        with contextlib.suppress(psycopg.Error):
            node.execute("CHECKPOINT")
        return True

    def stop(self) -> None:
        for node in [*self.nodes, self.monitor]:
            self.kill(node)
        shutil.rmtree(self.directory, ignore_errors=True)

    def kill(self, node: Node, *, every_process: bool = True) -> None:
        """SIGKILL the node. every_process: pg_autoctl's keeper and supervisor (one process group),
        Postgres and its children (each backend runs in a session of its own) all at once, as
        when the host is gone. Else only the process group (keeper and postmaster): the backends
        see their postmaster die and exit by themselves, as after an OOM kill. A lone postmaster
        killed would be restarted by its keeper in place."""
        if node.process is None:
            return
        if not every_process:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.process.pid, signal.SIGKILL)
        while every_process and (processes := _tree(node.process.pid)):
            for pid in processes:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)  # a child forked meanwhile is found on the next walk
        node.process.wait(timeout=10)
        self._wait(lambda: not _answers(node.port), f"{node.name}'s port free", timeout_s=10)
        node.killed_at = time.time()  # nothing of it answers from here on

    def remove_data(self, node: Node) -> None:
        """The disk is gone too: the node can never come back as it was."""
        assert not node.alive()
        shutil.rmtree(node.pgdata, ignore_errors=True)

    # --- the monitor's view ----------------------------------------------------------------------

    def states(self) -> dict[str, tuple[str, str]]:
        """node name -> (reported state, assigned goal state), as the monitor has them."""
        rows = self.monitor.execute("SELECT nodename, reportedstate, goalstate FROM pgautofailover.node",
                                    dbname="pg_auto_failover")  # fmt: skip
        return {name: (str(reported), str(goal)) for name, reported, goal in rows}

    def settled(self) -> bool:
        """A primary and a secondary, each in the state it was assigned."""
        states = self.states()
        return sorted(states.values()) == [("primary", "primary"), ("secondary", "secondary")]

    def primary(self) -> Node:
        """The node the monitor reports as primary (or wait_primary: the standby is away)."""
        for name, (reported, goal) in self.states().items():
            if reported == goal and reported in ("primary", "wait_primary", "single"):
                return self.node(name)
        raise AssertionError(f"no primary: {self.states()}")

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def other(self, node: Node) -> Node:
        return next(n for n in self.nodes if n is not node)

    def wait_for_new_primary(self, old: Node, timeout_s: float = 60.0) -> Node:
        """Until the other node accepts writes and the monitor reports it primary (or wait_primary);
        returns it."""
        new = self.other(old)

        def promoted() -> bool:
            reported, goal = self.states().get(new.name, ("", ""))
            return reported == goal and reported in ("primary", "wait_primary") and _writable(new)

        self._wait(promoted, f"{new.name} promoted", timeout_s)
        return new

    def switchover(self) -> None:
        """A planned switchover, as `pg_autoctl perform switchover` asks the monitor for it
        (pgautofailover.perform_failover): the primary is demoted to secondary and the secondary
        promoted. Returns once it is asked for."""
        self.monitor.execute("SELECT pgautofailover.perform_failover('default', 0)", dbname="pg_auto_failover")

    def show_state(self) -> str:
        done = subprocess.run(
            ["pg_autoctl", "show", "state", "--pgdata", str(self.monitor.pgdata)], env=self.env, user=self._uid,
            group=self._gid, extra_groups=[], capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        return done.stdout + done.stderr

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.directory.glob("*.log")))

    def _wait(self, check: Callable[[], Any], what: str, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            with contextlib.suppress(psycopg.Error, OSError):
                if check():
                    return
            if time.monotonic() > deadline:
                states = ""
                with contextlib.suppress(psycopg.Error, OSError):
                    states = str(self.states())
                raise AssertionError(f"pg_auto_failover: not {what} within {timeout_s} s {states}\n{self.logs()[-4000:]}")
            time.sleep(0.2)


def _tree(root: int) -> list[int]:
    """root and its living descendants (from /proc), or [] once root has exited."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    if not Path(f"/proc/{root}").exists() or _zombie(root):
        found: list[int] = []
    else:
        found = [root]
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


def _writable(node: Node) -> bool:
    try:
        return node.execute("SELECT NOT pg_is_in_recovery()")[0][0] is True
    except (psycopg.Error, OSError):
        return False


def _answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _free_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = embedded._free_port()  # noqa: SLF001
        if port not in ports:
            ports.append(port)
    return ports


@contextlib.contextmanager
def formation(monitor_settings: dict[str, str] | None = None) -> Iterator[Formation]:
    """A started formation, stopped and removed on leaving (also when the test fails).
    monitor_settings: instead of MONITOR_SETTINGS ({} keeps pg_auto_failover's defaults)."""
    # Not under pytest's tmp_path: the postgres user must own it and reach it.
    directory = Path(tempfile.mkdtemp(prefix="schedulerd-fault-paf-"))
    found = Formation(directory, monitor_settings)
    try:
        found.start()
        yield found
    finally:
        found.stop()
