"""The http task's one client per process: made at first use, closed by the daemon at shutdown,
made again by a call after that (a test's next event loop)."""

from __future__ import annotations

from schedulerd.tasks import http


async def test_close_closes_the_shared_client_and_the_next_call_makes_one() -> None:
    first = http._client_for_process()
    assert http._client_for_process() is first
    await http.close()
    assert first.is_closed
    second = http._client_for_process()
    assert second is not first and not second.is_closed
    await http.close()
    await http.close()  # closing again (nothing made since) is fine
