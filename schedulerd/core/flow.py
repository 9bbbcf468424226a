"""Fleet-wide concurrency limits, the pure half: which limits an execution is counted against (its
job's concurrency key, a cap on its task type, its tenant's in-flight quota), and which of the
executions asking to start may, given how many run now. No I/O: schedulerd/flow_claims.py takes
the locks, counts the running rows and writes the verdicts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")

MAX_KEY = 200  # characters of a concurrency key (as a debounce or idempotency key)
MAX_LIMIT = 100_000
MAX_RATE = 1_000_000  # starts per window


@dataclass(frozen=True, slots=True)
class Scope:
    """One counted limit. kind: key (a job's concurrency key, within its tenant), task (a task
    type across every tenant) or tenant (a tenant's executions in flight)."""

    kind: str
    name: str  # key: "<tenant>/<key>"; task: the task type; tenant: the tenant
    limit: int

    @property
    def lock_id(self) -> int:
        """The advisory lock that serialises every judge of this scope (a signed 64-bit number).
        Two scopes sharing one only wait on each other: never a wrong verdict."""
        digest = hashlib.blake2b(f"{self.kind}:{self.name}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big", signed=True)


@dataclass(frozen=True)
class Caps:
    """The caps set in config ([concurrency]): per task type and per tenant, fleet-wide."""

    tasks: Mapping[str, int] = field(default_factory=dict)
    tenants: Mapping[str, int] = field(default_factory=dict)
    tenant_default: int = 0  # every tenant not in `tenants`; 0: no quota
    any: bool = field(init=False)  # some cap is set (read for every outcome: computed once)

    def __post_init__(self) -> None:
        object.__setattr__(self, "any", bool(self.tasks or self.tenants or self.tenant_default))

    def tenant_limit(self, tenant: str) -> int:
        return self.tenants.get(tenant, self.tenant_default)


def with_quotas(caps: Caps, quotas: Mapping[str, int]) -> Caps:
    """`caps` with the tenant quotas an operator set at runtime in place of config's for those tenants.

    >>> with_quotas(Caps(tenants={"acme": 10}, tenant_default=4), {"acme": 2}).tenant_limit("acme")
    2
    """
    if not quotas:
        return caps
    return Caps(tasks=caps.tasks, tenants={**caps.tenants, **quotas}, tenant_default=caps.tenant_default)


def scopes_of(tenant: str, task: str, key: str | None, key_limit: int | None, caps: Caps) -> tuple[Scope, ...]:
    """The limits one execution is counted against (none: it is not limited).

    >>> [s.name for s in scopes_of("acme", "send", "customer:42", 2, Caps(tasks={"send": 50}))]
    ['acme/customer:42', 'send']
    """
    scopes: list[Scope] = []
    if key is not None and key_limit is not None:
        scopes.append(Scope("key", f"{tenant}/{key}", key_limit))
    if task in caps.tasks:
        scopes.append(Scope("task", task, caps.tasks[task]))
    quota = caps.tenant_limit(tenant)
    if quota > 0:
        scopes.append(Scope("tenant", tenant, quota))
    return tuple(scopes)


@dataclass(frozen=True)
class Verdict(Generic[T]):
    start: list[T]
    wait: list[T]


def admit(candidates: Sequence[tuple[T, Sequence[Scope]]], running: Mapping[Scope, int]) -> Verdict[T]:
    """In the order given (due order), start each candidate whose every limit has room, counting
    it there; the others wait. One full limit never holds back a candidate not counted in it.

    >>> key = Scope("key", "acme/k", 2)
    >>> admit([("a", [key]), ("b", [key]), ("c", [key])], {key: 1})
    Verdict(start=['a'], wait=['b', 'c'])
    """
    counts = {scope: running.get(scope, 0) for _, scopes in candidates for scope in scopes}
    start: list[T] = []
    wait: list[T] = []
    for item, scopes in candidates:
        if all(counts[scope] < scope.limit for scope in scopes):
            for scope in scopes:
                counts[scope] += 1
            start.append(item)
        else:
            wait.append(item)
    return Verdict(start, wait)


def watched_scope(name: str, caps: Caps) -> Scope:
    """The limit an operator names for a gauge ("task:send", "tenant:acme", "key:acme/customer:42"),
    with its cap where config sets one (0: a key's limit is its jobs' own).

    >>> watched_scope("task:send", Caps(tasks={"send": 50}))
    Scope(kind='task', name='send', limit=50)
    """
    kind, _, scope_name = name.partition(":")
    limit = caps.tasks.get(scope_name, 0) if kind == "task" else caps.tenant_limit(scope_name) if kind == "tenant" else 0
    return Scope(kind, scope_name, limit)


def check_rate(key: object, limit: object, window_s: object) -> tuple[str, int, float] | None:
    """A job's rate limit (key, starts per window, window in seconds), all or none; returns them,
    or None for none. Raises ValueError (field name, message) on anything else."""
    given = {"rate_key": key, "rate_limit": limit, "rate_window_s": window_s}
    if all(v is None for v in given.values()):
        return None
    missing = [name for name, v in given.items() if v is None]
    if missing:
        raise ValueError(missing[0], "is required with " + ", ".join(n for n in given if n not in missing))
    _check_key_text(key, "rate_key")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_RATE:
        raise ValueError("rate_limit", f"must be an integer from 1 to {MAX_RATE} (starts per window), got {limit!r}")
    if isinstance(window_s, bool) or not isinstance(window_s, int | float) or not 0.001 <= window_s <= 86400:
        raise ValueError("rate_window_s", f"must be from 0.001 to 86400 seconds, got {window_s!r}")
    return key, limit, float(window_s)


def check_key(key: object, limit: object) -> tuple[str, int] | None:
    """A job's concurrency key and limit, both or neither; returns them, or None for neither.
    Raises ValueError (field name, message) on anything else."""
    if key is None and limit is None:
        return None
    if key is None or limit is None:
        missing = "concurrency_key" if key is None else "concurrency_limit"
        raise ValueError(missing, "is required with " + ("concurrency_limit" if key is None else "concurrency_key"))
    _check_key_text(key, "concurrency_key")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise ValueError("concurrency_limit", f"must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
    return key, limit


NO_CAPS = Caps()


def _check_key_text(key: object, field_name: str) -> None:
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_KEY or not key.isprintable():
        raise ValueError(field_name, f"must be 1-{MAX_KEY} printable characters, got {key!r}")
