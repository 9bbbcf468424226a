"""Static checks: store/queries/*.sql parse with names unique across files; every Lua script documents its KEYS and ARGV."""

import re
from pathlib import Path

import pytest

from schedulerd.store import sql
from schedulerd.store.store import Store

LUA_DIR = Path(__file__).resolve().parents[2] / "lua"


def test_every_query_has_a_store_method() -> None:
    assert set(sql.QUERIES) - {"job_insert", "execution_insert"} <= set(dir(Store))


def test_duplicate_query_names_are_refused() -> None:
    with pytest.raises(ValueError, match="defined twice"):
        sql.parse("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n")


def test_a_name_is_unique_across_files() -> None:
    with pytest.raises(ValueError, match=r"b.sql: query 'a' is defined twice \(also in a.sql\)"):
        sql.load([("a.sql", "-- name: a\nSELECT 1;\n"), ("b.sql", "-- name: a\nSELECT 2;\n")])


def test_every_queries_file_is_loaded() -> None:
    """The lint below sees every statement: each file's names are in QUERIES."""
    files = sorted(sql.QUERIES_DIR.glob("*.sql"))
    assert len(files) > 1
    for path in files:
        names = re.findall(r"^-- name: (\w+)", path.read_text(), re.MULTILINE)
        assert names and set(names) <= set(sql.QUERIES), path.name


@pytest.mark.parametrize("path", sorted(LUA_DIR.glob("*.lua")), ids=lambda p: p.name)
def test_lua_header_documents_every_key(path: Path) -> None:
    """The file name ends in its interface version (-N.lua, bumped when KEYS or ARGV change);
    the header documents KEYS[1..n] one by one and, for a script taking a variable number of
    keys, the rest as KEYS[n+1..]. Every key a script touches comes in KEYS (Redis Cluster)."""
    text = path.read_text()
    assert re.search(r"-\d+\.lua$", path.name)
    header = text.split("]]")[0]
    documented = sorted({int(k) for k in re.findall(r"KEYS\[(\d+)\]\s", header)})
    assert documented == list(range(1, len(documented) + 1)) and documented
    variadic = sorted(set(re.findall(r"KEYS\[(\d+)\.\.\]", header)))
    assert variadic in ([], [str(len(documented) + 1)])
    assert re.search(r"ARGV\[1\]", text) and "Returns:" in text


@pytest.mark.parametrize("name", [n for n, q in sql.QUERIES.items() if re.search(r"(UPDATE|DELETE FROM) executions", q)])
def test_every_write_to_executions_locks_in_id_order_or_skips_locked(name: str) -> None:
    """Two statements locking the same executions in different orders deadlock under load
    (tests/integration/test_lock_order.py shows it): each one locks through a CTE ordered by id,
    or one row at a time from its input sorted by id (a LATERAL lookup by id), or takes only rows
    nobody holds (SKIP LOCKED), which never waits."""
    query = sql.QUERIES[name]
    in_order = re.search(r"ORDER BY (e\.)?id FOR (NO KEY )?UPDATE", query)
    one_by_one = re.search(r"ORDER BY id\) \w+\s+CROSS JOIN LATERAL \((?:(?!\) \w+\n).)*LIMIT 1 FOR NO KEY UPDATE\)", query, re.S)
    assert in_order or one_by_one or "SKIP LOCKED" in query, name
