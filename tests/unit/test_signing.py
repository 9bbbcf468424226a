"""core/signing.py: the canonical string, the header, verify() over a table of tampered and stale
requests and a rotation, and the receiver snippet of docs/webhooks.md agreeing with verify()."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from schedulerd.core.signing import canonical_string, parse_header, signature, signature_header, verify
from tests.webhook_receiver import documented_verify

T = 1_733_212_345
OLD, NEW = ("k_00000000000000aa", "whsec_old"), ("k_00000000000000bb", "whsec_new")
REQUEST = {"method": "POST", "path": "/hook?x=1", "body": b'{"a":1}', "idempotency_key": "e-1", "fence": "2"}


def signed(keys=(NEW,), timestamp: int = T, **overrides: object) -> str:
    request = {**REQUEST, **overrides}
    return signature_header(list(keys), timestamp, request["method"], request["path"], request["body"],
                            request["idempotency_key"], request["fence"])  # fmt: skip


def test_the_canonical_string_is_fixed() -> None:
    assert canonical_string(T, "post", "/h?a=1", b"{}", "e", "3") == b"1733212345\nPOST\n/h?a=1\ne\n3\n{}"
    assert canonical_string(T, "GET", "/", b"") == b"1733212345\nGET\n/\n\n\n"


def test_the_signature_is_hmac_sha256_hex_keyed_with_the_secret_as_shown() -> None:
    expected = hmac.new(b"whsec_new", b"1733212345\nPOST\n/\n\n\n", hashlib.sha256).hexdigest()
    assert signature("whsec_new", canonical_string(T, "POST", "/", b"")) == expected
    assert signed() == f"t={T},v1={NEW[0]}:{signature('whsec_new', canonical_string(T, **REQUEST))}"


def test_the_header_carries_one_signature_per_key_newest_first() -> None:
    timestamp, signatures = parse_header(signed((NEW, OLD)))
    assert timestamp == T and [kid for kid, _ in signatures] == [NEW[0], OLD[0]]


@pytest.mark.parametrize(
    ("case", "header", "secrets", "now_s", "request_overrides", "expected"),
    [
        ("genuine", signed(), ["whsec_new"], T + 10, {}, True),
        ("wrong secret", signed(), ["whsec_other"], T, {}, False),
        ("body changed", signed(), ["whsec_new"], T, {"body": b'{"a":2}'}, False),
        ("path changed", signed(), ["whsec_new"], T, {"path": "/other?x=1"}, False),
        ("query changed", signed(), ["whsec_new"], T, {"path": "/hook?x=2"}, False),
        ("method changed", signed(), ["whsec_new"], T, {"method": "PUT"}, False),
        ("idempotency key changed", signed(), ["whsec_new"], T, {"idempotency_key": "e-2"}, False),
        ("fence changed", signed(), ["whsec_new"], T, {"fence": "3"}, False),
        ("300 s old: inside the window", signed(), ["whsec_new"], T + 300, {}, True),
        ("301 s old: a replay", signed(), ["whsec_new"], T + 301, {}, False),
        ("301 s in the future", signed(), ["whsec_new"], T - 301, {}, False),
        ("timestamp changed", signed().replace(f"t={T}", f"t={T + 1}"), ["whsec_new"], T, {}, False),
        ("rotation: receiver has the old secret", signed((NEW, OLD)), ["whsec_old"], T, {}, True),
        ("rotation: receiver has the new secret", signed((NEW, OLD)), ["whsec_new"], T, {}, True),
        ("rotation: receiver has both", signed((NEW, OLD)), ["whsec_old", "whsec_new"], T, {}, True),
        ("after retirement the old secret fails", signed((NEW,)), ["whsec_old"], T, {}, False),
        ("upper-case hex", signed().upper().replace("T=", "t=").replace("V1=K_", "v1=k_"), ["whsec_new"], T, {}, True),
        ("no header", "", ["whsec_new"], T, {}, False),
        ("no signature", f"t={T}", ["whsec_new"], T, {}, False),
        ("no timestamp", signed().split(",", 1)[1], ["whsec_new"], T, {}, False),
        ("two timestamps", f"t={T},{signed()}", ["whsec_new"], T, {}, False),
        ("a short signature", f"t={T},v1=k_1:abc", ["whsec_new"], T, {}, False),
        ("a non-hex signature", f"t={T},v1=k_1:" + "é" * 64, ["whsec_new"], T, {}, False),
        ("a signature without key id", f"t={T},v1=" + "0" * 64, ["whsec_new"], T, {}, False),
        ("a huge timestamp", "t=" + "9" * 40 + ",v1=k_1:" + "0" * 64, ["whsec_new"], T, {}, False),
        ("nine signatures", f"t={T}" + f",v1=k_1:{'0' * 64}" * 9, ["whsec_new"], T, {}, False),
        ("other schemes are skipped", signed() + ",v2=whatever", ["whsec_new"], T, {}, True),
    ],
)
def test_verify(case: str, header: str, secrets: list[str], now_s: float, request_overrides: dict, expected: bool) -> None:
    request = {**REQUEST, **request_overrides}
    assert verify(header, secrets, request["method"], request["path"], request["body"], now_s=now_s,
                  idempotency_key=request["idempotency_key"], fence=request["fence"]) is expected, case  # fmt: skip
    # docs/webhooks.md's snippet, executed as documented, gives the same answer
    snippet = documented_verify()
    assert snippet(header, secrets, request["method"], request["path"], request["body"], request["idempotency_key"],
                   request["fence"], now_s=now_s) is expected, case  # fmt: skip


def test_parse_header_refuses_malformed_values() -> None:
    for bad in ["", "t=1", "v1=k:" + "0" * 64, "t=x,v1=k:" + "0" * 64, f"t={T},t={T},v1=k:" + "0" * 64]:
        with pytest.raises(ValueError):
            parse_header(bad)
