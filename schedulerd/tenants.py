"""Tenants and their API tokens: register a tenant, issue tokens, resolve a token to its tenant.

A token is `sdk_` + 32 random bytes (URL-safe base64), shown once and stored as its SHA-256.
A fast hash is enough here: 256 random bits cannot be guessed, so there is nothing for a slow
hash (bcrypt, scrypt) to slow down, and every API request can afford the lookup.
"""

from __future__ import annotations

import hashlib
import secrets
import time
import uuid
from dataclasses import dataclass
from uuid import UUID

from schedulerd.errors import NotFoundError, ValidationError
from schedulerd.jobs import TENANT_PATTERN
from schedulerd.models import ApiToken
from schedulerd.store import Store

TOKEN_PREFIX = "sdk_"
MAX_TOKEN_LENGTH = 100  # a real token is 47 characters; anything far longer is not one


@dataclass(frozen=True)
class Principal:
    """Who is calling: the tenant a bearer token belongs to."""

    tenant: str
    token_id: UUID


@dataclass(frozen=True)
class IssuedToken:
    token_id: UUID
    tenant: str
    token: str  # the secret itself: print it once, it is not stored


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


TOKEN_CACHE_MAX = 10_000  # tokens remembered per process; past it the cache starts afresh


class Tenants:
    def __init__(self, store: Store, cache_s: float = 0.0) -> None:
        self.store = store
        # token hash -> (principal, monotonic expiry): a keep-alive client's requests skip the
        # lookup, a round trip each. A token revoked through another replica still works here
        # for up to cache_s seconds; one revoked through this replica stops at once.
        self.cache_s = cache_s
        self._cache: dict[bytes, tuple[Principal, float]] = {}

    async def create(self, name: str) -> IssuedToken:
        """Register a tenant and issue its first token, in one transaction."""
        if not TENANT_PATTERN.match(name):
            raise ValidationError("name", "must be 1-64 characters of letters, digits, '_', '.', '-', starting with a letter or digit")
        async with self.store.transaction() as tx:
            if not await tx.tenant_insert(name):
                raise ValidationError("name", f"tenant {name!r} already exists")
            return await Tenants(tx).issue_token(name)

    async def issue_token(self, tenant: str) -> IssuedToken:
        """Another token for an existing tenant (tokens can be rotated without downtime)."""
        token, token_id = new_token(), uuid.uuid4()
        if not await self.store.token_insert(token_id, tenant, token_hash(token)):
            raise NotFoundError(f"tenant {tenant!r} not found (create it with `schedulerd tenant create`)")
        return IssuedToken(token_id, tenant, token)

    async def tokens(self, tenant: str) -> list[ApiToken]:
        """A tenant's tokens, newest first (ids and times; the secrets are not kept)."""
        return await self.store.token_list(tenant)

    async def revoke(self, token_id: UUID, tenant: str | None = None) -> ApiToken:
        """Revoke a token (only `tenant`'s, when given: another tenant's is "not found"). Takes
        effect on this replica's next request that presents it, and within [api].token_cache_s
        on the others (their cached lookups expire)."""
        revoked = await self.store.token_revoke(token_id, tenant)
        if revoked is None:
            raise NotFoundError(f"token {token_id} not found")
        for digest in [d for d, (principal, _) in self._cache.items() if principal.token_id == token_id]:
            del self._cache[digest]
        return revoked

    async def authenticate(self, token: str) -> Principal | None:
        """The tenant of a live token, or None for anything else."""
        if not token.startswith(TOKEN_PREFIX) or len(token) > MAX_TOKEN_LENGTH or not token.isascii():
            return None
        digest = token_hash(token)
        cached = self._cache.get(digest)
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        found = await self.store.token_authenticate(digest)
        if found is None:
            self._cache.pop(digest, None)
            return None
        principal = Principal(tenant=found[1], token_id=found[0])
        if self.cache_s > 0:
            if len(self._cache) >= TOKEN_CACHE_MAX:
                self._cache.clear()
            self._cache[digest] = (principal, time.monotonic() + self.cache_s)
        return principal
