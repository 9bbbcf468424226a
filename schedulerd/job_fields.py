"""The public fields of a job, once: each one's name in JobSpec, as a Python argument (Client.enqueue,
JobRequest), in the API body, as a `schedulerd job create` flag, its one-line doc, and whether an
edit may change it. The doors derive their refusal maps, flags and descriptions from FIELDS (the
edit's too: PATCH /v1/jobs/{id}, Client.update_job, `job update`). Pure data: no I/O, no imports
of schedulerd.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class JobField:
    spec: str  # JobSpec's field (idempotency_key and debounce_*: the intake Item's); the name a refusal carries
    argument: str | None  # Client.enqueue / JobRequest keyword; None: no Python argument
    body: str | None  # path in the POST /v1/jobs/batch item ("retry.max_attempts"); None: not in the body
    flag: str | None  # `schedulerd job create` flag; None: no flag
    doc: str  # the API's description and the start of the flag's help
    flag_note: str = ""  # appended to doc in the flag's help: how the flag's text is written
    choices: tuple[str, ...] = ()  # the values it takes, when it is one of a few
    refused_as: str | None = None  # the name jobs.validate gives it in a refusal, when not `spec`
    editable: bool = False  # changed in place by an edit (Jobs.update, PATCH /v1/jobs/{id}, `job update`)


# In `job create --help` order (the flags are added in this order).
FIELDS: tuple[JobField, ...] = (
    JobField("task", "task", "task", "--task", "a registered task type (GET /v1/tasks)",
             flag_note="; required unless --from-file"),
    JobField("params", "params", "params", "--params", "JSON object passed to the handler", editable=True),
    JobField("run_at", "at", "run_at", "--at", "ISO 8601 instant with a UTC offset, e.g. 2026-12-01T09:00:00Z", editable=True),
    JobField("delay_s", "in_", None, "--in", "a delay from now (Postgres's clock)", flag_note=", e.g. 30s, 5m, 1h30m",
             refused_as="in"),
    JobField("cron", "cron", "cron", "--cron", "5-field cron expression (Quartz's L, W, #, ? accepted in the day fields), "
             "@hourly, @daily, ..., or an interval from the job's creation: @every 5m", editable=True),
    JobField("timezone", "tz", "timezone", "--tz", "IANA time zone the cron expression is read in (default UTC)", editable=True),
    JobField("misfire_policy", "misfire", "misfire.policy", "--misfire",
             "what happens to occurrences missed while the scheduler was down", choices=("skip", "run_once", "catch_up"), editable=True),
    JobField("catch_up_limit", "catch_up_limit", "misfire.catch_up_limit", "--catch-up-limit",
             "most missed runs replayed by catch_up", editable=True),
    JobField("window_s", "window", "window_s", "--window", "smear each run by a stable offset within this window",
             flag_note=", e.g. 5m", refused_as="window", editable=True),
    JobField("dst_repeated", "dst_repeated", "dst_repeated", "--dst-repeated",
             "a wall time that happens twice (fall back): run at its first pass or at both "
             "(default: the DST rule, first for fixed times, both for a cadence)", choices=("first", "both"), editable=True),
    JobField("dst_missing", "dst_missing", "dst_missing", "--dst-missing",
             "a wall time that does not exist (spring forward): run at the end of the gap or skip it "
             "(default: the DST rule, shift for fixed times, skip for a cadence)", choices=("shift", "skip"), editable=True),
    JobField("overlap", "overlap", "overlap", "--overlap",
             "an occurrence due while the job's previous execution still runs: start anyway (allow), skip it, "
             "start it when that one ends (buffer_one; at most one waits), or ask that one to stop and then "
             "start (cancel_other)", choices=("allow", "skip", "buffer_one", "cancel_other"), editable=True),
    JobField("priority", "priority", "priority", "--priority",
             "0-9, higher starts first among the tenant's due executions (default 5)", editable=True),
    JobField("concurrency_key", "concurrency_key", "concurrency.key", "--concurrency-key",
             "at most concurrency_limit executions of the tenant's jobs with this key run at once, across every replica "
             "(others wait, no attempt used; an edit to null or '' removes it)", editable=True),
    JobField("concurrency_limit", "concurrency_limit", "concurrency.limit", "--concurrency-limit",
             "with concurrency_key: how many run at once (1-100000)", editable=True),
    JobField("rate_key", "rate_key", "rate_limit.key", "--rate-key",
             "at most rate_limit starts per rate_window of the tenant's jobs with this key, across every replica "
             "(others wait for their turn, no attempt used; an edit to null or '' removes it)", editable=True),
    JobField("rate_limit", "rate_limit", "rate_limit.limit", "--rate-limit", "with rate_key: starts allowed per window",
             editable=True),
    JobField("rate_window_s", "rate_window", "rate_limit.window_s", "--rate-window", "with rate_key: the window",
             flag_note=", e.g. 1s, 1m", editable=True),
    JobField("notify_url", "notify_url", "notify.url", "--notify-url",
             "POST a notice of the events in notify.on to this URL (docs/notifications.md); the job's setting replaces "
             "its tenant's (GET /v1/notifications)", editable=True),
    JobField("notify_on", "notify_on", "notify.on", "--notify-on",
             "the events notified: failure, recovery, late, dead_letter (default failure, recovery; an empty list "
             "sends none, not even the tenant's)", flag_note=", comma-separated: failure,recovery; none for no notice",
             editable=True),
    JobField("pause_after_failures", "pause_after_failures", "pause_after_failures", "--pause-after-failures",
             "recurring jobs: pause the job after this many consecutive failed runs (1-1000; default never)",
             editable=True),
    JobField("tenant", "tenant", None, "--tenant", "the tenant the job belongs to (the API takes the token's)"),
    JobField("name", "name", "name", "--name", "a name for people, shown with the job", editable=True),
    JobField("max_attempts", "max_attempts", "retry.max_attempts", "--max-attempts",
             "attempts before the execution is failed (default [jobs].max_attempts)", editable=True),
    JobField("timeout_s", "timeout", "timeout_s", "--timeout", "handler timeout (default [jobs].timeout_s)",
             flag_note=", e.g. 30s", editable=True),
    JobField("backoff_base_s", "backoff_base_s", "retry.backoff_base_s", None, "delay cap before attempt 2", editable=True),
    JobField("backoff_factor", "backoff_factor", "retry.backoff_factor", None, "the cap grows by this factor per attempt", editable=True),
    JobField("backoff_max_s", "backoff_max_s", "retry.backoff_max_s", None, "largest delay cap", editable=True),
    JobField("labels", "labels", "labels", "--labels",
             "key: value strings to find and act on the job by (a selector: team=billing,env=prod)",
             flag_note=", written as a selector: team=billing,env=prod", editable=True),
    JobField("start_at", "start_at", "start_at", "--start-at",
             "recurring jobs: no run before this instant (ISO 8601 with a UTC offset)"),
    JobField("end_at", "end_at", "end_at", "--end-at", "recurring jobs: no run at or after this instant; then the job is done"),
    JobField("max_runs", "max_runs", "max_runs", "--max-runs",
             "recurring jobs: at most this many scheduled runs in all; then the job is done"),
    JobField("debounce_key", "debounce_key", "debounce.key", "--debounce-key",
             "one-off jobs: creates with this key (per tenant) share one execution while it has not started, "
             "due debounce_window after the last of them, with its params"),
    JobField("debounce_window_s", "debounce_window", "debounce.window_s", "--debounce-window",
             "with debounce_key: how long after the last create of the key its execution falls due (at most 1 day)",
             flag_note=", e.g. 30s", refused_as="debounce_window"),
    JobField("idempotency_key", "idempotency_key", "idempotency_key", None,
             "repeat this create safely: the same key (per tenant) returns the first result"),
)  # fmt: skip

BY_SPEC: Mapping[str, JobField] = {f.spec: f for f in FIELDS}


def renamed(column: str) -> dict[str, str]:
    """{name a refusal carries: this column's name} for every field whose name differs there, e.g.
    renamed("argument")["timezone"] == "tz" and renamed("body")["window"] == "window_s"."""
    names: dict[str, str] = {}
    for f in FIELDS:
        name = getattr(f, column)
        if name is None:
            continue
        for refused in (f.spec, f.refused_as):
            if refused is not None and refused != name:
                names[refused] = name
    return names


EDITABLE: tuple[JobField, ...] = tuple(f for f in FIELDS if f.editable)


def doc(spec: str) -> str:
    """The field's doc line (the API's description)."""
    return BY_SPEC[spec].doc
