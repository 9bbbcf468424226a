"""Sealing tenant secrets and signing keys at rest: AES-256-GCM under [secrets].key, with the
tenant and the row's name bound in as associated data, so a sealed value copied to another
tenant's (or another name's) row fails to open. No store: callers read and write the rows.

A sealed value is nonce (12 random bytes) + ciphertext + tag, kept beside the id of the key that
sealed it (the first 8 hex digits of the key's SHA-256), so [secrets].previous_keys can still open
rows sealed before a key rotation until `schedulerd secret reseal` has moved them to the new key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Sequence

from schedulerd.errors import NotConfiguredError, UnsealError

KEY_BYTES = 32
NONCE_BYTES = 12
NOT_CONFIGURED = ("secrets are not enabled on this deployment: the operator sets [secrets].key "
                  "(SCHEDULERD_SECRETS_KEY; docs/configuration.md)")  # fmt: skip


def parse_master_key(text: str) -> bytes:
    """A key as configured: base64 (standard or URL-safe, padding optional) of 32 bytes.
    ValueError says what is wrong without quoting the key."""
    cleaned = text.strip()
    try:
        key = base64.b64decode(cleaned.replace("-", "+").replace("_", "/") + "=" * (-len(cleaned) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("is not base64 (make one with: python3 -c 'import base64, os; "
                         "print(base64.b64encode(os.urandom(32)).decode())')") from None  # fmt: skip
    if len(key) != KEY_BYTES:
        raise ValueError(f"must decode to {KEY_BYTES} bytes, got {len(key)}")
    return key


def master_key_id(key: bytes) -> str:
    """The id stored beside each sealed value: names the key without revealing it."""
    return hashlib.sha256(key).hexdigest()[:8]


def associated_data(kind: str, tenant: str, name: str) -> bytes:
    """What a sealed value is bound to: its kind ("secret", "signing_key"), tenant and name (NUL
    cannot occur in either, so the parts cannot run into each other)."""
    return f"schedulerd.{kind}\x00{tenant}\x00{name}".encode()


class Keyring:
    """The current key (seals) and the previous ones (open only)."""

    def __init__(self, current: bytes, previous: Sequence[bytes] = ()) -> None:
        # Imported here: the cipher library costs a replica ~5 MB of memory, and only a deployment
        # with [secrets].key set ever builds a Keyring.
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self.current_id = master_key_id(current)
        self._keys = {master_key_id(key): AESGCM(key) for key in [*previous, current]}

    @classmethod
    def from_settings(cls, key: str, previous_keys: Sequence[str] = ()) -> Keyring | None:
        """None when no key is configured (config.validate has checked the texts)."""
        if not key:
            return None
        return cls(parse_master_key(key), [parse_master_key(k) for k in previous_keys])

    def seal(self, plaintext: bytes, aad: bytes) -> tuple[str, bytes]:
        """(key id, nonce + ciphertext + tag) under the current key."""
        nonce = os.urandom(NONCE_BYTES)
        return self.current_id, nonce + self._keys[self.current_id].encrypt(nonce, plaintext, aad)

    def open(self, key_id: str, sealed: bytes, aad: bytes) -> bytes:
        """The plaintext; UnsealError when the key is unknown or the value was not sealed for `aad`."""
        cipher = self._keys.get(key_id)
        if cipher is None:
            raise UnsealError(f"sealed with key {key_id}, which neither [secrets].key nor previous_keys holds")
        from cryptography.exceptions import InvalidTag

        try:
            return cipher.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], aad)
        except InvalidTag:
            raise UnsealError("a sealed value does not open: it was sealed for another tenant or name, or altered") from None


def require(keyring: Keyring | None) -> Keyring:
    """The keyring, or NotConfiguredError naming the setting to set."""
    if keyring is None:
        raise NotConfiguredError(NOT_CONFIGURED)
    return keyring
