"""What a tenant may see of an attempt's error: the exception's type and message, never the
traceback through schedulerd's files (that stays in the log and on the operator's side: the CLI
and the attempts table). Pure: no I/O."""

from __future__ import annotations

import re

_FRAME = re.compile(r'^\s+File "')


def tenant_error(error: str | None) -> str | None:
    """The error without traceback frames: the last exception's "Type: message" lines.

    >>> tenant_error('Traceback (most recent call last):\\n  File "/opt/schedulerd/worker.py", line 9, in run\\n'
    ...              '    await handler()\\nRuntimeError: boom')
    'RuntimeError: boom'
    >>> tenant_error("http: POST https://x.example/ answered 503")
    'http: POST https://x.example/ answered 503'
    """
    if error is None:
        return None
    lines = error.splitlines()
    if not any(_FRAME.match(line) for line in lines):
        return error
    # The message is what follows the last indented line (frames and their source lines are indented).
    last_indented = max(i for i, line in enumerate(lines) if line.startswith(" "))
    message = "\n".join(lines[last_indented + 1 :]).strip()
    return message or "the handler failed (details in the server log)"
