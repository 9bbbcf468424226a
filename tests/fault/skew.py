"""A Postgres clock offset from the Redis server's, for one Store: the two servers on hosts whose
clocks differ. Its sessions resolve clock_timestamp() to a wrapper in a schema of their own,
searched before pg_catalog, so every statement (due times, claims, leases, the sweeper) reads the
shifted clock while the Redis pop reads TIME. The offset can change while the Store is in use."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg

from schedulerd.store import Store
from schedulerd.store.store import SERVER_SETTINGS, _init_connection, _keep_session


@dataclass
class SkewedPostgres:
    store: Store  # a Store whose Postgres clock reads offset_s away from the real one
    schema: str
    admin: asyncpg.Connection

    async def set_offset(self, offset_s: float) -> None:
        """Postgres's clock minus Redis's, in seconds: negative when Redis's host is ahead."""
        await self.admin.execute(f"UPDATE {self.schema}.clock_offset SET offset_s = $1", offset_s)


@contextlib.asynccontextmanager
async def skewed_postgres(database_url: str, offset_s: float = 0.0) -> AsyncIterator[SkewedPostgres]:
    schema = f"skew_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(database_url)
    await admin.execute(f"CREATE SCHEMA {schema}")
    await admin.execute(f"CREATE TABLE {schema}.clock_offset (offset_s float8 NOT NULL)")
    await admin.execute(f"INSERT INTO {schema}.clock_offset VALUES ($1)", offset_s)
    await admin.execute(
        f"CREATE FUNCTION {schema}.clock_timestamp() RETURNS timestamptz LANGUAGE sql VOLATILE AS $$ "
        f"SELECT pg_catalog.clock_timestamp() + make_interval(secs => (SELECT offset_s FROM {schema}.clock_offset)) $$"
    )
    pool = await asyncpg.create_pool(
        database_url, min_size=1, max_size=8, init=_init_connection, reset=_keep_session,
        server_settings={**SERVER_SETTINGS, "search_path": f"{schema}, pg_catalog, public"},
    )  # fmt: skip
    try:
        yield SkewedPostgres(Store(pool), schema, admin)
    finally:
        await pool.close()
        await admin.execute(f"DROP SCHEMA {schema} CASCADE")
        await admin.close()
