"""Properties of the domain rules that every surface shares."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memoryd.kernel.domain import (
    MAX_NAME_LENGTH,
    clean_name,
    clean_type,
    normalize_name,
)
from memoryd.kernel.errors import ValidationError
from memoryd.kernel.text import checked_identifier, checked_text


@given(st.text())
def test_normalizing_a_name_twice_changes_nothing(raw: str) -> None:
    assert normalize_name(normalize_name(raw)) == normalize_name(raw)


@given(st.text())
def test_a_normalized_name_has_no_hyphens_spaces_or_capitals_and_keeps_its_length(raw: str) -> None:
    name = normalize_name(raw)
    assert "-" not in name and " " not in name
    assert name == name.lower()
    assert len(name) == len(raw.strip().lower())


@given(st.text(alphabet=st.sampled_from("aB -_x\t"), min_size=1, max_size=300))
def test_clean_name_accepts_exactly_the_non_blank_names_of_at_most_256_characters(raw: str) -> None:
    stripped = raw.strip()
    if not stripped or len(stripped) > MAX_NAME_LENGTH:
        with pytest.raises(ValidationError, match="name is required"):
            clean_name(raw)
    elif "\t" in stripped:
        with pytest.raises(ValidationError, match=r"name contains a control character \(U\+0009\)"):
            clean_name(raw)
    else:
        assert clean_name(raw) == normalize_name(stripped)


@given(st.sampled_from(["user", "general", "feedback", "reference"]), st.sampled_from([str.upper, str.title, str.lower]),
       st.sampled_from(["", " ", "\t"]))
def test_types_are_accepted_in_any_case_and_padding(memory_type: Any, case: Any, pad: Any) -> None:
    assert clean_type(pad + case(memory_type) + pad) == memory_type


@given(st.text().filter(lambda t: t.strip().lower() not in {"user", "general", "feedback", "reference"}))
def test_any_other_type_is_rejected_with_a_message_naming_the_field(raw: str) -> None:
    with pytest.raises(ValidationError, match="^(invalid )?type"):
        clean_type(raw)


def test_an_unset_type_stays_unset() -> None:
    assert clean_type(None) is None


ANY_CHARACTER = st.one_of(st.characters(exclude_categories=()), st.sampled_from("\x00\ud800\udfff\n\t\x1b\x85\x7f"))


@given(st.text(ANY_CHARACTER))
def test_text_is_storable_exactly_when_it_encodes_as_utf8_without_nul(value: str) -> None:
    storable = "\x00" not in value and _encodes(value)
    try:
        assert checked_text(value, "field") == value
        assert storable
    except ValidationError as error:
        assert not storable and error.message.startswith("field ")


@given(st.text(ANY_CHARACTER))
def test_an_identifier_also_has_no_control_characters(value: str) -> None:
    control = any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in value)
    try:
        checked_identifier(value, "name")
        assert not control and "\x00" not in value and _encodes(value)
    except ValidationError:
        assert control or not _encodes(value)


def _encodes(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
