"""The http task's pure parts: target allow-list and private ranges, Retry-After, params."""

from __future__ import annotations

import pytest

from schedulerd.config import HttpConfig
from schedulerd.core.targets import host_listed, is_private, refusal
from schedulerd.http_task import breaker_key, parse_params, parse_retry_after
from schedulerd.registry import PermanentError


@pytest.mark.parametrize(
    ("address", "private"),
    [
        ("127.0.0.1", True), ("10.1.2.3", True), ("172.16.0.1", True), ("192.168.1.1", True),
        ("169.254.169.254", True), ("0.0.0.0", True), ("224.0.0.1", True), ("::1", True),
        ("fe80::1%eth0", True), ("fd00::1", True), ("::ffff:10.0.0.1", True),
        ("93.184.216.34", False), ("2606:2800:220:1::1", False),
    ],
)  # fmt: skip
def test_private_ranges(address: str, private: bool) -> None:
    assert is_private(address) is private


def test_refusal_rules() -> None:
    assert refusal("example.com", ["93.184.216.34"], (), False) is None
    assert "private address (10.0.0.5)" in refusal("internal.example.com", ["93.184.216.34", "10.0.0.5"], (), False)
    assert refusal("internal.example.com", ["10.0.0.5"], (), True) is None
    assert refusal("localhost", ["127.0.0.1"], ("localhost",), False) is None  # listed: may be private
    assert "not in http.allow_hosts" in refusal("example.org", ["93.184.216.34"], (".example.com",), False)
    assert "resolved to no address" in refusal("example.com", [], (), False)


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
    ],
)
def test_bad_params_name_the_field(params: dict, message: str) -> None:
    with pytest.raises(PermanentError, match=message):
        parse_params(params, HttpConfig())


def test_params_defaults_and_timeout_cap() -> None:
    request = parse_params({"url": "https://Hooks.Example.com/a?b=1", "timeout_s": 99}, HttpConfig(timeout_s=5))
    assert (request.method, request.host, request.port, request.timeout_s) == ("POST", "hooks.example.com", 443, 5.0)
    assert breaker_key({"url": "https://Hooks.Example.com/a"}) == "http:hooks.example.com"
