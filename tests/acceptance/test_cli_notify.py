"""`job create` / `job update` with --notify-url, --notify-on and --pause-after-failures as
subprocesses: stored, changed and removed; a refused URL (a private address class), an unknown
event or a bad count exits 2 naming the flag, nothing written."""

from __future__ import annotations

import json

import pytest

from tests.acceptance.test_cli_bad_input import _refused


async def test_create_update_and_remove_notifications(cli, store) -> None:  # type: ignore[no-untyped-def]
    made = cli("job", "create", "--task", "noop", "--cron", "@daily", "--notify-url", "https://hooks.example.com/x",
               "--notify-on", "failure,late", "--pause-after-failures", "3", "--json")  # fmt: skip
    assert made.returncode == 0, made.stderr
    job_id = json.loads(made.stdout)["job"]["id"]
    row = await store.db.fetchrow("SELECT notify_url, notify_on, pause_after_failures FROM jobs WHERE id = $1", job_id)
    assert tuple(row) == ("https://hooks.example.com/x", ["failure", "late"], 3)

    assert cli("job", "update", job_id, "--notify-on", "recovery", "--pause-after-failures", "5").returncode == 0
    row = await store.db.fetchrow("SELECT notify_url, notify_on, pause_after_failures FROM jobs WHERE id = $1", job_id)
    assert tuple(row) == ("https://hooks.example.com/x", ["recovery"], 5)
    opted_out = cli("job", "update", job_id, "--notify-url", "", "--notify-on", "none")
    assert opted_out.returncode == 0, opted_out.stderr
    assert await store.db.fetchval("SELECT notify_on FROM jobs WHERE id = $1", job_id) == []
    removed = cli("job", "update", job_id, "--notify-on", "", "--pause-after-failures", "")
    assert removed.returncode == 0, removed.stderr
    row = await store.db.fetchrow("SELECT notify_url, notify_on, pause_after_failures FROM jobs WHERE id = $1", job_id)
    assert tuple(row) == (None, None, None)

    url_only = cli("job", "create", "--task", "noop", "--cron", "@daily", "--notify-url", "https://hooks.example.com/y", "--json")
    shown = json.loads(url_only.stdout)["job"]
    assert (shown["notify_url"], shown["notify_on"]) == ("https://hooks.example.com/y", ["failure", "recovery"])


@pytest.mark.parametrize(
    ("flags", "named"),
    [(["--notify-url", "http://127.0.0.1:8080/hook"], "--notify-url"), (["--notify-url", "http://10.0.0.1/"], "--notify-url"),
     (["--notify-url", "http://localhost/"], "--notify-url"), (["--notify-url", "ftp://example.com/"], "--notify-url"),
     (["--notify-on", "failure"], "--notify-url"),
     (["--notify-url", "https://hooks.example.com/", "--notify-on", "failure,soon"], "--notify-on"),
     (["--pause-after-failures", "0"], "--pause-after-failures"), (["--pause-after-failures", "three"], "--pause-after-failures")],
)  # fmt: skip
async def test_bad_notification_flags_exit_2_naming_the_flag(cli, store, flags, named) -> None:  # type: ignore[no-untyped-def]
    _refused(cli("job", "create", "--task", "noop", "--cron", "@daily", *flags), named)
    assert await store.db.fetchval("SELECT count(*) FROM jobs") == 0
