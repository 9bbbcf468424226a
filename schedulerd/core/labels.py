"""Labels on jobs and the selectors that pick jobs by them. Pure: the store turns a selector into
`labels @> $n::jsonb`.

A label is `key: value`, both short strings: a key of letters, digits and `._/-` (starting with a
letter or digit, at most 63 characters), a value of at most 63 printable characters; at most 20
labels a job. A selector is `key=value[,key=value...]`: a job matches when it carries every pair.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from schedulerd.errors import ValidationError

MAX_LABELS = 20
MAX_KEY = 63
MAX_VALUE = 63
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")


def _check_key(key: str, field: str) -> None:
    if not _KEY.fullmatch(key) or len(key) > MAX_KEY:
        raise ValidationError(field, f"label key {key!r} must be 1-{MAX_KEY} letters, digits or ._/- "
                              "starting with a letter or digit")  # fmt: skip


def _check_value(key: str, value: str, field: str) -> None:
    if len(value) > MAX_VALUE or not value.isprintable():
        raise ValidationError(field, f"label {key!r}: the value must be at most {MAX_VALUE} printable characters")


def check_labels(labels: Any, field: str = "labels") -> dict[str, str]:
    """A job's labels, checked; refused naming `field`."""
    if not isinstance(labels, Mapping):
        raise ValidationError(field, "must be an object of string keys to string values")
    if len(labels) > MAX_LABELS:
        raise ValidationError(field, f"at most {MAX_LABELS} labels, got {len(labels)}")
    checked: dict[str, str] = {}
    for key, value in labels.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValidationError(field, "keys and values must be strings")
        _check_key(key, field)
        _check_value(key, value, field)
        checked[key] = value
    return checked


def parse_selector(text: str, field: str = "label") -> dict[str, str]:
    """`team=billing,env=prod` as the pairs a job must carry; refused naming `field`."""
    pairs: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise ValidationError(field, f"expected key=value[,key=value...], got {text!r}")
        _check_key(key, field)
        _check_value(key, value, field)
        if pairs.get(key, value) != value:
            raise ValidationError(field, f"label {key!r} is given two values")
        pairs[key] = value
    if len(pairs) > MAX_LABELS:
        raise ValidationError(field, f"at most {MAX_LABELS} pairs, got {len(pairs)}")
    return pairs


def matches(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    """Whether a job with `labels` is picked by `selector` (what `labels @> selector` answers)."""
    return all(labels.get(key) == value for key, value in selector.items())
