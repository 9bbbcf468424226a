"""Postgres: the only package that imports asyncpg. SQL lives in queries.sql."""

from schedulerd.store.store import Store, migrate, migrations_pending

__all__ = ["Store", "migrate", "migrations_pending"]
