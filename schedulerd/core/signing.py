"""Webhook signatures: the canonical string, the X-Schedulerd-Signature header, and verify(), which
docs/webhooks.md's receiver snippet mirrors line for line. Pure: the instant and the keys are
passed in.

Scheme v1. For each signing key the tenant holds (the newest first), HMAC-SHA256 keyed with the
secret exactly as shown to the tenant (UTF-8) over

    f"{t}\\n{METHOD}\\n{path}\\n{idempotency_key}\\n{fence}\\n".encode() + body

where t is the Unix time of sending in whole seconds, path is the request target as sent (path
and `?query`), and idempotency_key, fence are the Idempotency-Key and X-Fence-Token headers (empty
when absent). Newlines cannot occur in any field before the body, so no two requests share a
canonical string. Signing the method, path and those two headers keeps a captured request from
being replayed at another endpoint, or with another key or fence that would defeat the receiver's
deduplication and fencing; the timestamp bounds replays of the request itself to the tolerance.

    X-Schedulerd-Signature: t=1733212345,v1=k_1f2e3d4c5b6a7988:5d41...,v1=k_0a9b8c7d6e5f4031:7c21...
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Sequence

SIGNATURE_HEADER = "X-Schedulerd-Signature"
SCHEME = "v1"
TOLERANCE_S = 300  # a receiver refuses timestamps further than this from its own clock (either way)
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
MAX_SIGNATURES = 8  # a header carrying more is refused unread (a sender never has that many keys)


def canonical_string(timestamp: int, method: str, path: str, body: bytes, idempotency_key: str = "", fence: str = "") -> bytes:
    """What v1 signs.

    >>> canonical_string(1733212345, "post", "/hook?a=1", b'{"x":1}', "e1", "3")
    b'1733212345\\nPOST\\n/hook?a=1\\ne1\\n3\\n{"x":1}'
    """
    return f"{timestamp}\n{method.upper()}\n{path}\n{idempotency_key}\n{fence}\n".encode() + body


def signature(secret: str, canonical: bytes) -> str:
    """HMAC-SHA256 of the canonical string keyed with the secret as shown (UTF-8), in lower-case hex."""
    return hmac.new(secret.encode(), canonical, hashlib.sha256).hexdigest()


def signature_header(
    keys: Sequence[tuple[str, str]], timestamp: int, method: str, path: str, body: bytes,
    idempotency_key: str = "", fence: str = "",
) -> str:  # fmt: skip
    """The header value for (key id, secret) pairs, newest first: one v1 entry per key."""
    canonical = canonical_string(timestamp, method, path, body, idempotency_key, fence)
    return ",".join([f"t={timestamp}", *(f"{SCHEME}={kid}:{signature(secret, canonical)}" for kid, secret in keys)])


def parse_header(value: str) -> tuple[int, list[tuple[str, str]]]:
    """(t, [(key id, hex signature), ...]) from a header value; ValueError when it is malformed.
    Entries of other schemes are skipped, so a later scheme can be added beside v1."""
    timestamp: int | None = None
    signatures: list[tuple[str, str]] = []
    for item in value.split(","):
        name, _, text = item.strip().partition("=")
        if name == "t":
            if not text.isdigit() or len(text) > 12 or timestamp is not None:
                raise ValueError("t must appear once, as whole Unix seconds")
            timestamp = int(text)
        elif name == SCHEME:
            kid, _, digest = text.partition(":")
            if not kid or len(digest) != 64 or not set(digest) <= HEX_DIGITS:
                raise ValueError("a v1 entry is <key id>:<64 hex digits>")
            signatures.append((kid, digest))
    if timestamp is None or not signatures or len(signatures) > MAX_SIGNATURES:
        raise ValueError(f"a header carries t and 1 to {MAX_SIGNATURES} v1 entries")
    return timestamp, signatures


def verify(
    header: str, secrets: Iterable[str], method: str, path: str, body: bytes, *, now_s: float,
    idempotency_key: str = "", fence: str = "", tolerance_s: float = TOLERANCE_S,
) -> bool:  # fmt: skip
    """True when the header is fresh (t within tolerance_s of now_s) and one of its v1 signatures
    matches one of the receiver's secrets (compared in constant time). During a rotation the
    receiver may hold the old secret, the new one, or both: the sender signs with every live key.

    >>> h = signature_header([("k_1", "whsec_a")], 100, "POST", "/h", b"{}")
    >>> verify(h, ["whsec_a"], "POST", "/h", b"{}", now_s=160), verify(h, ["whsec_b"], "POST", "/h", b"{}", now_s=160)
    (True, False)
    """
    try:
        timestamp, signatures = parse_header(header)
    except ValueError:
        return False
    if abs(now_s - timestamp) > tolerance_s:
        return False
    canonical = canonical_string(timestamp, method, path, body, idempotency_key, fence)
    found = False
    for secret in secrets:
        expected = signature(secret, canonical)
        for _, digest in signatures:
            found |= hmac.compare_digest(expected, digest.lower())
    return found
