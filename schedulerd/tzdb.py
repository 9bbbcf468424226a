"""Which IANA tz database this process resolves zones with, and its version. Reads files only.

zoneinfo looks a zone up in each directory of zoneinfo.TZPATH first and falls back to the
`tzdata` package, so the version that counts is the first TZPATH directory holding zone files
(its `tzdata.zi` says "# version 2025b"), else the package's IANA_VERSION.
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass
from functools import cache
from pathlib import Path


@dataclass(frozen=True)
class TzDatabase:
    version: str  # e.g. "2025b"; "unknown" when the source does not say
    source: str  # the directory zoneinfo reads, or "tzdata package <version>"


def _directory_version(directory: Path) -> str:
    try:
        with (directory / "tzdata.zi").open() as zi:
            first = zi.readline().split()
        if first[:2] == ["#", "version"] and len(first) == 3:
            return first[2]
    except (OSError, UnicodeDecodeError, IndexError):
        pass
    try:  # some builds ship a +VERSION file instead
        return (directory / "+VERSION").read_text().strip() or "unknown"
    except (OSError, UnicodeDecodeError):
        return "unknown"


@cache
def installed() -> TzDatabase:
    """The tz database zoneinfo uses in this process (read once: zoneinfo caches zones too, so a
    new tzdata takes effect at the next start, which is when jobs are recomputed)."""
    for directory in map(Path, zoneinfo.TZPATH):
        if (directory / "UTC").is_file() or (directory / "Etc" / "UTC").is_file():
            return TzDatabase(_directory_version(directory), str(directory))
    try:
        import tzdata  # type: ignore[import-untyped]
    except ImportError:
        return TzDatabase("unknown", "none")
    return TzDatabase(tzdata.IANA_VERSION, f"tzdata package {tzdata.__version__}")


def installed_version() -> str:
    """The version recorded on jobs (tests replace this function to simulate an upgrade)."""
    return installed().version
