"""Load store/queries/*.sql (one file per entity) into {name: statement}; fail at import on a
duplicate or unnamed query, whichever files hold them.

Each statement starts with "-- name: <name>" and a purpose line; Store has one method per name.
Times come from clock_timestamp(): one clock (Postgres's) judges due times and leases, whatever
the replicas' own clocks say."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

QUERIES_DIR = Path(__file__).with_name("queries")
_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def parse(text: str, source: str = "queries") -> dict[str, str]:
    """Split a queries file on its "-- name: x" lines; each statement runs to the next name."""
    return load([(source, text)])


def load(files: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Every statement of these (file name, text) pairs; a name is unique across all of them."""
    queries: dict[str, str] = {}
    where: dict[str, str] = {}
    for source, text in files:
        parts = _NAME.split(text)
        for name, body in zip(parts[1::2], parts[2::2]):
            if name in queries:
                raise ValueError(f"{source}: query {name!r} is defined twice (also in {where[name]})")
            statement = "\n".join(line for line in body.strip().splitlines() if not line.startswith("--")).strip()
            if not statement:
                raise ValueError(f"{source}: query {name!r} is empty")
            queries[name], where[name] = statement, source
    return queries


QUERIES = load((path.name, path.read_text()) for path in sorted(QUERIES_DIR.glob("*.sql")))
