"""The CLI door of tracing: `job create --traceparent` (refused, exit 2, when malformed) or the
TRACEPARENT variable (ignored, with a warning, when malformed) is stored on the one-off executions
it creates, --from-file's lines included; and `schedulerd run` traces the attempt from OTEL_*
variables alone."""

from __future__ import annotations

import json

from schedulerd.store import Store
from tests.conftest import wait_for

GOOD = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
OTHER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"


async def _stored(store: Store, job_id: str) -> list[str | None]:
    return [r["traceparent"] for r in await store.db.fetch("SELECT traceparent FROM executions WHERE job_id = $1::uuid", job_id)]


def _job_id(done) -> str:  # type: ignore[no-untyped-def]
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["job"]["id"])


async def test_the_flag_or_the_variable_is_stored_and_the_flag_wins(cli, store: Store) -> None:  # type: ignore[no-untyped-def]
    flagged = _job_id(cli("job", "create", "--task", "noop", "--traceparent", GOOD, "--json"))
    inherited = _job_id(cli("job", "create", "--task", "noop", "--json", environ={"TRACEPARENT": OTHER}))
    both = _job_id(cli("job", "create", "--task", "noop", "--traceparent", GOOD, "--json", environ={"TRACEPARENT": OTHER}))
    neither = _job_id(cli("job", "create", "--task", "noop", "--json"))

    assert [await _stored(store, j) for j in (flagged, inherited, both, neither)] == [[GOOD], [OTHER], [GOOD], [None]]


async def test_a_malformed_flag_exits_2_naming_it_and_writes_nothing(cli, store: Store) -> None:  # type: ignore[no-untyped-def]
    done = cli("job", "create", "--task", "noop", "--traceparent", GOOD.upper())
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.startswith("schedulerd: error: --traceparent: must be a W3C traceparent"), done.stderr
    assert await store.db.fetchval("SELECT count(*) FROM jobs") == 0


async def test_a_malformed_variable_is_ignored_with_a_warning(cli, store: Store) -> None:  # type: ignore[no-untyped-def]
    done = cli("job", "create", "--task", "noop", "--json", environ={"TRACEPARENT": "not-a-traceparent"})
    assert "TRACEPARENT is not a W3C traceparent; ignored" in done.stderr
    assert await _stored(store, _job_id(done)) == [None]


async def test_every_line_of_a_file_carries_it(cli, store: Store) -> None:  # type: ignore[no-untyped-def]
    lines = "\n".join(json.dumps({"task": "noop", "params": {"n": n}}) for n in range(3)) + "\n"
    done = cli("job", "create", "--from-file", "-", stdin=lines, environ={"TRACEPARENT": GOOD})
    assert done.returncode == 0, done.stderr
    assert [r["traceparent"] for r in await store.db.fetch("SELECT traceparent FROM executions")] == [GOOD] * 3


async def test_the_daemon_sets_up_the_sdk_and_the_attempt_is_the_create_s_child(cli, start_daemon) -> None:  # type: ignore[no-untyped-def]
    """`schedulerd run` with OTEL_* variables: its console exporter prints the attempt's span,
    whose parent is the span the CLI's create named."""
    daemon = start_daemon("traced", OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="scheduler-test",
                          OTEL_BSP_SCHEDULE_DELAY="50")  # fmt: skip
    done = cli("job", "create", "--task", "noop", "--traceparent", GOOD)
    assert done.returncode == 0, done.stderr

    async def printed() -> bool:
        return '"name": "schedulerd.attempt"' in daemon.log_text()

    await wait_for(printed, timeout_s=20)
    text = daemon.log_text()
    assert '"trace_id": "0x4bf92f3577b34da6a3ce929d0e0e4736"' in text and '"parent_id": "0x00f067aa0ba902b7"' in text
    assert '"service.name": "scheduler-test"' in text and '"event": "tracing.configured"' in text
