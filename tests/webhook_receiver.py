"""The receiver's verification function exactly as docs/webhooks.md documents it: the first
```python block of that page that defines verify_signature, executed as it stands. Tests verify
schedulerd's signatures with it, so the documented snippet cannot drift from the sender."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[1] / "docs" / "webhooks.md"


def documented_verify() -> Callable[..., bool]:
    blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), re.MULTILINE | re.DOTALL)
    [source] = [block for block in blocks if "def verify_signature" in block]
    namespace: dict[str, Any] = {}
    exec(compile(source, str(DOC), "exec"), namespace)  # noqa: S102 - our own documentation, run as the reader would
    return namespace["verify_signature"]
