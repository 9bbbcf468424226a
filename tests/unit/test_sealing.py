"""keyring.py (AES-256-GCM with the tenant and name as associated data) and core/secret_refs.py
(finding, substituting and scrubbing {"$secret": NAME} references)."""

from __future__ import annotations

import base64
import os

import pytest

from schedulerd import config
from schedulerd.core import secret_refs
from schedulerd.errors import ConfigError, NotConfiguredError, UnsealError
from schedulerd.keyring import Keyring, associated_data, master_key_id, parse_master_key, require

KEY, OTHER = os.urandom(32), os.urandom(32)


def test_a_sealed_value_opens_for_its_tenant_and_name_only() -> None:
    ring = Keyring(KEY)
    key_id, sealed = ring.seal(b"Bearer s3cr3t", associated_data("secret", "acme", "TOKEN"))
    assert key_id == master_key_id(KEY) and b"s3cr3t" not in sealed
    assert ring.open(key_id, sealed, associated_data("secret", "acme", "TOKEN")) == b"Bearer s3cr3t"
    for tenant, name, kind in [("evil", "TOKEN", "secret"), ("acme", "OTHER", "secret"), ("acme", "TOKEN", "signing_key")]:
        with pytest.raises(UnsealError, match="another tenant or name"):
            ring.open(key_id, sealed, associated_data(kind, tenant, name))


def test_sealing_twice_gives_different_ciphertexts() -> None:
    ring, aad = Keyring(KEY), associated_data("secret", "acme", "T")
    assert ring.seal(b"x", aad)[1] != ring.seal(b"x", aad)[1]  # a fresh nonce each time


def test_an_altered_ciphertext_does_not_open() -> None:
    ring, aad = Keyring(KEY), associated_data("secret", "acme", "T")
    key_id, sealed = ring.seal(b"value", aad)
    with pytest.raises(UnsealError):
        ring.open(key_id, sealed[:-1] + bytes([sealed[-1] ^ 1]), aad)


def test_previous_keys_open_old_rows_and_the_current_key_seals() -> None:
    aad = associated_data("secret", "acme", "T")
    old_id, old_sealed = Keyring(OTHER).seal(b"before", aad)
    rotated = Keyring(KEY, [OTHER])
    assert rotated.open(old_id, old_sealed, aad) == b"before"
    assert rotated.seal(b"after", aad)[0] == master_key_id(KEY)
    with pytest.raises(UnsealError, match="neither"):
        Keyring(KEY).open(old_id, old_sealed, aad)


def test_master_keys_parse_from_either_base64_alphabet() -> None:
    raw = bytes(range(250, 256)) + os.urandom(26)
    assert parse_master_key(base64.b64encode(raw).decode()) == raw
    assert parse_master_key(base64.urlsafe_b64encode(raw).decode().rstrip("=")) == raw
    for bad, message in [("not base64!", "is not base64"), (base64.b64encode(b"short").decode(), "must decode to 32 bytes")]:
        with pytest.raises(ValueError, match=message):
            parse_master_key(bad)


def test_config_names_a_bad_key_without_quoting_it(tmp_path) -> None:
    secret_text = base64.b64encode(b"x" * 31).decode()
    with pytest.raises(ConfigError, match="secrets.key: must decode to 32 bytes") as refused:
        config.load(tmp_path / "absent.toml", environ={"SCHEDULERD_SECRETS_KEY": secret_text})
    assert secret_text not in str(refused.value)
    good = base64.b64encode(KEY).decode()
    loaded = config.load(tmp_path / "absent.toml", environ={"SCHEDULERD_SECRETS_KEY": good})
    assert loaded.secrets.key == good and good not in repr(loaded)
    with pytest.raises(ConfigError, match="previous_keys needs secrets.key"):
        config.load(tmp_path / "absent.toml", environ={"SCHEDULERD_SECRETS_PREVIOUS_KEYS": good})


def test_no_key_means_not_configured_naming_the_setting() -> None:
    assert Keyring.from_settings("") is None
    with pytest.raises(NotConfiguredError, match=r"\[secrets\].key \(SCHEDULERD_SECRETS_KEY"):
        require(None)


def test_references_are_found_in_headers_and_nested_json() -> None:
    params = {"h": {"Authorization": {"$secret": "AUTH"}}, "j": {"a": [1, {"$secret": "KEY"}], "b": {"$secret": "AUTH"}}}
    assert secret_refs.names(params, "params") == ["AUTH", "KEY"]
    assert secret_refs.substitute(params, {"AUTH": "Bearer x", "KEY": "k"}) == {
        "h": {"Authorization": "Bearer x"}, "j": {"a": [1, "k"], "b": "Bearer x"}}
    # not references: another key beside "$secret", a string "$secret"
    assert secret_refs.names({"a": {"$secret": "X", "other": 1}, "b": "$secret"}, "params") == []


@pytest.mark.parametrize("bad", [{"$secret": "has space"}, {"$secret": ""}, {"$secret": 5}, {"$secret": "x" * 65}])
def test_a_malformed_reference_names_where_it_is(bad: object) -> None:
    with pytest.raises(secret_refs.SecretReferenceError, match=r"params.json.a\[0\]: .* is not a secret reference"):
        secret_refs.names({"a": [bad]}, "params.json")


def test_too_deep_a_document_is_refused() -> None:
    deep: object = {"$secret": "X"}
    for _ in range(secret_refs.MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(secret_refs.SecretReferenceError, match="nests deeper"):
        secret_refs.names(deep, "params.json")


def test_scrub_takes_every_value_out_longest_first() -> None:
    text = "echo: Bearer abc123 and abc"
    assert secret_refs.scrub(text, {"SHORT": "abc", "LONG": "Bearer abc123"}) == "echo: ***LONG and ***SHORT"
