"""`schedulerd apply` as a user runs it, with a real file: --plan prints the added jobs and a
change's next-runs diff and writes nothing, the second apply changes nothing, --prune, drift
refused (exit 1) unless --force, bad input named with the file, job and key (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

FILE = """\
[[job]]
name = "nightly-report"
task = "noop"
cron = "30 1 * * *"
timezone = "Europe/London"
params = {report = "sales"}
labels = {team = "billing"}

[[job]]
name = "every-10"
task = "noop"
cron = "*/10 * * * *"
[job.retry]
max_attempts = 4
"""


def test_plan_apply_again_change_and_prune(cli, store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "schedules.toml"
    path.write_text(FILE)
    planned = cli("apply", str(path), "--plan")
    assert planned.returncode == 0, planned.stderr
    assert "2 added, 0 changed, 0 removed, 0 unchanged (plan only: nothing written)" in planned.stdout
    assert "+ nightly-report  noop  30 1 * * *" in planned.stdout
    assert json.loads(cli("job", "list", "--json").stdout) == []
    applied = cli("apply", str(path))
    assert applied.returncode == 0 and "2 added" in applied.stdout and "(applied)" in applied.stdout, applied.stderr
    again = cli("apply", str(path), "--json")
    body = json.loads(again.stdout)
    assert (body["added"], body["changed"], body["removed"]) == ([], [], [])
    assert body["source"] == "schedules" and sorted(body["unchanged"]) == ["every-10", "nightly-report"]
    path.write_text(FILE.replace('cron = "30 1 * * *"', 'cron = "30 2 * * *"').split("[[job]]\nname = \"every-10\"")[0])
    change = cli("apply", str(path), "--plan")
    assert change.returncode == 0, change.stderr
    assert "~ nightly-report" in change.stdout and "removed (" in change.stdout and "added (" in change.stdout
    assert "every-10" in change.stdout and "--prune deletes it" in change.stdout
    pruned = cli("apply", str(path), "--prune", "--json")
    body = json.loads(pruned.stdout)
    assert [c["name"] for c in body["changed"]] == ["nightly-report"] and [r["name"] for r in body["removed"]] == ["every-10"]
    listed = json.loads(cli("job", "list", "--json").stdout)
    assert [j["name"] for j in listed] == ["nightly-report"] and listed[0]["cron"] == "30 2 * * *"


def test_drift_is_refused_unless_forced(cli, store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "ops.toml"
    path.write_text('source = "ops"\n' + FILE)
    assert cli("apply", str(path)).returncode == 0
    (job,) = [j for j in json.loads(cli("job", "list", "--json").stdout) if j["name"] == "every-10"]
    assert cli("job", "update", job["id"], "--params", '{"by": "hand"}').returncode == 0
    planned = cli("apply", str(path), "--plan")
    assert planned.returncode == 0 and "! every-10" in planned.stdout and "drift" in planned.stdout
    refused = cli("apply", str(path))
    assert refused.returncode == 1 and "drift: " in refused.stderr and "every-10" in refused.stderr
    assert json.loads(cli("job", "show", job["id"], "--json").stdout)["params"] == {"by": "hand"}
    forced = cli("apply", str(path), "--force")
    assert forced.returncode == 0 and "(drifted: overwritten)" in forced.stdout, forced.stderr
    assert json.loads(cli("job", "show", job["id"], "--json").stdout)["params"] == {}


def test_bad_input_names_the_file_job_and_key_and_writes_nothing(cli, store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.toml"
    path.write_text(FILE + '\n[[job]]\nname = "third"\ntask = "noop"\ncron = "0 3 * * *"\ncolour = "red"\n')
    refused = cli("apply", str(path))
    assert refused.returncode == 2 and f"{path}: job 'third': colour: is not a field of a job" in refused.stderr
    broken = tmp_path / "broken.toml"
    broken.write_text("[[job]\n")
    assert cli("apply", str(broken)).returncode == 2
    missing = cli("apply", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2 and "cannot read it" in missing.stderr
    assert json.loads(cli("job", "list", "--json").stdout) == []
