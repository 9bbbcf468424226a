"""The Lua scripts under lua/ (one per file, "name-N.lua", N the number of KEYS): found, read, and
hashed for EVALSHA. Only the queue package runs them."""

from __future__ import annotations

import hashlib
from pathlib import Path


def _lua_dir() -> Path:
    """Installed wheels carry lua/ inside the package; a source checkout has it at the root."""
    package = Path(__file__).resolve().parent.parent
    packaged = package / "lua"
    return packaged if packaged.is_dir() else package.parent / "lua"


def load_script(name: str) -> str:
    matches = sorted(_lua_dir().glob(f"{name}-*.lua"))
    if len(matches) != 1:
        raise FileNotFoundError(f"Lua script {name}-N.lua not found in {_lua_dir()}")
    return matches[0].read_text()


class Script:
    """A Lua script sent by EVALSHA; its SHA1 is computed here, so the first call needs no SCRIPT
    LOAD round trip (a server that does not know it answers NOSCRIPT and is sent it then)."""

    def __init__(self, name: str) -> None:
        self.source = load_script(name)
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()
