"""The front door's pure parts: the client's arguments to a job spec, an NDJSON line to an item,
the batch item's documented schema, and the request hash that tells a replay from a conflict."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from schedulerd.api.schemas import JobBatch, JobBatchItem
from schedulerd.bulk_create import LineError, parse_line
from schedulerd.client import JobRequest, _item, task
from schedulerd.errors import ValidationError
from schedulerd.intake import Item, spec_hash


def test_client_arguments_become_a_spec() -> None:
    item = _item({"task": "t", "params": {"a": 1}, "in_": "1m30s", "timeout": timedelta(seconds=9), "tz": "Europe/Paris",
                  "misfire": "skip", "idempotency_key": "k", "tenant": "acme"})  # fmt: skip
    spec = item.spec
    assert (spec.delay_s, spec.timeout_s, spec.timezone, spec.misfire_policy, spec.tenant) == (90.0, 9.0, "Europe/Paris", "skip", "acme")
    assert item.idempotency_key == "k" and spec.run_at is None
    at = _item({"task": "t", "at": "2026-12-01T09:00:00+01:00"}).spec.run_at
    assert at == datetime(2026, 12, 1, 8, tzinfo=UTC)
    assert JobRequest("t", in_=5).item().spec.delay_s == 5.0


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"params": {}}, "task"),
        ({"task": "t", "colour": "red"}, "colour"),
        ({"task": "t", "params": [1, 2]}, "params"),
        ({"task": "t", "at": "2026-12-01T09:00:00"}, "at"),
        ({"task": "t", "at": 1700000000}, "at"),
        ({"task": "t", "in_": "soon"}, "in_"),
        ({"task": "t", "timeout": True}, "timeout"),
        ({"task": "t", "window": object()}, "window"),
    ],
)
def test_bad_client_arguments_name_the_argument(arguments: dict, field: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValidationError) as refused:
        _item(arguments)
    assert refused.value.field == field


def test_an_ndjson_line_is_read_with_the_apis_fields() -> None:
    line = json.dumps({"task": "t", "retry": {"max_attempts": 4}, "misfire": {"policy": "catch_up"}, "cron": "@hourly",
                       "timezone": "Asia/Tokyo", "tenant": "acme", "idempotency_key": "line-1"})  # fmt: skip
    item = parse_line(line, 1, "default")
    assert isinstance(item, Item)
    assert (item.spec.max_attempts, item.spec.misfire_policy, item.spec.tenant, item.idempotency_key) == (4, "catch_up", "acme", "line-1")
    assert parse_line('{"task": "t"}', 2, "fallback").spec.tenant == "fallback"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('{"task": "t",', "line"),
        ("[1, 2]", "line"),
        ('{"task": "t", "tenant": 7}', "tenant"),
        ('{"task": "t", "retry": {"max_attempts": 0}}', "retry.max_attempts"),
        ('{"task": "t", "colour": "red"}', "colour"),
        ('{"task": "t", "run_at": "tomorrow"}', "run_at"),
        ('{"task": "t", "idempotency_key": "two words"}', "idempotency_key"),
    ],
)
def test_a_bad_line_is_refused_naming_its_number_and_field(line: str, field: str) -> None:
    refused = parse_line(line, 41, "default")
    assert isinstance(refused, LineError) and refused.line == 41 and refused.field == field
    assert str(refused).startswith(f"line 41: {field}: ")


def test_the_batch_item_schema_is_documented_inline() -> None:
    schema = json.dumps(JobBatch.model_json_schema())
    assert "$defs" not in json.loads(schema)["properties"]["items"]["items"]
    assert "idempotency_key" in schema and "max_attempts" in schema and "#/$defs/" not in schema
    assert JobBatchItem.model_validate({"task": "t", "idempotency_key": "k"}).spec("acme").tenant == "acme"


def test_request_hash_ignores_the_tenant_and_sees_the_rest() -> None:
    one = _item({"task": "t", "params": {"a": 1}, "in_": 60}).spec
    assert spec_hash(one) == spec_hash(_item({"task": "t", "params": {"a": 1}, "in_": 60, "tenant": "x"}).spec)
    assert spec_hash(one) != spec_hash(_item({"task": "t", "params": {"a": 2}, "in_": 60}).spec)


def test_task_refs_keep_the_handler_and_refuse_unknown_defaults() -> None:
    @task("tests.unit.front_door.echo", timeout="5s")
    def echo(ctx: object, params: dict) -> dict:  # type: ignore[type-arg]
        return params

    assert echo(None, {"x": 1}) == {"x": 1}  # type: ignore[arg-type]
    request = echo.request({"x": 2}, max_attempts=2)
    assert (request.task, request.timeout, request.max_attempts) == ("tests.unit.front_door.echo", "5s", 2)
    with pytest.raises(TypeError, match="not an enqueue option"):
        task("tests.unit.front_door.bad", run_at="now")
