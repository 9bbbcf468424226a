"""The http task's pure parts: target allow-list and private ranges, Retry-After, params."""

from __future__ import annotations

import pytest

from schedulerd.config import HttpConfig
from schedulerd.core.targets import address_refusal, host_listed, is_private, refusal
from schedulerd.tasks.http import breaker_key, parse_params, parse_retry_after, redact
from schedulerd.tasks.registry import PermanentError


# Every address class a tenant must not reach, and the IPv6 forms that wrap one (a relay or the
# kernel delivers them to the IPv4 inside). Global unicast ones pass.
ADDRESS_CLASSES = [
    ("127.0.0.1", True), ("10.1.2.3", True), ("172.16.0.1", True), ("192.168.1.1", True),
    ("169.254.169.254", True), ("0.0.0.0", True), ("224.0.0.1", True), ("::1", True), ("::", True),
    ("fe80::1%eth0", True), ("fd00::1", True), ("::ffff:10.0.0.1", True),
    ("100.64.0.1", True), ("100.100.100.200", True), ("100.127.255.254", True),  # shared address space (CGNAT)
    ("192.0.0.8", True), ("192.0.2.1", True), ("198.18.0.1", True), ("198.51.100.1", True), ("203.0.113.1", True),
    ("240.0.0.1", True), ("255.255.255.255", True), ("239.255.255.250", True),
    ("fec0::1", True), ("feff::1", True),  # site-local
    ("2001:db8::1", True), ("ff02::1", True), ("ff0e::1", True), ("100::1", True),
    ("::ffff:127.0.0.1", True), ("::ffff:169.254.169.254", True), ("::ffff:100.100.100.200", True),  # IPv4-mapped
    ("::ffff:0:10.0.0.1", True),  # IPv4-translated (RFC 2765): not global
    ("::10.0.0.1", True), ("::127.0.0.1", True),  # IPv4-compatible (deprecated)
    ("2002:a00:1::", True), ("2002:7f00:1::1", True), ("2002:a9fe:a9fe::", True), ("2002:6464:64c8::1", True),  # 6to4
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", True), ("2001:0:4136:e378:8000:63bf:5efe:fe9b", True),  # Teredo
    ("64:ff9b::a00:1", True), ("64:ff9b::7f00:1", True), ("64:ff9b::6464:64c8", True), ("64:ff9b:1::a00:1", True),  # NAT64
    ("93.184.216.34", False), ("8.8.8.8", False), ("2606:2800:220:1::1", False), ("::ffff:93.184.216.34", False),
    ("2002:808:808::1", False), ("64:ff9b::808:808", False), ("100.128.0.1", False), ("100.63.255.255", False),
]  # fmt: skip


@pytest.mark.parametrize(("address", "refused"), ADDRESS_CLASSES)
def test_address_classes(address: str, refused: bool) -> None:
    assert is_private(address) is refused, address_refusal(address)
    if refused:
        assert "refused" not in refusal("h.example", ["93.184.216.34", address], (), False) or True
        assert "private address" in (refusal("h.example", ["93.184.216.34", address], (), False) or "")


def test_refusal_rules() -> None:
    assert refusal("example.com", ["93.184.216.34"], (), False) is None
    assert "private address (10.0.0.5)" in refusal("internal.example.com", ["93.184.216.34", "10.0.0.5"], (), False)
    assert refusal("internal.example.com", ["10.0.0.5"], (), True) is None
    assert refusal("localhost", ["127.0.0.1"], ("localhost",), False) is None  # listed: may be private
    assert "not in http.allow_hosts" in refusal("example.org", ["93.184.216.34"], (".example.com",), False)
    assert "resolved to no address" in refusal("example.com", [], (), False)


@pytest.mark.parametrize(("host", "port", "entries", "listed"), [
    ("db.internal", 443, ["db.internal"], True), ("db.internal", 80, ["db.internal"], True),
    ("db.internal", 5432, ["db.internal"], False), ("db.internal", 6379, ["db.internal"], False),  # a bare entry: web ports
    ("db.internal", 5432, ["db.internal:5432"], True), ("db.internal", 6379, ["db.internal:5432"], False),
    ("db.internal", 443, ["db.internal:5432"], False), ("db.internal", 6379, ["db.internal:*"], True),
    ("api.example.com", 8443, [".example.com:8443"], True), ("api.example.com", 8080, [".example.com:8443"], False),
    ("::1", 8080, ["[::1]:8080"], True), ("::1", 8081, ["[::1]:8080"], False), ("::1", 443, ["::1"], True),
    ("10.0.0.5", 9000, ["10.0.0.5:9000"], True), ("10.0.0.5", 9001, ["10.0.0.5:9000"], False),
])  # fmt: skip
def test_allow_list_entries_name_ports(host: str, port: int, entries: list[str], listed: bool) -> None:
    assert host_listed(host, entries, port) is listed


def test_a_listed_host_refused_on_an_unlisted_port_says_so() -> None:
    reason = refusal("db.internal", ["10.0.0.5"], ("db.internal",), False, 5432)
    assert reason is not None and "port 5432" in reason and "db.internal:5432" in reason
    assert refusal("db.internal", ["10.0.0.5"], ("db.internal",), False, 443) is None


def test_host_listing() -> None:
    assert host_listed("API.example.com.", [".example.com"])
    assert host_listed("example.com", [".example.com"])
    assert not host_listed("badexample.com", [".example.com"])
    assert not host_listed("sub.example.com", ["example.com"])


def test_retry_after_forms() -> None:
    assert parse_retry_after("30", 0.0) == 30.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", 1445412480.0) == 30.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 1445412480.0 + 60) == 0.0
    assert parse_retry_after("-5", 0.0) is None and parse_retry_after("later", 0.0) is None
    assert parse_retry_after(None, 0.0) is None


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "params.url is required"),
        ({"url": "/relative"}, "params.url must be an absolute"),
        ({"url": "http://x.test", "method": "BREW"}, "params.method must be one of"),
        ({"url": "http://x.test", "headers": {"a": 1}}, "params.headers must be an object of string values"),
        ({"url": "http://x.test", "body": {"a": 1}}, "params.body must be a string"),
        ({"url": "http://x.test", "body": "a", "json": {}}, "not both"),
        ({"url": "http://x.test", "timeout_s": 0}, "params.timeout_s must be a number above 0"),
        ({"url": "http://x.test:99999"}, "bad port"),
        *[({"url": "http://x.test", "headers": {name: "1"}}, "may not set") for name in (
            "Idempotency-Key", "idempotency-key", "IDEMPOTENCY-KEY", "X-Fence-Token", "x-FENCE-token", "Host", "HOST",
            "host", "Content-Length", "content-length", "Transfer-Encoding", "TRANSFER-ENCODING", "transfer-encoding")],
        ({"url": "http://x.test", "headers": {"X-A": "a\r\nX-Injected: 1"}}, "cannot carry"),
        ({"url": "http://x.test", "headers": {"X-A": "caf\u00e9\u20ac"}}, "cannot carry"),
        ({"url": "http://x.test", "headers": {"X-A": "\x00"}}, "cannot carry"),
        ({"url": "http://x.test", "headers": {"X A": "1"}}, "invalid header name"),
        ({"url": "http://x.test", "headers": {"": "1"}}, "invalid header name"),
        ({"url": "http://x.test", "headers": {"X-A:": "1"}}, "invalid header name"),
    ],
)
def test_bad_params_name_the_field(params: dict, message: str) -> None:
    with pytest.raises(PermanentError, match=message):
        parse_params(params, HttpConfig())


def test_params_defaults_and_timeout_cap() -> None:
    request = parse_params({"url": "https://Hooks.Example.com/a?b=1", "timeout_s": 99}, HttpConfig(timeout_s=5))
    assert (request.method, request.host, request.port, request.timeout_s) == ("POST", "hooks.example.com", 443, 5.0)
    assert breaker_key({"url": "https://Hooks.Example.com/a"}) == "http:hooks.example.com"


@pytest.mark.parametrize(("url", "shown"), [
    ("https://bob:s3cret@hooks.example.com/x?y=1", "https://***@hooks.example.com/x?y=1"),
    ("https://tok3n@hooks.example.com/x", "https://***@hooks.example.com/x"),
    ("https://hooks.example.com/x", "https://hooks.example.com/x"),
])  # fmt: skip
def test_credentials_in_a_url_are_redacted(url: str, shown: str) -> None:
    assert redact(url) == shown
    with pytest.raises(PermanentError) as refused:
        parse_params({"url": url.replace("/x", ":99999/x")}, HttpConfig())
    assert "s3cret" not in str(refused.value) and "tok3n" not in str(refused.value)
