"""Where Postgres and Redis are, and the one way every door (the Client, the CLI, the daemon)
connects to them: the configured URLs, else the embedded servers that `schedulerd run` started.
Starts no loop and imports no handler: the producer library depends on it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from schedulerd import embedded
from schedulerd.config import Config
from schedulerd.errors import ConfigError, SchemaError
from schedulerd.queue import DelayQueue
from schedulerd.store import Store
from schedulerd.store.store import MIGRATIONS_DIR


@dataclass(frozen=True)
class Servers:
    database_url: str
    redis_url: str
    stop: Callable[[], None] = lambda: None  # stops embedded servers this process started


def embedded_dir(config: Config) -> Path:
    """The embedded servers' folder ([embedded].data_dir, relative to the working directory)."""
    return Path(config.embedded.data_dir).expanduser().resolve()


def resolve(config: Config, *, start: bool = False) -> Servers:
    """The configured URLs; when one is unset, the embedded servers' (started if `start`, else
    those running in [embedded].data_dir). Raises ConfigError saying what to do when none run."""
    if config.database.url and config.redis.url:
        return Servers(config.database.url, config.redis.url)
    data_dir = embedded_dir(config)
    if start:
        started = embedded.start_embedded(data_dir)
        return Servers(config.database.url or started.database_url, config.redis.url or started.redis_url, started.stop)
    running = embedded.read_running(data_dir)
    if running is None:
        # The folder is the working directory's: an application's folder is not the one where
        # `schedulerd run` keeps its servers, so name the lines that point there from anywhere.
        unset = " and no ".join(n for n, url in (("database", config.database.url), ("Redis", config.redis.url)) if not url)
        raise ConfigError(
            f"no {unset} configured, and no embedded servers run in {data_dir}. Start `schedulerd run` in "
            f"{data_dir.parent}, or point this process at a running daemon's servers with the two lines "
            "`schedulerd run` prints at start (also in .schedulerd/embedded.json of the folder it runs in):\n"
            "  export SCHEDULERD_DATABASE_URL='postgresql://schedulerd:...@127.0.0.1:<port>/schedulerd'\n"
            "  export SCHEDULERD_REDIS_URL='redis://:...@127.0.0.1:<port>/0'"
        )
    return Servers(config.database.url or running[0], config.redis.url or running[1])


async def connect(
    config: Config, servers: Servers | None = None, *, pool_min: int = 1, pool_max: int | None = None,
    read_url: str = "", check_schema: bool = False, worker_pool: bool = False,
) -> tuple[Store, DelayQueue]:  # fmt: skip
    """A Store (pool of pool_min..pool_max connections, default [database].pool_max; a second
    pool on read_url when given; with worker_pool, the worker's own: Store.connect) and the
    DelayQueue [redis] describes, on `servers` (default: resolve(config)). check_schema: raise
    SchemaError, naming `schedulerd migrate`, when the database lacks a migration this code
    ships, rather than fail later on a missing relation."""
    servers = servers or resolve(config)
    store = await Store.connect(
        servers.database_url, min_size=pool_min, max_size=pool_max or config.database.pool_max, read_url=read_url,
        statement_timeout_s=config.database.statement_timeout_s, worker_pool=worker_pool,
    )
    if check_schema:
        try:
            await check_migrated(store)
        except BaseException:
            await store.close()
            raise
    return store, DelayQueue.from_config(servers.redis_url, config.redis)


async def check_migrated(store: Store) -> None:
    """Raise SchemaError naming what to run when the database lacks a shipped migration."""
    missing = await store.migration_missing()
    if not missing:
        return
    never = len(missing) == len(list(MIGRATIONS_DIR.glob("*.sql")))
    raise SchemaError(
        ("the database has no schedulerd schema" if never else f"the database lacks migration(s) {', '.join(missing)}")
        + ": run `schedulerd migrate` (or start the daemon, which migrates at start) first"
    )
