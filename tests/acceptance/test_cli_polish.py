"""What a newcomer reads from the CLI: `job list` names jobs and says when a one-off is done,
`status` is a screen (and --json for machines), a closed pipe is not an error, `-` for nothing
everywhere, counts that agree with their nouns, previews that say they carry the --window
offset, and a success that does not wear an earlier attempt's error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta

from schedulerd.models import AttemptOutcome, ExecutionStatus, Outcome
from schedulerd.observer import replica_roles
from tests.conftest import REPO_ROOT


async def _run_once(store, execution_id, outcomes) -> None:  # type: ignore[no-untyped-def]
    """Claim and finish the execution once per (status, outcome, error), as a worker would."""
    for status, outcome, error in outcomes:
        (claim,) = await store.execution_claim_many([str(execution_id)], 10.0, "cli-test-worker")
        await store.execution_finish_many([Outcome(execution_id, claim.fence, "noop", status, outcome, error,
                                                   0.0 if status == ExecutionStatus.QUEUED else None)])  # fmt: skip


async def test_job_list_names_jobs_and_says_done(cli, store, make_job) -> None:  # type: ignore[no-untyped-def]
    done_job, execution = await make_job("noop", name="nightly report")
    waiting, _ = await make_job("noop", run_at=datetime.now(UTC) + timedelta(hours=1))
    await _run_once(store, execution.id, [(ExecutionStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED, None)])
    assert cli("job", "create", "--task", "noop", "--cron", "@hourly", "--name", "hourly").returncode == 0

    assert str(done_job.id) not in cli("job", "list").stdout  # done jobs are listed when asked
    listed = cli("job", "list", "--state", "all")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["ID", "NAME", "TENANT", "TASK", "SCHEDULE", "ZONE", "OVERLAP", "STATE", "LAST", "CREATED"]
    by_id = {row.split()[0]: row for row in rows}
    assert "nightly report" in by_id[str(done_job.id)] and " done " in by_id[str(done_job.id)]
    assert " succeeded " in by_id[str(done_job.id)]
    assert " enabled " in by_id[str(waiting.id)] and "None" not in listed.stdout
    as_json = {j["id"]: j for j in json.loads(cli("job", "list", "--state", "all", "--json").stdout)}
    assert (as_json[str(done_job.id)]["state"], as_json[str(done_job.id)]["last_status"]) == ("done", "succeeded")
    assert (as_json[str(waiting.id)]["state"], as_json[str(waiting.id)]["last_status"]) == ("enabled", None)


async def test_a_success_does_not_show_an_earlier_attempts_error(cli, store, make_job) -> None:  # type: ignore[no-untyped-def]
    _, execution = await make_job("noop")
    await _run_once(store, execution.id, [
        (ExecutionStatus.QUEUED, AttemptOutcome.FAILED, "RuntimeError: flaky downstream"),
        (ExecutionStatus.SUCCEEDED, AttemptOutcome.SUCCEEDED, None),
    ])  # fmt: skip
    stored = await store.execution_get(execution.id)
    assert (stored.status, stored.attempt, stored.last_error) == ("succeeded", 2, None)
    shown = cli("executions", "show", str(execution.id))
    assert shown.returncode == 0, shown.stderr
    fields = dict(line.split(None, 1) for line in shown.stdout.split("\n\n")[0].splitlines())
    assert fields["last_error"] == "-" and fields["status"] == "succeeded"
    attempts = shown.stdout.split("\n\n")[1]
    assert "flaky downstream" in attempts and "succeeded" in attempts  # kept in the history
    # A row written before this rule (its last_error kept) reads the same.
    await store.db.execute("UPDATE executions SET last_error = 'RuntimeError: old' WHERE id = $1", execution.id)
    again = cli("executions", "show", str(execution.id))
    assert "RuntimeError: old" not in again.stdout.split("\n\n")[0]
    listed = cli("executions", "list")
    assert "old" not in listed.stdout and "flaky" not in listed.stdout


async def test_executions_show_prints_dashes_where_the_list_does(cli, make_job) -> None:  # type: ignore[no-untyped-def]
    _, execution = await make_job("noop", run_at=datetime.now(UTC) + timedelta(hours=1))
    shown = cli("executions", "show", str(execution.id))
    assert shown.returncode == 0, shown.stderr
    assert "None" not in shown.stdout
    fields = dict(line.split(None, 1) for line in shown.stdout.split("\n\n")[0].splitlines())
    assert fields["worker"] == "-" and fields["first_started_at"] == "-" and fields["last_error"] == "-"
    job = cli("job", "show", str(execution.job_id))
    assert "None" not in job.stdout and job.stdout.count(" -\n") >= 3


def test_counts_agree_with_their_nouns_and_window_previews_say_so(cli) -> None:  # type: ignore[no-untyped-def]
    one = cli("job", "create", "--task", "noop", "--cron", "@every 5h")  # one run inside the 6-hour horizon
    assert one.returncode == 0, one.stderr
    assert "; 1 execution written ahead; next runs:" in one.stdout
    many = cli("job", "create", "--task", "noop", "--cron", "@hourly", "--window", "5m")
    assert "6 executions written ahead" in many.stdout or "5 executions written ahead" in many.stdout
    assert "after its scheduled time: this job's offset inside its 5 min --window" in many.stdout
    job_id = many.stdout.split()[1]
    upcoming = cli("job", "next", job_id, "--count", "2")
    assert upcoming.stdout.startswith("next runs (each ") and "--window" in upcoming.stdout.splitlines()[0]
    plain = cli("job", "create", "--task", "noop", "--cron", "@hourly")
    assert "--window" not in plain.stdout


async def test_status_is_a_screen_with_json_for_machines(cli, store, config, make_job) -> None:  # type: ignore[no-untyped-def]
    # Queued ahead of time (due in 2 minutes, inside the dispatch horizon): not a negative age.
    await make_job("noop", run_at=datetime.now(UTC) + timedelta(minutes=2))
    assert cli("job", "create", "--task", "noop", "--cron", "@hourly").returncode == 0
    started = await store.clock_now() - timedelta(minutes=5)
    await store.replica_report("replica-under-test", "host", 1234, replica_roles(config), "0.1.0", started)

    report = json.loads(cli("status", "--json").stdout)
    assert report["oldest_queued_due_age_s"] == 0 and report["oldest_queued_due_at"] is not None
    assert report["oldest_pending_due_age_s"] in (None, 0)
    (replica,) = [r for r in report["replicas"] if r["worker_id"] == "replica-under-test"]
    assert replica["roles"][: len(config.daemon.roles)] == list(config.daemon.roles) and "observer" in replica["roles"]
    assert ("api" in replica["roles"]) == config.api.enabled and ("ops" in replica["roles"]) == config.ops.enabled
    assert 299 <= replica["up_s"] <= 400

    shown = cli("status")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "{" not in text and "[" not in text and "None" not in text, text  # no Python dicts or lists
    assert "replica-under-test" in text and "observer" in text and "5 min" in text
    assert "from now (queued ahead of time" in text and "ago" in text
    assert "materialiser horizon" in text and " ahead" in text
    assert "within 1m" in text and "within 60m" in text
    assert not any(token.startswith("-") and token[1:2].isdigit() for token in text.split())  # no negative numbers


def test_a_closed_pipe_is_not_an_error(database_url, redis_url, redis_prefix) -> None:  # type: ignore[no-untyped-def]
    env = {**os.environ, "SCHEDULERD_CONFIG": str(REPO_ROOT / "config.toml"), "SCHEDULERD_DATABASE_URL": database_url,
           "SCHEDULERD_REDIS_URL": redis_url, "SCHEDULERD_REDIS_PREFIX": redis_prefix}  # fmt: skip
    for args in (["cron", "next", "* * * * *", "--count", "1000"], ["status"], ["executions", "list"], ["--help"]):
        reader_gone = subprocess.Popen([sys.executable, "-m", "schedulerd", *args], env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE)  # fmt: skip
        assert reader_gone.stdout is not None and reader_gone.stderr is not None
        reader_gone.stdout.close()  # as `| head` does once it has read enough
        stderr = reader_gone.stderr.read().decode()
        # argparse's help swallows the error itself and exits 0; our commands exit as SIGPIPE would.
        assert reader_gone.wait(60) == (0 if args == ["--help"] else 128 + signal.SIGPIPE), (args, stderr)
        assert stderr == "", (args, stderr)
    # Through a real shell pipeline, as people type it.
    piped = subprocess.run(f"{sys.executable} -m schedulerd cron next '* * * * *' --count 1000 | head -n 1",
                           shell=True, env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert piped.returncode == 0 and piped.stderr == "" and len(piped.stdout.splitlines()) == 1
