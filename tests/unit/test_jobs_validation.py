from datetime import UTC, datetime, timedelta

import pytest

from schedulerd.config import Config
from schedulerd.errors import ValidationError
from schedulerd.jobs import JobSpec, validate
from schedulerd.tasks import loader

NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)
loader.load_modules([])


def _nested(levels: int) -> dict:
    """`levels` objects, each the only value of the one outside it."""
    document: dict = {}
    for _ in range(levels - 1):
        document = {"x": document}
    return document


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        (JobSpec(task="nope"), "task", "unknown task type 'nope'"),
        (JobSpec(task="noop", tenant=""), "tenant", "1-64 characters"),
        (JobSpec(task="noop", tenant="a/b"), "tenant", "1-64 characters"),
        (JobSpec(task="noop", params=[1]), "params", "must be a JSON object"),  # type: ignore[arg-type]
        (JobSpec(task="noop", params={"x": float("nan")}), "params", "not valid JSON"),
        (JobSpec(task="noop", params={"x": "a" * 70000}), "params", "the limit is 65536"),
        (JobSpec(task="noop", params={"x": ["ok", "nul\x00"]}), "params.x[1]", "NUL"),
        (JobSpec(task="noop", params={"a\x00": 1}), "params key", "NUL"),
        (JobSpec(task="noop", params={"x": {"y": "caf\udce9"}}), "params.x.y", "not valid UTF-8"),
        (JobSpec(task="noop", params={"\ud800": 1}), "params key", "not valid UTF-8"),
        (JobSpec(task="noop", params=_nested(34)), "params", "nested deeper than 32"),
        (JobSpec(task="noop", params=_nested(5000)), "params", "nested deeper than 32"),  # past the encoder's recursion
        (JobSpec(task="noop", run_at=datetime(1999, 1, 1, tzinfo=UTC)), "run_at", "out of range"),
        (JobSpec(task="noop", run_at=NOW + timedelta(days=4000)), "run_at", "out of range"),
        (JobSpec(task="noop", run_at=datetime(2026, 12, 1)), "run_at", "UTC offset"),
        (JobSpec(task="noop", max_attempts=0), "max_attempts", "between 1 and 100"),
        (JobSpec(task="noop", timeout_s=0), "timeout_s", "above 0"),
    ],
)
def test_bad_job_specs_name_the_field(spec, field, message) -> None:
    with pytest.raises(ValidationError, match=message) as raised:
        validate(spec, Config(), NOW)
    assert raised.value.field == field


def test_defaults_fill_unset_fields() -> None:
    values = validate(JobSpec(task="noop"), Config(), NOW)
    assert values["run_at"] == NOW and values["schedule_kind"] == "now"
    assert (values["max_attempts"], values["backoff_base_s"], values["backoff_factor"]) == (3, 5.0, 5.0)


@pytest.mark.parametrize(
    "params",
    [
        {"text": "caf\u00e9 \U0001f600 \\u0000 tab\t"},  # escapes in the encoding, nothing wrong: the walk finds nothing
        {"brackets": "{[" * 40},  # more brackets than the depth cap, all inside a string
        {"list": [{"i": i} for i in range(100)]},  # many containers, shallow
        _nested(33),  # the deepest accepted: more brackets than the cap, so it is walked
    ],
)
def test_documents_that_only_look_suspicious_are_accepted(params: dict) -> None:
    values = validate(JobSpec(task="noop", params=params), Config(), NOW)
    assert values["params"] == params
