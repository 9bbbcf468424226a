"""`schedulerd secret ...` and `schedulerd signing-key ...` as a user runs them: the value comes
from standard input, never the arguments, and never appears in any output; bad input exits 2
naming the field or flag; a missing object exits 1."""

from __future__ import annotations

import base64
import json
import os
import uuid

import pytest

from schedulerd.config import SecretsConfig
from schedulerd.keyring import Keyring
from schedulerd.tenant_secrets import TenantSecrets
from tests.conftest import wait_for

KEY = base64.b64encode(os.urandom(32)).decode()
WITH_KEY = {"SCHEDULERD_SECRETS_KEY": KEY}
VALUE = "Bearer cli-test-value-91c2"


@pytest.fixture
def tenant() -> str:
    return f"cli-{uuid.uuid4().hex[:10]}"


def outputs(*results) -> str:  # type: ignore[no-untyped-def]
    return "".join(r.stdout + r.stderr for r in results)


async def test_secret_set_reads_stdin_and_never_prints_the_value(cli, store, tenant) -> None:
    set_ = cli("secret", "set", "VENDOR_AUTH", "--tenant", tenant, stdin=VALUE + "\n", environ=WITH_KEY)
    assert set_.returncode == 0, set_.stderr
    assert f"secret VENDOR_AUTH of tenant {tenant} set" in set_.stdout
    listed = cli("secret", "list", "--tenant", tenant, "--json", environ=WITH_KEY)
    assert listed.returncode == 0 and [e["name"] for e in json.loads(listed.stdout)] == ["VENDOR_AUTH"]
    table = cli("secret", "list", "--tenant", tenant)  # listing needs no key: nothing is opened
    assert table.returncode == 0 and "VENDOR_AUTH" in table.stdout
    assert "cli-test-value" not in outputs(set_, listed, table)
    opened = await TenantSecrets(store, Keyring.from_settings(KEY), SecretsConfig()).resolve(tenant, ["VENDOR_AUTH"])
    assert opened == {"VENDOR_AUTH": VALUE}  # the newline echo adds is dropped
    deleted = cli("secret", "delete", "VENDOR_AUTH", "--tenant", tenant)
    assert deleted.returncode == 0 and "deleted" in deleted.stdout
    again = cli("secret", "delete", "VENDOR_AUTH", "--tenant", tenant)
    assert again.returncode == 1 and "secret 'VENDOR_AUTH' not found" in again.stderr


@pytest.mark.parametrize(
    ("args", "stdin", "settings", "named"),
    [
        (["secret", "set", "has space"], "v", WITH_KEY, "name:"),
        (["secret", "set", "X", "--tenant", "no tenant!"], "v", WITH_KEY, "--tenant"),
        (["secret", "set", "X"], "", WITH_KEY, "value:"),
        (["secret", "set", "X"], "x" * 9000, WITH_KEY, "value: is 9000 bytes; the most is 8192"),
        (["secret", "set", "X"], "v", {}, "[secrets].key"),
        (["secret", "set", "X", VALUE], "", WITH_KEY, "value: is read from standard input"),  # never a value in argv
        (["signing-key", "rotate", "--grace", "soon"], None, WITH_KEY, "--grace"),
        (["signing-key", "rotate", "--grace", "60d"], None, WITH_KEY, "--grace"),
        (["signing-key", "rotate"], None, {}, "[secrets].key"),
    ],
)
def test_bad_input_exits_2_naming_the_field(cli, tenant, args, stdin, settings, named) -> None:
    result = cli(*args, *(["--tenant", tenant] if "--tenant" not in args else []), stdin=stdin, environ=settings)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert named in result.stderr and "Traceback" not in result.stderr
    assert "cli-test-value" not in outputs(result)
    listed = cli("secret", "list", "--tenant", tenant, "--json")
    assert listed.returncode != 0 or json.loads(listed.stdout) == []  # nothing written


def test_signing_key_rotate_prints_the_secret_once_list_and_retire(cli, tenant) -> None:
    rotated = cli("signing-key", "rotate", "--tenant", tenant, environ=WITH_KEY)
    assert rotated.returncode == 0, rotated.stderr
    key_id = rotated.stdout.split()[2]
    secret = rotated.stdout.strip().splitlines()[-1]
    assert key_id.startswith("k_") and secret.startswith("whsec_")
    listed = cli("signing-key", "list", "--tenant", tenant, "--json")
    assert [k["id"] for k in json.loads(listed.stdout)] == [key_id] and secret not in listed.stdout
    other = cli("signing-key", "list", "--tenant", tenant + "-other")
    assert other.returncode == 0 and key_id not in other.stdout
    assert cli("signing-key", "retire", key_id, "--tenant", tenant + "-other").returncode == 1  # another tenant's: not found
    retired = cli("signing-key", "retire", key_id, "--tenant", tenant)
    assert retired.returncode == 0 and f"signing key {key_id} of tenant {tenant} retired" in retired.stdout
    assert cli("signing-key", "retire", key_id, "--tenant", tenant).returncode == 1


async def test_reseal_moves_every_row_to_the_new_key(cli, store, tenant) -> None:
    assert cli("secret", "set", "AUTH", "--tenant", tenant, stdin="v1", environ=WITH_KEY).returncode == 0
    new_key = base64.b64encode(os.urandom(32)).decode()
    without_old = cli("secret", "reseal", environ={"SCHEDULERD_SECRETS_KEY": new_key})
    assert without_old.returncode == 1 and "neither [secrets].key nor previous_keys" in without_old.stderr
    resealed = cli("secret", "reseal", environ={"SCHEDULERD_SECRETS_KEY": new_key, "SCHEDULERD_SECRETS_PREVIOUS_KEYS": KEY})
    assert resealed.returncode == 0 and "resealed 1 secret(s)" in resealed.stdout, resealed.stderr
    opened = await TenantSecrets(store, Keyring.from_settings(new_key), SecretsConfig()).resolve(tenant, ["AUTH"])
    assert opened == {"AUTH": "v1"}


async def test_the_daemon_signs_and_puts_secrets_in_end_to_end(cli, start_daemon, tenant) -> None:
    """The daemon's own wiring ([secrets].key from the environment): a key rotated and a secret
    set through the CLI, an http job run by `schedulerd run`; the target verifies the signature
    with the documented snippet and receives the secret; the daemon's log never carries it."""
    from tests.http_target import Target
    from tests.webhook_receiver import documented_verify

    target = Target()
    try:
        assert cli("secret", "set", "AUTH", "--tenant", tenant, stdin=VALUE, environ=WITH_KEY).returncode == 0
        rotated = cli("signing-key", "rotate", "--tenant", tenant, environ=WITH_KEY)
        secret = rotated.stdout.strip().splitlines()[-1]
        daemon = start_daemon("replica-1", SCHEDULERD_HTTP_ALLOW_HOSTS="127.0.0.1:*", **WITH_KEY)
        params = {"url": target.url + "/hook", "headers": {"Authorization": {"$secret": "AUTH"}}, "json": {"a": 1}}
        created = cli("job", "create", "--task", "http", "--tenant", tenant, "--params", json.dumps(params))
        assert created.returncode == 0, created.stderr

        async def received() -> bool:
            return target.count() > 0

        await wait_for(received, timeout_s=30, interval_s=0.2)
        [request] = target.requests
        assert request.headers["Authorization"] == VALUE
        assert documented_verify()(request.headers["X-Schedulerd-Signature"], [secret], request.method, request.path,
                                   request.body, request.headers["Idempotency-Key"], request.headers["X-Fence-Token"])  # fmt: skip
        assert "cli-test-value" not in daemon.log_text()
    finally:
        target.close()
