"""core/rate.py: rates parsed and refused by name, the buckets a claim needs, and the token
bucket's arithmetic (the same lua/take_tokens-1.lua runs; tests/integration/test_rate_limits.py)."""

from __future__ import annotations

import pytest

from schedulerd import config
from schedulerd.core.rate import Bucket, Rate, RateLimits, limits_from, park_delay_s, parse_rate, take
from schedulerd.errors import ConfigError


@pytest.mark.parametrize("text, expected", [
    ("100/1s", Rate(100, 1.0)), ("10 / 500ms", Rate(10, 0.5)), ("600/1m", Rate(600, 60.0)), ("5/m", Rate(5, 60.0)),
    ("1/h", Rate(1, 3600.0)), ("3/1m30s", Rate(3, 90.0)), ("1000000/1d", Rate(1_000_000, 86400.0)),
])  # fmt: skip
def test_rates_parse(text: str, expected: Rate) -> None:
    assert parse_rate(text) == expected


@pytest.mark.parametrize("text, message", [
    ("100", "is not a rate"), ("100/", "is not a rate"), ("/1s", "is not a rate"), ("-1/1s", "is not a rate"),
    ("1.5/1s", "is not a rate"), ("0/1s", "allows 0 starts"), ("2000000/1s", "between 1 and 1000000"),
    ("10/1x", "'1x' is not a duration"), ("10/0s", "window of 0 s"), ("10/2d", "a day"), ("10/0.5ms", "between 1 ms"),
])  # fmt: skip
def test_bad_rates_say_why(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_rate(text)


def test_limits_name_their_buckets_and_hosts_are_normalised() -> None:
    limits = limits_from({"send_email": "100/1s", "http": "50/1s"}, {"API.Vendor.com.": "10/1s"})
    assert limits.tasks["send_email"] == Bucket("task:send_email", 100, 1000)
    assert limits.hosts == {"api.vendor.com": Bucket("host:api.vendor.com", 10, 1000)}
    assert limits.buckets("send_email", None) == (Bucket("task:send_email", 100, 1000),)
    assert [b.key for b in limits.buckets("http", "api.vendor.com")] == ["task:http", "host:api.vendor.com"]
    assert [b.key for b in limits.buckets("http", "other.example.com")] == ["task:http"]
    assert limits.buckets("noop", None) == () and limits.enabled and not RateLimits().enabled
    only_hosts = limits_from({}, {"api.vendor.com": "1/1s"})
    assert [b.key for b in only_hosts.buckets("http", "api.vendor.com")] == ["host:api.vendor.com"]


@pytest.mark.parametrize("tasks, hosts, message", [
    ({"send_email": "fast"}, {}, r"rate_limits.tasks\['send_email'\] = 'fast': is not a rate"),
    ({"send_email": "0/1s"}, {}, r"rate_limits.tasks\['send_email'\] = '0/1s': allows 0 starts"),
    ({}, {"https://api.vendor.com": "1/1s"}, r"rate_limits.hosts\['https://api.vendor.com'\] = '1/1s': is not a host name"),
    ({}, {"api.vendor.com:8443": "1/1s"}, r"is not a host name \(no scheme, port or path"),
    ({}, {"a.com": "1/1s", "A.com": "2/1s"}, r"rate_limits.hosts\['A.com'\] = '2/1s': names the same host as another entry"),
])  # fmt: skip
def test_bad_config_names_the_entry(tasks, hosts, message) -> None:
    with pytest.raises(ConfigError, match=message):
        config.Config(rate_limits=config.RateLimitsConfig(tasks=tasks, hosts=hosts)).validate()


def test_rate_limits_from_file_and_environment(tmp_path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[rate_limits]\ntasks = { send_email = "100/1s" }\nhosts = { "api.vendor.com" = "10/1s" }\n')
    loaded = config.load(path, environ={})
    assert loaded.rate_limits.tasks == {"send_email": "100/1s"} and loaded.rate_limits.hosts == {"api.vendor.com": "10/1s"}
    from_env = config.load(path, environ={"SCHEDULERD_RATE_LIMITS_TASKS": '{"report": "5/m"}'})
    assert from_env.rate_limits.tasks == {"report": "5/m"}
    with pytest.raises(ConfigError, match=r"rate_limits.tasks = \{'report': 5\} is not a valid table of strings"):
        config.load(path, environ={"SCHEDULERD_RATE_LIMITS_TASKS": '{"report": 5}'})


A = Bucket("task:a", 4, 1000)  # a token every 250 ms, burst 4
H = Bucket("host:h", 1, 1000)  # one a second


def test_a_full_bucket_grants_its_burst_then_successive_instants() -> None:
    state: dict[str, tuple[float, float]] = {}
    assert take(state, [[A]] * 7, 10_000.0) == [(True, 10_000)] * 4 + [(False, 10_250), (False, 10_500), (False, 10_750)]
    assert state == {"task:a": (11_000.0, 11_750.0)}  # the refused took no token, and booked three instants
    assert take(state, [[A]], 10_100.0) == [(False, 11_000)]  # the next refused, in a later call, comes after them
    # The first one booked comes back at its instant and finds its token; the booking is not counted twice.
    assert take(state, [[A]], 10_250.0) == [(True, 10_250)] and state["task:a"] == (11_250.0, 12_000.0)


def test_it_refills_continuously_up_to_the_burst() -> None:
    state: dict[str, tuple[float, float]] = {}
    take(state, [[A]] * 4, 0.0)
    assert take(state, [[A]] * 2, 260.0) == [(True, 260), (False, 500)]  # one token back after 250 ms
    assert [g for g, _ in take(state, [[A]] * 6, 60_000.0)] == [True] * 4 + [False] * 2  # idle: the burst, no more


def test_a_claim_refused_by_one_bucket_takes_nothing_from_the_other() -> None:
    state: dict[str, tuple[float, float]] = {}
    answers = take(state, [[A, H], [A, H], [A]], 0.0)
    assert answers == [(True, 0), (False, 1000), (True, 0)]  # the host's next token is in a second
    assert [state[k][0] for k in ("task:a", "host:h")] == [500.0, 1000.0]  # two of A's tokens taken, not three
    # More refused claims of the host wait behind the first: successive, 1 s apart.
    assert take(state, [[A, H], [A, H]], 0.0) == [(False, 2000), (False, 3000)]


def test_a_token_taken_by_a_newcomer_displaces_one_booked_claim_only() -> None:
    state: dict[str, tuple[float, float]] = {}
    take(state, [[H]] * 3, 0.0)  # one runs, two book 1000 and 2000
    assert take(state, [[H]], 1000.0) == [(True, 1000)]  # a newcomer at 1000 takes the token
    assert take(state, [[H]], 1001.0) == [(False, 3000)]  # the claim booked for it books again, after the others
    assert take(state, [[H]], 2000.0) == [(True, 2000)]  # the one booked for 2000 still finds its token


def test_the_park_lasts_until_the_token_and_a_few_ms_more() -> None:
    assert park_delay_s(10_250, 10_000) == pytest.approx(0.255)
    assert park_delay_s(9_000, 10_000) == pytest.approx(0.005)  # due already (another clock): back at once
