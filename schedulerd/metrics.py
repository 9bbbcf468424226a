"""Prometheus metrics of one daemon process (each replica serves its own /metrics).

Names follow Prometheus conventions: schedulerd_<what>_<unit>, counters end in _total. Gauges
about shared state (queue depth, horizon) are sampled by the observer loop; the rest are
updated where the event happens.
"""

from __future__ import annotations

from functools import cache

from prometheus_client import Counter, Gauge, Histogram

# Start lag: first claim of an attempt minus its due time, on Postgres's clock.
START_LAG = Histogram(
    "schedulerd_start_lag_seconds",
    "Attempt start minus due time (scheduled_for, or the retry time), by task",
    ["task"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300),
)
FINISHED = Counter("schedulerd_executions_finished_total", "Attempts finished, by task and outcome", ["task", "outcome"])
ATTEMPTS = Counter("schedulerd_attempts_total", "Attempts started (claims won), by task", ["task"])
RETRIES = Counter("schedulerd_retries_total", "Failed attempts scheduled to run again, by task", ["task"])
CLAIM_CONFLICTS = Counter(
    "schedulerd_claim_conflicts_total", "Popped executions not claimed (claimed by another worker, finished, or not due)"
)
FENCED_OUT = Counter("schedulerd_outcomes_fenced_out_total", "Outcomes refused because the lease had been reclaimed")
LEASE_RECLAIMS = Counter("schedulerd_lease_reclaims_total", "Expired leases handed back by the sweeper, by result", ["result"])
QUEUE_REPAIRS = Counter("schedulerd_queue_repairs_total", "Executions put back into Redis by the sweeper, by cause", ["cause"])
MISFIRES = Counter("schedulerd_misfires_total", "Missed cron occurrences, by decision (skipped, replayed)", ["decision"])
REDIS_FALLBACK = Gauge("schedulerd_redis_fallback", "1 while this worker claims from Postgres because Redis is unreachable")
IN_FLIGHT = Gauge("schedulerd_in_flight", "Executions this process is running now")

QUEUE_DEPTH = Gauge("schedulerd_queue_depth", "Members of the Redis delay queue")
OLDEST_DUE_AGE = Gauge("schedulerd_oldest_due_age_seconds", "Now minus the earliest due time in the delay queue (negative: nothing due)")
PENDING_IN_HORIZON_CAP = 10_000  # counted up to this: the count reads a row per execution (stats.sql)
PENDING_IN_HORIZON = Gauge(
    "schedulerd_pending_in_horizon",
    f"Executions pending or queued and due within the dispatch horizon (counted up to {PENDING_IN_HORIZON_CAP:,})",
)
HORIZON = Gauge("schedulerd_materialiser_horizon_seconds", "Least-advanced cron cursor minus now (alert well before 0)")
ROUND_TRIP = Gauge("schedulerd_round_trip_seconds", "Last measured round trip, by server (postgres, redis)", ["server"])
CLOCK_SKEW = Gauge("schedulerd_clock_skew_seconds", "This host's clock minus the server's, by server (postgres, redis)", ["server"])
PARTITIONS = Counter(
    "schedulerd_partitions_total", "Daily partitions of executions and attempts, by action (created, exported, dropped)", ["action"]
)
LOOP_LAST_TICK = Gauge("schedulerd_loop_last_tick_timestamp_seconds", "When each loop last completed a pass", ["loop"])


# Per-execution hot path: resolve a label set once, not on every attempt (labels() hashes and
# locks; it cost ~6% of a busy worker).
@cache
def attempts(task: str) -> Counter:
    return ATTEMPTS.labels(task)


@cache
def start_lag(task: str) -> Histogram:
    return START_LAG.labels(task)


@cache
def finished(task: str, outcome: str) -> Counter:
    return FINISHED.labels(task, outcome)

# Protection under load (per-task limits, rate limits, circuit breakers).
PARKED = Counter(
    "schedulerd_executions_parked_total",
    "Executions held back unrun, attempt not used (task_limit, breaker_open, admit_error, rate_limited, "
    "concurrency_limit: waiting for a slot), by task and reason",
    ["task", "reason"],
)
# A park moves the due time, from which start lag is measured: the wait parks add is counted
# here, so schedulerd_start_lag_seconds stays the scheduler's own lag.
FLOW_WAIT = Histogram(
    "schedulerd_flow_wait_seconds",
    "Wait a park added to a claimed execution (its new due time minus now), by park reason",
    ["reason"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600),
)
FLOW_RELEASED = Counter(
    "schedulerd_concurrency_released_total", "Executions that waited for a concurrency slot and were let start (docs/tasks.md)"
)
PARKED_NOW = Gauge(
    "schedulerd_parked_by_reason", "Executions held back unrun now, attempt not used, by reason (parked by a worker "
    "and not due again yet: task_limit, rate_limited, breaker_open, admit_error; waiting for a slot: concurrency_limit)",
    ["reason"],
)
FLOW_IN_FLIGHT = Gauge(
    "schedulerd_concurrency_in_flight",
    "Executions running now in a limit an operator named ([concurrency].watch), with the limit", ["scope", "limit"],
)
BREAKER_OPEN = Gauge(
    "schedulerd_breaker_open", "1 while a circuit breaker is open or half open (as this replica last saw it)", ["task", "host"]
)
BREAKER_TRANSITIONS = Counter(
    "schedulerd_breaker_transitions_total", "Circuit breaker state changes this replica caused, by new state", ["task", "host", "state"]
)

# Overlap policies, overrun warnings, backfills and redrives.
OVERLAP_DECISIONS = Counter(
    "schedulerd_overlap_decisions_total",
    "Occurrences of guarded jobs judged at claim time, by overlap policy and decision "
    "(started, skipped, waiting, released, cancel_requested)",
    ["policy", "decision"],
)
OVERRUN_WARNINGS = Counter(
    "schedulerd_overrun_warnings_total",
    "Cron jobs found with a recent p95 duration above [jobs].overrun_fraction of their interval, by task",
    ["task"],
)
# Backfill and dead-letter redrive (counted by the process that served the request: the API's
# replica, or a CLI run, which has no /metrics).
BACKFILLED = Counter("schedulerd_backfilled_occurrences_total", "Executions created by backfills")
REDRIVEN = Counter("schedulerd_redriven_executions_total", "Failed executions redriven with a new attempt budget")
NOTICES = Counter(
    "schedulerd_notifications_total",
    "Notice sends, by event (failure, recovery, late, dead_letter) and result (sent, retried, given_up)",
    ["event", "result"],
)
PAUSED_AFTER_FAILURES = Counter("schedulerd_paused_after_failures_total", "Jobs paused after pause_after_failures failed runs in a row")
# Late and missed occurrences, and known future load.
LATE = Counter(
    "schedulerd_late_occurrences_total",
    "Occurrences whose first attempt did not start within the grace (or never started), by late reason "
    "(scheduler_down, backlog, misfire_skip, overlap, paused, breaker_open, tenant_cap, rate_limited, concurrency_limit); "
    "each counted once",
    ["reason"],
)
DUE_NEXT = Gauge(
    "schedulerd_due_next",
    "Executions not yet started that fall due within the window (1m, 5m, 15m, 60m), by tenant "
    "(the top [forecast].top_tenants, the rest summed as _other; sum over tenants = total)",
    ["window", "tenant"],
)

# The tz database (schedulerd/tzchange.py): which one resolves zones here, and what its change moved.
TZDATA = Gauge("schedulerd_tzdata_info", "1 for the tz database this replica resolves zones with", ["version", "source"])
TZ_JOBS_MOVED = Counter(
    "schedulerd_tz_jobs_moved_total", "Cron jobs whose future instants moved when recomputed after a tz database change"
)
TZ_OCCURRENCES_MOVED = Counter(
    "schedulerd_tz_occurrences_moved_total", "Future occurrences moved by tz database recomputes ([old, new] pairs; an unpaired one counts once)"
)
