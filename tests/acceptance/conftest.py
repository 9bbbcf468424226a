"""The CLI as a user runs it: `python -m schedulerd ...` in a subprocess, on this test's servers."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from tests.conftest import REPO_ROOT

RunCli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cli(database_url: str, redis_url: str, redis_prefix: str) -> RunCli:
    env = {
        **os.environ, "SCHEDULERD_CONFIG": str(REPO_ROOT / "config.toml"), "SCHEDULERD_DATABASE_URL": database_url,
        "SCHEDULERD_REDIS_URL": redis_url, "SCHEDULERD_REDIS_PREFIX": redis_prefix,
    }  # fmt: skip

    def run(*args: str, stdin: str | None = None, environ: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        """`environ`: variables set for this run beside the test's."""
        return subprocess.run([sys.executable, "-m", "schedulerd", *args], env={**env, **(environ or {})},
                              capture_output=True, text=True, timeout=60, input=stdin)  # fmt: skip

    return run
