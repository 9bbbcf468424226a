"""`schedulerd job create` with labels and bounds, and `job list`'s filters and cursor, as a user runs them."""

from __future__ import annotations

import json


def test_labels_bounds_and_finding_jobs(cli) -> None:  # type: ignore[no-untyped-def]
    for i in range(5):
        made = cli("job", "create", "--task", "noop", "--name", f"report-{i}", "--cron", "0 3 * * *",
                   "--labels", f"team={'billing' if i % 2 else 'ops'},env=prod", "--tenant", "acme")  # fmt: skip
        assert made.returncode == 0, made.stderr
    bounded = cli("job", "create", "--task", "noop", "--cron", "* * * * *", "--max-runs", "2", "--name", "twice",
                  "--tenant", "acme", "--json")  # fmt: skip
    assert bounded.returncode == 0, bounded.stderr
    job = json.loads(bounded.stdout)["job"]
    assert job["max_runs"] == 2 and job["runs_written"] == 2 and job["done_at"]
    shown = cli("job", "show", job["id"], "--json")
    assert json.loads(shown.stdout)["state"] == "done" and json.loads(shown.stdout)["runs_written"] == 2

    listed = json.loads(cli("job", "list", "--tenant", "acme", "--label", "team=billing", "--json").stdout)
    assert [j["name"] for j in listed] == ["report-3", "report-1"]
    assert json.loads(cli("job", "list", "--tenant", "acme", "--json").stdout)[0]["name"] == "report-4"  # done: hidden
    assert [j["name"] for j in json.loads(cli("job", "list", "--state", "done", "--json").stdout)] == ["twice"]

    first = cli("job", "list", "--tenant", "acme", "--name", "report-", "--limit", "3")
    assert first.returncode == 0, first.stderr
    cursor = first.stdout.splitlines()[-1].removeprefix("next page: --cursor ")
    rest = cli("job", "list", "--tenant", "acme", "--name", "report-", "--limit", "3", "--cursor", cursor, "--json")
    assert [j["name"] for j in json.loads(rest.stdout)] == ["report-1", "report-0"] and not rest.stderr

    for args, message in [
        (["job", "list", "--label", "team"], "--label: expected key=value"),
        (["job", "list", "--state", "over"], "--state: must be all or"),
        (["job", "list", "--cursor", "nope"], "--cursor: is not a cursor"),
        (["job", "create", "--task", "noop", "--max-runs", "2"], "--max-runs: applies to recurring"),
        (["job", "create", "--task", "noop", "--cron", "@hourly", "--start-at", "2030-01-01"], "--start-at:"),
        (["job", "create", "--task", "noop", "--labels", "bad key=x"], "--labels: label key"),
    ]:
        refused = cli(*args)
        assert refused.returncode == 2 and message in refused.stderr, (args, refused.stderr)
