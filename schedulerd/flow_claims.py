"""Fleet-wide concurrency limits at claim time: executions counted against a concurrency key, a
task type's cap or a tenant's quota start only while every one of their limits has room, judged
under the limits' locks from the running rows themselves (core/flow.py decides).

The lock is what makes the count exact across replicas: each judge takes it before counting, so
the second of two replicas claiming one key sees the first's claims. An execution over a limit
waits (pending, reason concurrency_limit, no attempt used) until a holder stops: the worker that
finished, parked or handed one back releases the oldest waiting executions of its limits, and the
sweeper does the same for any limit executions still wait on (a holder reclaimed, a release lost
with its worker). A released execution is judged again when it is claimed, so a release that lets
too many go costs a second wait, never a slot over the limit.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from schedulerd import metrics
from schedulerd.core.flow import Caps, Scope, admit, scopes_of
from schedulerd.models import Claim, Enqueue
from schedulerd.store import Store

RELEASE_BATCH = 1000  # waiting executions looked at per release


def claim_scopes(claim: Claim, caps: Caps) -> tuple[Scope, ...]:
    """The limits a claimed execution holds a slot of (none: it is not limited); () at once for
    the usual claim, with no key and no cap configured (it runs for every outcome)."""
    if claim.concurrency_key is None and not caps.any:
        return ()
    return scopes_of(claim.tenant, claim.task, claim.concurrency_key, claim.concurrency_limit, caps)


async def running_in(store: Store, scopes: Iterable[Scope]) -> dict[Scope, int]:
    """How many run now in each scope (inside the transaction that holds their locks)."""
    wanted = set(scopes)
    tenants = {s.name for s in wanted if s.kind == "tenant"} | {s.name.split("/", 1)[0] for s in wanted if s.kind == "key"}
    tasks = {s.name for s in wanted if s.kind == "task"}
    counts: collections.Counter[Scope] = collections.Counter()
    by_name = {(s.kind, s.name): s for s in wanted}
    for tenant, task, key, running in await store.flow_running(sorted(tenants), sorted(tasks)):
        for kind, name in (("key", f"{tenant}/{key}" if key is not None else None), ("task", task), ("tenant", tenant)):
            scope = by_name.get((kind, name))  # type: ignore[arg-type]
            if scope is not None:
                counts[scope] += running
    return dict(counts)


async def claim_limited(
    store: Store, execution_ids: Sequence[str | UUID], lease_s: float, worker: str, caps: Caps, *,
    late_after_s: float = 60.0, down_after_s: float = 15.0, due_by: datetime | None = None,
) -> tuple[list[Claim], int]:  # fmt: skip
    """Judge the due executions of limited, unguarded jobs among `execution_ids` (guarded jobs'
    go through overlap_claims.claim_guarded, which holds back theirs with hold_back) and claim
    those that start. Returns (claims, how many now wait). Ids that are neither are left alone:
    those cost one read and no transaction."""
    first = _limited(await store.flow_candidates(execution_ids, due_by), caps) if execution_ids else []
    if not first:
        return [], 0
    locked = {scope for _, own, _ in first for scope in own}
    async with store.transaction() as tx:
        await tx.flow_lock([scope.lock_id for scope in locked])
        # Read again under the locks: one claimed meanwhile must not take a slot in the count. One
        # whose job changed its key meanwhile is left queued (the sweeper's overdue repair puts it back).
        candidates = [c for c in _limited(await tx.flow_candidates(execution_ids, due_by), caps) if locked.issuperset(c[1])]
        start, wait = await _judge_locked(tx, [(i, own) for i, own, _ in candidates])
        waiting = await tx.execution_wait_slot(wait) if wait else set()
        claims = await tx.execution_claim_many(
            start, lease_s, worker, late_after_s=late_after_s, down_after_s=down_after_s, due_by=due_by, limited=True
        ) if start else []  # fmt: skip
    _count_waits(candidates, waiting)
    return claims, len(waiting)


async def hold_back(
    store: Store, execution_ids: Sequence[UUID], caps: Caps, due_by: datetime | None, *, beside: Sequence[str | UUID] = ()
) -> list[UUID]:
    """Inside the transaction of a guarded claim (its job locks held): of the executions its
    overlap verdicts start, make those over a concurrency limit wait; returns the ones that start.
    `beside`: the rest of the popped batch. Its unguarded executions are judged in the same due
    order without being claimed here: one due earlier keeps its slot for claim_limited, which
    comes next, so a later guarded execution never takes that slot first."""
    starting = set(execution_ids)
    rows = await store.flow_candidates([*execution_ids, *(i for i in beside if UUID(str(i)) not in starting)], due_by)
    unguarded = {r["id"] for r in rows if r["overlap"] == "allow"}
    candidates = [c for c in _limited(rows, caps, guarded=True) if c[0] in starting or c[0] in unguarded]
    if not any(i in starting for i, _, _ in candidates):
        return list(execution_ids)
    await store.flow_lock([scope.lock_id for _, own, _ in candidates for scope in own])
    _, wait = await _judge_locked(store, [(i, own) for i, own, _ in candidates])
    held = {i for i in wait if i in starting}
    _count_waits(candidates, await store.execution_wait_slot(sorted(held)) if held else set())
    return [i for i in execution_ids if i not in held]


def _limited(rows: Sequence[Any], caps: Caps, *, guarded: bool = False) -> list[tuple[UUID, tuple[Scope, ...], str]]:
    """(id, limits, task) of the rows counted against a limit: of allow jobs (guarded: of any
    job), enabled (a paused or deleted job's are cancelled by the claim), in the rows' due order."""
    return [
        (r["id"], scopes, r["task"]) for r in rows
        if (guarded or r["overlap"] == "allow") and r["enabled"]
        and (scopes := scopes_of(r["tenant"], r["task"], r["concurrency_key"], r["concurrency_limit"], caps))
    ]  # fmt: skip


async def _judge_locked(store: Store, candidates: Sequence[tuple[UUID, Sequence[Scope]]]) -> tuple[list[UUID], list[UUID]]:
    """With the candidates' limits locked: count what runs, and say which start (in the order
    given: due order) and which wait."""
    verdict = admit(list(candidates), await running_in(store, {scope for _, own in candidates for scope in own}))
    return verdict.start, verdict.wait


def _count_waits(candidates: Sequence[tuple[UUID, tuple[Scope, ...], str]], waiting: set[UUID]) -> None:
    tasks = {i: task for i, _, task in candidates}
    for task, count in collections.Counter(tasks[i] for i in waiting).items():
        metrics.PARKED.labels(task, "concurrency_limit").inc(count)


async def release(
    store: Store, scopes: Iterable[Scope], caps: Caps, *, late_after_s: float = 60.0, tenants: Iterable[str] = ()
) -> list[Enqueue]:
    """After executions holding slots of these limits stopped (finished, parked, handed back,
    reclaimed): let the oldest waiting ones start, as many as all their limits now have room
    for. `tenants`: look at all of these tenants' waiting executions too (one whose job lost its
    limits to an edit starts at once). Returns them for ZADD. Safe to call for any limits, any
    number of times."""
    wanted = set(scopes)
    tenants = set(tenants) | {s.name for s in wanted if s.kind == "tenant"}
    if not wanted and not tenants:
        return []
    async with store.transaction() as tx:
        keys = sorted({tuple(s.name.split("/", 1)) for s in wanted if s.kind == "key"})
        tasks = sorted(s.name for s in wanted if s.kind == "task")
        waiting = await tx.execution_waiting_slot(keys, tasks, sorted(tenants), RELEASE_BATCH)  # type: ignore[arg-type]
        if not waiting:
            return []
        candidates = [
            (r["id"], scopes_of(r["tenant"], r["task"], r["concurrency_key"], r["concurrency_limit"], caps)) for r in waiting
        ]  # fmt: skip
        await tx.flow_lock([scope.lock_id for _, own in candidates for scope in own])
        start, _ = await _judge_locked(tx, candidates)
        released = await tx.execution_release_slot(start, late_after_s) if start else []
    if released:
        metrics.FLOW_RELEASED.inc(len(released))
    return released


async def release_stalled(store: Store, caps: Caps, *, batch: int, late_after_s: float = 60.0) -> list[Enqueue]:
    """The sweeper's safety net: release what waits on any limit that has room now."""
    scopes: set[Scope] = set()
    unlimited: set[str] = set()  # tenants with executions waiting on no limit any more (an edit, a config change)
    for tenant, task, key, key_limit in await store.flow_waiting_scopes(batch):
        own = scopes_of(tenant, task, key, key_limit, caps)
        scopes.update(own)
        if not own:
            unlimited.add(tenant)
    return await release(store, scopes, caps, late_after_s=late_after_s, tenants=unlimited)
