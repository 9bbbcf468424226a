"""Tenant secrets referenced from a job's params as {"$secret": "NAME"}: the name rule, finding
the references, putting the values in at call time, and taking them back out of any text that
leaves the call. Pure: the values are passed in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
NAME_RULE = "must be 1-64 characters of letters, digits, '_', '.' and '-'"
REFERENCE_KEY = "$secret"
MAX_DEPTH = 64  # nesting of params.json searched for references; deeper documents are refused


class SecretReferenceError(ValueError):
    """A reference is malformed (its name breaks the rule) or sits deeper than MAX_DEPTH; the
    message names where."""


def is_reference(value: Any) -> bool:
    """An object whose only key is "$secret": a reference, whatever its value (checked by names())."""
    return isinstance(value, dict) and len(value) == 1 and REFERENCE_KEY in value


def _name(reference: dict[str, Any], where: str) -> str:
    name = reference[REFERENCE_KEY]
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise SecretReferenceError(f"{where}: {{\"$secret\": {str(name)[:80]!r}}} is not a secret reference: the name {NAME_RULE}")
    return name


def names(value: Any, where: str) -> list[str]:
    """The secret names referenced anywhere in `value`, in first-seen order.

    >>> names({"a": [{"$secret": "TOKEN"}], "b": {"$secret": "KEY"}, "c": "$secret"}, "params.json")
    ['TOKEN', 'KEY']
    """
    found: dict[str, None] = {}
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise SecretReferenceError(f"{where} nests deeper than {MAX_DEPTH} levels")
        if is_reference(item):
            found.setdefault(_name(item, path))
        elif isinstance(item, dict):
            stack.extend((v, f"{path}.{k}", depth + 1) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in reversed(list(enumerate(item))))
    return list(found)


def substitute(value: Any, values: Mapping[str, str]) -> Any:
    """`value` with every reference replaced by its secret's value (names() has checked them, and
    `values` holds every name it found). The input is not changed.

    >>> substitute({"auth": {"$secret": "T"}, "n": [1, {"$secret": "T"}]}, {"T": "s3"})
    {'auth': 's3', 'n': [1, 's3']}
    """
    if is_reference(value):
        return values[value[REFERENCE_KEY]]
    if isinstance(value, dict):
        return {k: substitute(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, values) for v in value]
    return value


def scrub(text: str, values: Mapping[str, str]) -> str:
    """`text` with every secret value replaced by ***<name>, longest values first (one value may
    contain another), so an error message or a response excerpt never carries one.

    >>> scrub("401: bad token s3cr3t", {"T": "s3cr3t"})
    '401: bad token ***T'
    """
    for name, secret in sorted(values.items(), key=lambda item: -len(item[1])):
        if secret:
            text = text.replace(secret, f"***{name}")
    return text
