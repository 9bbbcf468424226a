"""Old import paths keep working for one release, with a DeprecationWarning naming the new one
(docs/changelog.md lists each); the public surface is what `schedulerd` exports."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

import schedulerd
from schedulerd.tasks import registry

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_the_old_registry_path_works_and_warns() -> None:
    sys.modules.pop("schedulerd.registry", None)
    with pytest.warns(DeprecationWarning, match=r"schedulerd\.registry is deprecated.*from schedulerd import task"):
        old = importlib.import_module("schedulerd.registry")
    assert old.task is registry.task and old.TaskContext is registry.TaskContext
    assert old.PermanentError is registry.PermanentError and old.RetryAfter is registry.RetryAfter


def test_a_task_module_written_against_the_old_path_registers_its_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "old_style_tasks.py").write_text(
        "from schedulerd.registry import TaskContext, task\n\n"
        "@task('deprecated_path_probe')\n"
        "async def probe(ctx: TaskContext, params: dict) -> None:\n"
        "    return None\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("schedulerd.registry", None)
    with pytest.warns(DeprecationWarning) as warned:
        importlib.import_module("old_style_tasks")
    assert warned[0].filename.endswith("old_style_tasks.py")  # the warning points at the line to change
    assert registry.get("deprecated_path_probe").name == "deprecated_path_probe"
    sys.modules.pop("old_style_tasks", None)


def test_every_public_name_is_documented() -> None:
    page = (REPO_ROOT / "docs" / "api-python.md").read_text()
    documented = set(re.findall(r"^#+ `(\w+)", page, re.MULTILINE))
    assert set(schedulerd.__all__) <= documented, sorted(set(schedulerd.__all__) - documented)


def test_every_deprecation_is_in_the_changelog() -> None:
    changelog = (REPO_ROOT / "docs" / "changelog.md").read_text()
    assert "`schedulerd.registry`" in changelog
