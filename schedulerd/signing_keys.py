"""Webhook signing keys per tenant: rotate (a new key; older ones keep signing through a grace
period), list, retire (API and CLI), and sign_request(), the one call every outgoing webhook makes
for its X-Schedulerd-Signature header (core/signing.py has the scheme).

The signer caches a tenant's live keys for [secrets].signing_cache_s: a webhook call would
otherwise add a database read and an AES-GCM open per key to every attempt. The cost of the cache
is that a rotation or retirement reaches a replica's signing up to that long after it commits;
older keys stay live through a rotation's grace period, so only a key retired at once may still
sign (beside the live ones) for those seconds.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from schedulerd.config import MAX_SIGNING_GRACE_S, SecretsConfig
from schedulerd.core.signing import SIGNATURE_HEADER, signature_header
from schedulerd.errors import ConflictError, NotFoundError, ValidationError
from schedulerd.keyring import Keyring, associated_data, require
from schedulerd.models import SigningKeyEntry
from schedulerd.store import Store

KEY_ID_PREFIX = "k_"
SECRET_PREFIX = "whsec_"
MAX_LIVE_KEYS = 3  # per tenant: bounds the signature header (one v1 entry per live key)
CACHE_MAX_TENANTS = 10_000  # tenants whose keys a signer remembers; past it the cache starts afresh


@dataclass(frozen=True)
class IssuedSigningKey:
    id: str
    secret: str  # shown once: the receiver verifies with it; stored sealed
    created_at: datetime


def _scope(tenant: str) -> str:
    return f"signing/{tenant}"  # a lock apart from the tenant's secrets' (tenant names hold no '/')


class SigningKeys:
    def __init__(self, store: Store, keyring: Keyring | None, config: SecretsConfig) -> None:
        self.store, self.keyring, self.config = store, keyring, config

    async def rotate(self, tenant: str, grace_s: float | None = None) -> IssuedSigningKey:
        """A new signing key, which signs from now on; the tenant's older live keys keep signing
        for grace_s (default [secrets].signing_grace_s), then stop. Refused when the tenant already
        holds MAX_LIVE_KEYS live keys, or no [secrets].key is configured."""
        grace = self.config.signing_grace_s if grace_s is None else grace_s
        if isinstance(grace, bool) or not isinstance(grace, int | float) or not 0 <= grace <= MAX_SIGNING_GRACE_S:
            raise ValidationError("grace_s", f"must be a number of seconds between 0 and {MAX_SIGNING_GRACE_S:g}")
        keyring = require(self.keyring)
        key_id, secret = KEY_ID_PREFIX + secrets.token_hex(8), SECRET_PREFIX + secrets.token_urlsafe(32)
        sealed_with, sealed = keyring.seal(secret.encode(), associated_data("signing_key", tenant, key_id))
        async with self.store.transaction() as tx:
            await tx.secrets_lock_tenant(_scope(tenant))  # two rotations at once count each other's keys
            await tx.signing_key_prune(tenant)
            live = await tx.signing_key_list(tenant)
            if len(live) >= MAX_LIVE_KEYS:
                raise ConflictError("signing_key", f"this tenant already has {len(live)} live signing keys, the most "
                                    f"allowed: retire one first ({', '.join(k.id for k in live)})")  # fmt: skip
            await tx.signing_key_retire_older(tenant, float(grace))
            entry = await tx.signing_key_insert(key_id, tenant, sealed_with, sealed)
        return IssuedSigningKey(entry.id, secret, entry.created_at)

    async def entries(self, tenant: str) -> list[SigningKeyEntry]:
        """The tenant's live keys, newest first: ids and times, never secrets."""
        return await self.store.signing_key_list(tenant)

    async def retire(self, tenant: str, key_id: str) -> SigningKeyEntry:
        """Stop signing with a key at once and delete its secret; another tenant's id is "not found"."""
        retired = await self.store.signing_key_delete(tenant, key_id)
        if retired is None:
            raise NotFoundError(f"signing key {key_id!r} not found")
        return retired

    async def reseal(self) -> int:
        """Seal every signing key held under a previous [secrets] key with the current one."""
        keyring = require(self.keyring)
        moved = 0
        while batch := await self.store.signing_key_sealed_by_other_keys(keyring.current_id, 500):
            for tenant, row in batch:
                aad = associated_data("signing_key", tenant, row.name)
                sealed_with, sealed = keyring.seal(keyring.open(row.key_id, row.sealed, aad), aad)
                await self.store.signing_key_reseal(row.name, row.key_id, sealed_with, sealed)
                moved += 1
        return moved


class Signer:
    """Signs outgoing requests with each tenant's live keys (none: no header)."""

    def __init__(self, store: Store, keyring: Keyring, cache_s: float = 0.0, now_s: Callable[[], float] = time.time) -> None:
        self.store, self.keyring, self.cache_s, self.now_s = store, keyring, cache_s, now_s
        self._cache: dict[str, tuple[list[tuple[str, str]], float]] = {}  # tenant -> ((key id, secret), ...), monotonic expiry
        self._loading: dict[str, asyncio.Future[list[tuple[str, str]]]] = {}

    @classmethod
    def from_config(cls, store: Store, config: SecretsConfig) -> Signer | None:
        """The signer of a process with these [secrets] settings; None without a key (then no
        tenant can hold a signing key, and nothing is signed)."""
        keyring = Keyring.from_settings(config.key, config.previous_keys)
        return cls(store, keyring, config.signing_cache_s) if keyring is not None else None

    async def sign_request(
        self, tenant: str, method: str, url: str, body: bytes, *, idempotency_key: str = "", fence: str = "",
    ) -> dict[str, str]:  # fmt: skip
        """The signature header for this request as it will be sent ({} when the tenant has no live
        key). `url` is the URL the request goes to: its path and query are signed as sent."""
        keys = await self.keys(tenant)
        if not keys:
            return {}
        import httpx  # only to sign: a replica that never calls out never holds it (schedulerd/tasks/http.py)

        path = httpx.URL(url).raw_path.decode("ascii")
        header = signature_header(keys, int(self.now_s()), method, path, body, idempotency_key, fence)
        return {SIGNATURE_HEADER: header}

    async def keys(self, tenant: str) -> list[tuple[str, str]]:
        """(key id, secret) of the tenant's live keys, newest first: from the cache while fresh;
        concurrent calls for one tenant share one read."""
        cached = self._cache.get(tenant)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        loading = self._loading.get(tenant)
        if loading is None:
            loading = self._loading[tenant] = asyncio.ensure_future(self._load(tenant))

            def loaded(done: asyncio.Future[list[tuple[str, str]]]) -> None:
                self._loading.pop(tenant, None)
                if not done.cancelled():
                    done.exception()  # its waiters get the error; a load whose waiters all left must not warn

            loading.add_done_callback(loaded)
        return await asyncio.shield(loading)

    async def _load(self, tenant: str) -> list[tuple[str, str]]:
        keys = [(row.name, self.keyring.open(row.key_id, row.sealed, associated_data("signing_key", tenant, row.name)).decode())
                for row in await self.store.signing_key_live(tenant)]  # fmt: skip
        if self.cache_s > 0:
            if len(self._cache) >= CACHE_MAX_TENANTS:
                self._cache.clear()
            self._cache[tenant] = (keys, time.monotonic() + self.cache_s)
        return keys
