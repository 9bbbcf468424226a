"""Labels and selectors: what is accepted, what is refused and how it is named."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schedulerd.core.labels import MAX_LABELS, check_labels, matches, parse_selector
from schedulerd.errors import ValidationError

KEYS = st.from_regex(r"[a-z0-9][a-z0-9._/-]{0,20}", fullmatch=True)
VALUES = st.from_regex(r"[a-z0-9 _-]{0,20}", fullmatch=True).filter(lambda v: v.strip() == v)


def test_labels_are_short_string_pairs() -> None:
    assert check_labels({"team": "billing", "k8s.io/env": "prod", "empty": ""}) == {
        "team": "billing", "k8s.io/env": "prod", "empty": ""}  # fmt: skip


@pytest.mark.parametrize("labels, says", [
    (["team"], "must be an object"),
    ({"team": 1}, "must be strings"),
    ({"-team": "x"}, "label key '-team'"),
    ({"": "x"}, "label key ''"),
    ({"k" * 64: "x"}, "label key"),
    ({"team": "x" * 64}, "at most 63"),
    ({"team": "a\nb"}, "printable"),
    ({f"k{i}": "v" for i in range(MAX_LABELS + 1)}, "at most 20 labels"),
])  # fmt: skip
def test_bad_labels_are_refused_naming_the_field(labels: object, says: str) -> None:
    with pytest.raises(ValidationError) as refused:
        check_labels(labels, field="labels")
    assert refused.value.field == "labels" and says in refused.value.message


def test_a_selector_is_pairs_separated_by_commas() -> None:
    assert parse_selector("team=billing, env=prod") == {"team": "billing", "env": "prod"}
    assert parse_selector("team=") == {"team": ""}


@pytest.mark.parametrize("text", ["team", "=billing", "team=a,team=b", "team=billing,,env=prod", "bad key=x"])
def test_bad_selectors_are_refused(text: str) -> None:
    with pytest.raises(ValidationError) as refused:
        parse_selector(text, field="label")
    assert refused.value.field == "label"


@given(st.dictionaries(KEYS, VALUES, max_size=5), st.dictionaries(KEYS, VALUES, max_size=3))
def test_a_selector_picks_exactly_the_jobs_that_carry_all_its_pairs(labels: dict[str, str], selector: dict[str, str]) -> None:
    text = ",".join(f"{k}={v}" for k, v in selector.items())
    if selector:
        assert parse_selector(text) == selector
    assert matches(labels, selector) == (selector.items() <= labels.items())
