"""[database].url naming several hosts (every node of an HA formation): the pool and the
migrations reach the one that answers as a primary (target_session_attrs=read-write), wherever it
stands in the list. A standby's refusal of a write is retryable, and the pooled connection that
met it closes itself, so the next one looks for the primary again."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from schedulerd.store import POSTGRES_ERRORS, RETRYABLE_ERRORS, Store, migrate, migrations_pending
from schedulerd.store.store import single_host_url


def _dead_port() -> int:
    with socket.socket() as sock:  # bound then closed: nothing listens there
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _multi_host(database_url: str) -> str:
    """database_url behind a host that refuses connections, read-write asked for."""
    parts = urlsplit(database_url)
    userinfo, _, hostport = parts.netloc.rpartition("@")
    netloc = f"{userinfo + '@' if userinfo else ''}127.0.0.1:{_dead_port()},{hostport}"
    return urlunsplit(parts._replace(netloc=netloc, query="target_session_attrs=read-write"))


async def test_a_multi_host_url_reaches_the_primary_for_the_pool_and_the_migrations(database_url: str) -> None:
    url = _multi_host(database_url)
    single = await single_host_url(url)
    assert "," not in single and urlsplit(single).port == urlsplit(database_url).port
    assert await migrations_pending(url) == [] and await migrate(url) == 0
    store = await Store.connect(url, min_size=1, max_size=2)
    try:
        assert await store.server_is_primary()
        assert await store.clock_now()
    finally:
        await store.close()


async def test_a_standbys_refusal_of_a_write_is_retryable(database_url: str) -> None:
    connection = await asyncpg.connect(database_url)
    try:
        async with connection.transaction(readonly=True):  # refuses writes as a standby does (SQLSTATE 25006)
            try:
                await connection.execute("CREATE TEMP TABLE refused (x int)")
            except RETRYABLE_ERRORS as exc:
                assert isinstance(exc, asyncpg.ReadOnlySQLTransactionError)
            else:
                raise AssertionError("a read-only transaction accepted a write")
    finally:
        await connection.close()


async def test_a_pooled_connection_that_refused_a_write_as_read_only_is_not_handed_out_again(database_url: str) -> None:
    """A connection whose server turned read-only under it (a demoted primary) is closed by the
    refusal, on every path, so the retry gets a fresh connection (to the primary, with a
    multi-host URL). Here the session is made read-only by hand: the pool keeps session state
    (Store's reset skips RESET ALL), so without the close every later write would be refused."""
    store = await Store.connect(database_url, min_size=1, max_size=1)
    try:
        async with store.db.acquire() as connection:
            await connection.execute("SET default_transaction_read_only = on")
            read_only_pid = await connection.fetchval("SELECT pg_backend_pid()")
        try:
            await store.db.execute("CREATE TEMP TABLE refused (x int)")
        except RETRYABLE_ERRORS as exc:
            assert isinstance(exc, asyncpg.ReadOnlySQLTransactionError)
        else:
            raise AssertionError("a read-only session accepted a write")
        assert await store.db.fetchval("SELECT pg_backend_pid()") != read_only_pid
        await store.db.execute("CREATE TEMP TABLE accepted (x int)")
    finally:
        await store.close()


def test_driver_errors_of_a_failover_are_transient_and_close_the_connection() -> None:
    # No host of a multi-host URL writable yet; a connection left mid-protocol by a dead server.
    assert issubclass(asyncpg.TargetServerAttributeNotMatched, asyncpg.InternalClientError)
    assert asyncpg.InternalClientError in POSTGRES_ERRORS and asyncpg.InternalClientError in RETRYABLE_ERRORS


async def test_a_pooled_connection_decodes_an_empty_jsonb_object_as_a_fresh_dict_each_time(store: Store) -> None:
    """The jsonb decoder's shortcut for {} (a job without params) gives what json.loads gives: a
    new dict per value, so a handler changing its params changes no other's."""
    values = ["{}", "{}", '{"a": [1, 2.5, null]}', "[]", '"{}"']
    rows = await store.db.fetch("SELECT v::jsonb AS v FROM unnest($1::text[]) WITH ORDINALITY AS t(v, n) ORDER BY n", values)
    first, second, nested, array, text = (r["v"] for r in rows)
    assert first == second == {} and first is not second
    first["changed"] = True
    assert second == {}
    assert (nested, array, text) == ({"a": [1, 2.5, None]}, [], "{}")
