"""Debian's Chromium, driven by Playwright (the project installs it; tests never download a browser)."""

from __future__ import annotations

import os

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


@pytest.fixture
def chromium() -> str:
    if not os.path.exists(CHROMIUM):
        message = f"{CHROMIUM} is missing: scripts/install installs Debian's chromium when run as root"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    return CHROMIUM
