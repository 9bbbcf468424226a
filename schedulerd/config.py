"""Settings: one frozen dataclass per [section] of config.toml.

Precedence is built-in default < TOML file < environment (SCHEDULERD_<SECTION>_<KEY>).
Errors name the key and the value that was refused.
"""

from __future__ import annotations

import json
import os
import socket
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from schedulerd.core import rate
from schedulerd.core.flow import MAX_LIMIT as MAX_CONCURRENCY_LIMIT
from schedulerd.core.flow import Caps
from schedulerd.errors import ConfigError

MAX_SIGNING_GRACE_S = 30 * 86400.0  # the longest an older signing key may keep signing after a rotation
MAX_CATCH_UP_LIMIT = 1000  # the largest catch_up_limit a job may have (schedulerd/jobs.py validates it)


@dataclass(frozen=True)
class DatabaseConfig:
    url: str = ""  # empty: embedded Postgres
    pool_min: int = 2
    pool_max: int = 10
    read_url: str = ""  # read replica for the API's and dashboard's read-only queries; empty: the primary (url)
    commit_retry_s: float = 30.0  # a create whose connection broke (a failover) is retried this long, its outcome checked first
    statement_timeout_s: float = 30.0  # a statement unanswered this long is abandoned and its connection closed (a half-open one would hang its caller)


@dataclass(frozen=True)
class RedisConfig:
    url: str = ""  # empty: embedded Redis
    prefix: str = "schedulerd"  # key prefix shared by the replicas of one deployment
    timeout_s: float = 1.0  # per command; past it Redis counts as unreachable and workers claim from Postgres
    shards: int = 1  # delay-queue shards, each in a hash slot of its own ({prefix:s}); 1 keeps the keys of one-slot versions
    cluster: bool = False  # url names a node of a Redis Cluster: connect with RedisCluster (every node is found from it)


@dataclass(frozen=True)
class EmbeddedConfig:
    data_dir: str = ".schedulerd"


@dataclass(frozen=True)
class DaemonConfig:
    roles: tuple[str, ...] = ("materialiser", "dispatcher", "worker", "sweeper", "retention", "notifier")
    worker_id: str = ""  # empty: "<hostname>:<pid>"; unique per live process (a duplicate refuses to start)
    task_modules: tuple[str, ...] = ()
    migrate_on_start: bool = True
    observe_interval_s: float = 5.0  # how often gauges are sampled and this replica reports itself alive

    def resolved_worker_id(self) -> str:
        return self.worker_id or f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class WorkerConfig:
    concurrency: int = 256  # executions run at once per process
    batch_size: int = 256  # executions popped and claimed per round trip
    poll_max_s: float = 0.1  # longest sleep between pops when nothing is due (bounds a new job's start lag)
    linger_s: float = 0.02  # shortest pause between partial pops and between outcome writes: batches them
    linger_busy_s: float = 0.05  # that pause while pops come back at least 1/8 full (linger_s: never longer)
    lease_s: float = 15.0  # lease granted at claim and at each heartbeat
    heartbeat_s: float = 5.0  # lease extension interval
    write_timeout_s: float = 5.0  # a claim, heartbeat or finish statement taking longer is retried on a fresh connection (capped at lease_s / 3)
    threads: int = 16  # thread pool for synchronous handlers
    shutdown_grace_s: float = 10.0  # on stop, how long in-flight handlers may run on
    redis_probe_s: float = 2.0  # while Redis is unreachable, how often to try it again
    task_concurrency: dict[str, int] = field(default_factory=dict)  # most executions of a task type run at once per process; {} = no limits
    slow_tasks: tuple[str, ...] = ()  # task types run in the slow pool, never in the main pool's slots
    slow_concurrency: int = 16  # executions of slow tasks run at once per process
    defer_s: float = 1.0  # an execution over its task's limit is handed back for about this long (jittered 50-100 %)


@dataclass(frozen=True)
class ConcurrencyConfig:
    """Fleet-wide caps, counted across every replica (docs/tasks.md "Concurrency limits"); a job's
    own concurrency key is set on the job."""

    tasks: dict[str, int] = field(default_factory=dict)  # most executions of a task type running at once, fleet-wide
    tenants: dict[str, int] = field(default_factory=dict)  # most executions of a tenant running at once (its in-flight quota)
    tenant_default: int = 0  # the quota of every tenant not in `tenants`; 0: none
    watch: tuple[str, ...] = ()  # limits whose in-flight count is a gauge: "task:send", "tenant:acme", "key:acme/customer:42"
    refresh_s: float = 5.0  # how often each replica reads the tenant quotas set at runtime (`schedulerd tenant quota`)

    @property
    def caps(self) -> Caps:
        return Caps(tasks=self.tasks, tenants=self.tenants, tenant_default=self.tenant_default)


@dataclass(frozen=True)
class MaterialiserConfig:
    interval_s: float = 30.0  # how often cursors are checked
    horizon_s: float = 21600.0  # occurrences are written this far ahead (6 h)
    batch_size: int = 200  # jobs per transaction
    max_occurrences_per_job: int = 10000  # per job per pass; the rest come next pass
    lookback_s: float = 86400.0  # a cursor further behind restarts here; older occurrences are not written
    misfire_grace_s: float = 60.0  # an occurrence not started this long after its due time was missed
    misfire_batch_size: int = 10000  # missed executions judged per pass
    replay_per_s: float = 50.0  # late runs released per second after an outage
    tz_batch_size: int = 500  # jobs per transaction when recomputing after a tz database change


@dataclass(frozen=True)
class DispatcherConfig:
    interval_s: float = 1.0
    horizon_s: float = 300.0  # executions due within this are put in the delay queue
    batch_size: int = 5000


@dataclass(frozen=True)
class SweeperConfig:
    interval_s: float = 2.0
    grace_s: float = 2.0  # overdue this long and absent from Redis: re-enqueue
    live_holder_grace_s: float = 15.0  # an expired lease whose replica still reports itself alive is left to it this much longer
    batch_size: int = 1000


@dataclass(frozen=True)
class RetentionConfig:
    days: int = 90  # executions and attempts are kept this many days (by scheduled time), then dropped by the day
    premake_days: int = 3  # partitions are created this many days ahead
    interval_s: float = 3600.0  # how often partitions are created and expired ones dropped
    export_dir: str = ""  # when set, each day is written there as gzipped CSV before it is dropped
    lock_timeout_s: float = 5.0  # partition DDL gives up (until the next pass) rather than wait longer for its locks


@dataclass(frozen=True)
class JobsConfig:
    max_attempts: int = 3
    backoff_base_s: float = 5.0
    backoff_factor: float = 5.0
    backoff_max_s: float = 3600.0
    timeout_s: float = 300.0
    max_params_bytes: int = 65536
    overrun_fraction: float = 0.8  # warn when a cron job's recent p95 duration reaches this fraction of its interval
    overrun_samples: int = 20  # recent attempts the p95 is taken over (at least 3)
    backfill_max_occurrences: int = 1000  # most occurrences one backfill may create; a range holding more is refused
    backfill_per_s: float = 10.0  # backfilled runs fall due this many per second (spread from now, not all at once)
    redrive_max: int = 1000  # most failed executions one redrive request takes (a bulk redrive takes the newest)
    redrive_per_s: float = 50.0  # redriven executions fall due this many per second
    task_types_seen_within_s: float = 86400.0  # producers accept a task type a worker replica reported this recently (seconds)


@dataclass(frozen=True)
class ApiConfig:
    enabled: bool = True  # serve the HTTP API and dashboard from the daemon
    host: str = "127.0.0.1"  # address to listen on
    port: int = 8080  # TCP port
    max_body_bytes: int = 262144  # largest request body (bytes)
    page_size_max: int = 500  # most items one list request may ask for
    rate_limit: int = 600  # requests per token per rate_window_s, counted in Redis across replicas
    rate_window_s: float = 60.0  # rate limit window (seconds)
    auth_failure_limit: int = 30  # requests with a missing or invalid token per client address per rate_window_s; then 429
    idempotency_ttl_s: float = 86400.0  # how long an Idempotency-Key replays its first result (seconds)
    overview_window_s: float = 900.0  # operator view: start lags and runs per status of this many seconds
    batch_max: int = 1000  # most items one POST /v1/jobs/batch may carry (each counts against rate_limit)
    max_batch_body_bytes: int = 4194304  # largest POST /v1/jobs/batch body (bytes)
    token_cache_s: float = 2.0  # a token checked this recently is not looked up again (revoked through another replica, it works this long; seconds)


@dataclass(frozen=True)
class OpsConfig:
    """Operator endpoints (/metrics, /forecast, /stats/minutes, /healthz, /readyz, the page at /) on a
    listener of their own: they name tenants and the hosts they call, so the tenants' [api] listener
    serves none of them."""

    enabled: bool = True  # serve them from the daemon
    host: str = "127.0.0.1"  # address to listen on: keep it private (no token guards these endpoints)
    port: int = 9090  # TCP port; replicas on one host need one each


@dataclass(frozen=True)
class HttpConfig:
    """The built-in `http` task. Tenants name the URLs, so private targets are refused by default."""

    allow_hosts: tuple[str, ...] = ()  # empty: any public host; else only these (name, ".example.com" for subdomains; "host:port", "host:*"; a bare host opens 80 and 443 only); a listed host may be private
    allow_private: bool = False  # let unlisted hosts resolve to loopback/private/link-local addresses
    timeout_s: float = 10.0  # per request, unless params.timeout_s is lower (the job's timeout also applies)
    excerpt_bytes: int = 1024  # of the response body kept on the attempt


@dataclass(frozen=True)
class SecretsConfig:
    """Tenant secrets and webhook signing keys, stored sealed (AES-256-GCM) with `key` (docs/webhooks.md)."""

    key: str = field(default="", repr=False)  # base64 of 32 random bytes; empty: secret writes and signing-key rotations are refused
    previous_keys: tuple[str, ...] = field(default=(), repr=False)  # older keys, to open rows sealed with them until `schedulerd secret reseal`
    max_value_bytes: int = 8192  # largest secret value (UTF-8 bytes)
    max_per_tenant: int = 1000  # most secrets one tenant may hold
    signing_grace_s: float = 86400.0  # after a rotation, older signing keys keep signing this long unless retired sooner (seconds)
    signing_cache_s: float = 10.0  # a worker reuses a tenant's signing keys this long before reading them again (seconds)


@dataclass(frozen=True)
class BreakerConfig:
    """Circuit breakers per task type (per target host for http), shared by replicas in Redis."""

    enabled: bool = True  # park executions whose task (or http host) keeps failing
    failures: int = 10  # consecutive failed attempts that open a breaker (permanent errors do not count)
    open_s: float = 30.0  # an open breaker waits this long before one probe runs (seconds)
    probe_timeout_s: float = 120.0  # a probe silent this long (its worker died) is replaced by another (seconds)
    recheck_s: float = 1.0  # least jitter added to a parked execution's wait (it spreads up to open_s; seconds)


@dataclass(frozen=True)
class RateLimitsConfig:
    """Fleet-wide rate limits: starts per window, counted once for every replica (Redis, lua/take_tokens-1.lua)."""

    tasks: dict[str, str] = field(default_factory=dict)  # task type -> "N/<duration>", e.g. { send_email = "100/1s" }; {} = none
    hosts: dict[str, str] = field(default_factory=dict)  # http target host (any port) -> "N/<duration>"; {} = none


@dataclass(frozen=True)
class LateConfig:
    """Explaining occurrences that did not start within [materialiser].misfire_grace_s."""

    down_after_s: float = 15.0  # a replica silent this long counts as down (scheduler_down); 3 x observe_interval_s (seconds)


@dataclass(frozen=True)
class ForecastConfig:
    """Known future load: executions due in the next 1, 5, 15 and 60 minutes (schedulerd_due_next)."""

    interval_s: float = 15.0  # how often the observer refreshes the forecast gauges (seconds)
    top_tenants: int = 20  # tenants with their own label; the rest are summed under tenant="_other"


@dataclass(frozen=True)
class NotifyConfig:
    """Notifications (docs/notifications.md): the notifier role finds failed, recovered and late
    runs in Postgres and POSTs notices through the http task's target check ([http].allow_hosts,
    [http].allow_private); it pauses jobs after pause_after_failures failed runs in a row."""

    interval_s: float = 5.0  # how often the notifier looks for transitions and due notices (seconds)
    batch_size: int = 100  # transitions judged per kind (failures: per tenant), and notices sent, per pass
    lookback_s: float = 21600.0  # a run that failed or started late longer ago than this is not judged (a notifier down longer misses it; seconds)
    history_s: float = 2592000.0  # how far back the consecutive-failure count looks (seconds)
    max_attempts: int = 10  # tries of one notice; then it is given up
    backoff_base_s: float = 5.0  # ceiling of the wait after a notice's first failed try, doubling per try, full jitter (seconds)
    backoff_max_s: float = 3600.0  # largest ceiling of that wait (seconds)
    timeout_s: float = 10.0  # per send, at most [http].timeout_s (seconds)
    hold_s: float = 60.0  # a notice being sent is not sent by another replica for this long; above timeout_s (seconds)
    public_url: str = ""  # the dashboard's public base URL for the links in notices; "": a path (/#/executions/ID)
    keep_s: float = 604800.0  # sent, given-up and unsent notices are deleted after this long (seconds)


@dataclass(frozen=True)
class LogConfig:
    level: str = "info"
    format: str = "auto"  # json | console | auto


@dataclass(frozen=True)
class Config:
    database: DatabaseConfig = field(default_factory=DatabaseConfig)
    redis: RedisConfig = field(default_factory=RedisConfig)
    embedded: EmbeddedConfig = field(default_factory=EmbeddedConfig)
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
    materialiser: MaterialiserConfig = field(default_factory=MaterialiserConfig)
    worker: WorkerConfig = field(default_factory=WorkerConfig)
    concurrency: ConcurrencyConfig = field(default_factory=ConcurrencyConfig)
    dispatcher: DispatcherConfig = field(default_factory=DispatcherConfig)
    sweeper: SweeperConfig = field(default_factory=SweeperConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    jobs: JobsConfig = field(default_factory=JobsConfig)
    api: ApiConfig = field(default_factory=ApiConfig)
    ops: OpsConfig = field(default_factory=OpsConfig)
    http: HttpConfig = field(default_factory=HttpConfig)
    secrets: SecretsConfig = field(default_factory=SecretsConfig)
    breaker: BreakerConfig = field(default_factory=BreakerConfig)
    rate_limits: RateLimitsConfig = field(default_factory=RateLimitsConfig)
    late: LateConfig = field(default_factory=LateConfig)
    forecast: ForecastConfig = field(default_factory=ForecastConfig)
    notify: NotifyConfig = field(default_factory=NotifyConfig)
    log: LogConfig = field(default_factory=LogConfig)

    def validate(self) -> None:
        if self.worker.heartbeat_s >= self.worker.lease_s:
            raise ConfigError(
                f"worker.heartbeat_s ({self.worker.heartbeat_s}) must be below worker.lease_s ({self.worker.lease_s})"
            )
        if not 0 <= self.database.commit_retry_s <= 3600:
            raise ConfigError(f"database.commit_retry_s must be between 0 and 3600, got {self.database.commit_retry_s}")
        if not 1 <= self.database.statement_timeout_s <= 3600:
            raise ConfigError(
                f"database.statement_timeout_s must be between 1 and 3600, got {self.database.statement_timeout_s}"
            )
        if not 1 <= self.redis.shards <= 1024:
            raise ConfigError(f"redis.shards must be between 1 and 1024, got {self.redis.shards}")
        for key in ("linger_s", "linger_busy_s"):
            if not 0 <= getattr(self.worker, key) <= 1:
                raise ConfigError(f"worker.{key} must be between 0 and 1 second, got {getattr(self.worker, key)}")
        if self.worker.concurrency < 1 or self.worker.batch_size < 1:
            raise ConfigError("worker.concurrency and worker.batch_size must be at least 1")
        for task, limit in self.worker.task_concurrency.items():
            if limit < 1:
                raise ConfigError(f"worker.task_concurrency[{task!r}] must be at least 1, got {limit}")
        for section, caps in (("tasks", self.concurrency.tasks), ("tenants", self.concurrency.tenants)):
            for name, limit in caps.items():
                if not 1 <= limit <= MAX_CONCURRENCY_LIMIT:
                    raise ConfigError(f"concurrency.{section}[{name!r}] must be between 1 and {MAX_CONCURRENCY_LIMIT}, got {limit}")
        if not 0 <= self.concurrency.tenant_default <= MAX_CONCURRENCY_LIMIT:
            raise ConfigError(f"concurrency.tenant_default must be between 0 (no quota) and {MAX_CONCURRENCY_LIMIT}, "
                              f"got {self.concurrency.tenant_default}")
        if not 0.1 <= self.concurrency.refresh_s <= 3600:
            raise ConfigError(f"concurrency.refresh_s must be between 0.1 and 3600 seconds, got {self.concurrency.refresh_s}")
        for watched in self.concurrency.watch:
            kind, _, name = watched.partition(":")
            if kind not in ("task", "tenant", "key") or not name or (kind == "key" and "/" not in name):
                raise ConfigError(f"concurrency.watch: {watched!r} is not task:<type>, tenant:<tenant> or key:<tenant>/<key>")
        if self.worker.slow_concurrency < 1 or not self.worker.defer_s > 0:
            raise ConfigError(f"worker.slow_concurrency must be at least 1 and worker.defer_s above 0, got "
                              f"{self.worker.slow_concurrency} and {self.worker.defer_s}")
        if self.breaker.failures < 1 or not (self.breaker.open_s > 0 and self.breaker.probe_timeout_s > 0
                                             and self.breaker.recheck_s > 0):
            raise ConfigError("breaker.failures must be at least 1 and breaker.open_s, probe_timeout_s and "
                              f"recheck_s above 0, got {self.breaker}")
        try:
            rate.limits_from(self.rate_limits.tasks, self.rate_limits.hosts)
        except ValueError as exc:
            raise ConfigError(f"rate_limits.{exc}") from None
        if self.materialiser.misfire_batch_size <= MAX_CATCH_UP_LIMIT:
            # a job's missed rows are judged a batch at a time, and each batch must get past the
            # occurrences its policy keeps
            raise ConfigError(f"materialiser.misfire_batch_size must be above {MAX_CATCH_UP_LIMIT} (the largest "
                              f"catch_up_limit), got {self.materialiser.misfire_batch_size}")
        if self.materialiser.tz_batch_size < 1:
            raise ConfigError(f"materialiser.tz_batch_size must be at least 1, got {self.materialiser.tz_batch_size}")
        if self.jobs.max_attempts < 1:
            raise ConfigError(f"jobs.max_attempts must be at least 1, got {self.jobs.max_attempts}")
        if not 0 < self.jobs.overrun_fraction <= 10 or not 3 <= self.jobs.overrun_samples <= 1000:
            raise ConfigError(f"jobs.overrun_fraction must be above 0 and at most 10, and jobs.overrun_samples between "
                              f"3 and 1000, got {self.jobs.overrun_fraction} and {self.jobs.overrun_samples}")
        for key in ("backfill_max_occurrences", "redrive_max"):
            if getattr(self.jobs, key) < 1:
                raise ConfigError(f"jobs.{key} must be at least 1, got {getattr(self.jobs, key)}")
        for key in ("backfill_per_s", "redrive_per_s", "task_types_seen_within_s"):
            if not getattr(self.jobs, key) > 0:
                raise ConfigError(f"jobs.{key} must be above 0, got {getattr(self.jobs, key)}")
        unknown = set(self.daemon.roles) - {"materialiser", "dispatcher", "worker", "sweeper", "retention", "notifier"}
        if unknown:
            raise ConfigError(f"daemon.roles has unknown role(s): {', '.join(sorted(unknown))}")
        if self.retention.days < 1 or self.retention.premake_days < 1 or not self.retention.interval_s > 0:
            raise ConfigError("retention.days and retention.premake_days must be at least 1 and retention.interval_s "
                              f"above 0, got {self.retention}")
        if self.log.format not in ("json", "console", "auto"):
            raise ConfigError(f"log.format must be json, console or auto, got {self.log.format!r}")
        if not 0 <= self.api.port <= 65535:
            raise ConfigError(f"api.port must be between 0 and 65535, got {self.api.port}")
        if not 0 <= self.ops.port <= 65535:
            raise ConfigError(f"ops.port must be between 0 and 65535, got {self.ops.port}")
        if self.api.enabled and self.ops.enabled and (self.api.host, self.api.port) == (self.ops.host, self.ops.port) \
                and self.api.port != 0:
            raise ConfigError(f"ops.port and api.port are both {self.api.port} on {self.api.host}: operator endpoints "
                              "need a listener of their own")
        for key in ("max_body_bytes", "page_size_max", "rate_limit", "auth_failure_limit", "batch_max", "max_batch_body_bytes"):
            if getattr(self.api, key) < 1:
                raise ConfigError(f"api.{key} must be at least 1, got {getattr(self.api, key)}")
        if not self.http.timeout_s > 0 or self.http.excerpt_bytes < 0:
            raise ConfigError(f"http.timeout_s must be above 0 and http.excerpt_bytes at least 0, got "
                              f"{self.http.timeout_s} and {self.http.excerpt_bytes}")
        self._validate_secrets()
        if not (self.late.down_after_s > 0 and self.forecast.interval_s > 0) or self.forecast.top_tenants < 0:
            raise ConfigError(f"late.down_after_s and forecast.interval_s must be above 0 and forecast.top_tenants at "
                              f"least 0, got {self.late.down_after_s}, {self.forecast.interval_s} and {self.forecast.top_tenants}")
        if self.late.down_after_s <= self.daemon.observe_interval_s:
            # Replicas report every observe_interval_s: a shorter silence is not a sign of death.
            raise ConfigError(f"late.down_after_s ({self.late.down_after_s}) must exceed daemon.observe_interval_s "
                              f"({self.daemon.observe_interval_s})")
        notify = self.notify
        if notify.batch_size < 1 or notify.max_attempts < 1 or not all(
            getattr(notify, key) > 0 for key in ("interval_s", "lookback_s", "history_s", "backoff_max_s", "timeout_s", "keep_s")
        ) or notify.backoff_base_s < 0:  # fmt: skip
            raise ConfigError(f"notify.batch_size and notify.max_attempts must be at least 1, notify.backoff_base_s at least 0, "
                              f"and its other durations above 0, got {notify}")  # fmt: skip
        if notify.hold_s <= notify.timeout_s:  # a send still running must not be sent again by another replica
            raise ConfigError(f"notify.hold_s ({notify.hold_s}) must exceed notify.timeout_s ({notify.timeout_s})")
        if notify.public_url and not notify.public_url.startswith(("http://", "https://")):
            raise ConfigError(f"notify.public_url must be an http:// or https:// URL (or empty), got {notify.public_url!r}")
        if not self.api.token_cache_s >= 0:
            raise ConfigError(f"api.token_cache_s must be at least 0, got {self.api.token_cache_s}")
        if not self.api.rate_window_s > 0:
            raise ConfigError(f"api.rate_window_s must be above 0, got {self.api.rate_window_s}")


    def _validate_secrets(self) -> None:
        secrets = self.secrets
        named = [("secrets.key", secrets.key)] * bool(secrets.key) + [("secrets.previous_keys", k) for k in secrets.previous_keys]
        if named:  # imported only then: most processes without a key never load the cipher library
            from schedulerd.keyring import parse_master_key

            for name, text in named:
                try:
                    parse_master_key(text)
                except ValueError as exc:  # the message never quotes the key
                    raise ConfigError(f"{name}: {exc}") from None
        if secrets.previous_keys and not secrets.key:
            raise ConfigError("secrets.previous_keys needs secrets.key (the key that seals new rows)")
        if secrets.max_value_bytes < 1 or secrets.max_per_tenant < 1:
            raise ConfigError(f"secrets.max_value_bytes and secrets.max_per_tenant must be at least 1, got "
                              f"{secrets.max_value_bytes} and {secrets.max_per_tenant}")
        if not 0 <= secrets.signing_grace_s <= MAX_SIGNING_GRACE_S or not secrets.signing_cache_s >= 0:
            raise ConfigError(f"secrets.signing_grace_s must be between 0 and {MAX_SIGNING_GRACE_S:g} and "
                              f"secrets.signing_cache_s at least 0, got {secrets.signing_grace_s} and {secrets.signing_cache_s}")


def _coerce(section: str, key: str, raw: Any, kind: Any, from_env: bool) -> Any:
    """Turn a TOML or environment value into the field's type, or say which key is wrong."""
    name = f"{section}.{key}"
    try:
        if kind is bool:
            if isinstance(raw, bool):
                return raw
            if from_env and str(raw).lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                return str(raw).lower() in ("1", "true", "yes", "on")
            raise ValueError
        if kind is int and not isinstance(raw, bool):
            return int(raw)
        if kind is float and not isinstance(raw, bool):
            return float(raw)
        if kind is str:
            if not isinstance(raw, str):
                raise ValueError
            return raw
        if kind == tuple[str, ...]:
            if from_env:  # "a,b" or a JSON list
                raw = json.loads(raw) if raw.strip().startswith("[") else [p for p in raw.split(",") if p.strip()]
            if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
                raise ValueError
            return tuple(v.strip() for v in raw)
        if kind == dict[str, int]:
            if from_env:  # a JSON object: SCHEDULERD_WORKER_TASK_CONCURRENCY='{"sleep": 4}'
                raw = json.loads(raw)
            if not isinstance(raw, dict) or not all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in raw.items()
            ):
                raise ValueError
            return dict(raw)
        if kind == dict[str, str]:
            if from_env:  # a JSON object: SCHEDULERD_RATE_LIMITS_TASKS='{"send_email": "100/1s"}'
                raw = json.loads(raw)
            if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
                raise ValueError
            return dict(raw)
    except (ValueError, TypeError, json.JSONDecodeError):
        pass
    kind_name = {dict[str, int]: "table of integers", dict[str, str]: "table of strings"}.get(kind) or getattr(kind, "__name__", kind)
    raise ConfigError(f"setting {name} = {raw!r} is not a valid {kind_name}")


def load(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read defaults, then the TOML file (if it exists), then SCHEDULERD_* variables."""
    environ = os.environ if environ is None else environ
    path = Path(path or environ.get("SCHEDULERD_CONFIG", "config.toml"))
    document: dict[str, Any] = {}
    if path.exists():
        try:
            document = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: {exc}") from exc

    sections: dict[str, Any] = {}
    for section, section_cls in get_type_hints(Config).items():
        hints = get_type_hints(section_cls)
        given = document.get(section, {})
        unknown = set(given) - set(hints)
        if unknown:
            raise ConfigError(f"{path}: unknown setting(s) in [{section}]: {', '.join(sorted(unknown))}")
        values = {}
        for key, kind in hints.items():
            env_name = f"SCHEDULERD_{section}_{key}".upper()
            if env_name in environ:
                values[key] = _coerce(section, key, environ[env_name], kind, from_env=True)
            elif key in given:
                values[key] = _coerce(section, key, given[key], kind, from_env=False)
        sections[section] = section_cls(**values)
    unknown_sections = set(document) - set(sections)
    if unknown_sections:
        raise ConfigError(f"{path}: unknown section(s): {', '.join(sorted(unknown_sections))}")
    config = Config(**sections)
    config.validate()
    return config
