"""The job vocabulary (schedulerd/job_fields.py) against the three doors it describes: the API's
/openapi.json (the app built in-process, no servers), the Python client's JobRequest and
Client.enqueue, and `schedulerd job create --help`. A field one of them has and the table lacks,
or the other way round, fails here."""

from __future__ import annotations

import dataclasses
import inspect
import re
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from schedulerd import cli, job_fields
from schedulerd.api import create_app
from schedulerd.api.schemas import BODY_FIELDS
from schedulerd.client import _ARGUMENT_OF, Client, JobRequest
from schedulerd.config import Config
from schedulerd.errors import ValidationError
from schedulerd.intake import Item
from schedulerd.jobs import Jobs, JobSpec, validate
from schedulerd.queue import DelayQueue
from schedulerd.store import Store

FIELDS = job_fields.FIELDS
CREATE_FLAGS_BESIDES_FIELDS = {"--help", "--from-file", "--json", "--traceparent"}  # not fields of a job


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    """The document GET /openapi.json serves, from an app over a store and queue never connected."""
    queue = DelayQueue.connect("redis://127.0.0.1:1", "job-fields")
    store = Store(SimpleNamespace())  # type: ignore[arg-type]
    config = Config()
    return create_app(Jobs(store, queue, config), store, queue, config).openapi()


def _body_paths(schema: dict[str, Any], schemas: dict[str, Any], prefix: str = "") -> dict[str, dict[str, Any]]:
    """{"retry.max_attempts": its schema, ...}: the leaves of a body, nested objects walked."""
    leaves: dict[str, dict[str, Any]] = {}
    for name, prop in schema["properties"].items():
        # An optional object (debounce) is anyOf its model and null.
        ref = prop.get("$ref", "") or next((o["$ref"] for o in prop.get("anyOf", ()) if "$ref" in o), "")
        inline = next((o for o in prop.get("anyOf", ()) if "properties" in o), prop)
        target = schemas[ref.rsplit("/", 1)[1]] if ref else inline
        if "properties" in target:
            leaves.update(_body_paths(target, schemas, f"{prefix}{name}."))
        else:
            leaves[prefix + name] = prop
    return leaves


def _batch_item_paths(openapi: dict[str, Any]) -> dict[str, dict[str, Any]]:
    schemas = openapi["components"]["schemas"]
    batch = schemas[openapi["paths"]["/v1/jobs/batch"]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                    .rsplit("/", 1)[1]]  # fmt: skip
    return _body_paths(batch["properties"]["items"]["items"], schemas)


def test_names_are_unique_in_every_column() -> None:
    for column in ("spec", "argument", "body", "flag"):
        names = [getattr(f, column) for f in FIELDS if getattr(f, column) is not None]
        assert len(names) == len(set(names)), column
    assert all(f.doc and f.doc == f.doc.strip() for f in FIELDS)


def test_the_batch_items_body_has_the_tables_fields_with_their_docs(openapi: dict[str, Any]) -> None:
    paths = _batch_item_paths(openapi)
    assert set(paths) == {f.body for f in FIELDS if f.body is not None}
    for f in FIELDS:
        if f.body is not None:
            assert paths[f.body].get("description") == f.doc, f.body
            if f.choices:
                enum = paths[f.body].get("enum") or next(o["enum"] for o in paths[f.body]["anyOf"] if "enum" in o)
                assert tuple(enum) == f.choices, f.body


def test_a_single_create_takes_the_same_body_with_its_key_as_a_header(openapi: dict[str, Any]) -> None:
    schemas = openapi["components"]["schemas"]
    post = openapi["paths"]["/v1/jobs"]["post"]
    body = schemas[post["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]]
    assert set(_body_paths(body, schemas)) == set(_batch_item_paths(openapi)) - {"idempotency_key"}
    assert "Idempotency-Key" in {p["name"] for p in post["parameters"] if p["in"] == "header"}


def test_the_client_takes_the_tables_arguments() -> None:
    arguments = {f.argument for f in FIELDS if f.argument is not None}
    assert {f.name for f in dataclasses.fields(JobRequest)} == arguments
    signature = inspect.signature(Client.enqueue)
    named = [p.name for p in signature.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD][1:]  # after self
    assert named == ["task", "params"] and set(named) <= arguments
    assert signature.parameters["options"].kind is inspect.Parameter.VAR_KEYWORD  # the rest: JobRequest's fields


def test_the_spec_has_the_tables_fields() -> None:
    specs = {f.spec for f in FIELDS}
    on_the_item = {"idempotency_key", "debounce_key", "debounce_window_s"}  # the intake Item's, not the job's
    assert {f.name for f in dataclasses.fields(JobSpec)} == specs - on_the_item
    assert {"idempotency_key", "debounce"} <= {f.name for f in dataclasses.fields(Item)}


def _create_help(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", "1000")  # one line per flag: no wrapping inside a doc line
    with pytest.raises(SystemExit) as done:
        cli.main(["job", "create", "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def test_job_create_has_the_tables_flags_with_their_docs(capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    shown = _create_help(capsys, monkeypatch)
    flags = {m.group(1) for m in re.finditer(r"^  (?:-\w, )?(--[a-z][a-z-]*)", shown, re.MULTILINE)}
    assert flags - CREATE_FLAGS_BESIDES_FIELDS == {f.flag for f in FIELDS if f.flag is not None}
    lines = {m.group(1): m.group(2) for m in re.finditer(r"^  (--[a-z][a-z-]*)(?: \S+)?\s{2,}(.*)$", shown, re.MULTILINE)}
    for f in FIELDS:
        if f.flag is not None:
            assert lines[f.flag] == f.doc + f.flag_note, f.flag
            if f.choices:
                assert f"{f.flag} {{{','.join(f.choices)}}}" in shown, f.flag


def test_refusals_are_named_as_each_door_names_the_field() -> None:
    for f in FIELDS:
        for refused in {f.spec, f.refused_as} - {None}:
            assert _ARGUMENT_OF.get(refused, refused) == (f.argument or refused)
            assert BODY_FIELDS.get(refused, refused) == (f.body or refused)
            assert cli._create_flag_error(ValidationError(refused, "is wrong")).field == (f.flag or refused)
    assert BODY_FIELDS["id"] == "job_id"  # a steered job's id is the path's job_id


@pytest.mark.parametrize(
    ("spec", "refused_as"),
    [(JobSpec("noop", window_s=-1.0, cron="@daily"), "window"), (JobSpec("noop", delay_s=-1.0), "in")],
)
def test_the_validator_refuses_under_the_tables_names(spec: JobSpec, refused_as: str) -> None:
    with pytest.raises(ValidationError) as refused:
        validate(spec, Config(), datetime(2026, 12, 1, tzinfo=UTC), {"noop"})
    assert refused.value.field == refused_as
    assert refused_as in {f.refused_as for f in FIELDS}


EDIT_BESIDES_FIELDS = {"task"}  # named to be refused


def test_the_edit_doors_take_the_editable_fields(openapi: dict[str, Any], capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from schedulerd.client import _EDITABLE_ARGUMENTS

    editable = [f for f in FIELDS if f.editable]
    assert editable == list(job_fields.EDITABLE) and not {"task", "tenant", "delay_s"} & {f.spec for f in editable}
    schemas = openapi["components"]["schemas"]
    patch = openapi["paths"]["/v1/jobs/{job_id}"]["patch"]
    body = schemas[patch["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]]
    paths = _body_paths(body, schemas)
    assert set(paths) - EDIT_BESIDES_FIELDS == {f.body for f in editable}
    assert {"If-Match", "Idempotency-Key"} <= {p["name"] for p in patch["parameters"] if p["in"] == "header"}
    assert set(_EDITABLE_ARGUMENTS) - EDIT_BESIDES_FIELDS == {f.argument for f in editable}
    monkeypatch.setenv("COLUMNS", "1000")
    with pytest.raises(SystemExit):
        cli.main(["job", "update", "--help"])
    shown = capsys.readouterr().out
    flags = {m.group(1) for m in re.finditer(r"^  (?:-\w, )?(--[a-z][a-z-]*)", shown, re.MULTILINE)}
    flags -= {"--help", "--plan", "--if-version", "--tenant", "--json"}
    assert flags == {f.flag for f in editable if f.flag is not None}
