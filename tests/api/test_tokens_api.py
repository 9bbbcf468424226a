"""A tenant's own tokens through the API (list, issue, revoke), one Authorization header only,
a per-address limit on requests without a valid token, and idempotency keys pruned after their
TTL."""

from __future__ import annotations

import httpx

from schedulerd.config import RetentionConfig
from schedulerd.retention import Retention


async def test_a_tenant_lists_issues_and_revokes_its_own_tokens(api, client, make_tenant) -> None:  # type: ignore[no-untyped-def]
    listed = (await client.get("/v1/tokens")).json()["items"]
    assert len(listed) == 1 and listed[0]["current"] and listed[0]["revoked_at"] is None
    issued = await client.post("/v1/tokens")
    assert issued.status_code == 201 and issued.json()["token"].startswith("sdk_")
    second = issued.json()
    async with httpx.AsyncClient(base_url=api.url, headers={"Authorization": f"Bearer {second['token']}"}) as other:
        assert (await other.get("/v1/me")).json()["tenant"] == client.tenant
        listed = (await other.get("/v1/tokens")).json()["items"]
        assert [t["current"] for t in listed] == [True, False]  # newest first: the one just issued
        assert "token" not in listed[0] and "token_hash" not in listed[0]
        revoked = await client.delete(f"/v1/tokens/{second['id']}")
        assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None
        assert (await other.get("/v1/me")).status_code == 401  # revoked: refused on the next request

    # Another tenant's token is "not found", like one that does not exist, and stays live.
    _, theirs = await make_tenant("other")
    async with httpx.AsyncClient(base_url=api.url, headers={"Authorization": f"Bearer {theirs}"}) as them:
        their_id = (await them.get("/v1/tokens")).json()["items"][0]["id"]
        assert (await client.delete(f"/v1/tokens/{their_id}")).status_code == 404
        assert (await them.get("/v1/me")).status_code == 200


async def test_two_authorization_headers_are_a_400(api, make_tenant) -> None:  # type: ignore[no-untyped-def]
    _, a = await make_tenant("a")
    _, b = await make_tenant("b")
    async with httpx.AsyncClient(base_url=api.url) as http:
        for headers in ([("Authorization", f"Bearer {a}"), ("Authorization", f"Bearer {b}")],
                        [("Authorization", f"Bearer {a}"), ("authorization", "Bearer sdk_nope")]):  # fmt: skip
            response = await http.get("/v1/me", headers=headers)
            assert response.status_code == 400, response.text
            assert response.json()["error"]["field"] == "Authorization"


async def test_requests_without_a_valid_token_count_against_their_address(start_api, make_tenant) -> None:  # type: ignore[no-untyped-def]
    server = start_api(auth_failure_limit=5, rate_window_s=60.0)
    _, token = await make_tenant()
    async with httpx.AsyncClient(base_url=server.url) as http:
        statuses = [(await http.get("/v1/me", headers={"Authorization": f"Bearer sdk_guess{i}"})).status_code
                    for i in range(8)]  # fmt: skip
        assert statuses == [401] * 5 + [429] * 3
        limited = await http.get("/v1/me", headers={"Authorization": "Bearer sdk_another"})
        assert limited.json()["error"]["limit"] == "api.auth_failure_limit" and "Retry-After" in limited.headers


async def test_idempotency_keys_are_pruned_after_their_ttl(client, store) -> None:  # type: ignore[no-untyped-def]
    for key in ("old-1", "old-2", "fresh"):
        response = await client.post("/v1/jobs", json={"task": "noop"}, headers={"Idempotency-Key": key})
        assert response.status_code == 201
    await store.db.execute("UPDATE idempotency_keys SET created_at = created_at - interval '2 days' WHERE key LIKE 'old-%'")
    result = await Retention(store, RetentionConfig(), idempotency_ttl_s=86400.0).run_once()
    assert result.idempotency_keys_pruned == 2
    assert await store.db.fetchval("SELECT array_agg(key) FROM idempotency_keys") == ["fresh"]
    assert (await Retention(store, RetentionConfig(), idempotency_ttl_s=86400.0).run_once()).idempotency_keys_pruned == 0
