"""/v1/secrets and /v1/signing-keys over real HTTP: values and key secrets never come back out,
bad input is a 422 naming the field, one tenant never sees or touches another's (404, as for a
name that does not exist), and a deployment without [secrets].key refuses writes naming it."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from schedulerd.config import SecretsConfig
from schedulerd.keyring import Keyring
from schedulerd.tenant_secrets import TenantSecrets

KEY = base64.b64encode(os.urandom(32)).decode()
VALUE = "Bearer api-test-value-7f3a"


@pytest.fixture
def keyed_api(start_api: Callable[..., Any]) -> Any:
    return start_api(secrets=SecretsConfig(key=KEY, max_value_bytes=64, max_per_tenant=3))


@pytest.fixture
async def two_tenants(keyed_api: Any, make_tenant: Callable[..., Any]) -> Any:
    clients = []
    for prefix in ("alpha", "beta"):
        tenant, token = await make_tenant(prefix)
        client = httpx.AsyncClient(base_url=keyed_api.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        client.tenant = tenant  # type: ignore[attr-defined]
        clients.append(client)
    yield clients
    for client in clients:
        await client.aclose()


async def test_a_value_goes_in_and_never_comes_out(two_tenants, store) -> None:
    alpha, _ = two_tenants
    put = await alpha.put("/v1/secrets/VENDOR_AUTH", json={"value": VALUE})
    assert put.status_code == 200, put.text
    assert set(put.json()) == {"name", "created_at", "updated_at"} and put.json()["name"] == "VENDOR_AUTH"
    replaced = await alpha.put("/v1/secrets/VENDOR_AUTH", json={"value": VALUE + "-2"})
    assert replaced.json()["created_at"] == put.json()["created_at"] and replaced.json()["updated_at"] > put.json()["updated_at"]
    listed = await alpha.get("/v1/secrets")
    assert [item["name"] for item in listed.json()["items"]] == ["VENDOR_AUTH"]
    for response in (put, replaced, listed):
        assert "api-test-value" not in response.text
    sealed = await store.db.fetchval("SELECT sealed FROM tenant_secrets WHERE tenant = $1", alpha.tenant)
    assert b"api-test-value" not in sealed  # stored sealed
    opened = await TenantSecrets(store, Keyring.from_settings(KEY), SecretsConfig()).resolve(alpha.tenant, ["VENDOR_AUTH"])
    assert opened == {"VENDOR_AUTH": VALUE + "-2"}
    deleted = await alpha.delete("/v1/secrets/VENDOR_AUTH")
    assert deleted.status_code == 200 and "api-test-value" not in deleted.text
    assert (await alpha.get("/v1/secrets")).json() == {"items": []}
    assert (await alpha.delete("/v1/secrets/VENDOR_AUTH")).status_code == 404


async def test_tenants_never_see_or_touch_each_others_secrets(two_tenants, store) -> None:
    alpha, beta = two_tenants
    assert (await alpha.put("/v1/secrets/TOKEN", json={"value": VALUE})).status_code == 200
    assert (await beta.get("/v1/secrets")).json() == {"items": []}
    refused = await beta.delete("/v1/secrets/TOKEN")
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "not_found"
    assert refused.json() == (await beta.delete("/v1/secrets/NEVER_EXISTED")).json() | {
        "error": refused.json()["error"] | {"message": "secret 'TOKEN' not found"}}  # the same answer as for no such name
    assert (await beta.put("/v1/secrets/TOKEN", json={"value": "beta's own"})).status_code == 200
    keyring = Keyring.from_settings(KEY)
    assert await TenantSecrets(store, keyring, SecretsConfig()).resolve(alpha.tenant, ["TOKEN"]) == {"TOKEN": VALUE}


@pytest.mark.parametrize(
    ("path", "body", "field", "code"),
    [
        ("/v1/secrets/has%20space", {"value": "v"}, "name", "validation"),
        ("/v1/secrets/" + "x" * 65, {"value": "v"}, "name", "validation"),
        ("/v1/secrets/semi;colon", {"value": "v"}, "name", "validation"),
        ("/v1/secrets/OK", {"value": ""}, "value", "validation"),
        ("/v1/secrets/OK", {"value": 5}, "value", "validation"),
        ("/v1/secrets/OK", {}, "value", "validation"),
        ("/v1/secrets/OK", {"value": "x" * 65}, "value", "limit_exceeded"),
        ("/v1/secrets/OK", {"value": "\udcff"}, "value", "validation"),
        ("/v1/secrets/OK", {"value": "v", "tenant": "other"}, "tenant", "validation"),
    ],
)
async def test_bad_input_is_a_422_naming_the_field(two_tenants, path: str, body: dict, field: str, code: str) -> None:
    alpha, _ = two_tenants
    # ASCII JSON: a lone surrogate travels as its \u escape, as a client written in another language sends it
    response = await alpha.put(path, content=json.dumps(body), headers={"Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field and response.json()["error"]["code"] == code
    assert (await alpha.get("/v1/secrets")).json() == {"items": []}  # nothing written


async def test_a_tenant_holds_at_most_max_per_tenant_secrets(two_tenants) -> None:
    alpha, _ = two_tenants
    for name in ("A", "B", "C"):
        assert (await alpha.put(f"/v1/secrets/{name}", json={"value": "v"})).status_code == 200
    refused = await alpha.put("/v1/secrets/D", json={"value": "v"})
    assert refused.status_code == 422 and refused.json()["error"]["limit"] == "secrets.max_per_tenant"
    assert (await alpha.put("/v1/secrets/A", json={"value": "replaced"})).status_code == 200  # a replacement is not a new one


async def test_without_a_server_key_writes_are_refused_naming_the_setting(client) -> None:
    for response in (await client.put("/v1/secrets/X", json={"value": "v"}), await client.post("/v1/signing-keys")):
        assert response.status_code == 409, response.text
        error = response.json()["error"]
        assert error["code"] == "not_configured" and "[secrets].key" in error["message"] and error["limit"] == "secrets.key"
    assert (await client.get("/v1/secrets")).json() == {"items": []}


async def test_signing_keys_rotate_list_retire_per_tenant(two_tenants) -> None:
    alpha, beta = two_tenants
    first = await alpha.post("/v1/signing-keys")
    assert first.status_code == 201, first.text
    issued = first.json()
    assert issued["id"].startswith("k_") and issued["secret"].startswith("whsec_")
    second = (await alpha.post("/v1/signing-keys", json={"grace_s": 60})).json()
    listed = await alpha.get("/v1/signing-keys")
    items = listed.json()["items"]
    assert [k["id"] for k in items] == [second["id"], issued["id"]]
    assert items[0]["retires_at"] is None and items[1]["retires_at"] is not None
    assert issued["secret"] not in listed.text and second["secret"] not in listed.text
    assert (await beta.get("/v1/signing-keys")).json() == {"items": []}
    assert (await beta.delete(f"/v1/signing-keys/{issued['id']}")).status_code == 404
    third = (await alpha.post("/v1/signing-keys")).json()
    refused = await alpha.post("/v1/signing-keys")
    assert refused.status_code == 409 and refused.json()["error"]["field"] == "signing_key"
    retired = await alpha.delete(f"/v1/signing-keys/{issued['id']}")
    assert retired.status_code == 200 and retired.json()["id"] == issued["id"] and issued["secret"] not in retired.text
    assert [k["id"] for k in (await alpha.get("/v1/signing-keys")).json()["items"]] == [third["id"], second["id"]]
    assert (await alpha.delete(f"/v1/signing-keys/{issued['id']}")).status_code == 404


@pytest.mark.parametrize(("body", "field"), [({"grace_s": -1}, "grace_s"), ({"grace_s": 10**9}, "grace_s"),
                                             ({"grace_s": "1d"}, "grace_s"), ({"other": 1}, "other")])  # fmt: skip
async def test_bad_rotation_input_names_the_field(two_tenants, body: dict, field: str) -> None:
    alpha, _ = two_tenants
    response = await alpha.post("/v1/signing-keys", json=body)
    assert response.status_code == 422 and response.json()["error"]["field"] == field
    assert (await alpha.get("/v1/signing-keys")).json() == {"items": []}


async def test_a_bad_key_id_is_a_422_and_a_job_shows_references_not_values(two_tenants) -> None:
    alpha, _ = two_tenants
    assert (await alpha.delete("/v1/signing-keys/../../etc")).status_code in (404, 422)
    assert (await alpha.delete("/v1/signing-keys/k_nothex")).json()["error"]["field"] == "key_id"
    await alpha.put("/v1/secrets/AUTH", json={"value": VALUE})
    params = {"url": "https://hooks.example.com/x", "headers": {"Authorization": {"$secret": "AUTH"}}}
    created = await alpha.post("/v1/jobs", json={"task": "http", "params": params})
    assert created.status_code == 201, created.text
    shown = await alpha.get(f"/v1/jobs/{created.json()['job']['id']}")
    assert shown.json()["params"] == params and "api-test-value" not in shown.text
