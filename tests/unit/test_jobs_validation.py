from datetime import UTC, datetime, timedelta

import pytest

from schedulerd.config import Config
from schedulerd.errors import ValidationError
from schedulerd.jobs import JobSpec, validate
from schedulerd.tasks import loader

NOW = datetime(2026, 11, 29, 12, tzinfo=UTC)
loader.load_modules([])


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
