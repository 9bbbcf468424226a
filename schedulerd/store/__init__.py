"""Postgres: the only package that imports asyncpg. SQL lives in queries/*.sql, one file per entity."""

from schedulerd.store.store import (
    POSTGRES_ERRORS, REFUSED_ERRORS, RETRYABLE_ERRORS, Connection, Store, migrate, migrations_pending, parsed_id,
)

__all__ = ["POSTGRES_ERRORS", "REFUSED_ERRORS", "RETRYABLE_ERRORS", "Connection", "Store", "migrate", "migrations_pending",
           "parsed_id"]
