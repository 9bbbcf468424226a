"""The README stays a newcomer's page (at most README_MAX_LINES), and every relative link in it
and in docs/ leads somewhere: the file exists and, where the link names an anchor, the target
has a heading with that anchor (GitHub's rule: lower case, punctuation dropped, spaces to -)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250
PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, every character but letters, digits, spaces, '-'
    and '_' dropped, each space a '-'; a repeated heading gets -1, -2, ..."""
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", FENCE.sub("", page.read_text()), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(page: Path) -> list[str]:
    return [target for target in LINK.findall(FENCE.sub("", page.read_text())) if not re.match(r"[a-z]+:", target)]


def test_the_readme_is_short() -> None:
    lines = (REPO_ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move reference text into docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no file {linked}")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading with anchor #{anchor} in {linked.name}")
    assert broken == []


def test_the_docs_are_linked_from_the_readme() -> None:
    linked = {(REPO_ROOT / t.partition("#")[0]).resolve() for t in relative_links(REPO_ROOT / "README.md")}
    orphans = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert orphans == [], "every docs/ page is reachable from the README"


def test_the_anchor_rule() -> None:
    page = REPO_ROOT / "docs" / "schedules.md"
    assert {"the-dst-rule", "misfires", "missed-and-late-runs-why-didnt-job-x-run-at-0200"} <= anchors(page)
