"""Tenant secrets: set, list and delete them (API and CLI), open them at call time (the http task),
and move them to a new [secrets].key (reseal). A value is sealed before it reaches the store and
opened only by resolve(), for the attempt that uses it; no list, error or log carries one.

resolve() reads the store on every call, with no cache: it runs once per attempt that references a
secret, one indexed read beside an HTTP call; a secret replaced or deleted takes effect at the
next attempt on every replica; and a plaintext lives no longer than the call that needs it.
"""

from __future__ import annotations

from collections.abc import Sequence

from schedulerd.config import SecretsConfig
from schedulerd.core.secret_refs import NAME_PATTERN, NAME_RULE
from schedulerd.errors import NotFoundError, ValidationError
from schedulerd.keyring import Keyring, associated_data, require
from schedulerd.models import SecretEntry
from schedulerd.store import Store

RESEAL_BATCH = 500  # rows read per round trip by reseal()


class MissingSecretError(NotFoundError):
    """A reference names secrets the tenant has not set; `names` lists them."""

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__(f"no secret named {', '.join(map(repr, names))} (set it with PUT /v1/secrets/NAME or "
                         "`schedulerd secret set NAME`)")  # fmt: skip
        self.names = list(names)


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ValidationError("name", NAME_RULE)
    return name


class TenantSecrets:
    def __init__(self, store: Store, keyring: Keyring | None, config: SecretsConfig) -> None:
        self.store, self.keyring, self.config = store, keyring, config

    async def put(self, tenant: str, name: str, value: str) -> SecretEntry:
        """Store or replace a secret. Refuses a bad name or value naming the field, and any write
        when no [secrets].key is configured (NotConfiguredError)."""
        check_name(name)
        if not isinstance(value, str) or not value:
            raise ValidationError("value", "must be a non-empty string")
        try:
            plaintext = value.encode()
        except UnicodeEncodeError:
            raise ValidationError("value", "is not valid UTF-8 text (it holds a lone surrogate)") from None
        limit = self.config.max_value_bytes
        if len(plaintext) > limit:
            raise ValidationError("value", f"is {len(plaintext)} bytes; the most is {limit}", limit="secrets.max_value_bytes")
        key_id, sealed = require(self.keyring).seal(plaintext, associated_data("secret", tenant, name))
        async with self.store.transaction() as tx:
            await tx.secrets_lock_tenant(tenant)  # the count below holds until the commit
            held, exists = await tx.secret_count(tenant, name)
            if not exists and held >= self.config.max_per_tenant:
                raise ValidationError("name", f"this tenant already holds {held} secrets, the most allowed; delete one first",
                                      limit="secrets.max_per_tenant")  # fmt: skip
            return await tx.secret_put(tenant, name, key_id, sealed)

    async def entries(self, tenant: str) -> list[SecretEntry]:
        """The tenant's secrets by name: names and times, never values."""
        return await self.store.secret_list(tenant)

    async def delete(self, tenant: str, name: str) -> SecretEntry:
        """Delete one of the tenant's secrets; another tenant's name is "not found" like a missing one."""
        deleted = await self.store.secret_delete(tenant, check_name(name))
        if deleted is None:
            raise NotFoundError(f"secret {name!r} not found")
        return deleted

    async def resolve(self, tenant: str, names: Sequence[str]) -> dict[str, str]:
        """{name: value} for the attempt that references them. MissingSecretError names the ones
        the tenant lacks; NotConfiguredError or UnsealError when this process cannot open them."""
        keyring = require(self.keyring)
        rows = {row.name: row for row in await self.store.secret_get_many(tenant, names)}
        missing = [name for name in names if name not in rows]
        if missing:
            raise MissingSecretError(missing)
        return {name: keyring.open(row.key_id, row.sealed, associated_data("secret", tenant, name)).decode()
                for name, row in rows.items()}  # fmt: skip

    async def reseal(self) -> int:
        """Seal every secret held under a previous key with the current one; returns how many.
        A row written meanwhile is already under the current key and is left as it is."""
        keyring = require(self.keyring)
        moved = 0
        while batch := await self.store.secret_sealed_by_other_keys(keyring.current_id, RESEAL_BATCH):
            for tenant, row in batch:
                aad = associated_data("secret", tenant, row.name)
                key_id, sealed = keyring.seal(keyring.open(row.key_id, row.sealed, aad), aad)
                await self.store.secret_reseal(tenant, row.name, row.key_id, key_id, sealed)
                moved += 1
        return moved
