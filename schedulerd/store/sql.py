"""Load store/queries.sql into {name: statement}; fail at import on a duplicate or unnamed query."""

from __future__ import annotations

import re
from pathlib import Path

QUERIES_PATH = Path(__file__).with_name("queries.sql")
_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def parse(text: str) -> dict[str, str]:
    """Split a queries file on its "-- name: x" lines; each statement runs to the next name."""
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        if name in queries:
            raise ValueError(f"queries.sql: query {name!r} is defined twice")
        statement = "\n".join(line for line in body.strip().splitlines() if not line.startswith("--")).strip()
        if not statement:
            raise ValueError(f"queries.sql: query {name!r} is empty")
        queries[name] = statement
    return queries


QUERIES = parse(QUERIES_PATH.read_text())
