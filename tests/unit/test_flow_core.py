"""core/flow.py: which limits an execution counts against, and who starts when they are full."""

from __future__ import annotations

import doctest

import pytest

from schedulerd.core import flow
from schedulerd.core.flow import Caps, Scope, admit, check_key, check_rate, scopes_of, watched_scope


def test_doctests() -> None:
    assert doctest.testmod(flow, raise_on_error=False).failed == 0


def test_scopes_per_kind_and_only_what_is_set() -> None:
    caps = Caps(tasks={"send": 10}, tenants={"acme": 5}, tenant_default=3)
    assert scopes_of("acme", "send", "k", 2, caps) == (Scope("key", "acme/k", 2), Scope("task", "send", 10), Scope("tenant", "acme", 5))
    assert scopes_of("other", "report", None, None, caps) == (Scope("tenant", "other", 3),)
    assert scopes_of("other", "report", None, None, Caps()) == ()
    # A key is per tenant: the same key of two tenants is two limits.
    assert scopes_of("a", "t", "k", 1, Caps())[0] != scopes_of("b", "t", "k", 1, Caps())[0]


def test_admit_counts_each_start_in_every_scope_it_holds() -> None:
    key = Scope("key", "acme/k", 2)
    tenant = Scope("tenant", "acme", 2)
    verdict = admit([("a", [key, tenant]), ("b", [tenant]), ("c", [key, tenant])], {})
    assert verdict.start == ["a", "b"] and verdict.wait == ["c"]  # the tenant's quota is full after two


def test_a_full_limit_holds_back_only_what_counts_against_it() -> None:
    full = Scope("key", "acme/full", 1)
    free = Scope("key", "acme/free", 1)
    verdict = admit([("x", [full]), ("y", [free]), ("z", [])], {full: 1})
    assert verdict.start == ["y", "z"] and verdict.wait == ["x"]


def test_admit_keeps_due_order_within_a_scope() -> None:
    key = Scope("key", "t/k", 3)
    assert admit([(n, [key]) for n in range(6)], {key: 1}).start == [0, 1]


def test_lock_ids_are_stable_and_signed_64_bit() -> None:
    scope = Scope("key", "acme/customer:42", 2)
    assert scope.lock_id == Scope("key", "acme/customer:42", 9).lock_id  # the limit is not part of the lock
    assert -(2**63) <= scope.lock_id < 2**63
    assert scope.lock_id != Scope("task", "acme/customer:42", 2).lock_id


@pytest.mark.parametrize(
    ("key", "limit", "field"),
    [("k", None, "concurrency_limit"), (None, 2, "concurrency_key"), ("", 2, "concurrency_key"), ("x" * 201, 2, "concurrency_key"),
     ("a\nb", 2, "concurrency_key"), ("k", 0, "concurrency_limit"), ("k", True, "concurrency_limit"), ("k", 2.5, "concurrency_limit"),
     ("k", 100_001, "concurrency_limit"), (3, 2, "concurrency_key")],
)  # fmt: skip
def test_bad_concurrency_fields_name_the_field(key: object, limit: object, field: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_key(key, limit)
    assert caught.value.args[0] == field


def test_good_concurrency_and_rate_fields() -> None:
    assert check_key(None, None) is None
    assert check_key("customer:42", 2) == ("customer:42", 2)
    assert check_rate(None, None, None) is None
    assert check_rate("vendor", 10, 1) == ("vendor", 10, 1.0)


@pytest.mark.parametrize(
    ("key", "limit", "window", "field"),
    [("v", 10, None, "rate_window_s"), (None, 10, 1.0, "rate_key"), ("v", 0, 1.0, "rate_limit"), ("v", 10, 0, "rate_window_s"),
     ("v", 10, 86401, "rate_window_s"), ("v", 10, True, "rate_window_s"), ("v", "10", 1.0, "rate_limit")],
)  # fmt: skip
def test_bad_rate_fields_name_the_field(key: object, limit: object, window: object, field: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_rate(key, limit, window)
    assert caught.value.args[0] == field


def test_watched_scopes_take_the_configured_cap() -> None:
    caps = Caps(tasks={"send": 4}, tenant_default=7)
    assert watched_scope("task:send", caps) == Scope("task", "send", 4)
    assert watched_scope("tenant:acme", caps) == Scope("tenant", "acme", 7)
    assert watched_scope("key:acme/k", caps) == Scope("key", "acme/k", 0)


def test_runtime_quotas_replace_config_for_their_tenants_only() -> None:
    base = Caps(tasks={"send": 5}, tenants={"acme": 10, "beta": 3}, tenant_default=4)
    caps = flow.with_quotas(base, {"acme": 2, "gamma": 7})
    assert (caps.tenant_limit("acme"), caps.tenant_limit("beta"), caps.tenant_limit("gamma"), caps.tenant_limit("other")) == (2, 3, 7, 4)
    assert caps.tasks == {"send": 5} and caps.any
    assert flow.with_quotas(base, {}) is base
    assert flow.with_quotas(Caps(), {"acme": 1}).any  # a runtime quota alone makes the claim judge that tenant
