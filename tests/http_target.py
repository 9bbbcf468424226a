"""A local HTTP server for the http task's tests: answers from a script the test sets, records
every request it receives. Runs in a thread so handlers on the test's event loop can call it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.webhook_receiver import documented_verify


@dataclass
class Reply:
    status: int = 200
    body: bytes = b"ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    trickle_s: float = 0.0  # pause before each byte of the body (a target that answers one byte at a time)


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Target:
    """`failing` on: every request gets `failure`; off: `success`. `script` replies are used first.
    With `signing_secrets` set, a request whose X-Schedulerd-Signature does not verify (with the
    function docs/webhooks.md documents) gets a 401 instead, as a verifying receiver answers."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.script: list[Reply] = []
        self.success = Reply()
        self.failure = Reply(503, b"down for the test")
        self.failing = False
        self.signing_secrets: list[str] | None = None
        self._lock = threading.Lock()
        verify_signature = documented_verify()
        target = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                secrets = target.signing_secrets
                forged = secrets is not None and not verify_signature(
                    self.headers.get("X-Schedulerd-Signature", ""), secrets, self.command, self.path, body,
                    self.headers.get("Idempotency-Key", ""), self.headers.get("X-Fence-Token", ""),
                )  # fmt: skip
                with target._lock:
                    target.requests.append(Received(self.command, self.path, dict(self.headers), body))
                    if forged:
                        reply = Reply(401, b"signature does not verify")
                    else:
                        reply = target.script.pop(0) if target.script else (target.failure if target.failing else target.success)
                if reply.delay_s:
                    threading.Event().wait(reply.delay_s)
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                try:
                    if reply.trickle_s:
                        for i in range(len(reply.body)):
                            threading.Event().wait(reply.trickle_s)
                            self.wfile.write(reply.body[i : i + 1])
                            self.wfile.flush()
                    else:
                        self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first (a timeout test): expected

            do_GET = do_POST = do_PUT = do_DELETE = _answer

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - keep test output quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def count(self, path: str | None = None) -> int:
        with self._lock:
            return sum(1 for r in self.requests if path is None or r.path == path)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve() -> Iterator[Target]:
    target = Target()
    try:
        yield target
    finally:
        target.close()
