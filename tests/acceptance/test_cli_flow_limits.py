"""`job create` / `job update` with --concurrency-key/--concurrency-limit and --rate-key/--rate-limit/
--rate-window as subprocesses: stored and removed; a bad or half-given limit exits 2 naming the
flag, nothing written."""

from __future__ import annotations

import json

import pytest

from tests.acceptance.test_cli_bad_input import _refused


async def test_create_update_and_remove_limits(cli, store) -> None:  # type: ignore[no-untyped-def]
    made = cli("job", "create", "--task", "noop", "--cron", "@daily", "--concurrency-key", "customer:42",
               "--concurrency-limit", "2", "--rate-key", "vendor", "--rate-limit", "10", "--rate-window", "1m", "--json")  # fmt: skip
    assert made.returncode == 0, made.stderr
    job_id = json.loads(made.stdout)["job"]["id"]
    row = await store.db.fetchrow("SELECT concurrency_key, concurrency_limit, rate_key, rate_limit, rate_window_s FROM jobs WHERE id = $1", job_id)
    assert tuple(row) == ("customer:42", 2, "vendor", 10, 60.0)

    assert cli("job", "update", job_id, "--concurrency-limit", "3").returncode == 0
    assert await store.db.fetchval("SELECT concurrency_limit FROM jobs WHERE id = $1", job_id) == 3
    removed = cli("job", "update", job_id, "--concurrency-key", "", "--rate-key", "")
    assert removed.returncode == 0, removed.stderr
    row = await store.db.fetchrow("SELECT concurrency_key, concurrency_limit, rate_key, rate_limit, rate_window_s FROM jobs WHERE id = $1", job_id)
    assert tuple(row) == (None, None, None, None, None)
    assert "--concurrency-key" in cli("job", "create", "--help").stdout


@pytest.mark.parametrize(
    ("flags", "named"),
    [(["--concurrency-key", "k"], "--concurrency-limit"), (["--concurrency-limit", "2"], "--concurrency-key"),
     (["--concurrency-key", "k", "--concurrency-limit", "two"], "--concurrency-limit"),
     (["--concurrency-key", "k", "--concurrency-limit", "0"], "--concurrency-limit"),
     (["--rate-key", "v", "--rate-limit", "10"], "--rate-window"), (["--rate-key", "v", "--rate-limit", "10", "--rate-window", "soon"], "--rate-window")],
)  # fmt: skip
async def test_a_bad_limit_exits_2_naming_the_flag(cli, store, flags, named) -> None:  # type: ignore[no-untyped-def]
    _refused(cli("job", "create", "--task", "noop", *flags), named)
    assert await store.db.fetchval("SELECT count(*) FROM jobs") == 0


async def test_tenant_quota_set_listed_and_cleared(cli, store) -> None:  # type: ignore[no-untyped-def]
    made = cli("tenant", "quota", "acme", "--in-flight", "3")
    assert made.returncode == 0, made.stderr
    assert await store.db.fetchval("SELECT in_flight FROM tenant_quotas WHERE tenant = 'acme'") == 3
    listed = cli("tenant", "quotas", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [(q["tenant"], q["in_flight"], q["source"]) for q in json.loads(listed.stdout)["quotas"]] == [("acme", 3, "runtime")]
    assert "acme" in cli("tenant", "quotas").stdout
    cleared = cli("tenant", "quota", "acme", "--clear")
    assert cleared.returncode == 0 and "removed" in cleared.stdout
    assert await store.db.fetchval("SELECT count(*) FROM tenant_quotas") == 0
    again = cli("tenant", "quota", "acme", "--clear")
    assert again.returncode != 0 and "no quota" in again.stderr


@pytest.mark.parametrize(
    ("args", "named"),
    [(["acme", "--in-flight", "0"], "--in-flight"), (["acme", "--in-flight", "many"], "--in-flight"),
     (["acme"], "--in-flight"), (["no/such name", "--in-flight", "2"], "name")],
)  # fmt: skip
async def test_a_bad_tenant_quota_exits_2_naming_what(cli, store, args, named) -> None:  # type: ignore[no-untyped-def]
    _refused(cli("tenant", "quota", *args), named)
    assert await store.db.fetchval("SELECT count(*) FROM tenant_quotas") == 0
