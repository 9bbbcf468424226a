"""The layout a newcomer relies on, checked from the source (ast, no imports run): no import cycle
in the package, core/ pure, one place for each driver, I/O modules named apart from their pure
halves, and the README's Layout block listing every module."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE = REPO_ROOT / "schedulerd"
# Standard-library modules that do I/O or concurrency: core/ takes the instant and the data as
# arguments and returns values, so it needs none of them.
IO_STDLIB = {
    "asyncio", "concurrent", "http", "io", "multiprocessing", "os", "pathlib", "select", "selectors", "shutil", "signal",
    "socket", "sqlite3", "ssl", "subprocess", "tempfile", "threading", "time", "urllib.request",
}  # fmt: skip
# Who may import each driver (module names; a package name covers its modules).
DRIVERS = {
    "asyncpg": {"schedulerd.store"},
    "yoyo": {"schedulerd.store"},
    "psycopg": {"schedulerd.store", "schedulerd.embedded"},  # embedded waits for its Postgres to answer
    # queue/ owns every key under the deployment's hash tag and the Lua scripts; embedded waits for its Redis to answer.
    "redis": {"schedulerd.queue", "schedulerd.embedded"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, at any depth of the file (a function's lazy import counts),
    except under `if TYPE_CHECKING:`. `from a import b` names a.b when that is a module."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = []
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                found.add(full if full in MODULES else node.module)
    return found


IMPORTS = {name: _imports(path) for name, path in MODULES.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of the graph, as a path that ends where it starts; None when there is none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_package_has_no_import_cycle() -> None:
    graph = {name: {i for i in imports if i in MODULES and i != name} for name, imports in IMPORTS.items()}
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_finder_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("name", [n for n in MODULES if n.startswith("schedulerd.core")])
def test_core_imports_nothing_that_does_io(name: str) -> None:
    """core/ may import the standard library's pure parts, other core modules and the errors."""
    for imported in IMPORTS[name]:
        top = imported.split(".")[0]
        if top == "schedulerd":
            assert imported.startswith("schedulerd.core") or imported == "schedulerd.errors", (name, imported)
        else:
            assert top in sys.stdlib_module_names, f"{name} imports {imported}, which is not the standard library"
            assert top not in IO_STDLIB and imported not in IO_STDLIB, f"{name} imports {imported}, which does I/O"


@pytest.mark.parametrize("driver", sorted(DRIVERS))
def test_each_driver_is_imported_only_where_it_belongs(driver: str) -> None:
    allowed = DRIVERS[driver]
    importers = {n for n, imports in IMPORTS.items() if any(i == driver or i.startswith(driver + ".") for i in imports)}
    strays = {n for n in importers if not any(n == a or n.startswith(a + ".") for a in allowed)}
    assert not strays, f"{driver} is imported by {sorted(strays)}; only {sorted(allowed)} may"


def test_io_modules_are_named_apart_from_their_pure_halves() -> None:
    """Inside late_runs.py the word `late` means core/late.py only: no module outside core/ is named
    like a core module (or its plural)."""
    core = {n.rsplit(".", 1)[1] for n in MODULES if n.startswith("schedulerd.core.")}
    clashes = sorted(n for n in MODULES if not n.startswith("schedulerd.core") and n.rsplit(".", 1)[-1].removesuffix("s") in core)
    assert not clashes, clashes


def _layout_listing(readme: str) -> dict[str, set[str]]:
    """{directory under the repository: the .py files the README's Layout block lists in it}. A line
    whose first word ends in "/" opens a directory (indented: inside schedulerd/); the lines after it
    continue it."""
    block = re.search(r"^## Layout\n+```\n(.*?)^```", readme, re.MULTILINE | re.DOTALL)
    assert block, "README.md has no fenced block under ## Layout"
    listing: dict[str, set[str]] = {}
    current = ""
    for line in block.group(1).splitlines():
        first = line.split()[0] if line.strip() else ""
        if first.endswith("/") and line[: len(line) - len(line.lstrip())] in ("", "  "):
            current = first if not line.startswith(" ") else "schedulerd/" + first
            listing.setdefault(current, set())
        listing.setdefault(current, set()).update(re.findall(r"(?<![\w/.*])([\w]+\.py)\b", line))
    return listing


def test_the_readme_layout_lists_every_module() -> None:
    listing = _layout_listing((REPO_ROOT / "README.md").read_text())
    actual: dict[str, set[str]] = {}
    for path in MODULES.values():
        directory = path.parent.relative_to(REPO_ROOT).as_posix() + "/"
        if path.name == "__init__.py" and directory != "schedulerd/":
            continue  # a subpackage's __init__ only opens it
        actual.setdefault(directory, set()).add(path.name)
    for directory in sorted(set(actual) | {d for d in listing if d.startswith("schedulerd/")}):
        missing, stale = actual.get(directory, set()) - listing.get(directory, set()), listing.get(directory, set()) - actual.get(directory, set())
        assert not missing, f"README.md's Layout does not list {sorted(missing)} under {directory}"
        assert not stale, f"README.md's Layout lists {sorted(stale)} under {directory}, which has no such module"


def test_the_layout_reader_tells_directories_apart() -> None:
    readme = "## Layout\n\n```\nschedulerd/   a.py (beside core/d.py)\n              e.py\n  core/       f.py\nlua/   x.py\n```\n"
    assert _layout_listing(readme) == {"schedulerd/": {"a.py", "e.py"}, "schedulerd/core/": {"f.py"}, "lua/": {"x.py"}}
