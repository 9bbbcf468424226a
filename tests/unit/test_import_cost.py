"""What a replica holds for its whole life starts with what it imports: the daemon loads the API's
web stack, the http client, the migration tool and the cipher library only when it uses them
(each is megabytes of every replica's RSS; docs/benchmarks.md "Memory")."""

from __future__ import annotations

import subprocess
import sys

LOADED_ON_USE = ("fastapi", "starlette", "pydantic", "uvicorn", "httpx", "yoyo", "psycopg", "cryptography.hazmat.primitives.ciphers")


def test_the_daemon_imports_none_of_what_it_loads_on_use() -> None:
    probe = "import sys, schedulerd.daemon; print(' '.join(m for m in sys.argv[1:] if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", probe, *LOADED_ON_USE], capture_output=True, text=True, check=True, timeout=60)
    assert loaded.stdout.split() == []
