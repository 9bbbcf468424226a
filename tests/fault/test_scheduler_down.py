"""The whole fleet down across cron occurrences: on restart each misfire policy does what the
README says, before any worker can start the missed runs."""

from __future__ import annotations

from schedulerd.jobs import Jobs, JobSpec
from tests.conftest import create_job, wait_for


async def test_restart_after_downtime_applies_each_misfire_policy(store, queue, config, start_daemon) -> None:
    jobs = Jobs(store, queue, config)
    made = {}
    for policy in ("skip", "run_once", "catch_up"):
        made[policy], _ = await create_job(jobs, JobSpec(task="noop", cron="* * * * *", misfire_policy=policy, catch_up_limit=2))
    # Nothing ran for 10 minutes: move every written occurrence 10 minutes into the past, as if
    # the fleet had been stopped since before they fell due (an id carries its scheduled_for).
    await store.db.execute(
        "UPDATE executions SET id = schedulerd_execution_id(scheduled_for - interval '10 minutes'),"
        " scheduled_for = scheduled_for - interval '10 minutes', due_at = due_at - interval '10 minutes'"
    )
    await store.db.execute("UPDATE jobs SET materialised_to = materialised_to - interval '10 minutes'")
    await queue.delete_all()

    restarted_at = await store.clock_now()
    start_daemon("replica-1")

    async def settled():
        unsettled = await store.db.fetchval(
            "SELECT count(*) FROM executions WHERE due_at < now() - interval '60 seconds' AND status IN ('pending', 'queued', 'running')"
        )
        late = await store.db.fetchval("SELECT count(*) FROM executions WHERE reason = 'late_replay' AND status = 'succeeded'")
        return unsettled == 0 and late == 3

    await wait_for(settled, timeout_s=30, interval_s=0.3)
    for policy, job in made.items():
        # The missed ones are those the judge saw overdue, up to a minute after restarted_at (the
        # daemon takes seconds to start): select by the judge's verdicts, not by a guessed cut-off.
        rows = await store.db.fetch(
            "SELECT status, reason FROM executions WHERE job_id = $1 AND scheduled_for < $2::timestamptz"
            " AND (reason IN ('late_replay', 'misfire_skip') OR scheduled_for < $2::timestamptz - interval '60 seconds')",
            job.id, restarted_at,
        )
        ran = [r for r in rows if r["status"] == "succeeded"]
        skipped = [r for r in rows if r["status"] == "skipped" and r["reason"] == "misfire_skip"]
        print(f"\n{policy}: {len(rows)} missed, {len(ran)} ran late, {len(skipped)} skipped")
        assert len(ran) == {"skip": 0, "run_once": 1, "catch_up": 2}[policy], policy
        assert len(ran) + len(skipped) == len(rows) >= 8, policy
        assert all(r["reason"] == "late_replay" for r in ran)
