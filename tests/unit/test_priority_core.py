"""core/priority.py: the range a door accepts, and the band names pop_due-4.lua reads."""

from __future__ import annotations

import pytest

from schedulerd.config import Config
from schedulerd.core.priority import band, bands, check_priority, of_band
from schedulerd.errors import ValidationError
from schedulerd.jobs import TENANT_PATTERN, JobSpec, validate
from schedulerd.queue.delay_queue import _of_bands
from schedulerd.tasks import loader

loader.load_modules([])


@pytest.mark.parametrize("value", [10, -1, "high", True, False, 5.0, None, "9"])
def test_a_priority_outside_0_to_9_or_not_an_integer_is_refused_by_name(value) -> None:
    with pytest.raises(ValidationError, match=r"must be an integer from 0 to 9") as raised:
        check_priority(value)
    assert raised.value.field == "priority"


def test_validate_takes_the_priority_and_defaults_to_5() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 12, 2, tzinfo=UTC)
    assert validate(JobSpec(task="noop"), Config(), now)["priority"] == 5
    assert validate(JobSpec(task="noop", priority=9), Config(), now)["priority"] == 9
    with pytest.raises(ValidationError) as raised:
        validate(JobSpec(task="noop", priority=10), Config(), now)
    assert raised.value.field == "priority"


@pytest.mark.parametrize(("tenant", "priority", "name"), [("acme", 5, "acme"), ("acme", 9, "acme#9"), ("a.b-c", 0, "a.b-c#0")])
def test_band_names_round_trip(tenant: str, priority: int, name: str) -> None:
    assert band(tenant, priority) == name
    assert of_band(name) == (tenant, priority)


def test_no_band_name_is_another_tenants_name() -> None:
    """'#' is not allowed in a tenant's name, so "acme#9" is never a tenant's priority-5 band."""
    assert all(TENANT_PATTERN.match(name) for name in ("acme", "a.b-c"))
    assert not any(TENANT_PATTERN.match(name) for name in bands("acme") if name != "acme")
    assert bands("acme")[0] == "acme#9" and bands("acme")[-1] == "acme#0" and len(bands("acme")) == 10


def test_popped_bands_parse_to_tenants_and_priorities() -> None:
    assert _of_bands(["a", "a#9", "b"]) == (["a", "a", "b"], [5, 9, 5])
    owners = ["a", "b", "a"]
    tenants, priorities = _of_bands(owners)
    assert tenants is owners and priorities == [5, 5, 5]  # one band per tenant: nothing parsed
