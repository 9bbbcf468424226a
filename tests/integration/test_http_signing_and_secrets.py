"""The http task signs its requests with the tenant's signing keys and puts tenant secrets into
headers and JSON bodies at call time, against a local HTTP server whose handler verifies the
signature with the function docs/webhooks.md documents. A missing secret fails the execution after
one attempt; no secret value reaches the attempt's record or the log."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from schedulerd.config import HttpConfig, SecretsConfig
from schedulerd.keyring import Keyring
from schedulerd.models import ExecutionStatus
from schedulerd.signing_keys import Signer, SigningKeys
from schedulerd.store import Store
from schedulerd.tasks import http
from schedulerd.tenant_secrets import TenantSecrets
from tests.http_target import Reply, Target, serve
from tests.integration.conftest import run_until_idle
from tests.webhook_receiver import documented_verify

LOCAL = HttpConfig(allow_hosts=("127.0.0.1:*",))
verify_signature = documented_verify()


@pytest.fixture
def target() -> Iterator[Target]:
    yield from serve()


@pytest.fixture
def master_key() -> bytes:
    return os.urandom(32)


@pytest.fixture
def keyring(master_key: bytes) -> Keyring:
    return Keyring(master_key)


@pytest.fixture
def tenant() -> str:
    return f"hooks-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def secrets(store: Store, keyring: Keyring) -> Iterator[TenantSecrets]:
    """Tenant secrets and signing (signing keys read afresh for every request) in the http task."""
    secrets = TenantSecrets(store, keyring, SecretsConfig())
    http.configure(LOCAL, secrets, Signer(store, keyring, cache_s=0))
    yield secrets
    http.configure(HttpConfig())


def verified(received, secret_list: list[str]) -> bool:
    return verify_signature(received.headers.get("X-Schedulerd-Signature", ""), secret_list, received.method,
                            received.path, received.body, received.headers.get("Idempotency-Key", ""),
                            received.headers.get("X-Fence-Token", ""))  # fmt: skip


async def test_requests_are_signed_and_the_documented_snippet_verifies_them(
    target, secrets, store, keyring, tenant, make_job, make_worker,
) -> None:  # fmt: skip
    issued = await SigningKeys(store, keyring, SecretsConfig()).rotate(tenant)
    target.signing_secrets = [issued.secret]  # the target answers 401 to a request that does not verify
    target.script = [Reply(503, b"again")]
    _, execution = await make_job("http", tenant=tenant, params={"url": target.url + "/hook?x=1", "json": {"a": 1}},
                                  max_attempts=2, backoff_base_s=0.01)  # fmt: skip

    finished = await run_until_idle(make_worker(), store, execution.id)

    assert finished.status == ExecutionStatus.SUCCEEDED and len(target.requests) == 2
    for received in target.requests:  # every attempt signed afresh, over its own fence
        assert received.headers["X-Schedulerd-Signature"].split(",")[1].startswith(f"v1={issued.id}:")
        assert verified(received, [issued.secret])
        assert not verified(received, ["whsec_someone-else"])
    first = target.requests[0]
    assert not verify_signature(first.headers["X-Schedulerd-Signature"], [issued.secret], "POST", "/other", first.body,
                                first.headers["Idempotency-Key"], first.headers["X-Fence-Token"])  # fmt: skip


async def test_a_receiver_holding_another_secret_refuses_and_the_execution_fails_at_once(
    target, secrets, store, keyring, tenant, make_job, make_worker,
) -> None:  # fmt: skip
    await SigningKeys(store, keyring, SecretsConfig()).rotate(tenant)
    target.signing_secrets = ["whsec_not-the-tenants"]
    _, execution = await make_job("http", tenant=tenant, params={"url": target.url}, max_attempts=5)

    finished = await run_until_idle(make_worker(), store, execution.id)

    assert finished.status == ExecutionStatus.FAILED and finished.attempt == 1 and "answered 401" in finished.last_error


async def test_a_tenant_without_keys_sends_no_signature(target, secrets, make_job, make_worker, store, tenant) -> None:
    _, execution = await make_job("http", tenant=tenant, params={"url": target.url})
    await run_until_idle(make_worker(), store, execution.id)
    assert "X-Schedulerd-Signature" not in target.requests[0].headers


async def test_during_a_rotation_both_keys_verify_then_the_retired_one_does_not(
    target, secrets, store, keyring, tenant, make_job, make_worker,
) -> None:  # fmt: skip
    keys = SigningKeys(store, keyring, SecretsConfig())
    old = await keys.rotate(tenant)
    new = await keys.rotate(tenant, grace_s=3600)
    assert [k.id for k in await keys.entries(tenant)] == [new.id, old.id]
    _, during = await make_job("http", tenant=tenant, params={"url": target.url + "/during"})
    await run_until_idle(make_worker(), store, during.id)
    await keys.retire(tenant, old.id)
    _, after = await make_job("http", tenant=tenant, params={"url": target.url + "/after"})
    await run_until_idle(make_worker(), store, after.id)

    in_rotation, retired = target.requests
    header = in_rotation.headers["X-Schedulerd-Signature"]
    assert [entry.split(":")[0] for entry in header.split(",")[1:]] == [f"v1={new.id}", f"v1={old.id}"]
    assert verified(in_rotation, [old.secret]) and verified(in_rotation, [new.secret])
    assert verified(retired, [new.secret]) and not verified(retired, [old.secret])


async def test_a_grace_period_of_zero_retires_older_keys_at_once(secrets, store, keyring, tenant) -> None:
    keys = SigningKeys(store, keyring, SecretsConfig())
    await keys.rotate(tenant)
    newest = await keys.rotate(tenant, grace_s=0)
    assert [k.id for k in await keys.entries(tenant)] == [newest.id]
    assert [kid for kid, _ in await Signer(store, keyring).keys(tenant)] == [newest.id]


async def test_secrets_are_put_into_headers_and_json_at_call_time(
    target, secrets, store, tenant, make_job, make_worker,
) -> None:  # fmt: skip
    await secrets.put(tenant, "VENDOR_AUTH", "Bearer tok-1")
    await secrets.put(tenant, "API_KEY", "key-é-1")
    params = {"url": target.url, "headers": {"Authorization": {"$secret": "VENDOR_AUTH"}},
              "json": {"account": "a-42", "nested": [{"key": {"$secret": "API_KEY"}}]}}  # fmt: skip
    job, execution = await make_job("http", tenant=tenant, params=params)

    await run_until_idle(make_worker(), store, execution.id)

    [received] = target.requests
    assert received.headers["Authorization"] == "Bearer tok-1"
    assert json.loads(received.body) == {"account": "a-42", "nested": [{"key": "key-é-1"}]}
    assert received.headers["Content-Type"] == "application/json"
    stored = await store.job_get(job.id)
    assert stored is not None and stored.params == params  # the job keeps the references, never the values


async def test_a_missing_secret_fails_permanently_after_one_attempt(
    target, secrets, store, tenant, make_job, make_worker,
) -> None:  # fmt: skip
    _, execution = await make_job("http", tenant=tenant, max_attempts=5,
                                  params={"url": target.url, "headers": {"Authorization": {"$secret": "NOT_SET"}}})  # fmt: skip

    finished = await run_until_idle(make_worker(), store, execution.id)

    assert finished.status == ExecutionStatus.FAILED and finished.attempt == 1
    assert "secret 'NOT_SET', which this tenant has not set" in finished.last_error
    assert target.count() == 0  # nothing was sent


async def test_another_tenants_secret_is_missing_not_borrowed(target, secrets, store, tenant, make_job, make_worker) -> None:
    await secrets.put(tenant + "-other", "SHARED_NAME", "theirs")
    _, execution = await make_job("http", tenant=tenant, params={"url": target.url, "json": {"k": {"$secret": "SHARED_NAME"}}})

    finished = await run_until_idle(make_worker(), store, execution.id)

    assert finished.status == ExecutionStatus.FAILED and "SHARED_NAME" in finished.last_error and target.count() == 0


async def test_a_row_copied_to_another_tenant_does_not_open(target, secrets, store, tenant, make_job, make_worker) -> None:
    await secrets.put(tenant + "-victim", "AUTH", "Bearer victim")
    await store.db.execute("INSERT INTO tenant_secrets (tenant, name, key_id, sealed) SELECT $1, name, key_id, sealed "
                           "FROM tenant_secrets WHERE tenant = $2", tenant, tenant + "-victim")  # fmt: skip
    _, execution = await make_job("http", tenant=tenant, params={"url": target.url, "headers": {"A": {"$secret": "AUTH"}}})

    finished = await run_until_idle(make_worker(), store, execution.id)

    assert finished.status == ExecutionStatus.FAILED and finished.attempt == 1
    assert "cannot open secret 'AUTH'" in finished.last_error and target.count() == 0


async def test_no_secret_value_reaches_the_attempt_or_the_log(target, secrets, store, tenant, make_job, make_worker) -> None:
    value = "Bearer super-secret-token-42"
    await secrets.put(tenant, "AUTH", value)
    # The target fails and echoes the header back in its body, as a debugging endpoint might.
    target.failure = Reply(500, b"rejected Authorization: " + value.encode())
    target.failing = True
    _, execution = await make_job("http", tenant=tenant, max_attempts=2, backoff_base_s=0.01,
                                  params={"url": target.url, "headers": {"Authorization": {"$secret": "AUTH"}}})  # fmt: skip

    with capture_logs() as logs:
        finished = await run_until_idle(make_worker(), store, execution.id)

    assert finished.status == ExecutionStatus.FAILED and target.count() == 2
    assert all(r.headers["Authorization"] == value for r in target.requests)
    attempts = await store.attempt_list(execution.id)
    recorded = json.dumps([[a.error, a.detail] for a in attempts]) + (finished.last_error or "")
    assert "***AUTH" in recorded and "super-secret" not in recorded
    assert logs and "super-secret" not in repr(logs)
    assert any(entry.get("event") == "worker.attempt_failed" for entry in logs)


async def test_a_secret_a_header_cannot_carry_is_refused_without_quoting_it(
    target, secrets, store, tenant, make_job, make_worker,
) -> None:  # fmt: skip
    await secrets.put(tenant, "BROKEN", "line1\r\nX-Injected: yes")
    _, execution = await make_job("http", tenant=tenant, params={"url": target.url, "headers": {"A": {"$secret": "BROKEN"}}})

    finished = await run_until_idle(make_worker(), store, execution.id)

    assert finished.status == ExecutionStatus.FAILED and finished.attempt == 1 and target.count() == 0
    assert "secret 'BROKEN' has a character a header value cannot carry" in finished.last_error
    assert "X-Injected" not in finished.last_error


async def test_without_a_server_key_a_reference_fails_naming_the_setting(target, store, tenant, make_job, make_worker) -> None:
    http.configure(LOCAL, TenantSecrets(store, None, SecretsConfig()), None)
    try:
        _, execution = await make_job("http", tenant=tenant, params={"url": target.url, "headers": {"A": {"$secret": "X"}}})
        finished = await run_until_idle(make_worker(), store, execution.id)
    finally:
        http.configure(HttpConfig())
    assert finished.status == ExecutionStatus.FAILED and finished.attempt == 1
    assert "[secrets].key" in finished.last_error and target.count() == 0


async def test_reseal_moves_rows_to_the_new_key(store, master_key, keyring, tenant) -> None:
    await TenantSecrets(store, keyring, SecretsConfig()).put(tenant, "AUTH", "v1")
    issued = await SigningKeys(store, keyring, SecretsConfig()).rotate(tenant)
    new_key = os.urandom(32)
    rotated = Keyring(new_key, [master_key])
    moved = await TenantSecrets(store, rotated, SecretsConfig()).reseal() + await SigningKeys(store, rotated, SecretsConfig()).reseal()
    assert moved >= 2
    only_new = Keyring(new_key)
    assert await TenantSecrets(store, only_new, SecretsConfig()).resolve(tenant, ["AUTH"]) == {"AUTH": "v1"}
    assert await Signer(store, only_new).keys(tenant) == [(issued.id, issued.secret)]
