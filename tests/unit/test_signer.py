"""signing_keys.Signer over a fake store: the header it makes verifies for the URL's path and
query, a tenant without keys gets no header, concurrent requests share one read, and the cache
holds for cache_s only."""

from __future__ import annotations

import asyncio
import os

from schedulerd.core.signing import SIGNATURE_HEADER, verify
from schedulerd.keyring import Keyring, associated_data
from schedulerd.models import Sealed
from schedulerd.signing_keys import Signer

RING = Keyring(os.urandom(32))


class FakeStore:
    def __init__(self, keys: dict[str, list[tuple[str, str]]]) -> None:
        self.keys, self.reads = keys, 0

    async def signing_key_live(self, tenant: str) -> list[Sealed]:
        self.reads += 1
        await asyncio.sleep(0)  # let concurrent callers arrive while this read is in flight
        sealed = []
        for key_id, secret in self.keys.get(tenant, []):
            sealed_with, blob = RING.seal(secret.encode(), associated_data("signing_key", tenant, key_id))
            sealed.append(Sealed(key_id, sealed_with, blob))
        return sealed


async def test_the_header_verifies_for_the_path_and_query_as_sent() -> None:
    signer = Signer(FakeStore({"acme": [("k_new", "whsec_new"), ("k_old", "whsec_old")]}), RING, now_s=lambda: 1000.0)  # type: ignore[arg-type]
    headers = await signer.sign_request("acme", "post", "https://h.example/a%20b/c?x=1&y=2#frag", b"{}",
                                        idempotency_key="e", fence="4")  # fmt: skip
    header = headers[SIGNATURE_HEADER]
    assert header.startswith("t=1000,v1=k_new:") and ",v1=k_old:" in header
    for secret in ("whsec_new", "whsec_old"):
        assert verify(header, [secret], "POST", "/a%20b/c?x=1&y=2", b"{}", now_s=1000, idempotency_key="e", fence="4")
    assert not verify(header, ["whsec_new"], "POST", "/a%20b/c", b"{}", now_s=1000, idempotency_key="e", fence="4")


async def test_a_tenant_without_keys_gets_no_header() -> None:
    assert await Signer(FakeStore({}), RING).sign_request("acme", "GET", "https://h.example/", b"") == {}  # type: ignore[arg-type]


async def test_concurrent_requests_share_one_read_and_the_cache_expires() -> None:
    store = FakeStore({"acme": [("k_1", "whsec_1")]})
    cached = Signer(store, RING, cache_s=60)  # type: ignore[arg-type]
    results = await asyncio.gather(*(cached.keys("acme") for _ in range(20)))
    assert store.reads == 1 and all(r == [("k_1", "whsec_1")] for r in results)
    await cached.keys("acme")
    assert store.reads == 1  # fresh: from the cache
    uncached = Signer(store, RING, cache_s=0)  # type: ignore[arg-type]
    await uncached.keys("acme")
    await uncached.keys("acme")
    assert store.reads == 3  # no cache: a read each time
