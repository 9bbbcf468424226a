"""Priorities: an integer 0-9 per job and execution, higher first, 5 when none is given, and the
name of the delay-queue band an execution waits in. Pure: pop_due-4.lua reads the same names.

A tenant's queue of one shard is split into bands by priority: the band of priority 5 keeps the
tenant's own name (so with every job at 5 the queue is exactly one sorted set per tenant), any
other band is "<tenant>#<priority>". '#' is not allowed in a tenant's name (jobs.TENANT_PATTERN),
so no band name is ever another tenant's.
"""

from __future__ import annotations

from typing import Any

from schedulerd.errors import ValidationError

DEFAULT = 5
LOWEST = 0
HIGHEST = 9
BAND_SEPARATOR = "#"


def check_priority(value: Any, field: str = "priority") -> int:
    """A priority as given by a door, checked: an integer (not a bool) in LOWEST..HIGHEST.

    >>> check_priority(9)
    9
    >>> check_priority(True)
    Traceback (most recent call last):
    ...
    schedulerd.errors.ValidationError: priority: must be an integer from 0 to 9 (higher runs first), got True
    """
    if isinstance(value, bool) or not isinstance(value, int) or not LOWEST <= value <= HIGHEST:
        raise ValidationError(field, f"must be an integer from {LOWEST} to {HIGHEST} (higher runs first), got {value!r}")
    return value


def band(tenant: str, priority: int = DEFAULT) -> str:
    """The name of the band `tenant`'s executions of `priority` wait in (a member of a shard's
    tenants set; the queue's key is the shard's queue prefix + this name).

    >>> band("acme"), band("acme", 9), band("acme", 0)
    ('acme', 'acme#9', 'acme#0')
    """
    return tenant if priority == DEFAULT else f"{tenant}{BAND_SEPARATOR}{priority}"


def of_band(name: str) -> tuple[str, int]:
    """(tenant, priority) of a band's name: band's inverse.

    >>> of_band("acme"), of_band("acme#9")
    (('acme', 5), ('acme', 9))
    """
    tenant, separator, digit = name.rpartition(BAND_SEPARATOR)
    if separator and len(digit) == 1 and digit.isdigit():
        return tenant, int(digit)
    return name, DEFAULT


def bands(tenant: str) -> list[str]:
    """Every band name `tenant` may have, highest priority first."""
    return [band(tenant, p) for p in range(HIGHEST, LOWEST - 1, -1)]
